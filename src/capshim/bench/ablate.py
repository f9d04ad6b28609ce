"""``capshim ablate``: what each capability group of a lowering profile is worth.

Given a lowering profile P (default ``vulkan-paravirt``), the bench measures,
in ONE interleaved bench (one evidence bundle):

* ``native`` (the stock device; the baseline and host), ``aa`` (the bench's A/A
  arm: the app layer active, answering the stock values: the harness's own
  bias) and ``sim`` (``simulate:P``);
* leave-one-out ``loo-G``: native with only group G lowered as P lowers it
  (``simulate:P|G``): what losing G costs;
* leave-one-in ``loi-G``: the simulated GPU with only group G raised back
  (``simulate:P`` + an app-role raise of G's stock values): what G alone buys;
* the cumulative path ``cum-K-G``: the simulated GPU with the first K groups
  raised (group order: :data:`GROUP_ORDER`); the last one raises all of them.

The smallest raise profile is the raise over P with the fewest groups (then the
fewest keys) whose ratio to native passes :func:`passes` (see
:data:`RECOVER` and :data:`LOWER_BOUND`); it is written as a profile file.

Groups whose keys P does not lower, or whose stock value is already at or below
P's answer on this device, are skipped (nothing to measure) and listed as such.

All bench runs go through :func:`run_arms` (the one seam to the bench API) and
all numbers are read from the bundle's summary through :func:`ratios` (one
place): no statistics are computed here. The bench's own warnings about each
arm (too few processes, unstable, contaminated, failed runs...) are read from
the summary too and shown short in each row (:func:`arm_flags`); why an arm
failed is the bench's reason (:func:`why`); when the A/A arm's interval
excludes 1.00x in any test, the first note says so (:func:`aa_warning`).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from capshim import profiles
from capshim.errors import CapshimError, UsageError
from capshim.profiles import Profile
from capshim.profiles.catalog import KEYS

# --- capability groups -------------------------------------------------------
# The ONE place that says which capability keys (catalog.py / the capability
# table's key names, and Vulkan extension names) belong to which group. Keys
# of a profile that are in no group fall into OTHER. Sources: the Vulkan
# specification's structures (the feature/property structures named in
# catalog.py) and llama.cpp's ggml-vulkan device checks (coopmat: KHR + NV
# coopmat2 extensions and features; integer dot: shaderIntegerDotProduct and
# the *Accelerated properties; fp16/bf16: shaderFloat16 and VK_KHR_shader_bfloat16;
# shared memory: maxComputeSharedMemorySize; subgroup control: the subgroup
# size control features and subgroup properties).
GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "coopmat": {
        "caps": ("cooperativeMatrix", "cooperativeMatrixRobustBufferAccess",
                 "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                 "cooperativeMatrixReductions", "cooperativeMatrixConversions",
                 "cooperativeMatrixPerElementOperations", "cooperativeMatrixTensorAddressing",
                 "cooperativeMatrixBlockLoads"),
        "exts": ("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix", "VK_NV_cooperative_matrix2"),
    },
    "intdot": {
        "caps": ("shaderIntegerDotProduct",
                 *(k for k in KEYS["vulkan"] if k.startswith("integerDotProduct"))),
        "exts": ("VK_KHR_shader_integer_dot_product",),
    },
    "fp16": {
        "caps": ("shaderFloat16", "shaderBFloat16Type", "shaderBFloat16DotProduct",
                 "shaderBFloat16CooperativeMatrix"),
        "exts": ("VK_KHR_shader_bfloat16",),
    },
    "shmem": {"caps": ("maxComputeSharedMemorySize",), "exts": ()},
    "subgroup": {
        "caps": ("subgroupSizeControl", "computeFullSubgroups", "subgroupSize", "subgroupSupportedStages",
                 "subgroupSupportedOperations", "subgroupQuadOperationsInAllStages", "minSubgroupSize",
                 "maxSubgroupSize", "maxComputeWorkgroupSubgroups", "requiredSubgroupSizeStages"),
        "exts": ("VK_EXT_subgroup_size_control",),
    },
}
#: Display and cumulative order (the order of the hand ablation in evidence/h200-ablation).
GROUP_ORDER = ("coopmat", "intdot", "fp16", "shmem", "subgroup")
OTHER = "other"

#: Selection rule for the smallest raise profile: the arm's median ratio to
#: native is at least RECOVER (99% of native) AND its 95% interval's lower
#: bound is at least LOWER_BOUND. 0.97 because the bench's intervals on the
#: H200 are about +-3-4 points wide today (evidence/h200-tinyllama-r10): a
#: lower bound of 0.99 would reject even native against itself. Tighten it
#: with --lower-bound once the bench reaches its +-2 point target.
RECOVER = 0.99
LOWER_BOUND = 0.97


def group_of(key: str) -> str:
    """The group (a key of :data:`GROUPS`, or :data:`OTHER`) of a capability key or extension name."""
    for name, g in GROUPS.items():
        if key in g["caps"] or key in g["exts"]:
            return name
    return OTHER


# --- profiles as data, written with a TOML library ---------------------------

def profile_data(name: str, direction: str, description: str, caps: dict, exts: dict) -> dict:
    """A profile as the dict its TOML file holds (values as a profile writes them).

    The description is cut to the 200 characters a profile allows (profiles schema).
    """
    if len(description) > 200:
        description = description[:197] + "..."
    data: dict = {"name": name, "api": "vulkan", "direction": direction, "version": 1,
                  "description": description}
    if caps:
        data["capabilities"] = dict(caps)
    if exts:
        data["extensions"] = dict(exts)
    return data


def write_profile(path: Path, data: dict, comment: str | None = None) -> Profile:
    """Write ``data`` as TOML (tomli_w) at ``path`` and return it parsed and validated.

    ``comment`` (any length, lines kept) goes on top of the file as ``#`` lines.

    Raises:
        ProfileError: the data is not a valid profile (a bug here; names the file and key).
    """
    text = tomli_w.dumps(data)
    if comment:
        text = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines()) + text
    prof = profiles.parse(text, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return prof


def _written(profile: Profile) -> tuple[dict, dict]:
    """A profile's capabilities and extensions as a profile file writes them."""
    d = profile.to_dict()
    exts = {k: (v if v else False) for k, v in d["extensions"].items()}
    return d["capabilities"], exts


