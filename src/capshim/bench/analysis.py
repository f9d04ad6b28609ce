"""Turn benchmark samples into the ``summary.json`` of an evidence bundle.

The contract the bench orchestration calls::

    summary = analyze(records, arms, baseline="native", host=None)

See :func:`analyze` for the shapes. Statistics are in :mod:`capshim.bench.stats`,
path attestation in :mod:`capshim.bench.attest`.
"""

from __future__ import annotations

import math
from pathlib import Path

from capshim.bench import answers, attest, llamabench, stats
from capshim.summary import NOT_SHIM_STATES, OFF_DEVICE_STATES, SCHEMA, STATES, AnalysisError, run_failed
from capshim.summary import load as load_summary

__all__ = ["analyze", "host_from_file", "arms_from_files", "ComparabilityError"]


#: summary.json's ``method``: how the statistics are made.
METHOD = {
    "statistic": "tables: median of per-process medians; ratios: geometric means of per-process medians (each process: its timed repetitions, after its "
                 "in-process warm-up run where the workload makes one (metadata.json); llama-bench "
                 "samples_ts, never avg_ts)",
    "spread": stats.SPREAD_DEFINITION,
    "ci": stats.CI_METHOD,
    "speedup": "geometric mean(arm) / geometric mean(baseline), over per-process medians",
    "pct_of_host": "100 * geometric mean(arm) / geometric mean(host), over per-process medians",
}


class ComparabilityError(AnalysisError):
    """Two sides of a comparison were measured with different configurations (exit 2): names the
    test, both sides, the field and both values."""


def _check_records(records, arms) -> dict[str, dict[str, dict[object, list[float]]]]:
    """{arm: {series: {run: [tok/s, ...]}}} in record order."""
    by: dict[str, dict[str, dict[object, list[float]]]] = {name: {} for name in arms}
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
        by[rec["arm"]].setdefault(str(rec["test"]), {}).setdefault(rec.get("run", 1), []).append(float(v))
    return by


def _configs(records) -> dict[tuple[str, str], list[tuple[object, dict]]]:
    """{(arm, series): [(run, config), ...]}, one entry per distinct (run, config)."""
    out: dict[tuple[str, str], list[tuple[object, dict]]] = {}
    for rec in records:
        cfg = rec.get("config")
        if isinstance(cfg, dict) and cfg:
            lst = out.setdefault((rec["arm"], str(rec["test"])), [])
            if (rec.get("run", 1), cfg) not in lst:
                lst.append((rec.get("run", 1), cfg))
    return out


def _as_processes(values) -> list[list[float]]:
    """A host's samples of one series: a list of per-process lists, or one flat list (one process)."""
    vals = list(values or [])
    if vals and all(isinstance(v, (list, tuple)) for v in vals):
        return [[float(x) for x in v] for v in vals if len(v)]
    return [[float(v) for v in vals]] if vals else []


