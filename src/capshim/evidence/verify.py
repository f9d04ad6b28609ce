"""``capshim evidence verify``: a bundle's seal, its required files, its layout and its runs.

A bundle verifies when its seal holds (:func:`capshim.evidence.seal.check_seal`),
it lists metadata.json and summary.json, every run that metadata.json or
summary.json records has its ``raw/`` stdout and stderr, no listed file is
outside a bundle's layout, and metadata.json has the shape of
:data:`capshim.jsonread.METADATA_SCHEMA`.
"""

from __future__ import annotations

import re
from pathlib import Path

from capshim.contracts.pasteable import command as pasteable
from capshim import jsonread, paths
from capshim.contracts import names
from capshim.contracts.names import is_run_label
from capshim.evidence.files import STDOUT_SUFFIXES, EvidenceError
from capshim.evidence.seal import check_seal
from capshim.paths import SUMS_NAME

__all__ = ["REQUIRED_FILES", "LAYOUT_FILES", "verify", "require_verified"]

REQUIRED_FILES = ("metadata.json", "summary.json")
"""Files every bundle lists in its SHA256SUMS: an empty SHA256SUMS over an empty folder is no bundle."""

LAYOUT_FILES = frozenset({"metadata.json", "summary.json", "results.csv", "report.md", "chart.png"})
"""The files capshim writes at a bundle's top level (besides SHA256SUMS)."""

_RUN_FILE = re.compile(r"(?:raw/(?P<raw>[^/]+)\.(?:json|txt|stderr)|status/(?P<status>[^/]+)\.jsonl)")


def _recorded_runs(p: Path, listed: dict[str, str]) -> set[str]:
    """Labels ``<arm>-<run>`` / ``<arm>.<control>-<run>`` of the runs metadata.json and summary.json record.

    Only files listed in SHA256SUMS are read (an unlisted one is a problem of its own);
    files that cannot be read or have another shape give no runs here.
    """
    labels: set[str] = set()
    for name, kinds in (("metadata.json", ("runs", "control_runs")), ("summary.json", ("runs",))):
        if name not in listed:
            continue
        try:
            doc = jsonread.load(p / name)
        except jsonread.JsonShapeError:  # metadata.json's own problem is reported by verify
            continue
        arms = doc.get("arms") if isinstance(doc, dict) else None
        if not isinstance(arms, dict):
            continue
        for arm, body in arms.items():
            if isinstance(body, dict):
                labels |= _run_labels(arm, body, kinds, listed)
    return labels


def _run_labels(arm: str, body: dict, kinds: tuple[str, ...], listed: dict[str, str]) -> set[str]:
    """The run labels one arm's record names: ``arm-N`` for its runs, its controls' for ``control_runs``.

    A control run's files are ``arm+control-N`` (:func:`capshim.contracts.names.run_stem`) or, in
    bundles written before that rule, ``arm.control-N``; the form listed in SHA256SUMS is used.
    """
    labels = set()
    for kind in kinds:
        runs = body.get(kind)
        for r in runs if isinstance(runs, list) else []:
            if not isinstance(r, dict) or not isinstance(r.get("run"), int) or isinstance(r["run"], bool):
                continue
            control = r.get("control") if kind == "control_runs" else None
            if kind == "control_runs" and not isinstance(control, str):
                continue
            label = names.run_label(arm, control)
            stem = names.run_stem(arm, r['run'], control) if control else None
            if control and not any(f"raw/{stem}{ext}" in listed for ext in STDOUT_SUFFIXES):
                label = f"{arm}.{control}"  # sealed before the ARM+CONTROL-N rule
            if is_run_label(label):
                labels.add(f"{label}-{r['run']}")
    return labels


def _missing_raw(runs: set[str], listed: dict[str, str]) -> list[str]:
    """Problems for recorded runs whose ``raw/`` stdout or stderr is not listed in SHA256SUMS."""
    problems = []
    for label in sorted(runs):
        for exts in (STDOUT_SUFFIXES, (".stderr",)):  # stdout: .json (JSON, or any before the rule) or .txt
            rel = f"raw/{label}{exts[0]}"
            if not any(f"raw/{label}{ext}" in listed for ext in exts):
                problems.append(f"{rel}: run {label} is recorded in metadata.json/summary.json but its "
                                f"file is not listed in {SUMS_NAME}")
    return problems