def restore_for(stock: dict, lowering: Profile) -> Profile:
    """The raise profile answering the stock values ``lowering`` lowers (the bench's ``profile:restore``)."""
    from capshim.profiles.ondevice import restore_profile

    return restore_profile(stock, lowering)


def _lowers(stock: dict, key: str, low) -> bool:
    """Whether answering ``low`` for ``key`` changes what this device (stock probe) answers."""
    real = stock.get("capabilities", {}).get(key)
    if real is None:
        return False
    kind = KEYS["vulkan"][key]
    if kind == "bool":
        return real is True and low is False
    if kind == "version":
        return profiles.parse_version(low) < profiles.parse_version(real)
    if kind == "flags":
        return bool(int(real) & ~int(low))
    return int(low) < int(real)


@dataclass
class Unit:
    """One ablation unit (a group, or one key with ``--by key``).

    Attributes:
        name: group name or key name.
        lower_caps / lower_exts: what P answers for this unit (profile-file values).
        raise_caps / raise_exts: the stock values restoring it.
        skipped: why the unit is not measured, or None.
    """

    name: str
    lower_caps: dict = field(default_factory=dict)
    lower_exts: dict = field(default_factory=dict)
    raise_caps: dict = field(default_factory=dict)
    raise_exts: dict = field(default_factory=dict)
    skipped: str | None = None

    @property
    def keys(self) -> list[str]:
        """Capability keys and extension names of the unit."""
        return [*self.lower_caps, *self.lower_exts]


