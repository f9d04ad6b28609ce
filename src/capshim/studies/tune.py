"""``capshim tune``: search the answers that are safe on this device for the fastest correct arm.

Safe means never above what the device has: every candidate is an app-role
``lower`` profile built from the device's stock probe (a feature can only be
turned off when the device has it on, an extension only hidden when the
device has it, a size only lowered). The dimensions (:func:`dimensions`):

* ``shmem``: ``maxComputeSharedMemorySize`` at the stock value, 3/4 and 1/2 of
  it (rounded down to 4 KiB, not below 16 KiB);
* ``fp16``, ``bf16``, ``intdot`` (the ``*Accelerated`` properties),
  ``subgroup-size-control``: on (stock) or off;
* ``coopmat``: cooperative matrix visibility: stock (KHR and NV coopmat2 as
  the device has them), ``coopmat1`` (NV coopmat2 hidden), ``none`` (both hidden).

Search: successive halving (Jamieson and Talwalkar 2016) over the bench's own
statistics. Stage 1 benches ``native`` and every candidate with ``r`` runs; each
later stage keeps the better half (by median ratio to native, among arms that
pass the correctness gate: state not failed, inert, invalid or wrong-output)
and doubles the runs, until at most two are kept. The better of those by
median (the best candidate) is confirmed against native in a final interleaved
bench (the runner-up is not: when their intervals overlap each other and 1.00x,
the verdict note says the pick is a tie within noise); its profile,
``tuned.toml``, is written whatever the verdict, and says it. A candidate the
bench flags ``path unchanged`` (the shim was active but llama.cpp reported the
same capabilities as native) is equivalent to stock for llama.cpp: its flags
and a note say so. Every
stage is its own evidence bundle (``stage-1/``, ``stage-2/``, ...);
``tune.json`` lists every candidate's result in every stage, with the bench's
warnings (short flags) and, for a candidate that failed, why; ``budget``
records the candidates asked for, how many this device's space holds and how
many were tried.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from capshim import summary
from capshim.contracts import names
from capshim.contracts import verdict as vd
from capshim.contracts.names import device_label
from capshim.contracts.numbers import DEFAULT_THRESHOLD
from capshim.contracts.suggest import did_you_mean
from capshim.errors import UsageError
from capshim.profiles.catalog import KEYS
from capshim.studies import common
from capshim.studies.common import PATH_UNCHANGED, Ratio, fmt_ratio

#: The A/A arm of the confirmation bench (the bench's identity arm: the app layer active,
#: answering exactly the stock values).
AA_ARM = "aa"
EQUIVALENT = ("llama.cpp reported the same capabilities as native with these answers, so for llama.cpp "
              "this candidate is equivalent to stock (its ratio is noise and the shim's own cost)")
MIN_SHMEM = 16384
SHMEM_STEP = 4096
#: Every tune dimension, in :func:`dimensions`' order, with why a device may offer no choice in it.
DIMENSIONS: dict[str, str] = {
    "shmem": "its shared memory cannot be lowered in 4 KiB steps to 3/4 or 1/2 and stay at least 16 KiB",
    "fp16": "it has no fp16 (shaderFloat16)",
    "bf16": "it has no bf16 (shaderBFloat16*, VK_KHR_shader_bfloat16)",
    "intdot": "it reports no accelerated integer dot product (integerDotProduct*Accelerated)",
    "subgroup-size-control": "it has no subgroup size control (subgroupSizeControl)",
    "coopmat": "it has no cooperative matrix (VK_KHR_cooperative_matrix)",
}


@dataclass
class Option:
    """One value of one dimension: a label and the lower-profile entries it needs (empty: stock)."""

    label: str
    caps: dict = field(default_factory=dict)
    exts: dict = field(default_factory=dict)


def dimensions(stock: dict) -> dict[str, list[Option]]:
    """The search space on this device (from a stock probe); option 0 of each dimension is stock.

    Dimensions the device gives no choice in (e.g. no fp16, no coopmat) are left out.
    """
    caps, exts = stock.get("capabilities") or {}, stock.get("extensions") or {}
    dims: dict[str, list[Option]] = {}
    s = caps.get("maxComputeSharedMemorySize")
    if isinstance(s, int):
        sizes = []
        for num, den in ((3, 4), (1, 2)):
            v = s * num // den // SHMEM_STEP * SHMEM_STEP
            if MIN_SHMEM <= v < s and v not in sizes:
                sizes.append(v)
        if sizes:
            dims["shmem"] = [Option(str(s))] + [Option(str(v), {"maxComputeSharedMemorySize": v}) for v in sizes]

    def off(keys, ext_names=()):
        c = {k: False for k in keys if caps.get(k) is True}
        e = {x: False for x in ext_names if x in exts}
        return Option("off", c, e) if c or e else None

    for name, keys, ext_names in (
        ("fp16", ["shaderFloat16"], ()),
        ("bf16", ["shaderBFloat16Type", "shaderBFloat16DotProduct", "shaderBFloat16CooperativeMatrix"],
         ["VK_KHR_shader_bfloat16"]),
        ("intdot", [k for k in KEYS[common.GROUPS_API] if k.startswith("integerDotProduct")], ()),
        ("subgroup-size-control", ["subgroupSizeControl"], ()),
    ):
        o = off(keys, ext_names)
        if o:
            dims[name] = [Option("on"), o]
    nv2 = [k for k in common.GROUPS["coopmat"]["caps"] if k.startswith("cooperativeMatrix")
           and k not in ("cooperativeMatrix", "cooperativeMatrixRobustBufferAccess")]
    if "VK_KHR_cooperative_matrix" in exts:
        opts = [Option("stock")]
        if "VK_NV_cooperative_matrix2" in exts:
            o = off(nv2, ["VK_NV_cooperative_matrix2"])
            opts.append(Option("coopmat1", o.caps, o.exts))
        o = off(["cooperativeMatrix", "cooperativeMatrixRobustBufferAccess", *nv2],
                ["VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix", "VK_NV_cooperative_matrix2"])
        opts.append(Option("none", o.caps, o.exts))
        dims["coopmat"] = opts
    return dims


def parse_only(names: list[str]) -> list[str]:
    """``--dims`` names: lower case, stripped, duplicates dropped (first kept), order kept.

    Raises:
        UsageError: an empty list, or a name that is no tune dimension (the message lists them).
    """
    only = list(dict.fromkeys(n.strip().lower() for n in names if n.strip()))
    if not only:
        raise UsageError("--dims: give at least one dimension name")
    unknown = [n for n in only if n not in DIMENSIONS]
    if unknown:
        raise UsageError(f"--dims {','.join(unknown)}: not a tune dimension{did_you_mean(unknown[0], DIMENSIONS)} "
                         f"(known: {', '.join(DIMENSIONS)})")
    return only


def space_size(dims: dict[str, list[Option]]) -> int:
    """How many candidates the space holds: every combination of options but all-stock."""
    return math.prod(len(o) for o in dims.values()) - 1 if dims else 0


def candidates(dims: dict[str, list[Option]], budget: int, seed: int) -> list[dict[str, int]]:
    """Up to ``budget`` candidates (dimension -> option index; never all stock), seeded.

    Every single-dimension change comes first (a seeded sample of them when
    there are more than ``budget``), then seeded random combinations.
    """
    rng = random.Random(seed)
    singles = [{d: i} for d, opts in dims.items() for i in range(1, len(opts))]
    if len(singles) >= budget:
        picked = sorted(rng.sample(range(len(singles)), budget))
        return [{**{d: 0 for d in dims}, **singles[i]} for i in picked]
    out = [{**{d: 0 for d in dims}, **s} for s in singles]
    seen = {tuple(sorted(c.items())) for c in out}
    total = space_size(dims)
    while len(out) < min(budget, total):
        c = {d: rng.randrange(len(opts)) for d, opts in dims.items()}
        key = tuple(sorted(c.items()))
        if key in seen or not any(c.values()):
            continue
        seen.add(key)
        out.append(c)
    return out


def describe(dims: dict[str, list[Option]], cand: dict[str, int]) -> str:
    """``shmem=24576, fp16=off`` (only the dimensions that differ from stock)."""
    return ", ".join(f"{d}={dims[d][i].label}" for d, i in cand.items() if i) or "stock"


def write_candidate(dims: dict[str, list[Option]], cand: dict[str, int], path: Path, name: str, device: str,
                    verdict: str | None = None, comment: str | None = None):
    """Write a candidate's lower profile (TOML, via :func:`capshim.studies.common.write_profile`).

    ``verdict`` (the confirmation's ratio and verdict) leads the description, so the 200
    characters a description holds never cut it; ``comment`` goes on top of the file.
    """
    caps = {k: v for d, i in cand.items() for k, v in dims[d][i].caps.items()}
    exts = {k: v for d, i in cand.items() for k, v in dims[d][i].exts.items()}
    what = f"capshim tune on {device}: {describe(dims, cand)}"
    return common.write_profile(path, common.profile_data(
        name, "lower", f"{verdict}; {what}" if verdict else what, caps, exts), comment)


def halve(names: list[str], rs: dict[str, Ratio]) -> list[str]:
    """The better half (rounded up) of ``names`` by median ratio, among those that pass the gate."""
    ok = sorted((n for n in names if rs[n].ok), key=lambda n: -rs[n].value)
    return ok[:max(1, math.ceil(len(ok) / 2))] if ok else []


def _bounds(r: Ratio) -> tuple[float, float] | None:
    """The 95% interval, or below 5 processes the range of ratios (wider: every pair of processes)."""
    return (r.lo, r.hi) if r.lo is not None else r.range


def _overlap(a: Ratio, b: Ratio) -> bool:
    x, y = _bounds(a), _bounds(b)
    return x is not None and y is not None and x[0] <= y[1] and y[0] <= x[1]


def tie_note(best: str, rs: dict[str, Ratio], names: list[str], label) -> tuple[str | None, list[str]]:
    """Whether picking ``best`` (by median, among ``names`` of the last stage, ratios ``rs``) is within noise:
    ``(sentence or None, [the candidates tied with it])``. Tied: a candidate that passes the gate whose 95%
    interval (below 5 processes: range of ratios) overlaps the best's (none: no sentence); native too when
    the best's holds 1.00x. Without either (one process per arm) the sentence says the pick rests on medians
    alone."""
    b = rs[best]
    others = [n for n in names if n != best and rs[n].ok]
    if not others:
        return None, []
    if _bounds(b) is None or any(_bounds(rs[n]) is None for n in others):
        return f"the pick of {best} over {', '.join(others)} rests on medians alone (no 95% interval: too " \
               "few processes)", []
    tied = [n for n in others if _overlap(b, rs[n])]
    if not tied:
        return None, []
    lo, hi = _bounds(b)
    native = lo <= 1.0 <= hi
    who = [best, *tied] + (["native"] if native else [])
    ivals = "; ".join(f"{label(n)} {fmt_ratio(rs[n])}" for n in [best, *tied])
    what = "95% intervals" if b.lo is not None and all(rs[n].lo is not None for n in tied) else \
        "intervals or, below 5 processes, ranges"
    return (f"the pick among {', '.join(who[:-1])} and {who[-1]} is a tie within noise: their last-stage "
            f"{what} overlap ({ivals}" + ("; native 1.00x" if native else "") + ")"), tied


def select_dims(stock: dict, device: dict, only: list[str] | None) -> dict[str, list[Option]]:
    """The search space on this device (:func:`dimensions`), restricted to ``only`` (parsed ``--dims``).

    Raises:
        UsageError: nothing can be lowered on this device, or a name of ``only`` this device
            offers no choice in (the message says why, and lists the device's dimensions).
    """
    dims = dimensions(stock)
    if not dims:
        raise UsageError(f"{device['name']}: no capability this device has can be lowered; nothing to tune")
    if only:
        absent = [n for n in only if n not in dims]
        if absent:
            raise UsageError("--dims " + "; ".join(f"{n}: {device['name']} offers no choice there: {DIMENSIONS[n]}"
                                                   for n in absent)
                             + f" (this device's dimensions: {', '.join(dims)})")
        dims = {n: o for n, o in dims.items() if n in only}
    return dims


@dataclass
class Search:
    """What the successive halving found (:func:`search`).

    Attributes:
        results: candidate -> its result in each stage it ran (tune.json ``candidates[c]["results"]``).
        last / last_flags: candidate -> its Ratio and the bench's short flags in the last stage it ran.
        unchanged: candidate -> where the bench flagged it ``path unchanged`` (``stage N``, ``confirmation``).
        stages: one entry per stage (tune.json ``stages``).
        why_notes / env_notes: notes on failed arms and inherited variables, each once.
        test: the test candidates are ranked on.
        best: the candidate to confirm, or None; tie / tied: :func:`tie_note` for it.
        failed_runs: native's failed runs (a candidate's are its result).
    """

    results: dict[str, list[dict]]
    last: dict[str, Ratio] = field(default_factory=dict)
    last_flags: dict[str, list[str]] = field(default_factory=dict)
    unchanged: dict[str, str] = field(default_factory=dict)
    stages: list[dict] = field(default_factory=list)
    why_notes: list[str] = field(default_factory=list)
    env_notes: list[str] = field(default_factory=list)
    test: str = ""
    best: str | None = None
    tie: str | None = None
    tied: list[str] = field(default_factory=list)
    failed_runs: int = 0


def search(out: Path, cands: dict[str, dict[str, int]], specs: dict[str, str], dims: dict[str, list[Option]],
           repetitions: int, test: str | None, bench: dict) -> Search:
    """Successive halving: stage N benches native and the candidates alive into ``out/stage-N``.

    ``bench``: the keyword arguments of :func:`capshim.studies.common.run_arms` every stage shares.
    Each stage keeps the better half (:func:`halve`) and doubles the runs, until at most two are left.
    """
    s = Search({n: [] for n in cands})
    alive, r, stage = list(cands), repetitions, 1

    def label(n: str) -> str:  # how the notes name an arm of this stage
        return f"stage {stage}: {n} ({describe(dims, cands[n])})" if n in cands else f"stage {stage}: {n}"

    while True:
        m = common.run_arms(["native=", *(specs[n] for n in alive)], out / f"stage-{stage}", repetitions=r, **bench)
        s.failed_runs += sum(1 for run in m.summary["arms"]["native"]["runs"] if summary.run_failed(run))
        s.test = common.main_test(m.summary, test)
        rs = common.ratios(m.summary, s.test)
        for n in alive:
            s.last[n] = rs[n]
            s.last_flags[n] = common.arm_flags(m.summary, n)
            same = PATH_UNCHANGED in s.last_flags[n]
            if same:
                s.unchanged.setdefault(n, f"stage {stage}")
            s.results[n].append({"stage": stage, "runs": r, **rs[n].to_json(), "gate": rs[n].ok,
                                 "flags": s.last_flags[n], "path_unchanged": same,
                                 "why": common.why(m.summary["arms"][n])})
        s.env_notes += [x for x in common.env_notes(m.summary) if x not in s.env_notes]
        s.why_notes += common.why_notes(m.summary, label)
        kept = halve(alive, rs)
        s.stages.append({"stage": stage, "runs": r, "bundle": str(m.bundle), "arms": alive, "kept": kept,
                         "warnings": common.bench_warnings(m.summary)})
        if len(kept) <= 2:  # the best by median is confirmed against native (the runner-up is not)
            s.best = kept[0] if kept else None
            if s.best:
                final = [n for n in alive if rs[n].ok]
                s.tie, s.tied = tie_note(s.best, rs, final, lambda n: f"{n} ({describe(dims, cands[n])})")
            return s
        alive, r, stage = kept, r * 2, stage + 1


def confirm_verdict(summary: dict, test: str, ok: bool) -> str:
    """The confirmation's verdict, tuned vs native, by the one rule (:func:`capshim.contracts.verdict.decide`:
    5 processes a side, neither mostly contaminated, the 95% interval entirely beyond the threshold):
    "faster than native (...)", "slower than native (...)", "the same as native (...)" or "not shown
    faster than native (why)"."""
    arms = summary["arms"]
    if not ok:
        return "not shown faster than native (not a result)"
    sp = ((arms["tuned"].get("tests") or {}).get(test) or {}).get("speedup")
    v = vd.decide_cmp(sp, (arms.get("native") or {}).get("runs"), arms["tuned"].get("runs"),
                      labels=("native", "tuned"))
    t = f"{DEFAULT_THRESHOLD:g}%"
    return {vd.IMPROVEMENT: f"faster than native (the whole interval more than {t} above 1.00x)",
            vd.REGRESSION: f"slower than native (the whole interval more than {t} below 1.00x)",
            vd.SAME: f"the same as native (the interval within {t} of 1.00x)"}.get(
                v.word, f"not shown faster than native ({v.why})")