def _entry(by_process: list[list[float]]) -> dict:
    flat = [v for p in by_process for v in p]
    reps = sorted(len(p) for p in by_process)
    return {**stats.describe(stats.process_values(by_process)), "n": len(flat), "processes": len(by_process),
            "repetitions": reps[len(reps) // 2], "repetitions_range": [reps[0], reps[-1]],
            "samples": flat, "by_process": by_process}


def analyze(records: list[dict], arms: dict, baseline: str, host: dict | None = None, *,
            allow_mismatch: bool = False, aa_arm: str | None = None, notes: list[str] | None = None,
            lower_is_better: frozenset[str] | set[str] = frozenset(),
            bench_warnings: list[str] | None = None, confidence: float = 0.95) -> dict:
    """Compute the summary of one bench run (the content of ``summary.json``): typed values only.

    Args:
        records: one dict per sample: ``{"arm": str, "run": int (the process), "sample": int,
            "test": str (the series), "tok_s": float, "config": dict (optional,
            :func:`capshim.bench.llamabench.row_config`)}`` (tok/s).
        arms: ``{name: {"spec": dict, "state": one of STATES, "path": attested
            caps from :func:`capshim.bench.attest.parse_path`, "runs": [{"run": int,
            "exit_code": int|None, "signal": str|None, "timed_out": bool, "contaminated":
            [str] (optional), "excluded": bool (optional)}]}}`` in display order.
        baseline: the arm the speedups are relative to.
        host: ``{"name": str, "tests": {series: [[tok/s, ...] per process] or [tok/s, ...]},
            "configs": {series: dict}, "path": dict, "source": str}`` (see
            :func:`host_from_file`), or None.
        allow_mismatch: compare series whose configurations differ, marking them,
            instead of raising :class:`ComparabilityError`.
        aa_arm: the A/A arm (shim active, stock answers): its ratio to the unshimmed reference arm is under ``"aa"``.
        notes: sentences for the table notes (e.g. "no speed effect is expected on a CPU device").
        lower_is_better: tests whose metric is better when lower (seconds): the
            stability warnings read them that way (a slow first process is a high value).
        bench_warnings: warnings about the whole bench, not one arm (an inherited
            ``GGML_VK_DISABLE_*``, :func:`capshim.bench.inherited_env.warnings`): listed
            first under ``"warnings"`` with ``arm`` and ``test`` null, and as ``warning: ...`` notes.
        confidence: the intervals' level (:func:`capshim.bench.stats.compare`; ``method.ci`` says it).

    Returns:
        ``{"schema", "baseline", "tests": [series], "method", "host": {...} | None,
        "arms": {name: {"spec", "state", "path", "runs", "shim_result", "answers" (:func:`capshim.bench.answers.arm_answers`), "path_unchanged",
        "output_check", "device_check" / "reach_check" (only for a cpu-backend or off-device arm / an arm
        whose output shows the shim did not reach the application: why), "reach_note" (runs on a device
        the arm leaves stock), "flags": [str], "tests": {series: {"n" (samples), "processes", "repetitions" (median per process), "repetitions_range", "median" (median of the
        per-process medians), "mean", "stdev", "min", "max", "q25", "q75", "iqr",
        "spread_pct", "iqr_pct" (over per-process medians), "samples", "by_process",
        "config", "mismatch": [{"field", "value", "reference", "against"}], "warnings": [str],
        "speedup": {"value", "ci95", "level", "processes"} | None, "pct_of_host": same | None}}}}
        (both None with an arm, a baseline or a host arm that did not run on the probed device),
        "aa": {"arm", "reference", "tests": {series: comparison}} | None,
        "warnings": [{"arm", "test", "warning"}], "notes": [str]}``.
        Ratios are plain numbers (speedup) or percent (pct_of_host).

    Raises:
        AnalysisError: unknown baseline, unknown state, a record naming an
            unknown arm or with a bad ``tok_s``.
        ComparabilityError: configurations differ and ``allow_mismatch`` is False.
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
    configs = _configs(records)
    tests: list[str] = list(dict.fromkeys(str(rec["test"]) for rec in records))  # first-seen order
    host_procs = {t: p for t, vals in ((host or {}).get("tests") or {}).items() if (p := _as_processes(vals))}
    host_tests = {t: _entry(p) for t, p in host_procs.items()}
    mismatches = _check_comparable(tests, arms, baseline, configs, host, allow_mismatch)
    base_arm = arms[baseline] or {}
    base_path = base_arm.get("path") or {}
    out_arms = {}
    all_warnings = [{"arm": None, "test": None, "warning": w} for w in bench_warnings or []]
    off = _off_device(arms)  # arms not on the probed device: warned, no ratios with them
    all_warnings += [{"arm": a, "test": None, "warning": w} for a, w in off.items()]
    for name, arm in arms.items():
        arm = arm or {}
        state = arm.get("state", "native")
        flags, unchanged = _arm_flags(name, arm, baseline, base_path, bool(samples[name]))
        per_test = {}
        for t in tests:
            if samples[name].get(t):
                per_test[t] = _test_entry(name, t, samples, baseline, configs, mismatches, host, host_tests,
                                          host_procs, lower_is_better, confidence)
                _drop_off_device(per_test[t], name, baseline, host, off)
                all_warnings += [{"arm": name, "test": t, "warning": w} for w in per_test[t]["warnings"]]
        out_arms[name] = {"spec": arm.get("spec") or {}, "state": state, "path": arm.get("path") or {},
                          "runs": list(arm.get("runs") or []), "shim_result": state == "active", "flags": flags,
                          "answers": answers.arm_answers(arm.get("runs") or [], arm.get("spec") or {}), **_checks(arm),
                          "path_unchanged": unchanged, "output_check": arm.get("output_check"), "tests": per_test}
    return {
        "schema": SCHEMA,
        "baseline": baseline,
        "tests": tests,
        "method": {**METHOD, "ci": stats.ci_method(confidence)},
        "host": None if host is None else {
            "name": host.get("name", "host"),
            "source": host.get("source"),
            "path": host.get("path") or {},
            "tests": host_tests,
        },
        "arms": out_arms,
        "aa": _aa(aa_arm, arms, samples, tests, host, off, confidence),
        "warnings": all_warnings,
        "notes": [f"warning: {w}" for w in [*(bench_warnings or []), *off.values()]] + list(notes or []),
    }


def _checks(arm: dict) -> dict:
    """An arm's ``device_check`` / ``reach_check`` (why it is not a result), where it has one."""
    return {k: arm[k] for k in ("device_check", "reach_check", "reach_note") if arm.get(k)}


def _off_device(arms: dict) -> dict[str, str]:
    """``{arm: warning}`` of the arms that did not run on the probed device (``cpu-backend``,
    ``off-device``: :func:`capshim.bench.attest.device_state`), in arm order."""
    out = {}
    for name, arm in arms.items():
        state = (arm or {}).get("state")
        if state in OFF_DEVICE_STATES:
            why = (arm or {}).get("device_check") or state
            out[name] = (f"arm {name} is {state}: {why}; its numbers are not a result on the probed device, "
                         "and no speedup or % of host is computed with it")
    return out


def _drop_off_device(entry: dict, name: str, baseline: str, host: dict | None, off: dict) -> None:
    """No speedup or % of host with an arm that did not run on the probed device, on either side."""
    if name in off or baseline in off:
        entry["speedup"] = None
    if name in off or (host is not None and host.get("name") in off):
        entry["pct_of_host"] = None


def _arm_flags(name: str, arm: dict, baseline: str, base_path: dict, has_samples: bool) -> tuple[list[str], bool | None]:
    """The flags of one arm (why its numbers are marked) and whether its path is unchanged."""
    state = arm.get("state", "native")
    path = arm.get("path") or {}
    runs = list(arm.get("runs") or [])
    flags = []
    if state in OFF_DEVICE_STATES:
        flags.append(f"{state}: not a result ({arm.get('device_check') or 'not on the probed device'})")
    elif state in NOT_SHIM_STATES:
        spec = arm.get("spec") or {}
        shimmed = state in ("inert", "invalid") or spec.get("profile") or spec.get("simulate")
        flags.append(f"{state}: not a shim result" if shimmed else f"{state}: not a result")
        if arm.get("reach_check"):
            flags.append(f"the shim did not reach the application: {arm['reach_check']}")
    failed = [(r.get("run"), why) for r in runs if (why := run_failed(r))]
    if failed:
        flags.append(f"{len(failed)} of {len(runs)} runs failed ("
                     + ", ".join(f"run {n}: {why}" for n, why in failed) + ")")
    dirty = [r for r in runs if r.get("contaminated")]
    if dirty:
        excluded = sum(1 for r in dirty if r.get("excluded"))
        flags.append(f"{len(dirty)} of {len(runs)} runs contaminated ("
                     + f"run {dirty[0].get('run')}: {', '.join(dirty[0]['contaminated'])}"
                     + (", ..." if len(dirty) > 1 else "") + ")"
                     + (f", {excluded} excluded" if excluded else ", kept (capshim bench --exclude-contaminated drops them)"))
    if arm.get("reach_note"):  # a device the arm's placements leave stock: its runs answered stock by choice
        flags.append(arm["reach_note"])
    unchanged = None
    if state == "active" and name != baseline and not (arm.get("spec") or {}).get("identity") \
            and not arm.get("reach_note"):
        unchanged = attest.same_path(path, base_path)
        if unchanged:
            flags.append("path unchanged: the shim was active but llama.cpp reported "
                         "the same capabilities as the baseline")
    if arm.get("path_differs"):
        flags.append("runs attested different paths; the first is shown")
    if not has_samples:
        flags.append("no samples")
    return flags, unchanged


def _test_entry(name, t, samples, baseline, configs, mismatches, host, host_tests, host_procs,
                lower_is_better, confidence: float = 0.95) -> dict:
    """One arm's statistics of one test: stats, config, mismatches, warnings, speedup, % of host."""
    procs = list(samples[name][t].values())
    entry = {**_entry(procs), "config": _first_config(configs, name, t),
             "mismatch": mismatches.get((name, t), []), "speedup": None, "pct_of_host": None}
    entry["warnings"] = stats.stability_warnings(procs, higher_is_better=t not in lower_is_better)
    base_runs = samples[baseline].get(t)
    if base_runs and name != baseline:
        entry["speedup"] = stats.compare(procs, list(base_runs.values()), confidence=confidence)
    elif name == baseline:
        entry["speedup"] = {"value": 1.0, "ci95": None}
    if t in host_tests and host is not None and host.get("name") == name:
        entry["pct_of_host"] = {"value": 100.0, "ci95": None}  # the host arm against itself
    elif t in host_tests:
        entry["pct_of_host"] = stats.compare(procs, host_procs[t], percent=True, confidence=confidence)
    return entry


def _first_config(configs, arm: str, test: str) -> dict:
    lst = configs.get((arm, test)) or []
    return dict(lst[0][1]) if lst else {}


def _check_comparable(tests, arms, baseline, configs, host, allow_mismatch) -> dict:
    """Compare every arm's (and the host's) configuration of each series with the reference's.

    The reference is the baseline arm's first run (else the first arm that has a
    configuration). Returns ``{(arm, series): [mismatch dicts]}`` when allowed.

    Raises:
        ComparabilityError: naming the series, both sides, the field and both values.
    """
    out: dict = {}
    host_cfgs = (host or {}).get("configs") or {}
    for t in tests:
        order = [baseline] + [a for a in arms if a != baseline]
        sides = [(f"arm {a!r}", a, run, cfg) for a in order for run, cfg in configs.get((a, t), [])]
        if t in host_cfgs and host_cfgs[t]:
            sides.append((f"host {host.get('name', 'host')!r}", "host", None, host_cfgs[t]))
        if not sides:
            continue
        ref_who, _, ref_run, ref = sides[0]
        ref_label = ref_who + (f" run {ref_run}" if ref_run is not None else "")
        for who, arm, run, cfg in sides[1:]:
            label = who + (f" run {run}" if run is not None else "")
            for field, value, refv in llamabench.config_differences(cfg, ref):
                if not allow_mismatch:
                    raise ComparabilityError(
                        f"test {t}: {label} and {ref_label} differ in {field}: {value!r} vs {refv!r}; "
                        "numbers measured on different models or settings are not compared "
                        "(--allow-mismatch compares them anyway, with the rows marked)")
                if arm == "host":  # every arm's % of host compares with it: mark them all
                    targets = [(a, {"field": field, "value": refv, "reference": value, "against": label})
                               for a in arms if configs.get((a, t))]
                else:
                    targets = [(arm, {"field": field, "value": value, "reference": refv, "against": ref_label})]
                for who_arm, item in targets:
                    lst = out.setdefault((who_arm, t), [])
                    if item not in lst:
                        lst.append(item)
    return out


def _aa(aa_arm, arms, samples, tests, host, off: dict | None = None, confidence: float = 0.95) -> dict | None:
    """The A/A arm against the unshimmed reference (the host arm, else the first arm without shims);
    no ratio when either did not run on the probed device (``off``)."""
    if not aa_arm or aa_arm not in arms:
        return None
    ref = None
    if host is not None and host.get("name") in arms:
        ref = host["name"]
    else:
        ref = next((a for a, v in arms.items() if a != aa_arm and not ((v or {}).get("spec") or {}).get("profile")
                    and not ((v or {}).get("spec") or {}).get("simulate")), None)
    if ref is None or aa_arm in (off or {}) or ref in (off or {}):
        return {"arm": aa_arm, "reference": ref, "tests": {}}
    out = {}
    for t in tests:
        a, r = samples[aa_arm].get(t), samples[ref].get(t)
        if a and r:
            out[t] = stats.compare(list(a.values()), list(r.values()), confidence=confidence)
    return {"arm": aa_arm, "reference": ref, "tests": out}


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


def _host_of_bundle(p: Path) -> dict:
    """The host of a bundle: its host arm (the bare-metal arm, e.g. ``native``), else the host
    baseline it was compared with; never its baseline arm (the simulated weak device)."""
    summary = load_summary(p / "summary.json")
    sfile = p / "summary.json"
    host = summary.get("host") or {}
    arms = summary["arms"]
    name = host.get("name")
    if name in arms:
        arm = arms[name]
        return {"name": f"{p.name}:{name}", "source": str(p), "path": arm.get("path") or {},
                "tests": {t: v.get("by_process") or list(v.get("samples") or [])
                          for t, v in (arm.get("tests") or {}).items() if v.get("by_process") or v.get("samples")},
                "configs": {t: v.get("config") or {} for t, v in (arm.get("tests") or {}).items()}}
    if host.get("tests"):
        return {"name": f"{p.name}:{name or 'host'}", "source": str(p), "path": host.get("path") or {},
                "tests": {t: v.get("by_process") or list(v.get("samples") or [])
                          for t, v in host["tests"].items() if v.get("by_process") or v.get("samples")},
                "configs": {}}
    raise AnalysisError(f"{sfile}: this bundle has no host arm and no host baseline to play host with "
                        "(its baseline arm is the simulated device, not a host)")


def host_from_file(path: str | Path) -> dict:
    """Load a host baseline measured elsewhere.

    Args:
        path: an evidence bundle folder (its ``summary.json``; the host is that
            bundle's host arm, or the host baseline it used) or a llama-bench
            ``-o json``/``-o jsonl`` file (one process); for a file, a
            ``.stderr`` beside it (``x.json`` -> ``x.stderr`` or ``x.json.stderr``)
            gives the attested path.

    Returns:
        ``{"name": str, "source": str, "tests": {series: [[tok/s, ...] per process]},
        "configs": {series: dict}, "path": dict}`` as :func:`analyze` takes it.

    Raises:
        AnalysisError / LlamaBenchError / SummaryShapeError: missing or unreadable file,
            bad JSON or shape, a bundle without a host; the message names the file.
    """
    p = Path(path)
    if p.is_dir():
        if not (p / "summary.json").is_file():
            raise AnalysisError(f"{p}: not an evidence bundle (no summary.json)")
        return _host_of_bundle(p)
    if not p.exists():
        raise AnalysisError(f"{p}: no such file or bundle folder")
    rows = llamabench.load_file(p)
    tests: dict[str, list[float]] = {}
    configs: dict[str, dict] = {}
    for rec in llamabench.to_records(rows, "host", 1):
        tests.setdefault(rec["test"], []).append(rec["tok_s"])
        configs.setdefault(rec["test"], rec.get("config") or {})
    err = _stderr_beside(p)
    return {"name": "host", "source": str(p), "tests": {t: [v] for t, v in tests.items()}, "configs": configs,
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
