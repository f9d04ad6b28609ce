"""What ablate, tune and kernels share: the one seam to the bench, the study folder, the summary readers.

* :func:`run_arms` is the ONE place the studies call the bench (re-point it
  when the bench API changes); "a run failed" is the summary contract's
  :func:`capshim.summary.run_failed`;
* :func:`study_folder` is the one study-folder helper: a new, unique output
  folder (:func:`capshim.contracts.folders.new_output_folder`), a
  :class:`~capshim.contracts.signals.SealGuard` held from before the first
  run to the study seal (:mod:`capshim.evidence.study`), and the exit status of
  a stop signal (:func:`capshim.contracts.signals.exit_code`);
* :func:`defaults`: each study's workload settings on a CPU or a GPU Vulkan
  device (the one table: :mod:`capshim.studies.defaults`);
* reading a bench's ``summary.json``: :class:`Ratio` (:func:`ratios`), the
  bench's warnings as short flags (:func:`arm_flags`), why an arm failed
  (:func:`why`), the A/A warning (:func:`aa_warning`); no statistics are
  computed here;
* profiles as data written with a TOML library (:func:`write_profile`) and
  the capability groups (:data:`GROUPS`).
"""

from __future__ import annotations

import contextlib
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from capshim import backends, profiles, summary
from capshim.bench import plan, runner
from capshim.bench.llamabench import test_name
from capshim.bench.request import BenchRequest
from capshim.bench.workloads import builtin
from capshim.contracts import folders, names, output, signals
from capshim.contracts.suggest import did_you_mean
from capshim.contracts.verdict import UNRELIABLE, harness_check, side
from capshim.contracts.verdict import gate as verdict_gate
from capshim.errors import EXIT_WORKLOAD, CapshimError, UsageError
from capshim.evidence import study as seal
from capshim.export.markdown import pipe_table
from capshim.profiles import Profile, targets
from capshim.profiles.catalog import KEYS
from capshim.studies import defaults as study_defaults
from capshim.summary import NOT_SHIM_STATES

# --- defaults ------------------------------------------------------------------------------------------

def defaults(study: str, device: dict | None) -> dict[str, int]:
    """The settings of ``study`` (``ablate``, ``tune``) for the bench device (a probe's ``device``):
    :data:`capshim.studies.defaults.DEFAULTS`."""
    return study_defaults.for_device(study, is_cpu(device))


# --- capability groups -------------------------------------------------------------------------------
# The ONE place that says which capability keys (catalog.py / the capability table's key names, and
# Vulkan extension names) belong to which group. Sources: the Vulkan specification's structures (the
# feature/property structures named in catalog.py) and llama.cpp's ggml-vulkan device checks (coopmat:
# KHR + NV coopmat2 extensions and features; integer dot: shaderIntegerDotProduct and the *Accelerated
# properties; fp16/bf16: shaderFloat16 and VK_KHR_shader_bfloat16; shared memory:
# maxComputeSharedMemorySize; subgroup control: the subgroup size control features and properties).
#: The API whose keys :data:`GROUPS` names (the groups of another API's profile are its keys, ``other``).
GROUPS_API = "vulkan"
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
                 *(k for k in KEYS[GROUPS_API] if k.startswith("integerDotProduct"))),
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


def groups_for(api: str) -> tuple[str, ...]:
    """The groups of :data:`GROUP_ORDER` that hold keys of ``api``'s capability table (none for CUDA)."""
    known = KEYS.get(api, {})
    return tuple(g for g in GROUP_ORDER if any(k in known for k in GROUPS[g]["caps"]))


# --- profiles as data, written with a TOML library -----------------------------------------------------

def profile_data(name: str, direction: str, description: str, caps: dict, exts: dict, *,
                 api: str = GROUPS_API) -> dict:
    """A profile of ``api`` as the dict its TOML file holds (values as a profile writes them).

    ``name`` must be a valid name (:func:`capshim.contracts.names.check`); the description
    is cut to the 200 characters a profile allows (profiles schema).

    Raises:
        UsageError: ``name`` is not a valid name.
    """
    if len(description) > 200:
        description = description[:197] + "..."
    data: dict = {"name": names.check(name, "profile name"), "api": api, "direction": direction,
                  "version": 1, "description": description}
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
    write_output(path, text)
    return prof


def arm_role(prof: Profile) -> str:
    """The bench-arm role a study gives ``prof``: ``simulate`` for a lowering profile of an API whose
    shim has a device role (Vulkan: the simulated-GPU arms), else ``profile`` (a raise profile, or
    a lower-only shim such as CUDA's, which lowers through its profile)."""
    return "simulate" if prof.direction == "lower" and backends.get(prof.api).can_simulate else "profile"