def units(lowering: Profile, stock: dict, by: str = "group") -> list[Unit]:
    """Split a lowering profile into units, in :data:`GROUP_ORDER` (keys: profile order).

    Args:
        lowering: a Vulkan ``lower`` profile.
        stock: a stock probe of the device the bench runs on.
        by: "group" or "key".

    Raises:
        UsageError: the profile is not a Vulkan lowering profile.
    """
    if lowering.api != "vulkan" or lowering.direction != "lower":
        raise UsageError(f"--profile {lowering.source}: ablate needs a Vulkan 'lower' profile "
                         f"(this one is {lowering.api}, {lowering.direction})")
    low_caps, low_exts = _written(lowering)
    up_caps, up_exts = _written(restore_for(stock, lowering))
    out: dict[str, Unit] = {}
    for key in [*low_caps, *low_exts]:
        name = key if by == "key" else group_of(key)
        u = out.setdefault(name, Unit(name))
        if key in low_caps:
            u.lower_caps[key] = low_caps[key]
            if key in up_caps and _lowers(stock, key, low_caps[key]):
                u.raise_caps[key] = up_caps[key]
        else:
            u.lower_exts[key] = low_exts[key]
            if key in up_exts:
                u.raise_exts[key] = up_exts[key]
    for u in out.values():
        if not u.raise_caps and not u.raise_exts:
            u.skipped = "this device does not have more than the profile answers: nothing to measure"
    if by == "group":
        for g in GROUP_ORDER:
            out.setdefault(g, Unit(g, skipped=f"{lowering.name} does not lower it: nothing to measure"))
    order = {g: i for i, g in enumerate((*GROUP_ORDER, OTHER))}
    result = list(out.values())
    if by == "group":
        result.sort(key=lambda u: order[u.name])
    return result


@dataclass
class ArmInfo:
    """One ablation arm: its bench name, kind (native/sim/loo/loi/cum), units and raise profile."""

    name: str
    kind: str
    units: list[str]
    spec: str
    raise_keys: int = 0
    raise_profile: Path | None = None


def build_arms(lowering: Profile, stock: dict, folder: Path, by: str = "group") -> tuple[list[ArmInfo], list[Unit]]:
    """Write the arms' profiles into ``folder`` and return the arms (``--arm`` specs) and units.

    Raises:
        UsageError: not a Vulkan lowering profile, or nothing to measure on this device.
    """
    us = units(lowering, stock, by)
    live = [u for u in us if not u.skipped]
    if not live:
        raise UsageError(f"--profile {lowering.source}: this device already answers at or below every value "
                         "the profile lowers; nothing to ablate")
    sim_path = folder / "sim.toml"
    write_profile(sim_path, profile_data(f"{lowering.name}", "lower", lowering.description, *_written(lowering)))
    arms = [ArmInfo("native", "native", [], "native="), ArmInfo("aa", "aa", [], "aa=identity"),
            ArmInfo("sim", "sim", [], f"sim=simulate:{sim_path}")]
    label = (lambda i, u: u.name) if by == "group" else (lambda i, u: f"k{i:02d}")
    for i, u in enumerate(live):
        p = folder / f"loo-{label(i, u)}.toml"
        write_profile(p, profile_data(f"loo-{label(i, u)}".lower(), "lower",
                                      f"Only {u.name} lowered as {lowering.name} lowers it", u.lower_caps,
                                      u.lower_exts))
        arms.append(ArmInfo(f"loo-{label(i, u)}", "loo", [u.name], f"loo-{label(i, u)}=simulate:{p}"))
    def raise_arm(kind: str, name: str, chosen: list[Unit]) -> ArmInfo:
        caps = {k: v for u in chosen for k, v in u.raise_caps.items()}
        exts = {k: v for u in chosen for k, v in u.raise_exts.items()}
        p = folder / f"{name}.toml"
        write_profile(p, profile_data(name.lower(), "raise", f"Raise {', '.join(u.name for u in chosen)} over "
                                      f"{lowering.name} to this device's values", caps, exts))
        return ArmInfo(name, kind, [u.name for u in chosen], f"{name}=simulate:{sim_path},profile:{p}",
                       raise_keys=len(caps) + len(exts), raise_profile=p)
    for i, u in enumerate(live):
        arms.append(raise_arm("loi", f"loi-{label(i, u)}", [u]))
    for k in range(2, len(live) + 1):
        arms.append(raise_arm("cum", f"cum-{k}-{label(k - 1, live[k - 1])}", live[:k]))
    return arms, us


def load_vulkan_profile(ref: str, needs: str) -> Profile:
    """The profile ``--profile REF`` names, which must be a Vulkan one (``needs`` says why).

    Raises:
        UsageError: it does not load, or is for another API (names ``--profile`` and REF).
    """
    try:
        prof = profiles.load(ref)
    except profiles.ProfileError as exc:
        raise UsageError(f"--profile: {exc}") from None
    if prof.api != "vulkan":
        raise UsageError(f"--profile {ref}: {needs}; this one is for {prof.api}")
    return prof


