"""Turn benchmark samples into the ``summary.json`` of an evidence bundle.

The contract the bench orchestration calls::

    summary = analyze(records, arms, baseline="native", host=None)

See :func:`analyze` for the shapes. Statistics are in :mod:`capshim.bench.stats`,
path attestation in :mod:`capshim.bench.attest`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from capshim.bench import attest, llamabench, stats
from capshim.errors import CapshimError

__all__ = ["analyze", "host_from_file", "arms_from_files", "AnalysisError",
           "SCHEMA", "STATES", "NOT_SHIM_STATES"]

SCHEMA = "capshim-summary/1"
#: Arm states. native: no shim; active: the shim's status file says it changed
#: answers; inert/invalid: the shim loaded but changed nothing / rejected its
#: configuration; failed: runs crashed or timed out; wrong-output: output
#: differed from the baseline; external: numbers made elsewhere (``capshim
#: report --arm``), shim state not attested by capshim.
STATES = ("native", "active", "inert", "invalid", "failed", "wrong-output", "external")
#: States whose numbers are never presented as shim results.
NOT_SHIM_STATES = ("inert", "invalid", "failed", "wrong-output")


class AnalysisError(CapshimError):
    """Bad analysis input: names the arm, record or key at fault (exit 2)."""


def _run_failed(run: dict) -> str | None:
    if run.get("timed_out"):
        return "timed out"
    if run.get("signal"):
        return f"killed by {run['signal']}"
    code = run.get("exit_code")
    if code not in (0, None):
        return f"exit {code}"
    return None


def _check_records(records, arms) -> dict[str, dict[str, list[float]]]:
    by: dict[str, dict[str, list[float]]] = {name: {} for name in arms}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise AnalysisError(f"record {i}: expected a dict, got {type(rec).__name__}")
        for key in ("arm", "test", "tok_s"):
            if key not in rec:
                raise AnalysisError(f"record {i}: key '{key}' is missing")
        if rec["arm"] not in arms:
            raise AnalysisError(f"record {i}: arm {rec['arm']!r} is not among the arms ({', '.join(arms)})")
        v = rec["tok_s"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise AnalysisError(f"record {i} (arm {rec['arm']!r}, test {rec['test']!r}): "
                                f"tok_s must be a finite number > 0, got {v!r}")
        by[rec["arm"]].setdefault(str(rec["test"]), []).append(float(v))
    return by


def analyze(records: list[dict], arms: dict, baseline: str, host: dict | None = None) -> dict:
    """Compute the summary of one bench run (the content of ``summary.json``).

    Args:
        records: one dict per sample: ``{"arm": str, "run": int, "sample": int,
            "test": str, "tok_s": float}`` (tok/s; ``run``/``sample`` are kept
            only in results.csv).
        arms: ``{name: {"spec": dict, "state": one of STATES, "path": attested
            caps from :func:`capshim.bench.attest.parse_path`, "runs": [{"run": int,
            "exit_code": int|None, "signal": str|None, "timed_out": bool}]}}``
            in display order. Missing keys default to empty.
        baseline: the arm the speedups are relative to.
        host: ``{"name": str, "tests": {test: [tok/s, ...]}, "path": dict,
            "source": str}`` measured elsewhere (see :func:`host_from_file`), or None.

    Returns:
        ``{"schema": "capshim-summary/1", "baseline": str, "tests": [test, ...],
        "method": {"statistic", "spread", "ci"}, "host": {"name", "source", "path",
        "tests": {test: {**describe, "samples"}}} | None, "arms": {name: {"spec",
        "state", "path", "runs", "shim_result": bool, "path_unchanged": bool|None,
        "flags": [str], "tests": {test: {"n", "median", "mean", "stdev", "min",
        "max", "q25", "q75", "iqr", "spread_pct", "iqr_pct", "samples": [...],
        "speedup": {"value", "ci95": [lo, hi]|None} | None, "pct_of_host":
        {"value", "ci95"} | None}}}}}``. ``shim_result`` is true only for arms in
        state ``active``; arms in :data:`NOT_SHIM_STATES` carry a flag saying they
        are not shim results (their numbers are still listed). ``path_unchanged``
        is true for an active arm whose attested path equals the baseline's,
        None when either path is unknown.

    Raises:
        AnalysisError: unknown baseline, unknown state, a record naming an
            unknown arm or with a bad ``tok_s``.
    """
    if not isinstance(arms, dict) or not arms:
        raise AnalysisError("no arms to analyse")
    if baseline not in arms:
        raise AnalysisError(f"baseline arm {baseline!r} is not among the arms ({', '.join(arms)})")
    for name, arm in arms.items():
        state = (arm or {}).get("state", "native")
        if state not in STATES:
            raise AnalysisError(f"arm {name!r}: state {state!r} is not one of {', '.join(STATES)}")
    samples = _check_records(records, arms)
    tests: list[str] = []
    for rec in records:
        if str(rec["test"]) not in tests:
            tests.append(str(rec["test"]))
    host_tests = {}
    if host is not None:
        for t, vals in (host.get("tests") or {}).items():
            host_tests[t] = {**stats.describe(vals), "samples": [float(v) for v in vals]}
    base_arm = arms[baseline] or {}
    base_path = base_arm.get("path") or {}
    out_arms = {}
    for name, arm in arms.items():
        arm = arm or {}
        state = arm.get("state", "native")
        path = arm.get("path") or {}
        runs = list(arm.get("runs") or [])
        flags = []
        if state in NOT_SHIM_STATES:
            spec = arm.get("spec") or {}
            shimmed = state in ("inert", "invalid") or spec.get("profile") or spec.get("simulate")
            flags.append(f"{state}: not a shim result" if shimmed else f"{state}: not a result")
        failed = [(r.get("run"), why) for r in runs if (why := _run_failed(r))]
        if failed:
            flags.append(f"{len(failed)} of {len(runs)} runs failed ("
                         + ", ".join(f"run {n}: {why}" for n, why in failed) + ")")
        unchanged = None
        if state == "active" and name != baseline:
            unchanged = attest.same_path(path, base_path)
            if unchanged:
                flags.append("path unchanged: the shim was active but llama.cpp reported "
                             "the same capabilities as the baseline")
        if arm.get("path_differs"):
            flags.append("runs attested different paths; the first is shown")
        if not samples[name]:
            flags.append("no samples")
        per_test = {}
        for t in tests:
            vals = samples[name].get(t)
            if not vals:
                continue
            entry = {**stats.describe(vals), "samples": vals, "speedup": None, "pct_of_host": None}
            base_vals = samples[baseline].get(t)
            if base_vals and name != baseline:
                entry["speedup"] = stats.compare(vals, base_vals)
            elif name == baseline:
                entry["speedup"] = {"value": 1.0, "ci95": None}
            if t in host_tests and host is not None and host.get("name") == name:
                entry["pct_of_host"] = {"value": 100.0, "ci95": None}  # the host arm against itself
            elif t in host_tests:
                entry["pct_of_host"] = stats.compare(vals, host_tests[t]["samples"], percent=True)
            per_test[t] = entry
        out_arms[name] = {
            "spec": arm.get("spec") or {},
            "state": state,
            "path": path,
            "runs": runs,
            "shim_result": state == "active",
            "path_unchanged": unchanged,
            "output_check": arm.get("output_check"),
            "flags": flags,
            "tests": per_test,
        }
    return {
        "schema": SCHEMA,
        "baseline": baseline,
        "tests": tests,
        "method": {
            "statistic": "median of per-repetition tok/s (llama-bench samples_ts, never avg_ts), "
                         "pooled over runs",
            "spread": stats.SPREAD_DEFINITION,
            "ci": stats.CI_METHOD,
            "speedup": "median(arm) / median(baseline)",
            "pct_of_host": "100 * median(arm) / median(host)",
        },
        "host": None if host is None else {
            "name": host.get("name", "host"),
            "source": host.get("source"),
            "path": host.get("path") or {},
            "tests": host_tests,
        },
        "arms": out_arms,
    }


def _stderr_beside(path: Path) -> Path | None:
    for cand in (path.with_suffix(".stderr"), path.with_name(path.name + ".stderr")):
        if cand.is_file():
            return cand
    return None


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise AnalysisError(f"{path}: cannot read: {exc.strerror or exc}") from None


def host_from_file(path: str | Path) -> dict:
    """Load a host baseline measured elsewhere.

    Args:
        path: an evidence bundle folder (its ``summary.json``; the host is that
            bundle's baseline arm) or a llama-bench ``-o json``/``-o jsonl`` file;
            for a file, a ``.stderr`` beside it (``x.json`` -> ``x.stderr`` or
            ``x.json.stderr``) gives the attested path.

    Returns:
        ``{"name": str, "source": str, "tests": {test: [tok/s, ...]}, "path": dict}``
        as :func:`analyze` takes it.

    Raises:
        AnalysisError / LlamaBenchError: missing or unreadable file, bad JSON,
            a summary without the baseline arm; the message names the file.
    """
    p = Path(path)
    if p.is_dir():
        sfile = p / "summary.json"
        if not sfile.is_file():
            raise AnalysisError(f"{p}: not an evidence bundle (no summary.json)")
        try:
            summary = json.loads(_read_text(sfile))
        except json.JSONDecodeError as exc:
            raise AnalysisError(f"{sfile}: invalid JSON: {exc}") from None
        base = summary.get("baseline")
        arm = (summary.get("arms") or {}).get(base)
        if not arm:
            raise AnalysisError(f"{sfile}: baseline arm {base!r} not found under 'arms'")
        return {"name": f"{p.name}:{base}", "source": str(p), "path": arm.get("path") or {},
                "tests": {t: list(v.get("samples") or []) for t, v in (arm.get("tests") or {}).items()
                          if v.get("samples")}}
    if not p.exists():
        raise AnalysisError(f"{p}: no such file or bundle folder")
    rows = llamabench.load_file(p)
    tests: dict[str, list[float]] = {}
    for rec in llamabench.to_records(rows, "host", 1):
        tests.setdefault(rec["test"], []).append(rec["tok_s"])
    err = _stderr_beside(p)
    return {"name": "host", "source": str(p), "tests": tests,
            "path": attest.parse_path(_read_text(err)) if err else {}}


def arms_from_files(specs: list[tuple[str, list[str | Path]]]) -> tuple[list[dict], dict]:
    """Build analysis input from llama-bench files made elsewhere.

    Args:
        specs: ``[(arm name, [file, ...]), ...]``; each file is one run (pp and tg
            may come from separate files); a ``.stderr`` beside a file gives the
            attested path.

    Returns:
        ``(records, arms)`` for :func:`analyze`; arms are in state ``external``
        and carry a flag when their files attest different paths.

    Raises:
        AnalysisError / LlamaBenchError: duplicate arm names, unreadable or bad files.
    """
    records: list[dict] = []
    arms: dict = {}
    for name, files in specs:
        if name in arms:
            raise AnalysisError(f"--arm {name}: arm named twice")
        paths = []
        runs = []
        for n, f in enumerate(files, 1):
            fp = Path(f)
            records.extend(llamabench.to_records(llamabench.load_file(fp), name, n))
            err = _stderr_beside(fp)
            if err:
                paths.append(attest.parse_path(_read_text(err)))
            runs.append({"run": n, "exit_code": None, "signal": None, "timed_out": False,
                         "source": str(fp), "stderr": str(err) if err else None})
        known = [p for p in paths if p]
        path = known[0] if known else {}
        arm = {"spec": {"files": [str(f) for f in files]}, "state": "external", "path": path, "runs": runs}
        if any(attest.path_key(p) != attest.path_key(path) for p in known[1:]):
            arm["path_differs"] = True
        arms[name] = arm
    return records, arms
