"""A sealed folder's README.md: what made it, on which machine, when, and its table, beside the data.

``capshim evidence readme FOLDER`` writes it; ``--check`` says whether the one there is what it
would write now. The facts come from the sealed files (``metadata.json``, ``study.json``) and the
table from ``capshim report BUNDLE --format md`` (:func:`capshim.report.render_markdown`), so
nothing in it is typed but the part between the "by hand" marks (what the folder shows and does not
show), which is kept from the README already there. The file is documentation outside the seal
(:data:`capshim.evidence.files.DOC_FILE`): writing it never changes what ``evidence verify`` checks.

Use::

    text = render(Path("evidence/lavapipe-default"))       # the README it would write (str)
    write(Path("evidence/lavapipe-default"))               # verify first, then write README.md atomically
    stale(Path("evidence/lavapipe-default"))               # [] when README.md is what render() gives
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from capshim.contracts.pasteable import command as pasteable
from capshim import evidence, jsonread, paths, report, summary
from capshim.contracts import output
from capshim.evidence import EvidenceError, study

__all__ = ["BEGIN", "END", "PLACEHOLDER", "render", "write", "stale", "hand_part", "generated_tables"]

BEGIN = "<!-- by hand: begin (capshim evidence readme keeps this part) -->"
END = "<!-- by hand: end -->"
PLACEHOLDER = "Not written yet: say what this folder shows, and what it does not show."
_KIND_WORDS = {"ablate": "an `ablate` study", "tune": "a `tune` study", "kernels": "a `kernels` study",
               "cuda-clients": "a `cuda-clients` study"}
#: A study's own summary file per kind, whose first table the README shows.
_OWN_TABLES = ("ablation.md", "tune.md", "kernels.md", "clients.md")


def _shown(folder: Path) -> str:
    """The folder as commands in the README name it: relative to the working folder when inside it."""
    rel = os.path.relpath(folder.absolute())
    return Path(rel).as_posix() if not rel.startswith("..") else folder.absolute().as_posix()


def _index_link(folder: Path) -> str:
    """A link to docs/results.md for a folder committed under a repository's evidence/, else nothing."""
    parent = folder.absolute().parent
    if parent.name == "evidence" and (parent.parent / "docs" / "results.md").is_file():
        return "\nIndex of all folders: [docs/results.md](../../docs/results.md)."
    return ""


def _verified(folder: Path) -> dict | None:
    """study.json of a study folder (None for a bundle), after the folder verifies.

    Raises:
        EvidenceError (exit 2): not a folder, or it does not verify (names the first problems).
    """
    if folder.is_symlink() or not folder.is_dir():
        raise EvidenceError(f"evidence readme {folder}: not a folder")
    is_study = study.is_study(folder)
    problems = study.verify(folder) if is_study else evidence.verify(folder)
    if problems:
        raise EvidenceError(f"evidence readme {folder}: does not verify ({pasteable('capshim', 'evidence', 'verify', folder)}): "
                            + "; ".join(problems[:5]))
    return study.read_study(folder) if is_study else None


def _command(meta: dict) -> str:
    """The recorded command line as ``capshim ...`` (argv[0] was a venv's capshim or the source tree's cli)."""
    argv = meta.get("command_line")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "(not recorded)"
    return pasteable("capshim", *argv[1:])


def _api_version(version) -> str:
    """A device's API version as the README names it: a Vulkan version is bare ("1.4.312"), other
    APIs record it with their name ("CUDA runtime 13.0")."""
    if not version:
        return ""
    return str(version) if not str(version)[:1].isdigit() else f"Vulkan {version}"


def _machine(meta: dict) -> str:
    """The device and host of a bundle's metadata.json, in one line."""
    dev = meta.get("device") if isinstance(meta.get("device"), dict) else {}
    host = meta.get("host") if isinstance(meta.get("host"), dict) else {}
    parts = []
    if dev.get("name"):
        extra = [f"{dev['type']}" if dev.get("type") else "", f"driver {dev['driverInfo']}" if dev.get("driverInfo")
                 else "", _api_version(dev.get("apiVersion"))]
        parts.append(f"{dev['name']} ({', '.join(x for x in extra if x)})")
    if host:
        parts.append(f"{host.get('cpu_count')} CPU cores, {host.get('os')}, Python {host.get('python')}")
    return "; ".join(parts) or "(not recorded)"