def _outside_layout(runs: set[str], listed: dict[str, str]) -> list[str]:
    """Listed files that are not part of a bundle's layout: only :data:`LAYOUT_FILES`,
    ``raw/<run>.json|.txt|.stderr`` and ``status/<run>.jsonl`` of a run that metadata.json or
    summary.json records. A file planted during the run and sealed with the rest shows here."""
    problems = []
    for rel in sorted(listed):
        if rel in LAYOUT_FILES:
            continue
        m = _RUN_FILE.fullmatch(rel)
        label = m and (m.group("raw") or m.group("status"))
        if not label or (runs and label not in runs):
            problems.append(f"{paths.show_name(rel)}: not part of a bundle's layout (capshim writes no such "
                            "file: it may have been planted during the run)")
    return problems


def verify(root: str | Path) -> list[str]:
    """Check a bundle against its SHA256SUMS; only the folder's own regular files count.

    Returns:
        Problems, one string each, starting with the file's path relative to
        the bundle: ``"<file>: checksum mismatch"``, ``"<file>: listed in
        SHA256SUMS but missing"``, ``"<file>: not listed in SHA256SUMS"``,
        ``"<entry>: is a link ..."``, ``"<entry>: is not a regular file or
        folder"``, ``"<file>: resolves outside the bundle"``,
        ``"SHA256SUMS: line N is malformed"`` or ``"... names a path outside
        the folder"``, ``"SHA256SUMS: line N lists X again"`` (a duplicate
        line), ``"... names a file with a control character"``, ``"<file>:
        has N hard links"``, ``"metadata.json: not listed ..."`` (a bundle
        lists metadata.json and summary.json at least), ``"raw/<arm>-<n>.json:
        run ... is recorded ... but its file is not listed"`` (every run that
        metadata.json or summary.json records has its stdout and stderr),
        ``"metadata.json: $.path: ..."`` (its shape, see
        :data:`capshim.jsonread.METADATA_SCHEMA`), ``"README.md: N bytes,
        over the 256 KiB ..."`` (the folder's documentation, outside the seal:
        :data:`capshim.evidence.files.DOC_FILE`), or ``"SHA256SUMS:
        missing"``. An empty list means every file matches (an unlisted
        README.md at the top aside, by that rule).

    Raises:
        EvidenceError: a listed regular file cannot be read to hash it (names it).
    """
    p = Path(root)
    problems, listed = check_seal(p)
    if listed is None:
        return problems
    for rel in REQUIRED_FILES:
        if rel not in listed:
            problems.append(f"{rel}: not listed in {SUMS_NAME} (every bundle has it)")
    runs = _recorded_runs(p, listed)
    problems += _missing_raw(runs, listed)
    problems += _outside_layout(runs, listed)
    if "metadata.json" in listed and not any(x.startswith("metadata.json:") for x in problems):
        try:
            jsonread.load_metadata(p)
        except jsonread.JsonShapeError as exc:
            problems.append("metadata.json:" + str(exc).split("metadata.json:", 1)[-1])
    return list(dict.fromkeys(problems))


def require_verified(root: str | Path, what: str) -> Path:
    """Refuse a bundle folder read as input unless :func:`verify` finds no problem.

    Args:
        root: the bundle folder.
        what: how the user named it, for the message (``"--host-baseline"``,
            ``"report"``, ``"--host"``).

    Returns:
        ``root`` as a Path.

    Raises:
        EvidenceError (exit 2): the bundle does not verify; names the folder,
            the flag and each problem (at most 20).
    """
    p = Path(root)
    problems = verify(p)
    if problems and not (p / "summary.json").exists():
        problems.insert(0, "summary.json: missing (not an evidence bundle)")
    if problems:
        shown = "; ".join(problems[:20]) + (f"; ... {len(problems) - 20} more" if len(problems) > 20 else "")
        raise EvidenceError(f"{what} {p}: the bundle does not verify ({pasteable('capshim', 'evidence', 'verify', p)}): {shown}")
    return p