# --- the one seam to the bench ------------------------------------------------

@dataclass
class Measured:
    """What one bench produced: its summary (summary.json content), bundle folder and device."""

    summary: dict
    bundle: Path
    device: dict | None
    failed_runs: int


def run_arms(arm_specs: list[str], out: Path, *, repetitions: int, warmup: int, model: str | None,
             n_prompt: int, n_gen: int, timeout: float = 900.0, env: dict[str, str] | None = None,
             check_output: bool = True, warmup_run: bool | None = None,
             process_reps: int | None = None) -> Measured:
    """Run ``--arm`` specs through the same entry ``capshim bench`` uses (baseline and host: ``native``).

    The summary returned is the bundle's own ``summary.json``, read back.
    ``env``: variables every arm's process gets on top of the workload's (the
    kernels check turns ggml-vulkan's perf logger on with it); ``check_output``:
    the bench's correctness gate; ``warmup_run`` / ``process_reps``: the
    built-in worker's in-process warm-up run and timed repetitions (default:
    the plan's).

    This is the ONE place ablate, tune and kernels call the bench; re-point it
    when the bench API changes.

    Raises:
        UsageError / CapshimError: as ``capshim bench`` (bad arms, no Vulkan driver).
    """
    from capshim.bench import plan

    p = plan.make_plan(list(arm_specs), "native", "native", None, repetitions, model, n_prompt, n_gen,
                       check_output, [], platform=sys.platform, warmup_run=warmup_run, process_reps=process_reps)
    p.workload.env.update(env or {})
    res = plan.execute(p, out, warmup=warmup, timeout=timeout)
    if res.interrupted:
        raise CapshimError(f"bench interrupted ({res.interrupted_by}); partial bundle: {res.bundle}",
                           exit_code=143 if res.interrupted_by == "SIGTERM" else 130)
    from capshim.report import load_summary

    return Measured(load_summary(res.bundle), res.bundle, p.device, res.failed_runs)


def run_failed(run: dict) -> bool:
    """Whether one run entry of summary.json (``arms[NAME]["runs"][i]``) failed, timed out or was killed."""
    return bool(run.get("timed_out") or run.get("signal") or run.get("exit_code") not in (0, None))


def stock_probe() -> tuple[dict, dict]:
    """The stock probe of the device the bench will use, and its ``device`` entry."""
    from capshim.backends import vulkan
    from capshim.bench import plan

    _, chosen = plan._pick_vulkan_device(vulkan.probe())
    return chosen, chosen["device"]


def is_cpu(device: dict | None) -> bool:
    """Whether the bench device is a CPU Vulkan implementation (lavapipe)."""
    return bool(device) and device.get("type") == "cpu"


#: Built-in workload settings used on a CPU Vulkan device when the user gives
#: none: short processes (about 2.5 s each with the tiny model on 2 cores once
#: Mesa's shader cache is filled). The warm-up round fills that cache: on
#: lavapipe a process that compiles the shaders measures faster than one that
#: reads them from the cache (capshim.bench.plan), so a cold first process
#: would skew its arm.
CPU_DEFAULTS = {"repetitions": 2, "warmup": 1, "n_prompt": 64, "n_gen": 16}
GPU_DEFAULTS = {"repetitions": 10, "warmup": 1, "n_prompt": 512, "n_gen": 128}


# --- reading the summary (one place) ------------------------------------------

@dataclass
class Ratio:
    """An arm's ratio to the baseline for one test, as the summary gives it.

    Attributes:
        value: median ratio (arm / baseline), or NaN when the arm has no samples.
        lo, hi: the 95% interval, or None when the summary has none.
        state: the arm's state (summary.json ``state``).
        ok: a result (not failed, inert, invalid or wrong-output).
    """

    value: float
    lo: float | None
    hi: float | None
    state: str
    ok: bool


def ratios(summary: dict, test: str) -> dict[str, Ratio]:
    """Every arm's :class:`Ratio` to the summary's baseline for ``test`` (read from summary.json)."""
    from capshim.bench.analysis import NOT_SHIM_STATES

    out = {}
    for name, arm in summary["arms"].items():
        entry = (arm.get("tests") or {}).get(test) or {}
        sp = entry.get("speedup") or {}
        ci = sp.get("ci95")
        out[name] = Ratio(float(sp["value"]) if "value" in sp else math.nan, ci[0] if ci else None,
                          ci[1] if ci else None, arm["state"], arm["state"] not in NOT_SHIM_STATES and bool(sp))
    return out


