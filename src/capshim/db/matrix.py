"""The fleet's compatibility matrix: every stored bench as device x host OS x guest OS x build -> verdict.

``capshim db matrix`` (issue 21). Each stored bundle gives one row per shimmed arm
(every arm but the baseline, the host arm and the A/A arm) and test: the device
(or chip), the host's OS, the guest's OS, the workload build, the arm's % of host
and its speedup over the baseline (each with its 95% interval, or below 5
processes its range: exactly the bundle summary's own figures, what ``capshim
report`` shows), the bench's A/A check, the verdict (:func:`capshim.db.terms.verdict`,
defined once there with :data:`~capshim.db.terms.VERDICTS`) and the bundle id.

Host OS and guest OS: the guest is where the bench ran (the bundle's OS). The
host is where the host baseline was measured: the same machine when it is an arm
of the bench (the default ``native``); when it came from elsewhere
(``--host-baseline``), the OS of the stored bundle whose name is that source's
folder name, else ``None`` (shown as ``?``: the store does not know it, or bundles on
different OSes share that name: :func:`host_os_index`).

This module only reads the store; the tables (terminal, Markdown, HTML) are
:mod:`capshim.export.matrix`'s.
"""

from __future__ import annotations

from pathlib import PurePath

from capshim.contracts.suggest import did_you_mean
from capshim.db.query import _check_threshold, arm_processes  # one threshold rule; old summaries' processes
from capshim.db.store import DbError, Store
from capshim.contracts.verdict import harness_check
from capshim.db.terms import DEFAULT_THRESHOLD, MATRIX_RULE, VERDICTS, verdict_of
from capshim.summary import NOT_SHIM_STATES

__all__ = ["matrix", "short_os", "host_os_index", "KEYS"]

#: The matrix's key columns, in sort order: row field -> header.
KEYS = {"device": "device", "host_os": "host OS", "guest_os": "guest OS", "build": "build"}


def short_os(os_text: str | None) -> str | None:
    """``Linux-6.18.44-fc-v657-gpu-x86_64-with-glibc2.39`` -> ``Linux-6.18.44``: the system and its
    release (Python's ``platform.platform()``, what a bundle records, up to the release's end).
    None stays None."""
    if not os_text:
        return os_text
    return "-".join(os_text.split("-")[:2])


def _aa_of(summary: dict) -> tuple[str | None, dict]:
    """``(A/A arm name, {test: bool (it passes the harness check:
    :func:`capshim.contracts.verdict.harness_check`) | None (nothing to judge)})``; (None, {}) without one."""
    aa = summary.get("aa") or {}
    if not aa.get("arm") or not aa.get("reference"):
        return None, {}
    clean = {}
    for t, r in (aa.get("tests") or {}).items():
        h = harness_check(r)
        clean[t] = None if h is None else h.reliable
    return aa["arm"], clean


def host_os_index(stored: list[dict]) -> dict[str, str | None]:
    """Folder name -> OS of the stored bundles (``name``, ``os`` of :meth:`Store.select`); a name
    that bundles on different OSes share (each host of a fleet may store a ``host``) maps to None:
    the store cannot say which one a host baseline came from."""
    out: dict[str, str | None] = {}
    for b in stored:
        name = PurePath(str(b["name"]).rstrip("/")).name
        out[name] = b.get("os") if name not in out or out[name] == b.get("os") else None
    return out


def _host_os(b: dict, by_name: dict[str, str | None]) -> str | None:
    """The OS the host baseline was measured on (see the module docstring)."""
    src = b.get("host_source")
    if not src or src.startswith("arm "):
        return b.get("os")
    return by_name.get(PurePath(src.rstrip("/")).name)


def _shimmed(summary: dict) -> dict[str, dict]:
    """The arms of a summary that are rows: every arm but the baseline, the host arm and the A/A arm."""
    skip = {summary.get("baseline"), (summary.get("host") or {}).get("name"), _aa_of(summary)[0]}
    return {name: arm for name, arm in (summary.get("arms") or {}).items() if name not in skip}


def _check_asked(asked: list[str] | None, seen: set[str], what: str, bundles: int, hint: str = "") -> None:
    """Refuse an ``--arm``/``--test`` that no matching bundle has (a typo is not an empty matrix)."""
    for name in asked or ():
        if name not in seen:
            raise DbError(f"db matrix: no {what} '{name}' in the {bundles} matching bundle(s)"
                          + did_you_mean(name, seen) + f"; they have: {', '.join(sorted(seen)) or 'none'}{hint}")