def confirm(out: Path, s: Search, cands: dict[str, dict[str, int]], specs: dict[str, str],
            dims: dict[str, list[Option]], device: dict, runs: int, test: str | None,
            bench: dict) -> tuple[dict, list[str]]:
    """Bench native, the best candidate (as ``tuned``) and the A/A arm into ``out/confirm``; write tuned.toml.

    Returns:
        tune.json's ``confirm`` entry (with ``outcome`` and ``tuned_profile`` added) and the notes
        (the verdict first). ``s`` gets the confirmation's failed runs, notes and path-unchanged flag.
    """
    best = s.best
    m = common.run_arms(["native=", f"tuned={specs[best].split('=', 1)[1]}", f"{AA_ARM}=identity"],
                        out / "confirm", repetitions=runs, **bench)
    s.failed_runs += m.failed_runs
    rcs = common.ratios(m.summary, common.main_test(m.summary, test))
    rc, aa = rcs["tuned"], rcs.get(AA_ARM)
    tuned_flags = common.arm_flags(m.summary, "tuned")
    if PATH_UNCHANGED in tuned_flags:
        s.unchanged.setdefault(best, "confirmation")
    verdict = confirm_verdict(m.summary, common.main_test(m.summary, test), rc.ok)
    flags = {a: common.arm_flags(m.summary, a) for a in m.summary["arms"]}
    tuned_path = out / "tuned.toml"
    said = f"{fmt_ratio(rc)} of native {s.test}: {verdict}"
    equivalent = f"{best} is path unchanged ({s.unchanged[best]}): {EQUIVALENT}" if best in s.unchanged else None
    write_candidate(dims, cands[best], tuned_path, "tuned", device_label(device), verdict=said,
                    comment=f"The best candidate of capshim tune ({best}: {describe(dims, cands[best])}) on "
                            f"{device_label(device)}.\nConfirmation ({out / 'confirm'}): {said}."
                            + (f"\nPath unchanged ({s.unchanged[best]}): {EQUIVALENT}." if equivalent else ""))
    notes = [f"best: {best} ({describe(dims, cands[best])}) {said} (confirmation, {out / 'confirm'}); "
             f"profile {tuned_path}" + (f"; {s.tie}" if s.tie else "") + (f"; {equivalent}" if equivalent else "")]
    moved = common.aa_warning(common.per_test(m.summary), AA_ARM)
    notes += moved
    if aa is not None and not moved:
        notes.append(f"A/A arm (shim active, stock answers): {fmt_ratio(aa)} of native: "
                     "the harness's and the shim's own bias")
    if flags.get("tuned") or flags.get("native"):
        notes.append("confirmation flags: " + "; ".join(f"{a}: {', '.join(f)}" for a, f in flags.items() if f))
    s.why_notes += common.why_notes(m.summary, lambda n: f"confirmation: {n}")
    s.env_notes += [x for x in common.env_notes(m.summary) if x not in s.env_notes]
    entry = {"bundle": str(m.bundle), **rc.to_json(), "verdict": verdict,
             "path_unchanged": PATH_UNCHANGED in tuned_flags, "aa": None if aa is None else aa.to_json(),
             "flags": flags, "why": common.why(m.summary["arms"]["tuned"]),
             "warnings": common.bench_warnings(m.summary),
             "outcome": "confirmed" if rc.ok else "confirmation failed", "tuned_profile": str(tuned_path)}
    return entry, notes


