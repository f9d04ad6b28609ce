"""CSV: the summary as one row per arm and series, and a bundle's per-sample results.csv."""

from __future__ import annotations

import csv as _csv
import io

__all__ = ["serialize", "serialize_records", "COLUMNS", "RECORD_COLUMNS"]

COLUMNS = ["arm", "test", "state", "processes", "repetitions", "samples", "median_tok_s", "min_tok_s", "max_tok_s",
           "spread_pct", "speedup", "speedup_ci_low", "speedup_ci_high", "pct_of_host", "pct_of_host_ci_low",
           "pct_of_host_ci_high", "ci_level", "config_mismatch", "warnings"]
#: results.csv: one row per sample; ``round`` and ``position`` say when the process ran
#: (the arm order is shuffled per round), ``contaminated`` whether its telemetry flagged it.
RECORD_COLUMNS = ["arm", "run", "round", "position", "sample", "test", "tok_s", "state", "contaminated"]


def _num(v) -> str:
    return "" if v is None else repr(float(v))


def serialize(summary: dict) -> str:
    """One row per arm and series: numbers unformatted (``repr`` of floats), intervals as two columns.

    Raises:
        KeyError, TypeError: a summary of another shape (see :func:`capshim.export.table.table`).
    """
    buf = io.StringIO()
    w = _csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for t in summary.get("tests") or []:
        for name, arm in summary["arms"].items():
            st = arm["tests"].get(t)
            if not st:
                continue
            sp, pct = st.get("speedup") or {}, st.get("pct_of_host") or {}
            sci, pci = sp.get("ci95") or [None, None], pct.get("ci95") or [None, None]
            w.writerow([name, t, arm.get("state", ""), st.get("processes", ""), st.get("repetitions", ""), st["n"],
                        _num(st["median"]), _num(st["min"]), _num(st["max"]), _num(st.get("spread_pct")),
                        _num(sp.get("value")), _num(sci[0]), _num(sci[1]), _num(pct.get("value")), _num(pci[0]),
                        _num(pci[1]), pct.get("level") or sp.get("level") or "",
                        "; ".join(f"{m['field']}={m['value']!r} vs {m['reference']!r}" for m in st.get("mismatch") or []),
                        "; ".join(st.get("warnings") or [])])
    return buf.getvalue()


def serialize_records(records: list[dict], states: dict[str, str]) -> str:
    """results.csv: the columns of :data:`RECORD_COLUMNS`, one row per sample (tok/s as ``repr``).

    Args:
        records: the bench's sample records (``arm``, ``test``, ``tok_s`` required; ``run``,
            ``round``, ``position``, ``sample``, ``contaminated`` optional).
        states: each arm's state (:data:`capshim.bench.analysis.NOT_SHIM_STATES` and the others).

    Raises:
        KeyError, ValueError, TypeError: a record without ``arm``/``test`` or whose ``tok_s``
            is not a number (a bundle's finalize records it as the results.csv step's failure).
    """
    buf = io.StringIO()
    w = _csv.writer(buf, lineterminator="\n")
    w.writerow(RECORD_COLUMNS)
    for r in records:
        w.writerow([r["arm"], r.get("run", ""), r.get("round", ""), r.get("position", ""), r.get("sample", ""),
                    r["test"], repr(float(r["tok_s"])), states.get(r["arm"], ""),
                    {True: "yes", False: "no"}.get(r.get("contaminated"), "")])
    return buf.getvalue()