def _rows_of(b: dict, summary: dict, host_os: str | None, arms: list[str] | None, tests: list[str] | None,
             threshold: float) -> list[dict]:
    aa_arm, aa_clean = _aa_of(summary)
    host_name = (summary.get("host") or {}).get("name")
    host_arm = (summary.get("arms") or {}).get(host_name) or {}
    rows = []
    for name, arm in _shimmed(summary).items():
        if arms and name not in arms:
            continue
        for test, st in (arm.get("tests") or {}).items():
            if tests and test not in tests:
                continue
            clean = aa_clean.get(test) if aa_arm else None
            host_procs = arm_processes(host_arm, test) if host_arm else \
                (((summary.get("host") or {}).get("tests") or {}).get(test) or {}).get("processes") or 0
            word, why = verdict_of(st.get("pct_of_host"), clean, arm.get("state") not in NOT_SHIM_STATES,
                                   threshold, processes=(arm_processes(arm, test), host_procs),
                                   runs=arm.get("runs"), host_runs=host_arm.get("runs"))
            rows.append({
                "device": b.get("device"), "host_os": short_os(host_os), "guest_os": short_os(b.get("os")),
                "build": b.get("workload_build") or b.get("workload_commit"), "model": b.get("model"),
                "arm": name, "state": arm.get("state"), "test": test, "baseline": summary.get("baseline"),
                "pct_of_host": st.get("pct_of_host"), "speedup": st.get("speedup"),
                "aa": None if aa_arm is None else {"arm": aa_arm, "clean": clean},
                "verdict": word, "why": why,
                "bundle_id": b["id"], "bundle": b["name"],
                "signed_by": [x.get("principal") or x.get("key") for x in b.get("signed_by") or []
                              if isinstance(x, dict)],
                "os_full": {"host": host_os, "guest": b.get("os")}})
    return rows


def matrix(store: Store, filters: dict | None = None, *, match: str = "exact", arms: list[str] | None = None,
           tests: list[str] | None = None, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """The compatibility matrix of the stored bundles matching ``filters``.

    Args:
        store: the open store.
        filters: :data:`capshim.db.terms.FILTERS` (device, build, since ...); match: exact, prefix, glob.
        arms, tests: only these arms and tests (default every shimmed arm and test).
        threshold: T of the verdicts, points of % of host (finite, >= 0).

    Returns:
        ``{"threshold", "rule", "verdicts": {name: meaning}, "bundles": int, "rows": [{"device",
        "host_os", "guest_os", "build", "model", "arm", "state", "test", "baseline", "pct_of_host":
        {"value", "ci95"|"range"}|None (percent of the host's speed), "speedup": {...}|None (times
        the baseline), "aa": {"arm", "clean": bool|None}|None, "verdict", "why": str|None (why unclear), "bundle_id", "bundle",
        "signed_by": [principal, or key when added without a signer list], "os_full": {"host", "guest"}}],
        "counts": {verdict: int}}``; rows sorted by the
        :data:`KEYS`, then arm, test and bundle id (unknown values last).

    Raises:
        DbError: a bad threshold or filter; nothing matches (names the filters); an arm or test
            in ``arms``/``tests`` that no matching bundle has (names it, and the closest).
    """
    _check_threshold(threshold)
    bundles = store.select(filters, match)
    if not bundles:
        where = ",".join(f"{k}={v}" for k, v in (filters or {}).items() if v)
        raise DbError(f"db matrix: no bundle in the store matches{' ' + where if where else ''} (see capshim db list)")
    by_name = host_os_index(store.select())  # a host baseline's own bundle
    rows, seen_arms, seen_tests = [], set(), set()
    for b in bundles:
        summary = store.summary(b["id"])
        for name, arm in _shimmed(summary).items():
            seen_arms.add(name)
            seen_tests.update(arm.get("tests") or {})
        rows += _rows_of(b, summary, _host_os(b, by_name), arms, tests, threshold)
    _check_asked(arms, seen_arms, "shimmed arm", len(bundles), " (the baseline, host and A/A arms are no rows)")
    _check_asked(tests, seen_tests, "test", len(bundles))
    rows.sort(key=lambda r: (*[(r[k] is None, r[k] or "") for k in KEYS], r["arm"], r["test"], r["bundle_id"]))
    counts = {v: n for v in VERDICTS if (n := sum(r["verdict"] == v for r in rows))}
    return {"threshold": threshold, "rule": MATRIX_RULE.format(t=threshold), "verdicts": dict(VERDICTS),
            "bundles": len(bundles), "rows": rows, "counts": counts}