def refuse_targets(ref: str) -> None:
    """A study's ``--profile P@DEV`` (:mod:`capshim.profiles.targets`): refused in one line; a study
    measures its profile on the one device it probes. The bench arm it suggests takes the role
    :func:`arm_role` picks for the profile (``profile:`` when the profile does not load).

    Raises:
        UsageError: ``ref`` names devices, or spells them wrong (names ``--profile`` and REF).
    """
    base, aimed = targets.split(ref, "--profile")
    if aimed:
        try:
            role = arm_role(profiles.load(base))
        except CapshimError:
            role = "profile"
        raise UsageError(f"--profile {ref}: a study measures one profile on the device it probes; device targets "
                         f"are taken by capshim run, probe and bench arms (capshim bench --arm NAME={role}:{ref}; "
                         "docs/multi-gpu.md)")


def write_output(path: Path, text: str | bytes) -> Path:
    """A file of the study's own new folder, by the output rule (:func:`capshim.contracts.output.write_file`):
    whole or not at all, never through a link or into a FIFO; a full disk is exit 4 naming the file.

    Raises:
        UsageError: (exit 2) the rule refuses ``path`` (a link or FIFO put there while the study ran).
        CapshimError: (exit 4) the write failed, naming the file.
    """
    return output.write_file(path, text if isinstance(text, bytes) else text.encode("utf-8"), replace=True)


def load_profile(ref: str, needs: str, api: str | None = None) -> Profile:
    """The profile ``--profile REF`` names; when ``api`` is given it must be for that API (``needs`` says why).

    Raises:
        UsageError: it does not load, or is for another API (names ``--profile`` and REF); a device
            target (``P@DEV``, :mod:`capshim.profiles.targets`): a study measures its profile on
            the one device it probes.
    """
    refuse_targets(ref)
    try:
        prof = profiles.load(ref)
    except profiles.ProfileError as exc:
        raise UsageError(f"--profile: {exc}") from None
    if api is not None and prof.api != api:
        raise UsageError(f"--profile {ref}: {needs}; this one is for {prof.api}")
    return prof


def spec_path(path: str | Path, flag: str) -> str:
    """``path`` (a profile file, or the folder the studies write theirs in) as the bench's ``--arm``
    spelling takes it (``NAME=simulate:P,profile:Q``: :mod:`capshim.bench.arms`).

    Raises:
        UsageError: (exit 2, naming ``flag``) a ``,`` in the path: that spelling separates items with it.
    """
    text = str(path)
    if "," in text:
        raise UsageError(f"{flag} {text}: a ',' in the path: the bench's arm spelling (NAME=simulate:P,profile:Q) "
                         "separates its items with ','; give a path without one")
    return text


# --- the study folder: one helper, one guard, one seal ---------------------------------------------------

@contextlib.contextmanager
def study_folder(out: str | Path | None, kind: str):
    """Create a study's output folder, hold stop signals from before its first run to its seal, seal it.

    Yields ``(folder, guard)``: the folder (``--out``, new or empty and never inside a sealed
    bundle, or a unique ``./capshim-KIND-DATE-TIME[-N]``: :func:`capshim.contracts.folders.new_output_folder`)
    and the :class:`~capshim.contracts.signals.SealGuard` every bench runs under (:func:`run_arms`).
    When the block ends the study is sealed (:func:`capshim.evidence.study.seal`); after an error it
    is sealed with the error recorded when files were written (:func:`~capshim.evidence.study.seal_quietly`),
    and a folder this call created and nothing was written to is removed (an exit 2 writes nothing).
    A stop signal (Ctrl-C, SIGTERM, SIGHUP: any number of them, in any order) never skips the seal;
    afterwards capshim exits 128+N (:func:`capshim.contracts.signals.exit_code`).

    Raises:
        UsageError: (exit 2) ``out`` is empty, a file, a non-empty folder, inside a sealed folder,
            or has a ``,`` in it (:func:`spec_path`).
        CapshimError: (exit 4) the folder cannot be created; whatever the block raised.
    """
    if out is not None:
        spec_path(out, "--out")
    created = _first_missing(out)
    guard_cm = signals.SealGuard("the study")
    with guard_cm as guard:
        folder = folders.new_output_folder(out, kind)
        created = created or (folder.absolute() if out is None else None)
        try:
            yield folder, guard
        except signals.StopRequested as stop:  # a signal before or between benches: nothing more runs
            err = CapshimError(f"{kind} stopped ({stop.signal_name}); what finished is sealed in {folder}",
                               exit_code=signals.exit_code(stop.signal_name))
            _after_error(folder, kind, err, created)
            raise err from None
        except BaseException as exc:
            _after_error(folder, kind, exc, created)
            raise
        finally:
            if guard.first:  # stopping: a later signal cannot end capshim before its exit 128+N
                guard.ignore_after()
        seal.seal(folder, kind)
    guard_cm.exit_if_signalled()