def _software(meta: dict) -> str:
    """capshim's version and the workload's recorded package versions."""
    work = meta.get("workload") if isinstance(meta.get("workload"), dict) else {}
    versions = work.get("versions") if isinstance(work.get("versions"), dict) else {}
    return ", ".join([f"capshim {meta.get('capshim_version')}"] + [f"{k} {v}" for k, v in sorted(versions.items())])


def _own_facts(doc: dict) -> dict:
    """A study without nested bundles (``cuda-clients``): its study.json's ``facts`` (``command_line``: the
    argv as run, ``machine`` and ``software`` as recorded, ``started_utc``, ``finished_utc``)."""
    facts = doc.get("facts") if isinstance(doc.get("facts"), dict) else {}
    return {"command_line": facts.get("command"), "started_utc": facts.get("started_utc"),
            "finished_utc": facts.get("finished_utc"), "machine": facts.get("machine"),
            "software": facts.get("software")}


def _facts(folder: Path, doc: dict | None) -> tuple[str, list[tuple[str, str]]]:
    """(what the folder is, [(fact, value)]) from metadata.json (a study: its first bundle's, or study.json's
    own ``facts`` when it has no bundle) and study.json."""
    bundles = list(doc["bundles"]) if doc else []
    if doc and not bundles:
        return _own_study_facts(folder, doc)
    metas = [jsonread.load_metadata(folder / b) for b in bundles] if doc else [jsonread.load_metadata(folder)]
    meta = metas[0]
    starts = sorted(m["started_utc"] for m in metas if isinstance(m.get("started_utc"), str))
    ends = sorted(m["finished_utc"] for m in metas if isinstance(m.get("finished_utc"), str))
    date = f"{starts[0] if starts else '?'} to {ends[-1] if ends else '?'} (UTC)"
    command = _command(meta)
    note = " (its `--out` is where the folder was first written)" if " --out " in f"{command} " else ""
    rows = [("command", f"`{command}`{note}"),
            ("machine", _machine(meta)), ("software", _software(meta)), ("date", date)]
    if doc:
        what = f"{_KIND_WORDS.get(doc['kind'], 'a study')} folder with {len(bundles)} nested bundle(s)"
        how = ("sealed after the run with `capshim evidence seal-study`" if doc.get("sealed_after")
               else "sealed by its command")
        rows.append(("seal", f"{how}, {doc.get('sealed_utc')}; each nested bundle by its own run"))
        if (folder / "run.txt").is_file():
            rows.append(("notes of the run", "[run.txt](run.txt) (sealed)"))
    else:
        what = "a bench evidence bundle"
        rows.append(("seal", "SHA256SUMS, written by the run"))
    return what, rows


def _own_study_facts(folder: Path, doc: dict) -> tuple[str, list[tuple[str, str]]]:
    """:func:`_facts` of a study without nested bundles: every fact from its study.json."""
    meta = _own_facts(doc)
    software = meta["software"] if isinstance(meta["software"], dict) else {}
    argv = meta["command_line"]
    command = pasteable(*argv) if isinstance(argv, list) and all(isinstance(a, str) for a in argv) \
        else "(not recorded)"
    rows = [("command", f"`{command}`"), ("machine", str(meta["machine"] or "(not recorded)")),
            ("software", ", ".join(f"{k} {v}" for k, v in sorted(software.items())) or "(not recorded)"),
            ("date", f"{meta['started_utc'] or '?'} to {meta['finished_utc'] or '?'} (UTC)"),
            ("seal", f"sealed by its command, {doc.get('sealed_utc')}")]
    if (folder / "run.txt").is_file():
        rows.append(("notes of the run", "[run.txt](run.txt) (sealed)"))
    return f"{_KIND_WORDS.get(doc['kind'], 'a study')} folder without nested bundles", rows


def generated_tables(folder: Path, doc: dict | None, shown: str) -> str:
    """The tables part: ``capshim report B --format md`` of the bundle, or of each of a study's bundles."""
    parts = []
    for b in (list(doc["bundles"]) if doc else [""]):
        where = f"{shown}/{b}" if b else shown
        if b:
            parts.append(f"### {b}/\n")
        parts.append(f"`{pasteable('capshim', 'report', where, '--format', 'md')}`:\n")
        parts.append(report.render_markdown([summary.load(folder / b if b else folder)]).rstrip("\n") + "\n")
    return "\n".join(parts)


def _first_table(path: Path) -> str:
    """The first Markdown pipe table of a study's own summary file (its lines, stripped of the rest)."""
    text = paths.read_limited(path, 4 << 20).decode("utf-8", errors="replace")
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            out.append(line)
        elif out:
            break
    return "\n".join(out) or "(no table)"


