"""Compare and trend stored benches, with capshim's own analysis.

Every figure here comes from :func:`capshim.bench.analysis.analyze` (the
function that writes ``summary.json`` and that ``capshim report`` shows) or
from the stored summary itself; nothing is re-derived. So a selection of one
bundle gives exactly the numbers of ``capshim report`` on that bundle.

Every test has a metric with a unit and a direction (``summary.json``'s
``metrics``, :meth:`capshim.bench.metrics.Metric.to_dict`; a bundle without
it measured llama-bench tok/s, higher is better). Ratios always read "times
better", as the bundle's own report reads them (:func:`capshim.bench.metrics.annotate`):
``median(B) / median(A)`` when higher is better (tok/s), ``median(A) /
median(B)`` when lower is better (seconds), so above 1.00x B is better.
Selections whose bundles measured one test in different units or directions
are not compared.

Verdict rule (documented in ``capshim db compare --help`` and the README):

- ``compare``: for each arm and test, the change is how many times better B
  is than A, with its 95% interval (``analyze``'s speedup, oriented as
  above: the same method as the report's speedup column, docs/statistics.md).
  Its verdict is :func:`capshim.contracts.verdict.decide`'s, the one rule of
  every command: "regression" or "improvement" only with 5 processes a side,
  neither side mostly contaminated (the bundles' runs as summary.json records
  them) and the whole interval more than ``threshold`` percent beyond 1.00x;
  "same" when the interval lies within ``threshold`` percent of 1.00x;
  otherwise "unclear" with why. A bundle of either side whose A/A arm fails
  the harness check (:func:`capshim.contracts.verdict.harness_check`) is
  called out under the table.
- ``trend``: each bundle's % of host is the stored summary's (oriented as
  above: % of the host's speed). A point is flagged when it is below
  ``--min-pct`` (when given), or when, against the previous point, the one
  rule says "regression" (the previous point as the reference side: its
  processes and its interval's position; the interval is this point's).

The default threshold is :data:`DEFAULT_THRESHOLD` (2, percent or points):
the target precision of a bench (issue 10: ±2 points).
"""

from __future__ import annotations

import io
import math

from capshim.bench import llamabench, metrics, summarize
from capshim.bench.analysis import analyze
from capshim.contracts import bounded
from capshim.contracts import verdict as vd
from capshim.contracts.suggest import did_you_mean
from capshim.db.store import DbError, Store
from capshim.db.terms import COMPARE_RULE, DEFAULT_THRESHOLD, FILTERS, TREND_RULE
from capshim.summary import run_failed

__all__ = ["parse_selection", "select", "compare", "trend", "trend_png", "DEFAULT_THRESHOLD", "COMPARE_RULE", "TREND_RULE"]



def parse_selection(text: str, what: str = "selection") -> dict:
    """Parse a selection: ``ID`` (digits), ``NAME``, or ``KEY=VALUE[,KEY=VALUE...]`` of :data:`FILTERS`.

    How text values match (exactly by default) is :func:`select`'s ``match``.

    Returns:
        ``{key: value}``, e.g. ``{"id": "3"}``, ``{"name": "run_1"}``, ``{"device": "NVIDIA H200"}``.

    Raises:
        DbError: an unknown key or an empty part (names it).
    """
    text = bounded.text((text or "").strip(), what)
    if not text:
        raise DbError(f"{what}: empty; give a bundle id, a name, or KEY=VALUE filters ({', '.join(FILTERS)})")
    if "=" not in text:
        return {"id": text} if text.isdigit() else {"name": text}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise DbError(f"{what} {text!r}: {part!r} is not KEY=VALUE")
        if key not in FILTERS:
            raise DbError(f"{what} {text!r}: unknown key {key!r}{did_you_mean(key, FILTERS)}; "
                          f"use one of {', '.join(FILTERS)}")
        out[key] = value.strip()
    return out