def _first_missing(out: str | Path | None) -> Path | None:
    """The top folder ``new_output_folder(out)`` will create (``out`` or a missing parent), or None."""
    if out is None:
        return None
    top = Path(out).absolute()
    if top.exists() or top.is_symlink():
        return None
    while not top.parent.exists():
        top = top.parent
    return top


def _after_error(folder: Path, kind: str, exc: BaseException, created: Path | None) -> None:
    """Seal what a study wrote before ``exc``; remove the folders it created (up to ``created``) while empty."""
    seal.seal_quietly(folder, kind, exc)
    p = folder.absolute()
    while created is not None and (p == created or created in p.parents):
        try:
            p.rmdir()  # only when empty: nothing was written
        except OSError:
            return
        p = p.parent


# --- the one seam to the bench -------------------------------------------------------------------------

@dataclass
class Measured:
    """What one bench produced: its summary (summary.json content), bundle folder, device and failed runs."""

    summary: dict
    bundle: Path
    device: dict | None
    failed_runs: int


def run_arms(arm_specs: list[str], out: Path, *, repetitions: int, warmup: int, model: str | None,
             n_prompt: int, n_gen: int, timeout: float = 900.0, env: dict[str, str] | None = None,
             check_output: bool = True, warmup_run: bool | None = None,
             process_reps: int | None = None, guard: signals.SealGuard | None = None,
             workload: str | None = None, shape: str | None = None) -> Measured:
    """Run ``--arm`` specs through the same entry ``capshim bench`` uses (baseline and host: ``native``).

    The summary returned is the bundle's own ``summary.json``, read back.
    ``env``: variables every arm's process gets on top of the workload's (the
    kernels check turns ggml-vulkan's perf logger on with it); ``check_output``:
    the bench's correctness gate; ``warmup_run`` / ``process_reps``: the
    built-in worker's in-process warm-up run and timed repetitions (default:
    the plan's); ``guard``: the study's seal guard (:func:`study_folder`): the
    runs are :meth:`~capshim.contracts.signals.SealGuard.stoppable`; ``workload``: a built-in workload
    other than llama.cpp (``torch-sdpa``: :func:`study_workload`), which takes no model or token counts;
    ``shape``: its problem (torch-sdpa's ``--shape``).

    This is the ONE place ablate, tune and kernels call the bench; re-point it
    when the bench API changes.

    Raises:
        UsageError / CapshimError: as ``capshim bench`` (bad arms, no Vulkan driver).
        CapshimError: the bench was stopped by a signal (exit 128+N, the partial bundle sealed),
            or a signal arrived before it started (nothing run).
    """
    if workload is not None:
        model = n_prompt = n_gen = warmup_run = None
    req = BenchRequest(arms=tuple(arm_specs), baseline="native", host_arm="native", repetitions=repetitions,
                       workload=workload, shape=shape, model=model, n_prompt=n_prompt, n_gen=n_gen, check_output=check_output,
                       warmup=warmup, warmup_run=warmup_run, process_reps=process_reps, timeout=timeout, env=dict(env or {}),
                       out=str(out))
    p = plan.make_plan(req, platform=sys.platform)
    with guard.stoppable() if guard is not None else contextlib.nullcontext():
        res = runner.run(p)
    if res.interrupted:
        stopped = res.interrupted_by or (guard.signal_name if guard is not None else None)
        raise CapshimError(f"bench interrupted ({stopped}); partial bundle: {res.bundle}",
                           exit_code=signals.exit_code(stopped))
    return Measured(summary.load(res.bundle), res.bundle, p.device, res.failed_runs)


#: What else the studies take from the bench, named here so that re-pointing :func:`run_arms` to a new
#: bench API is one file: the built-in workload's model presets and model resolution (kernels), and the
#: reason why an arm is not a result (the summary contract's, written with the states). (The llama.cpp
#: device-line parser, capshim.bench.attest, is read by the kernels fingerprint directly: a parser.)
MODEL_PRESETS = builtin.MODEL_PRESETS
resolve_model = builtin.resolve_model
arm_reason = summary.arm_reason