def tune(out: Path | None = None, budget: int | None = None, model: str | None = None,
         repetitions: int | None = None, confirm_runs: int | None = None, warmup: int | None = None,
         n_prompt: int | None = None, n_gen: int | None = None, test: str | None = None, seed: int = 1,
         timeout: float = 900.0, only: list[str] | None = None) -> dict:
    """Search, confirm, and write ``tuned.toml`` and ``tune.json`` into ``out``; return tune.json's content.

    Files (``out`` a new folder: :func:`capshim.studies.common.study_folder`; default
    ``./capshim-tune-DATE-TIME[-N]``): ``candidates/cNN.toml``, ``stage-N/`` (one evidence bundle per
    stage, N from 1), ``confirm/`` (native vs the best candidate, as ``tuned``),
    ``tune.md``, ``tune.json``, ``tuned.toml`` (the best candidate's profile, when
    one passed the gate, written after the confirmation; its description and
    comment give the confirmation's ratio and verdict, "not shown faster than
    native" included); last, the study seal (``study.json``, ``SHA256SUMS``:
    :mod:`capshim.evidence.study`), also after an error or stop signals once files were written.

    ``only`` restricts the search to those dimensions (names of
    :data:`DIMENSIONS`, e.g. ``["coopmat"]``, any case, duplicates dropped:
    :func:`parse_only`); the others stay stock.

    tune.json's ``outcome``: ``confirmed`` (the best candidate passed the gate in
    the confirmation; tuned.toml written, its verdict says whether it is faster),
    ``confirmation failed`` (it did not: tuned.toml written all the same, saying so),
    ``no candidate passed`` (no tuned.toml). ``capshim tune`` exits 0 only for
    ``confirmed`` without failed runs.

    Raises:
        UsageError: (exit 2, nothing written) an ``out`` that is not new or empty or lies inside a
            sealed folder; nothing to tune on this device; a name in ``only`` that is no tune
            dimension (the message lists them), or one this device offers no choice in (the
            message says why); a ``test`` the built-in workload does not run.
        CapshimError: no Vulkan driver; a bench was stopped by a signal (exit 128+N, sealed).
    """
    t0 = time.monotonic()
    only = parse_only(only) if only is not None else None
    with common.study_folder(out, "tune") as (out, guard):
        stock, device = common.stock_probe()
        d = common.defaults("tune", device)
        dims = select_dims(stock, device, only)
        n_prompt, n_gen = n_prompt or d["n_prompt"], n_gen or d["n_gen"]
        common.check_test(test, common.builtin_tests(n_prompt, n_gen))
        asked = budget or d["budget"]
        cands = {names.check(f"c{i + 1:02d}", "candidate"): c for i, c in enumerate(candidates(dims, asked, seed))}
        budget_info = {"requested": asked, "default": budget is None, "space": space_size(dims), "tried": len(cands)}
        specs = {}
        for n, c in cands.items():
            p = out / "candidates" / f"{n}.toml"
            write_candidate(dims, c, p, f"tune-{n}", device_label(device))
            specs[n] = f"{n}=profile:{p}"
        bench = dict(warmup=d["warmup"] if warmup is None else warmup, model=model, n_prompt=n_prompt,
                     n_gen=n_gen, timeout=timeout, guard=guard)
        s = search(out, cands, specs, dims, repetitions or d["repetitions"], test, bench)
        confirm_runs = confirm_runs or d["confirm"]
        conf, notes = (confirm(out, s, cands, specs, dims, device, confirm_runs, test, bench) if s.best
                       else (None, ["no candidate passed the correctness gate; no profile written"]))
        rows = _rows(s, cands, dims)
        notes = _notes(notes, s, cands, dims, budget_info, only, seed, confirm_runs if conf else None)
        if common.is_cpu(device):
            notes.append(common.CPU_NOTE)
        common.write_output(out / "tune.md", f"# capshim tune — {device_label(device)}\n\n" + common.markdown(rows, notes))
        outcome = conf.pop("outcome") if conf else "no candidate passed"
        tuned_path = conf.pop("tuned_profile") if conf else None
        result = {"schema": "capshim-tune/2", "out": str(out), "device": device, "cpu_device": common.is_cpu(device),
                  "test": s.test, "seed": seed, "only": list(only) if only else None, "budget": budget_info,
                  "outcome": outcome, "tie": {"with": s.tied, "note": s.tie} if s.tie else None,
                  "dimensions": {k: [o.label for o in v] for k, v in dims.items()},
                  "candidates": {n: {"answers": describe(dims, c), "profile": str(out / "candidates" / f"{n}.toml"),
                                     "path_unchanged": n in s.unchanged, "results": s.results[n]}
                                 for n, c in cands.items()},
                  "stages": s.stages, "winner": s.best, "confirm": conf, "tuned_profile": tuned_path, "rows": rows,
                  "notes": notes, "failed_runs": s.failed_runs, "elapsed_s": round(time.monotonic() - t0, 1)}
        common.write_output(out / "tune.json", json.dumps(result, indent=2) + "\n")
        return result


