"""Tables from procs.py's lines: seconds per phase, the template-vs-plain A/A, the process effect.

    python3 scripts/h200-precision/table.py PROCS.jsonl [--json OUT.json] [--perf STDERR_DIR]

1. Seconds per process and per phase (medians), plain vs template: where a process's time goes
   (``other`` = the parent's wall minus the worker's phases: exit, teardown, output).
2. A/A between templated and plain processes of the native arm: the ratio of geometric means
   of their pp512 process values (each process: the median of its repetitions) with a 95%
   bootstrap interval (4000 resamples of processes, seeded) and a Welch interval on the logs.
3. The process effect: the two clusters of pp512 process values, split where the pooled
   plain+template values' within-cluster sum of squares (of logs) is least; per config the
   share of processes in the fast cluster, their median and sd; per template, its children's
   shares (children of one template share its host address layout); nvidia-smi's SM clock
   and temperature of fast vs slow processes.
4. With ``--perf``: the perf-logger processes' per-op GPU times (GGML_VK_PERF_LOGGER's
   ``NAME: N x T us = TOTAL us`` lines, summed over the process), fast vs slow processes:
   which operations a slow process spends its extra time in.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
import random
import statistics
import sys
from collections import defaultdict

PHASES = ("python_start", "imports", "backend_init", "model_load", "context", "warmup", "test_warmup",
          "measure")


def value(rec: dict) -> float | None:
    pp = rec.get("pp512")
    return statistics.median(pp) if pp and rec.get("rc") == 0 else None


def split(values: list[float]) -> float | None:
    """The threshold between two clusters of ``values`` (least within-cluster SS of logs)."""
    xs = sorted(math.log(v) for v in values)
    if len(xs) < 4:
        return None
    best, cut = None, None
    for i in range(2, len(xs) - 1):
        lo, hi = xs[:i], xs[i:]
        ss = sum((x - statistics.fmean(lo)) ** 2 for x in lo) + sum((x - statistics.fmean(hi)) ** 2 for x in hi)
        if best is None or ss < best:
            best, cut = ss, math.exp((xs[i - 1] + xs[i]) / 2)
    return cut


def gm(xs):
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def aa(a: list[float], b: list[float], seed: int = 31) -> dict:
    """Ratio of geometric means a/b with bootstrap and Welch 95% intervals."""
    if len(a) < 3 or len(b) < 3:
        return {"n": [len(a), len(b)], "ratio": None}
    rng = random.Random(seed)
    boots = sorted(gm(rng.choices(a, k=len(a))) / gm(rng.choices(b, k=len(b))) for _ in range(4000))
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    d = statistics.fmean(la) - statistics.fmean(lb)
    df = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    t = 1.96 + 2.4 / df  # t quantile 0.975, a close approximation for df >= 5
    se = math.sqrt(va + vb)
    return {"n": [len(a), len(b)], "ratio": round(gm(a) / gm(b), 4),
            "bootstrap95": [round(boots[100], 4), round(boots[3899], 4)],
            "welch95": [round(math.exp(d - t * se), 4), round(math.exp(d + t * se), 4)]}


PERF_LINE = re.compile(r"^(?P<op>.+?): (?P<n>\d+) x (?P<t>[\d.e+]+) us = (?P<total>[\d.e+]+) us")


def perf_ops(text: str) -> dict[str, float]:
    """Microseconds per operation (GGML_VK_PERF_LOGGER lines), summed over a process's graphs."""
    ops: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = PERF_LINE.match(line)
        if m:
            ops[m.group("op")] += float(m.group("total"))
    return ops