def select(store: Store, sel: dict, what: str, match: str = "exact") -> list[dict]:
    """Bundles matching ``sel`` (:meth:`Store.select`; ``match``: exact, prefix or glob).

    Raises:
        DbError: naming ``what`` when none matches (and, for an exact match, saying how to loosen it).
    """
    rows = store.select(sel, match)
    if not rows:
        hint = "; --match prefix or --match glob to match more" if match == "exact" else ""
        raise DbError(f"{what} {_fmt_sel(sel, match)}: no bundle in the store matches (see capshim db list{hint})")
    return rows


def _fmt_sel(sel: dict, match: str = "exact") -> str:
    text = ",".join(f"{k}={v}" for k, v in sel.items() if v not in (None, ""))
    return text if match == "exact" or not text else f"{text} ({match})"


def _side(sel: dict, bundles: list[dict], match: str) -> dict:
    """One side of a comparison: ``{"selection", "match", "bundles": [names], "ids", "pooled": int}``."""
    return {"selection": _fmt_sel(sel, match), "match": match, "bundles": [b["name"] for b in bundles],
            "ids": [b["id"] for b in bundles], "pooled": len(bundles)}


def _mismatches(bundles: list[dict]) -> list[str]:
    """Config fields that differ between bundles (only where both recorded the field)."""
    out = []
    first = bundles[0]
    for b in bundles[1:]:
        for f, va, vb in llamabench.config_differences(first.get("config") or {}, b.get("config") or {}):
            if va is not None and vb is not None:
                out.append(f"{f}: {va!r} ({first['name']}) vs {vb!r} ({b['name']})")
    return out


def _selection_input(store: Store, bundles: list[dict]):
    """Records, arms and host for :func:`analyze` from the stored samples of ``bundles`` (pooled).

    Runs are renumbered ``index * 100000 + run`` so runs of different bundles stay apart.
    """
    ids = [b["id"] for b in bundles]
    index = {bid: i for i, bid in enumerate(ids)}
    records, host_runs = [], {}
    for s in store.samples(ids):
        if s["role"] == "host":
            # one list per host process, as the bench hands the host to analyze (the
            # process is the unit); samples without a run id each stand alone
            run = (s["bundle_id"], s["run"]) if s["run"] is not None else (s["bundle_id"], "sample", len(records),
                                                                           s["sample"], s["tok_s"])
            host_runs.setdefault(s["test"], {}).setdefault(run, []).append(s["tok_s"])
        else:
            records.append({"arm": s["arm"], "run": index[s["bundle_id"]] * 100000 + (s["run"] or 0),
                            "sample": s["sample"], "test": s["test"], "tok_s": s["tok_s"]})
    arms: dict = {}
    for b in bundles:
        for a in b["arms"]:
            arms.setdefault(a["name"], {"state": a["state"], "spec": a.get("spec") or {}})
    host_name = next((b["host_name"] for b in bundles if b.get("host_name")), None)
    if host_name is not None and any(r["arm"] == host_name for r in records):
        # the host is an arm of these bundles: the bench's host rule, so the numbers equal the
        # bundles' own report
        host_tests = summarize.host_of_arm(records, host_name)["tests"]
    else:
        host_tests = {t: list(runs.values()) for t, runs in host_runs.items()}
    host = {"name": host_name, "tests": host_tests} if host_tests else None
    return records, arms, host


def _metric_of(mets: dict, test: str) -> dict:
    """``{"unit", "better", "spec"}`` of ``test`` among a bundle's metrics (:meth:`Store.metrics`;
    llama-bench tok/s, higher is better, when they do not name it)."""
    m = mets.get(test)
    if not isinstance(m, dict) or m.get("better") not in metrics.DIRECTIONS:  # a store filled before the contract
        m = metrics.TOK_S.to_dict()
    return {"unit": str(m.get("unit") or ""), "better": m["better"], "spec": str(m.get("spec") or "")}