def stock_probe(api: str | None = None) -> tuple[dict, dict]:
    """The stock answers of the device the bench will use for ``api`` (default: the first API that runs
    here, :func:`capshim.backends.default_api`), and its ``device`` entry.

    Raises:
        CapshimError: the probe failed, or that API's backend cannot say what the hardware has.
    """
    backend = backends.get(api or backends.default_api())
    stock = backend.stock_answers()
    if stock is None:
        raise CapshimError(f"{backend.shim_label} cannot probe the device's own answers here")
    _, chosen = plan.pick_device(backend, stock)
    return chosen, chosen["device"]


def study_workload(api: str) -> str | None:
    """The built-in workload a study measures for a profile of ``api``: the llama.cpp one (None) for the
    first API that runs here (Vulkan on Linux), else the built-in workload whose path goes through
    ``api`` (:data:`capshim.bench.plan.WORKLOAD_API`: ``torch-sdpa`` for CUDA).

    Raises:
        UsageError: no built-in workload goes through ``api``.
    """
    if api == backends.default_api():
        return None
    for workload, through in plan.WORKLOAD_API.items():
        if through == api:
            return workload
    raise UsageError(f"no built-in workload measures {api} answers")


def is_cpu(device: dict | None) -> bool:
    """Whether the bench device is a CPU Vulkan implementation (lavapipe)."""
    return names.is_cpu_device(device)


CPU_NOTE = ("CPU Vulkan device (lavapipe): no speed effect of these capabilities is expected here "
            "(no cooperative matrix, no integer dot acceleration); the numbers measure lavapipe's own "
            "shader paths and show that the method runs, not what a GPU gains.")


# --- reading the summary (one place) --------------------------------------------------------------------

@dataclass
class Ratio:
    """An arm's ratio to the baseline for one test, as the summary gives it.

    Attributes:
        value: median ratio (arm / baseline), or NaN when the arm has no samples.
        lo, hi: the 95% interval, or None when the summary has none.
        state: the arm's state (summary.json ``state``).
        ok: a result (not failed, inert, invalid or wrong-output).
        range: below 5 processes a side (no interval), the range of ratios any two processes show
            (:func:`capshim.bench.stats.compare`), else None. Rules that need an interval never use it.
        gate: why no direction may be read from this ratio whatever its interval (fewer than 5
            processes a side, a side mostly contaminated: :func:`capshim.contracts.verdict.gate`), or None.
    """

    value: float
    lo: float | None
    hi: float | None
    state: str
    ok: bool
    range: tuple[float, float] | None = None
    gate: str | None = None

    def to_json(self) -> dict:
        """``{"ratio": float|None, "ci95": [lo, hi]|None, "state": str}`` plus ``"range": [lo, hi]`` below
        5 processes (no NaN, for a JSON file)."""
        out = {"ratio": None if math.isnan(self.value) else self.value,
               "ci95": [self.lo, self.hi] if self.lo is not None else None, "state": self.state}
        if self.range is not None:
            out["range"] = list(self.range)
        return out


def ratios(summary: dict, test: str) -> dict[str, Ratio]:
    """Every arm's :class:`Ratio` to the summary's baseline for ``test`` (read from summary.json)."""
    out = {}
    base_runs = (summary["arms"].get(summary.get("baseline")) or {}).get("runs")
    for name, arm in summary["arms"].items():
        entry = (arm.get("tests") or {}).get(test) or {}
        sp = entry.get("speedup") or {}
        ci, rng = sp.get("ci95"), sp.get("range")
        procs = sp.get("processes") if isinstance(sp.get("processes"), list) else None
        gate = None if procs is None or name == summary.get("baseline") else \
            verdict_gate(side(procs[1], base_runs, str(summary.get("baseline"))), side(procs[0], arm.get("runs"), name))
        out[name] = Ratio(float(sp["value"]) if "value" in sp else math.nan, ci[0] if ci else None,
                          ci[1] if ci else None, arm["state"], arm["state"] not in NOT_SHIM_STATES and bool(sp),
                          (rng[0], rng[1]) if rng and not ci else None, gate)
    return out


def per_test(summary: dict) -> dict[str, dict[str, Ratio]]:
    """:func:`ratios` for every test of the summary, in its order."""
    return {t: ratios(summary, t) for t in summary.get("tests") or []}