def builtin_tests(n_prompt: int, n_gen: int) -> list[str]:
    """The tests the built-in workload runs (known before any run): ``pp<n_prompt>``, ``tg<n_gen>``."""
    from capshim.bench.llamabench import test_name

    return [test_name(n_prompt, 0), test_name(0, n_gen)]


def check_test(wanted: str | None, tests: list[str]) -> None:
    """Refuse a ``--test`` that the bench will not produce, before any run.

    Raises:
        UsageError: naming ``--test`` and the valid names.
    """
    if wanted and wanted not in tests:
        raise UsageError(f"--test {wanted}: not a test of this bench (the built-in workload runs "
                         f"{', '.join(tests)}; -p and -n set their sizes)")


def main_test(summary: dict, wanted: str | None = None) -> str:
    """The test selection uses: ``wanted``, else the first prompt-processing test (``pp*``), else the first.

    Raises:
        UsageError: ``wanted`` is not a test of the summary, or there are no tests.
    """
    tests = list(summary.get("tests") or [])
    if wanted:
        if wanted not in tests:
            raise UsageError(f"--test {wanted}: not a test of this bench ({', '.join(tests) or 'none'})")
        return wanted
    if not tests:
        raise CapshimError("the bench produced no samples (every run failed?)", exit_code=1)
    return next((t for t in tests if t.startswith("pp")), tests[0])


def passes(r: Ratio, recover: float = RECOVER, lower_bound: float = LOWER_BOUND) -> bool:
    """The selection rule: a result, median >= ``recover`` and interval lower bound >= ``lower_bound``.

    An arm without an interval (fewer than 2 samples) never passes.
    """
    return r.ok and r.lo is not None and r.value >= recover and r.lo >= lower_bound


def smallest(arms: list[ArmInfo], rs: dict[str, Ratio], recover: float = RECOVER,
             lower_bound: float = LOWER_BOUND) -> ArmInfo | None:
    """The raise arm (loi/cum) with the fewest units, then fewest keys, then highest median, that passes."""
    cands = [a for a in arms if a.kind in ("loi", "cum") and a.name in rs and passes(rs[a.name], recover, lower_bound)]
    if not cands:
        return None
    return min(cands, key=lambda a: (len(a.units), a.raise_keys, -rs[a.name].value))


def per_test(summary: dict) -> dict[str, dict[str, Ratio]]:
    """:func:`ratios` for every test of the summary, in its order."""
    return {t: ratios(summary, t) for t in summary.get("tests") or []}


#: Short labels of the bench's own warnings (summary.json: an arm's ``flags``, written by
#: capshim.bench.analysis.analyze and metrics, and each test's ``warnings``, written by
#: capshim.bench.stats.stability_warnings), by the start of the sentence. None: not shown
#: (the row's state says it).
FLAG_LABELS: tuple[tuple[str, str | None], ...] = (
    (r"^only \d+ process", "few processes"),
    (r"^spread of the process values", "unstable"),
    (r"^outlier process", "outliers"),
    (r"^slow first process", "slow first process"),
    (r"^\d+ of \d+ runs failed", "runs failed"),
    (r"^\d+ of \d+ runs contaminated", "contaminated"),
    (r"^path unchanged", "path unchanged"),
    (r"^runs attested different paths", "paths differ"),
    (r"^control \S+ moved", "control moved"),
    (r"^no samples$", "no samples"),
    (r": not (a shim )?result$", None),
)


def short_flag(text: str) -> str | None:
    """The short label of one of the bench's warnings (:data:`FLAG_LABELS`); an unknown
    one keeps its head (the text before its first ``:`` or ``(``)."""
    import re

    for pattern, label in FLAG_LABELS:
        if re.search(pattern, text):
            return label
    return re.split(r":|\s\(", text, maxsplit=1)[0].strip() or text