def _metrics(store: Store, bundles: list[dict]) -> dict[str, dict]:
    """``{test: {"unit", "better", "spec"}}`` of every test of ``bundles`` (both selections).

    Raises:
        DbError: two bundles measured one test in different units or directions (names
            the test, both and the bundles): seconds are not tok/s.
    """
    names = {b["id"]: b["name"] for b in bundles}
    mets = store.metrics(list(names))
    out: dict[str, dict] = {}
    where: dict[str, str] = {}
    for r in store.results(list(names)):
        t, name = r["test"], names[r["bundle_id"]]
        m = _metric_of(mets[r["bundle_id"]], t)
        if t not in out:
            out[t], where[t] = m, name
        elif (out[t]["unit"], out[t]["better"]) != (m["unit"], m["better"]):
            raise DbError(f"test {t!r}: {_label(out[t])} in {where[t]} but {_label(m)} in {name}: "
                          "not compared (a different metric under the same test name)")
    return out


def _label(m: dict) -> str:
    return f"{m['unit'] or 'no unit'}, {m['better']} is better"


def _orient(summary: dict, mets: dict[str, dict]) -> dict:
    """Turn the ratios of lower-is-better tests in an :func:`analyze` result into "times better"
    (``baseline / arm``), as the bench does (:func:`capshim.bench.metrics.annotate`); in place."""
    lower = {t: m for t, m in mets.items() if m["better"] == "lower" and t in (summary.get("tests") or [])}
    if lower:
        metrics.annotate(summary, {t: _as_metric(t, m) for t, m in lower.items()})
    return summary


def _as_metric(test: str, m: dict) -> metrics.Metric:
    """A :class:`~capshim.bench.metrics.Metric` of a stored metric (for :func:`metrics.annotate`)."""
    kind, _, arg = m["spec"].partition(":")
    if kind not in metrics.KINDS:
        kind, arg = "json", test  # a spec this capshim does not know: only the method line reads it
    return metrics.Metric(kind, arg or None, m["unit"], m["better"], test)


def _analyze_selection(store: Store, bundles: list[dict], mets: dict[str, dict]) -> tuple[dict, list[dict]]:
    """``(analyze(...) of the pooled selection, oriented by each test's direction; its records)``."""
    records, arms, host = _selection_input(store, bundles)
    if not arms:
        raise DbError(f"{', '.join(b['name'] for b in bundles)}: no arm stored")
    baseline = bundles[0]["baseline"]
    if baseline not in arms:
        baseline = next(iter(arms))
    recipe = summarize.Recipe(records, arms, baseline, host=host,
                              metric_tests={t: _as_metric(t, m) for t, m in mets.items()})
    return recipe.summary(), records


def _check_threshold(threshold: float, what: str = "--threshold") -> None:
    """Refuse a NaN, infinite or negative threshold (every comparison with NaN is false: all "same").

    Raises:
        DbError: naming ``what`` and the value (exit 2).
    """
    if not isinstance(threshold, (int, float)) or not math.isfinite(threshold) or threshold < 0:
        raise DbError(f"{what} {threshold!r}: expected a finite number >= 0")


def _runs_of(summaries: list[dict], arm: str) -> list[dict]:
    """The runs of ``arm`` in every summary of a selection (summary.json ``arms[arm]["runs"]``):
    what :func:`capshim.contracts.verdict.side` counts contamination from."""
    return [r for s in summaries for r in ((s.get("arms") or {}).get(arm) or {}).get("runs") or []]


def _summaries(store: Store, bundles: list[dict]) -> list[dict]:
    """The stored summaries of ``bundles`` (one that the contract refuses counts as empty)."""
    out = []
    for b in bundles:
        try:
            out.append({**store.summary(b["id"]), "_bundle": b})
        except Exception:  # noqa: BLE001 - a summary the contract refuses has no runs or A/A to read
            out.append({"_bundle": b})
    return out