def _rows(s: Search, cands: dict[str, dict[str, int]], dims: dict[str, list[Option]]) -> list[dict]:
    """tune.md's table: one row per candidate, its last stage's ratio, state and flags."""
    rows = []
    for n, c in cands.items():
        flags = s.last_flags[n] + ([PATH_UNCHANGED] if n in s.unchanged and PATH_UNCHANGED not in s.last_flags[n]
                                   else [])
        rows.append({"candidate": n, "answers": describe(dims, c), "stages": len(s.results[n]),
                     f"{s.test} vs native (last stage)": fmt_ratio(s.last[n]),
                     "state": s.last[n].state, "flags": ", ".join(flags), "best": "yes" if n == s.best else ""})
    return rows


def _notes(notes: list[str], s: Search, cands: dict[str, dict[str, int]], dims: dict[str, list[Option]],
           budget: dict, only: list[str] | None, seed: int, confirm_runs: int | None) -> list[str]:
    """tune.md's notes: the verdict (``notes``), inherited variables, the budget, path unchanged, the search."""
    notes = [*notes[:1], *s.env_notes, *notes[1:]]
    if budget["requested"] > budget["space"]:
        space = budget["space"]
        notes.append(f"budget {budget['requested']}: only {space} candidate{'s' if space != 1 else ''} exist"
                     f"{'s' if space == 1 else ''} on this device"
                     + (f" in {', '.join(dims)}" if only else "") + f"; {budget['tried']} tried")
    notes += [f"{n} ({describe(dims, cands[n])}) path unchanged ({where}): {EQUIVALENT}"
              for n, where in s.unchanged.items() if n != s.best]
    notes.append(f"search: successive halving, {len(cands)} candidates (seed {seed}) over {', '.join(dims)}; "
                 "stages: " + "; ".join(f"{st['stage']}: native + {len(st['arms'])} candidates x {st['runs']} runs"
                                        for st in s.stages)
                 + (f"; confirmation: native + best + A/A x {confirm_runs} runs" if confirm_runs else ""))
    return notes + s.why_notes