def arm_flags(summary: dict, name: str) -> list[str]:
    """The bench's warnings about one arm, short (:func:`short_flag`), read from summary.json: the
    arm's flags, then its tests' warnings (a label that holds for only some tests names them)."""
    arm = summary["arms"].get(name) or {}
    out = [label for f in arm.get("flags") or [] if (label := short_flag(f))]
    tests = arm.get("tests") or {}
    where: dict[str, list[str]] = {}
    for t, entry in tests.items():
        labels = [short_flag(w) for w in entry.get("warnings") or []]
        labels += ["config mismatch"] if entry.get("mismatch") else []
        for label in filter(None, labels):
            where.setdefault(label, []).append(t)
    out += [label if len(ts) == len(tests) else f"{label} ({', '.join(ts)})" for label, ts in where.items()]
    return list(dict.fromkeys(out))


def bench_warnings(summary: dict) -> list[dict]:
    """Every warning of the bench, whole: ``[{"arm", "test" (None: about the arm), "warning", "short"}]``;
    first those about the whole bench (``arm`` None: an inherited ``GGML_VK_DISABLE_*``, :func:`env_notes`)."""
    out = [{**w, "short": short_flag(w["warning"])} for w in summary.get("warnings") or []
           if w.get("arm") is None and w.get("warning")]
    for name, arm in summary["arms"].items():
        out += [{"arm": name, "test": None, "warning": f, "short": short_flag(f)} for f in arm.get("flags") or []]
        out += [{"arm": name, "test": t, "warning": w, "short": short_flag(w)}
                for t, entry in (arm.get("tests") or {}).items() for w in entry.get("warnings") or []]
    return out


def env_notes(summary: dict) -> list[str]:
    """``warning: ...`` notes for the bench's warnings about the whole bench (summary.json ``warnings``
    with ``arm`` null: an inherited variable that switches llama.cpp's paths for every arm,
    :func:`capshim.bench.inherited_env.warnings`)."""
    return [f"warning: {w['warning']}" for w in summary.get("warnings") or []
            if w.get("arm") is None and w.get("warning")]


def why(arm: dict) -> str | None:
    """Why an arm of summary.json is not a result, or which of its runs failed and why (the bench's
    own reason, :func:`capshim.bench.plan.arm_reason`: llama.cpp's error line when it printed one)."""
    from capshim.bench.plan import arm_reason

    reason = arm_reason(arm)
    if reason:
        return reason
    runs = arm.get("runs") or []
    errors = [r["error"] for r in runs if r.get("error")]
    return f"{len(errors)} of {len(runs)} runs failed: {errors[0]}" if errors else None


# --- output -------------------------------------------------------------------

def aa_warning(rs_by_test: dict[str, dict[str, Ratio]], arm: str = "aa") -> list[str]:
    """A warning when the A/A arm's interval excludes 1.00x in any test (``rs_by_test``:
    :func:`per_test`): the harness's own bias is then as large as the effects measured,
    so no ratio of the table, and no choice made from them, is reliable."""
    shown = {t: rs[arm] for t, rs in rs_by_test.items() if arm in rs and rs[arm].ok}
    moved = [t for t, r in shown.items() if r.lo is not None and not r.lo <= 1.0 <= r.hi]
    if not moved:
        return []
    return ["warning: the A/A arm (stock answers through the app layer) is "
            + ", ".join(f"{fmt_ratio(r)} {t}" for t, r in shown.items())
            + f" of native; its interval excludes 1.00x ({', '.join(moved)}): the harness's own bias is as "
            "large as the effects measured here, so these ratios, and any choice made from them, are not "
            "reliable (more runs, -r, on a quieter machine)"]


def fmt_ratio(r: Ratio | None) -> str:
    """``0.98x [0.95–1.01]`` (``—`` when missing)."""
    if r is None or math.isnan(r.value):
        return "—"
    s = f"{r.value:.2f}x"
    if r.lo is not None:
        s += f" [{r.lo:.2f}–{r.hi:.2f}]"
    return s


def answers_text(a: ArmInfo) -> str:
    """What the arm answers, short: ``native``, ``P``, ``native − fp16``, ``P + fp16 + shmem``."""
    if a.kind == "native":
        return "native"
    if a.kind == "aa":
        return "native, app layer active (A/A)"
    if a.kind == "sim":
        return "P"
    if a.kind == "loo":
        return "native − " + a.units[0]
    return "P + " + " + ".join(a.units)


