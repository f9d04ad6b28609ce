"""Resolve ``capshim bench`` options into arms, a workload and a device, then run.

The embedded default (no arguments) on Linux: the built-in llama.cpp workload
(:mod:`capshim.bench.workloads.builtin`, through cyllama's Vulkan build) on the ``tiny``
synthetic model, with arms ``native``, ``vm-stock`` and ``vm-unlocked``
(:func:`capshim.bench.arms.default_arms`). The Vulkan device is chosen from a
stock probe: the first GPU; on a CPU-only machine lavapipe, with
``GGML_VK_VISIBLE_DEVICES`` set to its index (llama.cpp skips CPU-type Vulkan
devices otherwise: ggml-vulkan.cpp, device enumeration).

Every default that depends on the workload and the device (processes, repetitions
per process, warm-up, the GPU precision target) is one row of
:data:`capshim.bench.request.DEFAULTS`; on a CPU Vulkan device (lavapipe) the
table says that no speed effect is expected there.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from capshim import backends, evidence, profiles
from capshim.bench import arms as arms_mod
from capshim.bench import inherited_env, metrics, schedule
from capshim.bench.analysis import host_from_file
from capshim.bench.arms import Arm
from capshim.bench.request import MODEL, TIMEOUT_S, BenchRequest, Defaults, defaults_for
from capshim.bench.workloads import builtin, command, kinds, torch_sdpa
from capshim.bench.workloads.base import Workload
from capshim.bench.workloads.llama_bench import llama_bench_workload
from capshim.contracts import messages
from capshim.contracts.names import device_label, is_cpu_device
from capshim.contracts.suggest import did_you_mean
from capshim.errors import UsageError
from capshim.profiles import khronos, ondevice

CPU_NOTE = ("{device} is a CPU device: the answers change which kernels llama.cpp picks, not its speed; "
            "the default is short here and shows the mechanism and the evidence chain")
#: The GPU API each ``--workload`` kind's path goes through (a backend name): the device the bench
#: probes; read from the workload registry (:mod:`capshim.bench.workloads.kinds`).
WORKLOAD_API = {name: k.api for name, k in kinds.selectable().items()}
#: The same for a workload other than llama.cpp (``--metric``, ``--workload ncnn``).
CPU_NOTE_OTHER = ("{device} is a CPU device: the answers change which code paths the program takes, not "
                  "its speed; the bench shows the mechanism and the evidence chain")


@dataclass
class Plan:
    """A resolved bench: everything :func:`capshim.bench.runner.run` reads, nothing left to default.

    Attributes:
        arms: the arms, resolved (profiles loaded, ``restore``/``identity`` answered), names unique.
        workload: what each run executes (its controls included).
        baseline: the arm speedups are relative to (one of ``arms``).
        host_arm: an arm that plays the bare-metal host ("% of host"), or None.
        host: a host baseline measured elsewhere (used when ``host_arm`` is None), or None.
        repetitions: recorded processes (rounds) per arm, at least.
        title: the table's heading.
        device: the probed device's entry (recorded in metadata.json), or None.
        warmup: unrecorded rounds before the recorded ones.
        aa_arm: the A/A arm, or None.
        notes: sentences for the table notes.
        seed: the seed of the arm order and the environment padding (drawn when not asked for).
        timeout: seconds one run may take before it is killed.
        precision: add rounds until every interval's half-width is at most this many points, or None.
        precision_tests: the tests the target applies to (None: every test).
        cap: processes per arm at most (``--max-runs``; ``repetitions`` without a target).
        exclude_contaminated: leave runs telemetry flags out of the statistics.
        allow_mismatch: compare arms whose configurations differ (rows marked) instead of failing.
        out: the bundle folder asked for (None: a new unique ``./capshim-bench-DATE-TIME``).
    """

    arms: list[Arm]
    workload: Workload
    baseline: str
    host_arm: str | None
    host: dict | None
    repetitions: int
    title: str
    device: dict | None
    warmup: int = 1
    aa_arm: str | None = None
    notes: list[str] = field(default_factory=list)
    seed: int = field(default_factory=lambda: secrets.randbits(32))
    timeout: float = TIMEOUT_S
    precision: float | None = None
    precision_tests: list[str] | None = None
    cap: int = 0
    exclude_contaminated: bool = False
    allow_mismatch: bool = False
    out: str | None = None

    def __post_init__(self):
        """``cap``: ``repetitions`` without a target; with one, at least ``repetitions``, and
        5 x ``repetitions`` or :data:`capshim.bench.schedule.CAP`, whichever is more, when not given (0)."""
        if self.precision is None:
            self.cap = self.repetitions
        else:
            self.cap = max(self.repetitions, self.cap or max(5 * self.repetitions, schedule.CAP))


def pick_device(backend: backends.Backend, stock: dict) -> tuple[int, dict]:
    """Index of the first non-CPU device in probe order, else 0 (lavapipe), and its stock answers.

    ``stock``: the backend's :meth:`~capshim.backends.Backend.stock_answers` of its default device; a
    probe that lists no ``devices`` (one device) or gives no ``type`` is taken as it is."""
    names = stock.get("devices") or [stock["device"]["name"]]
    first = stock["device"].get("index", 0)
    for i in range(len(names)):
        data = stock if i == first else backend.stock_answers(device=i)
        if data["device"].get("type") != "cpu":
            return i, data
    return 0, stock if first == 0 else backend.stock_answers(device=0)


def device_api(arms: list[Arm], workload: str | None, command: bool, platform: str) -> str | None:
    """The API whose device the bench probes (None: no device is probed).

    The built-in workload's API (:data:`WORKLOAD_API`), else the API of the arms' profiles, else for
    the built-in llama.cpp workload or an A/A or restore arm the first API that runs here
    (:func:`capshim.backends.default_api`). The device is probed only when that API's backend can
    say what the hardware has (:meth:`~capshim.backends.Backend.stock_answers` is not None).
    """
    if workload in WORKLOAD_API:
        return WORKLOAD_API[workload]
    apis = [p.api for a in arms for p in (a.profile, a.simulate) if p is not None]
    apis += [khronos.API for a in arms if a.pending]  # a Khronos Vulkan Profiles file, placed on the device
    if apis:
        return apis[0]
    if not command or any(a.restore or a.identity for a in arms):
        return backends.default_api(platform)
    return None


def make_plan(req: BenchRequest, platform: str) -> Plan:
    """Resolve a request into a Plan: arms (profiles loaded, ``restore``/``identity`` answered from a
    stock probe), the workload, the device and every default of :data:`capshim.bench.request.DEFAULTS`.

    Args:
        req: what the caller asks for.
        platform: ``sys.platform`` (the embedded default's arms differ on macOS).

    Raises:
        UsageError: bad arms, baseline, model, workload command or flag combination (exit 2).
        CapshimError: the stock probe failed (no Vulkan driver), a workload's library is missing.
    """
    arms, baseline, host_arm, host, aa_arm = _arms(req, platform)
    argv = list(req.command)
    if req.model and argv:
        raise UsageError("--model is for the built-in workload; a command after -- brings its own model")
    _check_workload_flags(argv, req.metric, req.unit, req.better, req.output_file, req.workload,
                          {"--network": req.network, "--shape": req.shape, "--block": req.block}, req.model)
    if req.output_file and req.out and _inside(Path(req.output_file), Path(req.out)):
        raise UsageError(f"--output-file {req.output_file}: inside --out {req.out}, the bundle capshim seals; "
                         "let the runs write it somewhere else (capshim copies each run's copy into the bundle)")
    if req.workload == "torch-sdpa":
        torch_sdpa.shape_dims(req.shape)  # a bad shape is exit 2 before the device is probed
    api = device_api(arms, req.workload, bool(argv), platform)
    device, extra_env, devices = _resolve_on_device(arms, api) if api is not None else (None, {}, [])
    if any(a.pending for a in arms):  # placed only on the Vulkan device
        raise UsageError(f"--arm {next(a.name for a in arms if a.pending)}: a Khronos Vulkan Profiles file is "
                         f"split against the {khronos.API} device, and this bench probes the {api} device")
    cpu = is_cpu_device(device)
    workload, d = _workload(req, cpu, device)
    notes = [(CPU_NOTE if kinds.llama_cpp(workload.kind) else CPU_NOTE_OTHER)
             .format(device=device["name"])] if cpu else []
    workload.env.update(extra_env)
    workload.env.update(req.env)
    if device is not None:  # before the first run: a variable that cannot select the probed device is exit 2
        problems = inherited_env.device_selection_problems({**os.environ, **workload.env}, os.environ, device,
                                                           devices)
        if problems:
            raise UsageError("; ".join(problems) + " (unset it, or set it to select the probed device)")
    if req.controls:
        workload.controls = [command.control_workload(c) for c in req.controls]
        names = [c.control for c in workload.controls]
        if len(set(names)) != len(names):
            raise UsageError(f"--control: names must be unique ({', '.join(names)})")
        for c in workload.controls:
            c.env.update(extra_env)
    title = "capshim bench" + (f" — {device_label(device)}" if device else "")  # a stand-in says so
    repetitions = req.repetitions or d.processes
    precision, tests, max_runs = _precision(req, d)
    return Plan(arms, workload, baseline, host_arm, host, repetitions, title, device,
                d.warmup if req.warmup is None else req.warmup, aa_arm, notes,
                seed=secrets.randbits(32) if req.seed is None else int(req.seed), timeout=req.timeout,
                precision=precision, precision_tests=tests,
                cap=max_runs or 0,
                exclude_contaminated=req.exclude_contaminated, allow_mismatch=req.allow_mismatch, out=req.out)


def _precision(req: BenchRequest, d: Defaults) -> tuple[float | None, list[str] | None, int | None]:
    """(target, tests, --max-runs) of the precision loop: the request's ``--precision``, else the
    workload's default target on a GPU (:data:`capshim.bench.request.DEFAULTS`) unless ``-r`` was
    given (an explicit count is the user's choice). The tests are ``--precision-test``'s, else the
    workload's default ones (the built-in workload: pp512, whatever the target's source: its tg128
    spreads 16-20% between processes on the H200, evidence/h200-precision-1), else every test."""
    n_prompt = req.n_prompt or d.n_prompt
    tests = [f"pp{n_prompt}" if t == "pp512" and n_prompt else t for t in (d.precision or (None, ()))[1] or ()]
    if req.precision is not None:
        return req.precision, list(req.precision_tests) or tests or None, req.max_runs
    if d.precision and req.repetitions is None:
        target, _, cap = d.precision
        return target, list(req.precision_tests) or tests or None, req.max_runs or cap
    return None, None, None


def _arms(req: BenchRequest, platform: str) -> tuple[list[Arm], str, str | None, dict | None, str | None]:
    """(arms, baseline, host arm, host baseline, A/A arm) of a request.

    Raises:
        UsageError: a bad arm, duplicate names, two A/A arms, an unknown baseline or host arm,
            a ``--host-baseline`` bundle that does not verify.
    """
    if req.arms:
        arms = [arms_mod.parse(o) for o in req.arms]
        default_baseline, default_host = arms[0].name, None
        if any(a.name == "native" and not a.shimmed for a in arms):
            default_host = "native"
    else:
        arms, default_baseline, default_host = arms_mod.default_arms(platform)
    if req.aa:
        arms.append(arms_mod.Arm(arms_mod.AA_NAME, identity=True))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise UsageError(f"--arm: arm names must be unique ({', '.join(names)})")
    identities = [a.name for a in arms if a.identity]
    if len(identities) > 1:
        raise UsageError(f"--arm/--aa: one A/A (identity) arm at most ({', '.join(identities)})")
    if identities and platform == "darwin":
        raise UsageError("--aa / NAME=identity: the A/A arm needs the Vulkan layer (Linux)")
    baseline = req.baseline or ("vm-stock" if "vm-stock" in names and not req.arms else default_baseline)
    if baseline not in names:
        raise UsageError(f"--baseline {baseline!r} is not an arm{did_you_mean(baseline, names)} ({', '.join(names)})")
    host, host_arm = None, None
    if req.host_baseline:
        if Path(req.host_baseline).is_dir():  # a bundle is taken only when it verifies; a llama-bench file as is
            evidence.require_verified(req.host_baseline, "--host-baseline")
        host = host_from_file(req.host_baseline)
    else:
        host_arm = req.host_arm or default_host
        if host_arm is not None and host_arm not in names:
            raise UsageError(f"--host-arm {host_arm!r} is not an arm{did_you_mean(host_arm, names)} "
                             f"({', '.join(names)})")
    return arms, baseline, host_arm, host, identities[0] if identities else None


def _resolve_on_device(arms: list[Arm], api: str) -> tuple[dict | None, dict[str, str], list[str]]:
    """Probe the device of ``api`` the bench uses; answer ``restore``/``identity`` arms from it and check
    every profile of that API against it. Returns (the device entry, variables every run gets, every
    device's name in the probe's order); (None, {}, []) when the backend cannot say what the hardware
    has (:meth:`~capshim.backends.Backend.stock_answers` None).

    Raises:
        UsageError: a profile the capability table's consistency rules refuse on this device; an
            A/A arm for an API whose device cannot be probed.
        CapshimError: the stock probe failed.
    """
    backend = backends.get(api)
    stock = backend.stock_answers()
    if stock is None:
        if api == khronos.API and any(a.pending for a in arms):
            raise UsageError(f"--arm: a Khronos profile is split per answer against the device, and "
                             f"{backend.shim_label} cannot probe it here")
        if any(a.identity or a.restore for a in arms):
            raise UsageError(f"--aa / NAME=identity / profile:restore: {backend.shim_label} cannot probe the "
                             "device's own answers here, so no A/A or restore profile can be made")
        return None, {}, []
    index, chosen = pick_device(backend, stock)
    extra_env = {}
    if chosen["device"].get("type") == "cpu" and "GGML_VK_VISIBLE_DEVICES" not in os.environ:
        extra_env["GGML_VK_VISIBLE_DEVICES"] = str(index)
    said: dict[str, list[str]] = {}  # warning -> the arms it applies to
    for a in arms:
        for line in arms_mod.resolve_pending(a, chosen) if api == khronos.API else []:  # Khronos: on this device
            messages.emit(line)
        if a.restore:
            a.profile = ondevice.restore_profile(chosen, a.simulate)
            a.restore = False
        elif a.identity and a.profile is None:
            a.profile = arms_mod.identity_profile(chosen, api, arms, backend.can_simulate)
        for flag, prof in (("simulate", a.simulate), ("profile", a.profile)):
            # the consistency rules of the capability table, against this device
            # (the same check as run and probe: refusals are exit 2, warnings on stderr)
            if prof is None or prof.api != api:
                continue
            over_sim = flag == "profile" and a.simulate is not None
            base = profiles.answers_after(a.simulate, chosen) if over_sim else None
            where = f"simulate:{a.simulate.source}" if over_sim else "the device"
            for f in profiles.check_against_device(prof, chosen, base=base, base_name=where):
                if f.severity == "refuse":
                    raise UsageError(f"--arm {a.name}: {flag}:{prof.source}: {f.message}")
                if f.noop and prof.source.startswith("generated:"):
                    continue  # the identity arm answers the device's own values on purpose
                said.setdefault(f"{flag}:{prof.source}: {f.message}", []).append(a.name)
        if a.profile is not None and a.profile.api == api and a.profile.direction == "raise" \
                and not a.profile.source.startswith("generated:"):
            over = [str(b) for b in ondevice.beyond_device(a.profile, chosen)]
            if over:
                messages.emit(f"arm {a.name}: profile {a.profile.source} answers more than "
                              f"{chosen['device']['name']} has: " + messages.summarise(over, sep="; "), "warning")
    for message, names in said.items():  # once per profile, naming every arm it applies to
        messages.emit(f"arm{'s' if len(names) > 1 else ''} {', '.join(names)}: {message}", "warning")
    return chosen["device"], extra_env, list(stock.get("devices") or [stock["device"]["name"]])


def _workload(req: BenchRequest, cpu: bool, device: dict | None) -> tuple[Workload, Defaults]:
    """The workload of a request and its row of the defaults table.

    Raises:
        UsageError: ``--process-reps`` with a command, a bad ``--metric`` or command.
        CapshimError: the workload's library (cyllama, ncnn, torch) is missing.
    """
    if req.workload is not None:  # a kind of the registry (checked by _check_workload_flags)
        kind = kinds.selectable()[req.workload]
        return kind.build(req, cpu), defaults_for(kind.defaults, cpu)
    if req.command:
        if req.process_reps is not None:
            raise UsageError("--process-reps is for the built-in workloads; give the command its own repetitions")
        argv = list(req.command)
        check = bool(req.check_output)
        if req.metric:
            w = command.command_workload(argv, metrics.parse_spec(req.metric, req.unit, req.better), check,
                                         req.output_file)
        else:
            w = llama_bench_workload(argv, check_output=check)
        return w, defaults_for("command", cpu)
    d = defaults_for("builtin", cpu)
    model = req.model or MODEL
    if cpu and model != MODEL and (model in builtin.MODEL_PRESETS or Path(model).is_file()):  # a typo: error only
        messages.emit(f"--model {model} on a CPU Vulkan device ({device['name']}): each run may take "
                      f"many minutes (the '{MODEL}' default takes seconds); --timeout is per run", "warning")
    return builtin.builtin_workload(model, req.n_prompt or d.n_prompt, req.n_gen or d.n_gen,
                                    d.check_output if req.check_output is None else req.check_output,
                                    req.process_reps or d.process_reps,
                                    warmup_run=d.warmup_run if req.warmup_run is None else req.warmup_run), d


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies inside ``folder`` (links in the folder part resolved), either may not exist yet."""
    return path.absolute().parent.resolve().joinpath(path.name).is_relative_to(folder.absolute().resolve())


def _check_workload_flags(argv, metric, unit, better, output_file, workload_name, given: dict, model) -> None:
    """Refuse flag combinations that mean nothing (exit 2, naming the flags). ``given``: the
    kind-specific options given (``{"--network": value, "--shape": value, "--block": bool}``);
    each belongs to the kinds of the registry that declare it (:attr:`Kind.options`)."""
    known = kinds.selectable()
    if workload_name is not None and workload_name not in known:
        raise UsageError(f"--workload {workload_name!r}: expected one of {', '.join(known)} "
                         f"(llama.cpp is the default){did_you_mean(workload_name, list(known))}")
    for flag, value in given.items():
        if value not in (None, False) and (workload_name is None or flag not in known[workload_name].options):
            owners = [n for n, k in known.items() if flag in k.options]
            raise UsageError(f"{flag} is for --workload {' or '.join(owners)}")
    if workload_name is not None:
        what = known[workload_name].problem
        if argv:
            raise UsageError(f"--workload {workload_name} runs {what[0]}; give no command after --")
        if model:
            raise UsageError(f"--model is for the llama.cpp workload; --workload {workload_name} takes {what[1]}")
        if metric:
            raise UsageError(f"--metric is for a command after --; --workload {workload_name} reports {what[2]}")
    if metric and not argv:
        raise UsageError(f"--metric {metric}: give the command to measure after --")
    for flag, value in (("--unit", unit), ("--better", better), ("--output-file", output_file)):
        if value is not None and not metric:
            raise UsageError(f"{flag} goes with --metric SPEC (a command after --)")


__all__ = ["make_plan", "Plan"]