def harness_notes(summaries: list[dict], tests: set[str] | None = None) -> list[str]:
    """One line per bundle and test whose A/A arm fails the harness check
    (:func:`capshim.contracts.verdict.harness_check`): "the harness is unreliable here: #3 run_1:
    A/A aa pp512 1.42x, range 0.81-2.19x leaves +-5%". ``summaries``: :func:`_summaries`'s."""
    out = []
    for s in summaries:
        aa, b = s.get("aa") or {}, s["_bundle"]
        for t, cmp in (aa.get("tests") or {}).items():
            h = vd.harness_check(cmp)
            if h is not None and not h.reliable and (tests is None or t in tests):
                out.append(h.text(f"#{b['id']} {b['name']}: A/A {aa.get('arm')} {t}"))
    return out


def arm_processes(arm: dict, test: str) -> int:
    """An arm's processes in ``test`` (summary.json) for a summary written before comparisons recorded
    them: the test's ``processes``, else its runs that did not fail (each run is one process)."""
    st = (arm.get("tests") or {}).get(test) or {}
    if isinstance(st.get("processes"), int):
        return st["processes"]
    return sum(1 for r in arm.get("runs") or [] if not run_failed(r) and not r.get("excluded"))


def _pct_entry(store: Store, bundle_id: int, arm: str, test: str) -> tuple[dict, list[dict]]:
    """``(% of host as the stored summary gives it, the arm's runs)`` of one bundle, arm and test
    (``({}, [])`` when the stored summary cannot be read). A % of host without ``processes`` (an
    older summary) gets them from :func:`arm_processes` of the arm and of the host arm."""
    try:
        s = store.summary(bundle_id)
    except Exception:  # noqa: BLE001 - a summary the contract refuses has no range or runs to give
        return {}, []
    arms = s.get("arms") or {}
    a = arms.get(arm) or {}
    pct = ((a.get("tests") or {}).get(test) or {}).get("pct_of_host")
    pct = dict(pct) if isinstance(pct, dict) else {}
    if pct and not isinstance(pct.get("processes"), list):
        host = arms.get((s.get("host") or {}).get("name"))
        n = arm_processes(a, test)
        pct["processes"] = [n, arm_processes(host, test) if host else n]
    return pct, list(a.get("runs") or [])


def _range_of(pct: dict) -> list[float] | None:
    """The range of a summary's % of host (``level: "range"``, below 5 processes), or None."""
    rng = pct.get("range")
    return [float(rng[0]), float(rng[1])] if isinstance(rng, list) and len(rng) == 2 else None


def _point_side(pct: dict, runs: list[dict], label: str) -> vd.Side:
    """One trend point as a side of the one rule: the fewer of its arm's and host's processes
    (None recorded: 0, so no direction) and its arm's contaminated runs."""
    procs = pct.get("processes")
    n = min(procs) if isinstance(procs, list) and procs else 0
    return vd.side(n, runs, label)