def _after_title(path: Path) -> str:
    """A study's own Markdown file without its first line when that is a ``# `` title (stripped)."""
    text = paths.read_limited(path, 4 << 20).decode("utf-8", errors="replace")
    if text.startswith("# "):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return text.strip("\n") or "(empty)"


def hand_part(text: str) -> str | None:
    """The words between :data:`BEGIN` and :data:`END` of a README (stripped), or None when it has none."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start + len(BEGIN):end].strip("\n")


def _existing(folder: Path) -> str | None:
    """The README.md there as text when it is a regular file within the size limit, else None (never opens
    a FIFO or follows a link)."""
    f = folder / evidence.DOC_FILE
    try:
        st = os.lstat(f)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > evidence.DOC_LIMIT:
        return None
    return paths.read_limited(f, evidence.DOC_LIMIT).decode("utf-8", errors="replace")


def render(folder: Path, hand: str | None = None) -> str:
    """The README.md text for a sealed ``folder`` (str, Markdown).

    Args:
        folder: a bench bundle or a study folder; it must verify.
        hand: the words of the "by hand" part; None keeps those of the README there, or a placeholder.

    Raises:
        EvidenceError (exit 2): the folder does not verify, or a file it reads has the wrong shape.
    """
    doc = _verified(folder)
    if hand is None:
        hand = hand_part(_existing(folder) or "") or PLACEHOLDER
    shown = _shown(folder)
    what, facts = _facts(folder, doc)
    own = [f for f in _OWN_TABLES if (folder / f).is_file()]
    lines = [f"# {folder.absolute().name}", "",
             f"<!-- Written by `{pasteable('capshim', 'evidence', 'readme', shown)}`:",
             "the facts and tables come from the sealed files; only the part between the",
             "\"by hand\" marks is kept when it is written again. -->", "",
             f"This folder is {what}, sealed by its SHA256SUMS. This README.md is documentation beside",
             f"the data, outside the seal: `{pasteable('capshim', 'evidence', 'verify', shown)}` checks the data and",
             "names this file as not sealed." + _index_link(folder), "",
             "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in facts], "",
             "## What it shows", "", BEGIN, hand, END, "",
             "## The table" + ("s" if doc and len(doc["bundles"]) > 1 else ""), ""]
    if own and doc and not doc["bundles"]:  # the study's own file is all its tables (and their notes)
        lines += [f"From [{own[0]}]({own[0]}) (sealed, written by its command), below its title:", "",
                  _after_title(folder / own[0]), ""]
    elif own:
        lines += [f"The study's own table, from [{own[0]}]({own[0]}) (sealed, written by its command):", "",
                  _first_table(folder / own[0]), ""]
        if not doc or doc["bundles"]:
            lines += ["Each nested bundle, as `capshim report` prints it:", ""]
    return "\n".join(lines) + "\n" + generated_tables(folder, doc, shown)


def stale(folder: Path) -> list[str]:
    """Why ``folder``'s README.md is not what :func:`render` writes now ([] when it is)."""
    text = _existing(folder)
    if text is None:
        return [f"{folder / evidence.DOC_FILE}: missing, or not a regular file within "
                f"{evidence.DOC_LIMIT // 1024} KiB"]
    if hand_part(text) in (None, PLACEHOLDER):
        return [f"{folder / evidence.DOC_FILE}: the \"by hand\" part is not written"]
    if text != render(folder):
        return [f"{folder / evidence.DOC_FILE}: differs from what `capshim evidence readme` writes now "
                f"(a table or fact changed): write it again with {pasteable('capshim', 'evidence', 'readme', _shown(folder))}"]
    return []


def write(folder: Path, hand: str | None = None) -> Path:
    """Write ``folder/README.md`` (atomically, replacing an entry of that name) and return its path.

    Raises:
        EvidenceError (exit 2): the folder does not verify, or the text is over the size limit.
        StorageError (exit 4): the disk is full.
    """
    text = render(folder, hand).encode("utf-8")
    if len(text) > evidence.DOC_LIMIT:
        raise EvidenceError(f"{folder / evidence.DOC_FILE}: {len(text)} bytes, over the "
                            f"{evidence.DOC_LIMIT // 1024} KiB a folder's documentation may have")
    target = folder / evidence.DOC_FILE
    # the output rule (contracts.output): a file a sealed folder takes outside its seal, replaced whole,
    # never through a link or into a FIFO; a failed write is exit 4 naming it and leaves the old file
    return output.write_file(target, text, replace=True, sealed_ok=True)