def table_rows(arms: list[ArmInfo], summary: dict) -> list[dict]:
    """One row per arm: ``arm``, ``answers``, then per test the ratio to native text, then ``state``
    and ``flags`` (the bench's warnings about the arm, short: :func:`arm_flags`)."""
    rows = []
    for a in arms:
        row = {"arm": a.name, "answers": answers_text(a)}
        for t, rs in per_test(summary).items():
            row[f"{t} vs native"] = fmt_ratio(rs.get(a.name))
        row["state"] = summary["arms"].get(a.name, {}).get("state", "—")
        row["flags"] = ", ".join(arm_flags(summary, a.name))
        rows.append(row)
    return rows


def why_notes(summary: dict, label=lambda name: name) -> list[str]:
    """One note per arm that is not a result or had failed runs: ``NAME STATE: why`` (:func:`why`)."""
    out = []
    for name, arm in summary["arms"].items():
        reason = why(arm)
        if reason:
            out.append(f"{label(name)} {arm.get('state')}: {reason}")
    return out


def markdown(rows: list[dict], notes: list[str]) -> str:
    """The table as Markdown, with notes below."""
    from capshim.export.markdown import pipe_table

    cols = list(rows[0]) if rows else []
    return pipe_table(cols, [[r[c] for c in cols] for r in rows]) + "\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def chart(arms: list[ArmInfo], summary: dict, test: str, path: Path, title: str) -> Path:
    """Horizontal bars of each arm's ratio to native for ``test``, with 95% intervals (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rs = ratios(summary, test)
    shown = [a for a in arms if a.name in rs and not math.isnan(rs[a.name].value)]
    colors = {"native": "#555555", "aa": "#777777", "sim": "#999999", "loo": "#d62728", "loi": "#2ca02c", "cum": "#1f77b4"}
    fig, ax = plt.subplots(figsize=(7.5, 0.4 * len(shown) + 1.5))
    for i, a in enumerate(shown):
        r = rs[a.name]
        err = [[r.value - r.lo], [r.hi - r.value]] if r.lo is not None else None
        ax.barh(i, r.value, xerr=err, color=colors[a.kind], hatch=None if r.ok else "//", capsize=3,
                edgecolor="black", linewidth=0.4)
    ax.set_yticks(range(len(shown)), [answers_text(a) for a in shown], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(RECOVER, color="black", linewidth=0.6, linestyle=":")
    ax.set_xlabel(f"{test}: ratio to native (median, 95% interval)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


CPU_NOTE = ("CPU Vulkan device (lavapipe): no speed effect of these capabilities is expected here "
            "(no cooperative matrix, no integer dot acceleration); the numbers measure lavapipe's own "
            "shader paths and show that the method runs, not what a GPU gains.")


def lowering_builtins() -> list[str]:
    """The built-in profiles ablate takes: Vulkan ``lower`` profiles."""
    return [n for n in profiles.builtin_names()
            if (p := profiles.load(n)).api == "vulkan" and p.direction == "lower"]


def load_lowering(ref: str) -> Profile:
    """``--profile``: a built-in name or a file, which must be a Vulkan lowering profile.

    Raises:
        UsageError: unknown name (the message lists the built-ins ablate takes), a folder,
            an invalid profile, or one for another API.
    """
    looks_like_file = Path(ref).exists() or "/" in ref or ref.endswith(".toml")
    if not looks_like_file and ref not in profiles.builtin_names():
        raise UsageError(f"--profile {ref}: no such profile file or built-in Vulkan lowering profile "
                         f"(built-in: {', '.join(lowering_builtins())})")
    return load_vulkan_profile(ref, "ablate measures Vulkan lowering profiles "
                                    "(Metal ablation is not implemented yet)")


def ablate(profile_ref: str = "vulkan-paravirt", by: str = "group", out: Path | None = None,
           model: str | None = None, repetitions: int | None = None, warmup: int | None = None,
           n_prompt: int | None = None, n_gen: int | None = None, test: str | None = None,
           recover: float = RECOVER, lower_bound: float = LOWER_BOUND, timeout: float = 900.0) -> dict:
    """Run the whole ablation into ``out`` and return its result (also written as ``ablation.json``).

    Files in ``out``: ``profiles/`` (every arm's profile), ``bench/`` (the
    evidence bundle), ``ablation.md`` (the table), ``ablation.png`` (the chart),
    ``smallest-raise.toml`` (when an arm passes), ``ablation.json``; last, the study seal
    (``study.json``, ``SHA256SUMS``: :mod:`capshim.study`), also after an error once files were written.

    Raises:
        UsageError: bad profile, ``--by``, or a non-empty ``out``.
        CapshimError: no Vulkan driver; the bench was interrupted.
    """
    import json

    t0 = time.monotonic()
    if by not in ("group", "key"):
        raise UsageError(f"--by {by}: expected group or key")
    lowering = load_lowering(profile_ref)
    out = Path(out) if out else Path(f"capshim-ablate-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--out {out}: folder exists and is not empty")
    from capshim import study

    with study.sealing(out, "ablate"):  # the study seal: written last, also after an error
        stock, device = stock_probe()
        d = CPU_DEFAULTS if is_cpu(device) else GPU_DEFAULTS
        n_prompt, n_gen = n_prompt or d["n_prompt"], n_gen or d["n_gen"]
        check_test(test, builtin_tests(n_prompt, n_gen))
        arms, us = build_arms(lowering, stock, out / "profiles", by)
        m = run_arms([a.spec for a in arms], out / "bench",
                     repetitions=repetitions or d["repetitions"], warmup=d["warmup"] if warmup is None else warmup,
                     model=model, n_prompt=n_prompt, n_gen=n_gen, timeout=timeout)
        t = main_test(m.summary, test)
        rs = ratios(m.summary, t)
        best = smallest(arms, rs, recover, lower_bound)
        notes = aa_warning(per_test(m.summary)) + env_notes(m.summary)
        notes += [f"P = {lowering.source}; ratios to native (median, 95% interval) from {m.bundle / 'summary.json'}; "
                  f"flags: the bench's own warnings (whole in {m.bundle / 'report.md'})",
                  f"smallest raise: fewest groups, then keys, whose {t} median >= {recover:.2f}x of native and "
                  f"interval lower bound >= {lower_bound:.2f}x"]
        notes += [f"{u.name}: skipped: {u.skipped}" for u in us if u.skipped]
        notes += why_notes(m.summary)
        if is_cpu(device):
            notes.append(CPU_NOTE)
        smallest_path = None
        if best is not None:
            caps, exts = _written(profiles.load(str(best.raise_profile)))
            smallest_path = out / "smallest-raise.toml"
            write_profile(smallest_path, profile_data(
                f"smallest-raise-{lowering.name}", "raise",
                f"Smallest raise over {lowering.name} recovering {recover:.0%} of native {t} on "
                f"{(device or {}).get('name', 'this device')} (capshim ablate)", caps, exts))
            notes.append(f"smallest raise profile: {best.name} ({' + '.join(best.units)}), "
                         f"{fmt_ratio(rs[best.name])} -> {smallest_path}")
        else:
            notes.append("no raise arm met the rule; no profile written (more runs, -r, give tighter intervals)")
        rows = table_rows(arms, m.summary)
        title = f"capshim ablate {lowering.name} — {(device or {}).get('name', '?')}"
        (out / "ablation.md").write_text(f"# {title}\n\n" + markdown(rows, notes) + "\n![chart](ablation.png)\n",
                                         encoding="utf-8")
        chart(arms, m.summary, t, out / "ablation.png", title)
        result = {
            "schema": "capshim-ablation/1", "profile": lowering.source, "by": by, "device": device,
            "cpu_device": is_cpu(device), "test": t, "rule": {"recover": recover, "lower_bound": lower_bound},
            "units": [{"name": u.name, "keys": u.keys, "skipped": u.skipped} for u in us],
            "arms": [{"name": a.name, "kind": a.kind, "units": a.units, "spec": a.spec,
                      "raise_profile": str(a.raise_profile) if a.raise_profile else None,
                      "state": m.summary["arms"].get(a.name, {}).get("state"),
                      "flags": arm_flags(m.summary, a.name), "why": why(m.summary["arms"].get(a.name, {}))}
                     for a in arms],
            "rows": rows, "notes": notes, "warnings": bench_warnings(m.summary), "bundle": str(m.bundle),
            "smallest": None if best is None else {"arm": best.name, "units": best.units, "profile": str(smallest_path)},
            "failed_runs": m.failed_runs, "elapsed_s": round(time.monotonic() - t0, 1),
        }
        (out / "ablation.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return result