def compare(store: Store, sel_a: dict, sel_b: dict, *, arms: list[str] | None = None,
            tests: list[str] | None = None, pairs: dict | None = None,
            threshold: float = DEFAULT_THRESHOLD, allow_mismatch: bool = False, match: str = "exact") -> dict:
    """Compare two selections arm by arm and test by test.

    Args:
        store: the open store.
        sel_a, sel_b: filters (:func:`parse_selection`); A is the reference.
        arms: only these arms (names in A); default every arm in both.
        tests: only these tests; default every test in both.
        pairs: ``{arm in A: arm in B}`` for arms named differently (e.g.
            ``{"vm-stock": "paravirt"}``); other arms pair by name.
        threshold: percent, finite and >= 0 (see the module's regression rule).
        allow_mismatch: compare unlike configurations, marking every row.
        match: how the selections' text values match (:func:`select`): exact by default.

    Returns:
        ``{"a": {"selection", "match", "bundles": [names], "ids": [int], "pooled":
        int (how many bundles' samples are pooled)}, "b": {...}, "threshold",
        "rule", "mismatches": [str], "rows": [{"arm", "arm_b", "test", "unit",
        "better": "higher"|"lower", "a": {"median", "n", "pct_of_host":
        {"value", "ci95"}|None}, "b": {...}, "change": {"value", "ci95"},
        "change_pct", "delta_pct_points", "verdict":
        "regression"|"improvement"|"same"|"unclear", "why": str|None (why
        unclear), "marked": bool}], "harness": [str] (bundles whose A/A arm
        fails the harness check), "regressions": int, "same_bundles": bool (A and B select the same
        bundles: each row compares them with themselves)}``. Medians in the test's ``unit``; ``change`` is how many times
        better B is than A (above 1: B is better, whichever the direction);
        ``pct_of_host`` is % of the host's speed; ``change_pct`` percent.

    Raises:
        DbError: a selection matches nothing; a threshold that is NaN, infinite
            or negative; a test measured in different units or directions;
            the configurations differ (names the field, both values and
            bundles) without ``allow_mismatch``; no arm or test in common.
    """
    _check_threshold(threshold)
    a_b, b_b = select(store, sel_a, "selection A", match), select(store, sel_b, "selection B", match)
    mism = _mismatches(a_b + b_b)
    if mism and not allow_mismatch:
        raise DbError("unlike configurations, not compared (use --allow-mismatch to compare anyway, rows marked): "
                      + "; ".join(mism))
    mets = _metrics(store, a_b + b_b)
    (sa_, recs_a), (sb_, recs_b) = _analyze_selection(store, a_b, mets), _analyze_selection(store, b_b, mets)
    sums_a, sums_b = _summaries(store, a_b), _summaries(store, b_b)
    pairs = dict(pairs or {})
    for a_name, b_name in pairs.items():
        if a_name not in sa_["arms"]:
            raise DbError(f"--pair {a_name}={b_name}: arm {a_name!r} is not in selection A"
                          f"{did_you_mean(a_name, sa_['arms'])} ({', '.join(sa_['arms'])})")
        if b_name not in sb_["arms"]:
            raise DbError(f"--pair {a_name}={b_name}: arm {b_name!r} is not in selection B"
                          f"{did_you_mean(b_name, sb_['arms'])} ({', '.join(sb_['arms'])})")
    wanted = arms or [a for a in sa_["arms"] if pairs.get(a, a) in sb_["arms"]]
    for a in wanted:
        if a not in sa_["arms"] or pairs.get(a, a) not in sb_["arms"]:
            raise DbError(f"--arm {a}: not in both selections{did_you_mean(a, sa_['arms'])} "
                          f"(A: {', '.join(sa_['arms'])}; "
                          f"B: {', '.join(sb_['arms'])})")
    if not wanted:
        raise DbError(f"no arm in common (A: {', '.join(sa_['arms'])}; B: {', '.join(sb_['arms'])}); "
                      "pair arms named differently with --pair A_ARM=B_ARM")
    rows = []
    for a in wanted:
        b = pairs.get(a, a)
        ta, tb = sa_["arms"][a]["tests"], sb_["arms"][b]["tests"]
        for t in [t for t in sa_["tests"] if t in ta and t in tb and (not tests or t in tests)]:
            # the same records (runs kept: a process stays one unit) relabelled A and B
            recs = ([{**r, "arm": "A"} for r in recs_a if r["arm"] == a and r["test"] == t]
                    + [{**r, "arm": "B"} for r in recs_b if r["arm"] == b and r["test"] == t])
            lower = {t} if mets[t]["better"] == "lower" else set()
            mini = _orient(analyze(recs, {"A": {}, "B": {}}, "A", lower_is_better=lower), mets)
            ch = mini["arms"]["B"]["tests"][t]["speedup"]
            pa, pb = ta[t].get("pct_of_host"), tb[t].get("pct_of_host")
            v = vd.decide_cmp(ch, _runs_of(sums_a, a), _runs_of(sums_b, b), threshold, labels=("A", "B"))
            rows.append({
                "arm": a, "arm_b": b, "test": t, "unit": mets[t]["unit"], "better": mets[t]["better"],
                "a": {"median": ta[t]["median"], "n": ta[t]["n"], "pct_of_host": pa},
                "b": {"median": tb[t]["median"], "n": tb[t]["n"], "pct_of_host": pb},
                "change": ch, "change_pct": 100.0 * (ch["value"] - 1.0),
                "delta_pct_points": (pb["value"] - pa["value"]) if pa and pb else None,
                "verdict": v.word, "why": v.why or None,
                "marked": bool(mism)})
    if not rows:
        raise DbError(f"no test in common (A: {', '.join(sa_['tests'])}; B: {', '.join(sb_['tests'])})")
    side_a, side_b = _side(sel_a, a_b, match), _side(sel_b, b_b, match)
    return {"a": side_a, "b": side_b, "same_bundles": sorted(side_a["ids"]) == sorted(side_b["ids"]),
            "threshold": threshold, "rule": COMPARE_RULE.format(t=threshold), "mismatches": mism,
            "harness": harness_notes(sums_a + sums_b, {r["test"] for r in rows}),
            "rows": rows, "regressions": sum(r["verdict"] == vd.REGRESSION for r in rows)}