def builtin_tests(n_prompt: int, n_gen: int) -> list[str]:
    """The tests the built-in workload runs (known before any run): ``pp<n_prompt>``, ``tg<n_gen>``."""
    return [test_name(n_prompt, 0), test_name(0, n_gen)]


def check_test(wanted: str | None, tests: list[str]) -> None:
    """Refuse a ``--test`` that the bench will not produce, before any run.

    Raises:
        UsageError: naming ``--test`` and the valid names.
    """
    if wanted and wanted not in tests:
        raise UsageError(f"--test {wanted}: not a test of this bench{did_you_mean(wanted, tests)} (the built-in "
                         f"workload runs {', '.join(tests)}; -p and -n set their sizes)")


def main_test(summary: dict, wanted: str | None = None) -> str:
    """The test selection uses: ``wanted``, else the first prompt-processing test (``pp*``), else the first.

    Raises:
        UsageError: ``wanted`` is not a test of the summary.
        CapshimError: (exit 1) there are no tests (every run failed).
    """
    tests = list(summary.get("tests") or [])
    if wanted:
        if wanted not in tests:
            raise UsageError(f"--test {wanted}: not a test of this bench{did_you_mean(wanted, tests)} "
                             f"({', '.join(tests) or 'none'})")
        return wanted
    if not tests:
        raise CapshimError("the bench produced no samples (every run failed?)", exit_code=EXIT_WORKLOAD)
    return next((t for t in tests if t.startswith("pp")), tests[0])


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
#: The short flag of an arm whose shim was active but llama.cpp reported the same capabilities as native.
PATH_UNCHANGED = "path unchanged"


def short_flag(text: str) -> str | None:
    """The short label of one of the bench's warnings (:data:`FLAG_LABELS`); an unknown
    one keeps its head (the text before its first ``:`` or ``(``)."""
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
    reason = arm_reason(arm)
    if reason:
        return reason
    runs = arm.get("runs") or []
    errors = [r["error"] for r in runs if r.get("error")]
    return f"{len(errors)} of {len(runs)} runs failed: {errors[0]}" if errors else None


def why_notes(summary: dict, label=lambda name: name) -> list[str]:
    """One note per arm that is not a result or had failed runs: ``NAME STATE: why`` (:func:`why`)."""
    out = []
    for name, arm in summary["arms"].items():
        reason = why(arm)
        if reason:
            out.append(f"{label(name)} {arm.get('state')}: {reason}")
    return out


# --- output -------------------------------------------------------------------------------------------

def fmt_ratio(r: Ratio | None) -> str:
    """``0.98x [0.95–1.01]``, below 5 processes ``0.98x (range 0.90–1.07)`` (``—`` when missing)."""
    if r is None or math.isnan(r.value):
        return "—"
    s = f"{r.value:.2f}x"
    if r.lo is not None:
        s += f" [{r.lo:.2f}–{r.hi:.2f}]"
    elif r.range is not None:
        s += f" (range {r.range[0]:.2f}–{r.range[1]:.2f})"
    return s


def aa_warning(rs_by_test: dict[str, dict[str, Ratio]], arm: str = "aa") -> list[str]:
    """A warning when the A/A arm fails the harness check in any test (``rs_by_test``: :func:`per_test`;
    :func:`capshim.contracts.verdict.harness_check`: its interval, below 5 processes its range, excludes
    1.00x or leaves +-5%): the harness's own bias or noise is then as large as the effects measured, so
    no ratio of the table, and no choice made from them, is reliable."""
    shown = {t: rs[arm] for t, rs in rs_by_test.items() if arm in rs and rs[arm].ok}
    checks = {t: harness_check({"value": r.value, "ci95": [r.lo, r.hi] if r.lo is not None else None,
                                "range": list(r.range) if r.range else None}) for t, r in shown.items()}
    bad = [(t, h) for t, h in checks.items() if h is not None and not h.reliable]
    if not bad:
        return []
    return [f"warning: {UNRELIABLE}: the A/A arm (stock answers through the app layer) is "
            + ", ".join(f"{fmt_ratio(r)} {t}" for t, r in shown.items())
            + " of native; " + "; ".join(f"{t}: {h.why}" for t, h in bad)
            + ": the harness's own bias or noise is as large as the effects measured here, so these ratios, "
            "and any choice made from them, are not reliable (more runs, -r, on a quieter machine)"]


def markdown(rows: list[dict], notes: list[str]) -> str:
    """The table as Markdown, with notes below."""
    cols = list(rows[0]) if rows else []
    return pipe_table(cols, [[r[c] for c in cols] for r in rows]) + "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