def perf_table(folder: str, recs: list[dict], cut: float) -> dict:
    """Per-op medians (us) of fast and slow perf-logger processes, largest difference first."""
    byidx = {r.get("index"): r for r in recs}
    groups: dict[str, list[dict]] = {"fast": [], "slow": []}
    for f in sorted(Path(folder).glob("*-perf-logger.txt")):
        r = byidx.get(int(f.name.split("-")[0]))
        v = value(r) if r else None
        if v:
            groups["fast" if v > cut else "slow"].append(perf_ops(f.read_text(errors="replace")))
    if not groups["fast"] or not groups["slow"]:
        print(f"4. perf logger: {len(groups['fast'])} fast, {len(groups['slow'])} slow processes: no comparison")
        return {}
    ops = sorted({op for g in groups.values() for d in g for op in d})
    rows = []
    for op in ops:
        f = statistics.median(d.get(op, 0.0) for d in groups["fast"])
        s = statistics.median(d.get(op, 0.0) for d in groups["slow"])
        rows.append((s - f, op, f, s))
    rows.sort(reverse=True)
    print(f"4. perf logger, {len(groups['fast'])} fast vs {len(groups['slow'])} slow processes: "
          "per-op GPU us (median of the process sums), largest slow-minus-fast first")
    for d, op, f, s in rows[:15]:
        print(f"  {op[:70]:70} fast {f:>12,.0f}  slow {s:>12,.0f}  diff {d:>+10,.0f}")
    return {op: {"fast_us": f, "slow_us": s} for _d, op, f, s in rows}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("procs")
    ap.add_argument("--json")
    ap.add_argument("--perf", help="folder of procs.py's stderr files (NNN-CONFIG.txt)")
    a = ap.parse_args()
    recs = [json.loads(line) for line in open(a.procs) if line.strip()]
    by = defaultdict(list)
    for r in recs:
        by[r["config"]].append(r)
    out: dict = {"processes": len(recs), "failed": [r for r in recs if r.get("rc") != 0]}
    print(f"{len(recs)} processes, {len(out['failed'])} failed")

    print("\n1. seconds per process (medians)")
    cols = ("wall_s", *PHASES, "other")
    print(f"{'config':18}" + "".join(f"{c[:11]:>12}" for c in cols))
    phase_table = {}
    for cfg, rs in by.items():
        row = {}
        for c in cols:
            if c == "other":
                xs = [r["wall_s"] - sum((r.get("phases") or {}).get(p) or 0 for p in PHASES)
                      for r in rs if r.get("phases") and "wall_s" in r]
            elif c == "wall_s":
                xs = [r["wall_s"] for r in rs if "wall_s" in r]
            else:
                xs = [(r.get("phases") or {}).get(c) for r in rs]
                xs = [x for x in xs if x is not None]
            row[c] = round(statistics.median(xs), 3) if xs else None
        phase_table[cfg] = row
        print(f"{cfg:18}" + "".join(f"{'-' if row[c] is None else row[c]:>12}" for c in cols))
    out["phases"] = phase_table

    vals = {cfg: [v for v in map(value, rs) if v] for cfg, rs in by.items()}
    out["aa_template_vs_plain"] = aa(vals.get("template", []), vals.get("plain", []))
    print("\n2. A/A template vs plain, pp512:", json.dumps(out["aa_template_vs_plain"]))

    pooled = vals.get("plain", []) + vals.get("template", [])
    cut = split(pooled)
    out["cluster_threshold_tok_s"] = round(cut, 1) if cut else None
    print(f"\n3. process effect: fast cluster above {cut:,.0f} tok/s" if cut else "\n3. too few processes")
    print(f"{'config':18}{'n':>4}{'fast':>6}{'median':>10}{'sd %':>7}{'fast med':>10}{'slow med':>10}")
    eff = {}
    for cfg, vs in vals.items():
        if not vs or cut is None:
            continue
        fast, slow = [v for v in vs if v > cut], [v for v in vs if v <= cut]
        sd = statistics.stdev(vs) / statistics.median(vs) * 100 if len(vs) > 1 else 0
        eff[cfg] = {"n": len(vs), "fast": len(fast), "median": round(statistics.median(vs), 1),
                    "sd_pct": round(sd, 2), "fast_median": round(statistics.median(fast), 1) if fast else None,
                    "slow_median": round(statistics.median(slow), 1) if slow else None}
        e = eff[cfg]
        print(f"{cfg:18}{e['n']:>4}{e['fast']:>6}{e['median']:>10,.0f}{e['sd_pct']:>7.2f}"
              f"{e['fast_median'] or 0:>10,.0f}{e['slow_median'] or 0:>10,.0f}")
    out["process_effect"] = eff
    per_tpl = defaultdict(list)
    for r in by.get("template", []):
        v = value(r)
        if v and cut:
            per_tpl[r.get("template_pid")].append(int(v > cut))
    out["per_template_fast"] = {str(k): v for k, v in per_tpl.items()}
    print("template children (1 = fast):", " | ".join(" ".join(map(str, v)) for v in per_tpl.values()))
    if cut:
        for key in ("clocks.sm", "clocks.mem", "temperature.gpu", "memory.used", "power.draw"):
            groups = {"fast": [], "slow": []}
            for r in recs:
                v, s = value(r), (r.get("smi_before") or {}).get(key)
                try:
                    groups["fast" if v and v > cut else "slow"].append(float(s)) if v else None
                except (TypeError, ValueError):
                    pass
            if groups["fast"] and groups["slow"]:
                print(f"  nvidia-smi {key} before: fast median {statistics.median(groups['fast'])}, "
                      f"slow median {statistics.median(groups['slow'])}")
                out.setdefault("smi_fast_vs_slow", {})[key] = {g: statistics.median(x) for g, x in groups.items()}
    if cut and a.perf:
        out["perf_ops"] = perf_table(a.perf, recs, cut)
    seq = [(r.get("index"), r["config"], round(value(r) or 0)) for r in recs]
    out["sequence"] = seq
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