def trend(store: Store, arm: str, filters: dict | None = None, *, tests: list[str] | None = None,
          min_pct: float | None = None, threshold: float = DEFAULT_THRESHOLD,
          bundle_ids: list[int] | None = None, match: str = "exact") -> dict:
    """One arm's % of host over time, one point per bundle and test, oldest first.

    Args:
        store: the open store.
        arm: the arm's name.
        filters: :data:`capshim.db.store.FILTERS` narrowing the bundles.
        tests: only these tests (default all).
        min_pct: flag points below this % of host (finite, >= 0).
        threshold: points, finite and >= 0 (see the module's regression rule).
        bundle_ids: only these stored bundles (None: all that match ``filters``).
        match: how the text filters match (:func:`select`): exact by default.

    Returns:
        ``{"arm", "tests", "min_pct", "threshold", "rule", "points": [{"bundle_id",
        "bundle", "created_utc", "device", "build", "test", "unit", "better",
        "median", "pct_of_host", "ci95": [lo, hi]|None, "range": [lo, hi]|None, "flags": [str]
        (counted), "notes": [str] (a drop the one rule calls unclear, and why)}],
        "skipped": [str], "regressions": int, "all_above": bool|None}``. The
        median is in the test's ``unit``; ``pct_of_host`` (% of the host's
        speed, above 100 faster whichever the direction) and ``ci95`` are the
        bundle summary's own (what ``capshim report`` shows). A point is
        compared with the previous one of the same test and metric.

    Raises:
        DbError: a NaN, infinite or negative threshold or minimum; no bundle
            has the arm, or none has a % of host for it.
    """
    _check_threshold(threshold)
    if min_pct is not None:
        _check_threshold(min_pct, "--min-pct")
    flt = dict(filters or {})
    flt["arm"] = arm
    bundles = [b for b in store.select(flt, match) if bundle_ids is None or b["id"] in bundle_ids]
    if not bundles:
        where = _fmt_sel(filters or {}, match)
        raise DbError(f"arm {arm!r}: no stored bundle has it" + (f" ({where})" if where else ""))
    by_id = {b["id"]: b for b in bundles}
    res = [r for r in store.results(list(by_id)) if r["arm"] == arm and (not tests or r["test"] in tests)]
    order = {bid: i for i, bid in enumerate(by_id)}
    res.sort(key=lambda r: (order[r["bundle_id"]], r["id"]))
    mets = store.metrics(list(by_id))
    points, skipped, prev = [], [], {}
    for r in res:
        b = by_id[r["bundle_id"]]
        m = _metric_of(mets[b["id"]], r["test"])
        if r["pct_of_host"] is None:
            skipped.append(f"{b['name']} {r['test']}: no host baseline")
            continue
        ci = [r["pct_lo"], r["pct_hi"]] if r["pct_lo"] is not None else None
        pct, runs = _pct_entry(store, b["id"], arm, r["test"])
        # below 5 processes a bundle has no interval but the range of ratios (its summary's, not a column)
        rng = None if ci else _range_of(pct)
        flags, notes = [], []
        if min_pct is not None and r["pct_of_host"] < min_pct:
            flags.append(f"below {min_pct:g}%")
        series = (r["test"], m["unit"], m["better"])
        here = _point_side(pct, runs, "this bundle")
        p = prev.get(series)
        if p is not None:
            # the one rule, with the previous point as the reference: this point's interval, in
            # percent of the previous value
            pv, pside = p
            scaled = [x / pv * 100.0 for x in ci] if ci and pv > 0 else None
            v = vd.decide(r["pct_of_host"] / pv * 100.0 if pv > 0 else None, scaled,
                          vd.Side(pside.processes, pside.contaminated, pside.runs, "the previous bundle"), here,
                          threshold, percent=True)
            if v.word == vd.REGRESSION:
                flags.append(f"down {pv - r['pct_of_host']:.2f} points from the previous bundle")
            elif v.word == vd.UNCLEAR and r["pct_of_host"] < pv - threshold:
                notes.append(f"down {pv - r['pct_of_host']:.2f} points: {v}")
        prev[series] = (r["pct_of_host"], here)
        points.append({"bundle_id": b["id"], "bundle": b["name"], "created_utc": b["created_utc"],
                       "device": b["device"], "build": b["workload_build"], "test": r["test"],
                       "unit": m["unit"], "better": m["better"], "median": r["median"],
                       "pct_of_host": r["pct_of_host"], "ci95": ci, "range": rng, "flags": flags, "notes": notes})
    if not points:
        raise DbError(f"arm {arm!r}: no selected bundle has a % of host for it ({'; '.join(skipped)})")
    tests_seen = list(dict.fromkeys(p["test"] for p in points))
    return {"arm": arm, "tests": tests_seen, "min_pct": min_pct, "threshold": threshold,
            "rule": TREND_RULE.format(t=threshold), "points": points, "skipped": skipped,
            "regressions": sum(bool(p["flags"]) for p in points),
            "all_above": None if min_pct is None else all(p["pct_of_host"] >= min_pct for p in points)}


