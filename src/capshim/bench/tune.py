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

from capshim.bench import ablate
from capshim.errors import UsageError
from capshim.profiles.catalog import KEYS

#: The A/A arm of the confirmation bench (the bench's identity arm: the app layer active,
#: answering exactly the stock values); None leaves it out.
AA_ARM: str | None = "aa=identity"

#: CPU defaults: the warm-up round fills Mesa's shader cache (see ablate.CPU_DEFAULTS).
CPU_DEFAULTS = {"repetitions": 2, "warmup": 1, "n_prompt": 64, "n_gen": 16, "confirm": 2, "budget": 4}
#: GPU defaults sized for one command under 10 minutes on the H200 with tinyllama-1.1b:
#: 8 candidates (every single change there), stages of 9 x 3 and 5 x 5 processes, confirmation 3 x 11.
GPU_DEFAULTS = {"repetitions": 2, "warmup": 1, "n_prompt": 512, "n_gen": 128, "confirm": 10, "budget": 8}
#: The bench's short flag (ablate.FLAG_LABELS) for an arm whose shim was active but llama.cpp reported
#: the same capabilities as native.
PATH_UNCHANGED = "path unchanged"
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
        ("intdot", [k for k in KEYS["vulkan"] if k.startswith("integerDotProduct")], ()),
        ("subgroup-size-control", ["subgroupSizeControl"], ()),
    ):
        o = off(keys, ext_names)
        if o:
            dims[name] = [Option("on"), o]
    nv2 = [k for k in ablate.GROUPS["coopmat"]["caps"] if k.startswith("cooperativeMatrix")
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
        raise UsageError(f"--dims {','.join(unknown)}: not a tune dimension (known: {', '.join(DIMENSIONS)})")
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
    """Write a candidate's lower profile (TOML, via :func:`capshim.bench.ablate.write_profile`).

    ``verdict`` (the confirmation's ratio and verdict) leads the description, so the 200
    characters a description holds never cut it; ``comment`` goes on top of the file.
    """
    caps = {k: v for d, i in cand.items() for k, v in dims[d][i].caps.items()}
    exts = {k: v for d, i in cand.items() for k, v in dims[d][i].exts.items()}
    what = f"capshim tune on {device}: {describe(dims, cand)}"
    return ablate.write_profile(path, ablate.profile_data(
        name, "lower", f"{verdict}; {what}" if verdict else what, caps, exts), comment)


def _ratio_json(r: ablate.Ratio) -> dict:
    """A Ratio for tune.json: ``{"ratio": float|None, "ci95": [lo, hi]|None, "state": str}`` (no NaN)."""
    return {"ratio": None if math.isnan(r.value) else r.value,
            "ci95": [r.lo, r.hi] if r.lo is not None else None, "state": r.state}


def halve(names: list[str], rs: dict[str, ablate.Ratio]) -> list[str]:
    """The better half (rounded up) of ``names`` by median ratio, among those that pass the gate."""
    ok = sorted((n for n in names if rs[n].ok), key=lambda n: -rs[n].value)
    return ok[:max(1, math.ceil(len(ok) / 2))] if ok else []


def _overlap(a: ablate.Ratio, b: ablate.Ratio) -> bool:
    return a.lo is not None and b.lo is not None and a.lo <= b.hi and b.lo <= a.hi


def tie_note(best: str, rs: dict[str, ablate.Ratio], names: list[str], label) -> tuple[str | None, list[str]]:
    """Whether picking ``best`` (by median, among ``names`` of the last stage, ratios ``rs``) is within noise:
    ``(sentence or None, [the candidates tied with it])``. Tied: a candidate that passes the gate whose 95%
    interval overlaps the best's (none: no sentence); native too when the best's interval holds 1.00x.
    Without intervals (one process per arm) the sentence says the pick rests on medians alone."""
    b = rs[best]
    others = [n for n in names if n != best and rs[n].ok]
    if not others:
        return None, []
    if b.lo is None or any(rs[n].lo is None for n in others):
        return f"the pick of {best} over {', '.join(others)} rests on medians alone (no 95% interval: too " \
               "few processes)", []
    tied = [n for n in others if _overlap(b, rs[n])]
    if not tied:
        return None, []
    native = b.lo <= 1.0 <= b.hi
    who = [best, *tied] + (["native"] if native else [])
    ivals = "; ".join(f"{label(n)} {ablate.fmt_ratio(rs[n])}" for n in [best, *tied])
    return (f"the pick among {', '.join(who[:-1])} and {who[-1]} is a tie within noise: their last-stage "
            f"95% intervals overlap ({ivals}" + ("; native 1.00x" if native else "") + ")"), tied


def tune(out: Path | None = None, budget: int | None = None, model: str | None = None,
         repetitions: int | None = None, confirm_runs: int | None = None, warmup: int | None = None,
         n_prompt: int | None = None, n_gen: int | None = None, test: str | None = None, seed: int = 1,
         timeout: float = 900.0, only: list[str] | None = None) -> dict:
    """Search, confirm, and write ``tuned.toml`` and ``tune.json`` into ``out``; return tune.json's content.

    Files: ``candidates/cNN.toml``, ``stage-N/`` (one evidence bundle per
    stage, N from 1), ``confirm/`` (native vs the best candidate, as ``tuned``),
    ``tune.md``, ``tune.json``, ``tuned.toml`` (the best candidate's profile, when
    one passed the gate, written after the confirmation; its description and
    comment give the confirmation's ratio and verdict, "not shown faster than
    native" included); last, the study seal (``study.json``, ``SHA256SUMS``: :mod:`capshim.study`),
    also after an error once files were written.

    ``only`` restricts the search to those dimensions (names of
    :data:`DIMENSIONS`, e.g. ``["coopmat"]``, any case, duplicates dropped:
    :func:`parse_only`); the others stay stock.

    tune.json's ``outcome``: ``confirmed`` (the best candidate passed the gate in
    the confirmation; tuned.toml written, its verdict says whether it is faster),
    ``confirmation failed`` (it did not: tuned.toml written all the same, saying so),
    ``no candidate passed`` (no tuned.toml). ``capshim tune`` exits 0 only for
    ``confirmed`` without failed runs.

    Raises:
        UsageError: a non-empty ``out``; nothing to tune on this device; a name in
            ``only`` that is no tune dimension (the message lists them), or one this
            device offers no choice in (the message says why);
            a ``test`` the built-in workload does not run (before any run or file).
        CapshimError: no Vulkan driver; a bench was interrupted.
    """
    t0 = time.monotonic()
    out = Path(out) if out else Path(f"capshim-tune-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out}: folder exists and is not empty")
    from capshim import study

    with study.sealing(out, "tune"):  # the study seal: written last, also after an error
        only = parse_only(only) if only is not None else None
        stock, device = ablate.stock_probe()
        d = CPU_DEFAULTS if ablate.is_cpu(device) else GPU_DEFAULTS
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
        n_prompt, n_gen = n_prompt or d["n_prompt"], n_gen or d["n_gen"]
        ablate.check_test(test, ablate.builtin_tests(n_prompt, n_gen))
        asked = budget or d["budget"]
        cands = candidates(dims, asked, seed)
        space = space_size(dims)
        budget_info = {"requested": asked, "default": budget is None, "space": space, "tried": len(cands)}
        names = {f"c{i + 1:02d}": c for i, c in enumerate(cands)}
        specs = {}
        for n, c in names.items():
            p = out / "candidates" / f"{n}.toml"
            write_candidate(dims, c, p, f"tune-{n}", device["name"])
            specs[n] = f"{n}=profile:{p}"
        bench = dict(warmup=d["warmup"] if warmup is None else warmup, model=model,
                     n_prompt=n_prompt, n_gen=n_gen, timeout=timeout)
        results: dict[str, list[dict]] = {n: [] for n in names}
        last: dict[str, ablate.Ratio] = {}
        last_flags: dict[str, list[str]] = {}
        unchanged: dict[str, str] = {}  # candidate -> where the bench flagged it "path unchanged"
        why_notes: list[str] = []
        env_notes: list[str] = []
        stages = []
        alive, r, stage, t = list(names), repetitions or d["repetitions"], 1, None
        failed_runs = 0
        while True:
            m = ablate.run_arms(["native=", *(specs[n] for n in alive)], out / f"stage-{stage}", repetitions=r, **bench)
            # a candidate's failed runs are a result (it fails the gate); native's are a failed bench
            failed_runs += sum(1 for run in m.summary["arms"]["native"]["runs"] if ablate.run_failed(run))
            t = ablate.main_test(m.summary, test)
            rs = ablate.ratios(m.summary, t)
            for n in alive:
                last[n] = rs[n]
                last_flags[n] = ablate.arm_flags(m.summary, n)
                why = ablate.why(m.summary["arms"][n])
                same = PATH_UNCHANGED in last_flags[n]
                if same:
                    unchanged.setdefault(n, f"stage {stage}")
                results[n].append({"stage": stage, "runs": r, **_ratio_json(rs[n]), "gate": rs[n].ok,
                                   "flags": last_flags[n], "path_unchanged": same, "why": why})
            env_notes += [x for x in ablate.env_notes(m.summary) if x not in env_notes]
            why_notes += ablate.why_notes(m.summary, lambda n: f"stage {stage}: {n} ({describe(dims, names[n])})"
                                          if n in names else f"stage {stage}: {n}")
            kept = halve(alive, rs)
            stages.append({"stage": stage, "runs": r, "bundle": str(m.bundle), "arms": alive, "kept": kept,
                           "warnings": ablate.bench_warnings(m.summary)})
            if len(kept) <= 2:  # the best by median is confirmed against native (the runner-up is not)
                best = kept[0] if kept else None
                final = [n for n in alive if rs[n].ok]
                tie, tied = (tie_note(best, rs, final, lambda n: f"{n} ({describe(dims, names[n])})")
                             if best else (None, []))
                break
            alive, r, stage = kept, r * 2, stage + 1
        confirm = None
        tuned_path = None
        notes: list[str] = []
        if best is not None:
            arm_specs = ["native=", f"tuned={specs[best].split('=', 1)[1]}"] + ([AA_ARM] if AA_ARM else [])
            m = ablate.run_arms(arm_specs, out / "confirm", repetitions=confirm_runs or d["confirm"], **bench)
            failed_runs += m.failed_runs
            rcs = ablate.ratios(m.summary, ablate.main_test(m.summary, test))
            rc = rcs["tuned"]
            tuned_flags = ablate.arm_flags(m.summary, "tuned")
            if PATH_UNCHANGED in tuned_flags:
                unchanged.setdefault(best, "confirmation")
            aa_name = AA_ARM.split("=", 1)[0] if AA_ARM else None
            aa = rcs.get(aa_name) if aa_name else None
            verdict = ("faster than native (the whole interval above 1.00x)" if rc.ok and rc.lo is not None
                       and rc.lo > 1.0 else "not shown faster than native")
            outcome = "confirmed" if rc.ok else "confirmation failed"
            confirm = {"bundle": str(m.bundle), **_ratio_json(rc), "verdict": verdict,
                       "path_unchanged": PATH_UNCHANGED in tuned_flags,
                       "aa": None if aa is None else _ratio_json(aa),
                       "flags": {a: ablate.arm_flags(m.summary, a) for a in m.summary["arms"]},
                       "why": ablate.why(m.summary["arms"]["tuned"]), "warnings": ablate.bench_warnings(m.summary)}
            tuned_path = out / "tuned.toml"
            said = f"{ablate.fmt_ratio(rc)} of native {t}: {verdict}"
            write_candidate(dims, names[best], tuned_path, "tuned", device["name"], verdict=said,
                            comment=f"The best candidate of capshim tune ({best}: {describe(dims, names[best])}) on "
                                    f"{device['name']}.\nConfirmation ({out / 'confirm'}): {said}."
                                    + (f"\nPath unchanged ({unchanged[best]}): {EQUIVALENT}." if best in unchanged
                                       else ""))
            notes.append(f"best: {best} ({describe(dims, names[best])}) {said} (confirmation, {out / 'confirm'}); "
                         f"profile {tuned_path}"
                         + (f"; {tie}" if tie else "")
                         + (f"; {best} is path unchanged ({unchanged[best]}): {EQUIVALENT}" if best in unchanged else ""))
            moved = ablate.aa_warning(ablate.per_test(m.summary), aa_name) if aa_name else []
            notes += moved
            if aa is not None and not moved:
                notes.append(f"A/A arm (app layer active, stock answers): {ablate.fmt_ratio(aa)} of native: "
                             "the harness's and the shim's own bias")
            if confirm["flags"].get("tuned") or confirm["flags"].get("native"):
                notes.append("confirmation flags: " + "; ".join(f"{a}: {', '.join(f)}" for a, f
                                                                in confirm["flags"].items() if f))
            why_notes += ablate.why_notes(m.summary, lambda n: f"confirmation: {n}")
            env_notes += [x for x in ablate.env_notes(m.summary) if x not in env_notes]
        else:
            outcome = "no candidate passed"
            notes.append("no candidate passed the correctness gate; no profile written")
        notes[1:1] = env_notes
        if budget_info["requested"] > space:
            notes.append(f"budget {asked}: only {space} candidate{'s' if space != 1 else ''} exist"
                         f"{'s' if space == 1 else ''} on this device"
                         + (f" in {', '.join(dims)}" if only else "") + f"; {len(cands)} tried")
        notes += [f"{n} ({describe(dims, names[n])}) path unchanged ({where}): {EQUIVALENT}"
                  for n, where in unchanged.items() if n != best]
        rows = []
        for n, c in names.items():
            flags = last_flags[n] + ([PATH_UNCHANGED] if n in unchanged and PATH_UNCHANGED not in last_flags[n] else [])
            rows.append({"candidate": n, "answers": describe(dims, c), "stages": len(results[n]),
                         f"{t} vs native (last stage)": ablate.fmt_ratio(last[n]),
                         "state": last[n].state, "flags": ", ".join(flags), "best": "yes" if n == best else ""})
        notes.append(f"search: successive halving, {len(names)} candidates (seed {seed}) over {', '.join(dims)}; "
                     "stages: " + "; ".join(f"{s['stage']}: native + {len(s['arms'])} candidates x {s['runs']} runs"
                                            for s in stages)
                     + (f"; confirmation: native + best" + (" + A/A" if AA_ARM else "")
                        + f" x {confirm_runs or d['confirm']} runs" if confirm else ""))
        notes += why_notes
        if ablate.is_cpu(device):
            notes.append(ablate.CPU_NOTE)
        (out / "tune.md").write_text(f"# capshim tune — {device['name']}\n\n" + ablate.markdown(rows, notes),
                                     encoding="utf-8")
        result = {"schema": "capshim-tune/2", "out": str(out), "device": device, "cpu_device": ablate.is_cpu(device), "test": t,
                  "seed": seed, "only": list(only) if only else None, "budget": budget_info, "outcome": outcome,
                  "tie": {"with": tied, "note": tie} if tie else None,
                  "dimensions": {k: [o.label for o in v] for k, v in dims.items()},
                  "candidates": {n: {"answers": describe(dims, c), "profile": str(out / "candidates" / f"{n}.toml"),
                                     "path_unchanged": n in unchanged, "results": results[n]} for n, c in names.items()},
                  "stages": stages, "winner": best, "confirm": confirm,
                  "tuned_profile": str(tuned_path) if tuned_path else None, "rows": rows, "notes": notes,
                  "failed_runs": failed_runs, "elapsed_s": round(time.monotonic() - t0, 1)}
        (out / "tune.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return result