def trend_png(tr: dict) -> bytes:
    """The trend drawn as PNG bytes: % of host per bundle (95% interval bars), one line per test.

    Flagged points are drawn as red crosses; ``--min-pct`` as a dashed line.
    Uses matplotlib's Agg backend.
    """
    import matplotlib  # heavy (about 1 s) and needed only for --chart


    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(f"{(p['created_utc'] or '?')[:10]}\n{p['bundle']}" for p in tr["points"]))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(labels) + 2), 4.2))
    for i, t in enumerate(tr["tests"]):
        pts = [p for p in tr["points"] if p["test"] == t]
        xs = [labels.index(f"{(p['created_utc'] or '?')[:10]}\n{p['bundle']}") + (i - 0.5 * (len(tr["tests"]) - 1)) * 0.08
              for p in pts]
        ys = [p["pct_of_host"] for p in pts]
        err = [[y - (p["ci95"] or [y, y])[0] for y, p in zip(ys, pts)],
               [(p["ci95"] or [y, y])[1] - y for y, p in zip(ys, pts)]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=4, label=t)
        bad = [(x, y) for x, y, p in zip(xs, ys, pts) if p["flags"]]
        if bad:
            ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=80, color="red", zorder=5)
    if tr.get("min_pct") is not None:
        ax.axhline(tr["min_pct"], linestyle="--", color="grey", linewidth=1, label=f"{tr['min_pct']:g}% of host")
    ax.set_xticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylabel("% of host (median, 95% CI)")
    ax.set_title(f"{tr['arm']}: % of host over time")
    ax.legend(fontsize=8)
    ax.margins(x=0.15)
    fig.tight_layout()
    buf = io.BytesIO()  # the caller writes it by the output rule (contracts.output)
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()
