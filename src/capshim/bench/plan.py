"""Resolve ``capshim bench`` options into arms, a workload and a device, then run.

The embedded default (no arguments) on Linux: the built-in llama.cpp workload
(:mod:`capshim.bench.workloads.builtin`, through cyllama's Vulkan build) on the ``tiny``
synthetic model, with arms ``native``, ``vm-stock`` and ``vm-unlocked``
(:func:`capshim.bench.arms.default_arms`). The Vulkan device is chosen from a
stock probe: the first GPU; on a CPU-only machine lavapipe, with
``GGML_VK_VISIBLE_DEVICES`` set to its index (llama.cpp skips CPU-type Vulkan
devices otherwise: ggml-vulkan.cpp, device enumeration).

Process counts: each process of the built-in workload warms up in-process,
then runs ``process_reps`` timed repetitions; its median is one sample. On a
GPU the default is 10 processes of 5 repetitions per arm, then more rounds
until the pp interval is +-2 points wide (``GPU_PRECISION``, at most 30
processes), unless ``-r`` or ``--precision`` is given. On a CPU Vulkan
device (lavapipe) the capabilities change which kernels llama.cpp picks but
not the speed, so the default is shorter (3 processes of 3 repetitions, no
warm-up round: the in-process warm-up and the kept shader cache do that job)
and the table says that no speed effect is expected there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from capshim.bench import arms as arms_mod
from capshim.bench.arms import Arm
from capshim.bench import metrics
from capshim.bench.runner import BenchResult, run_bench
from capshim.bench.workloads import builtin, command, ncnn
from capshim.bench.workloads.base import Workload
from capshim.bench.workloads.llama_bench import llama_bench_workload
from capshim.errors import UsageError

#: (processes per arm, timed repetitions per process) of the built-in workload: on a GPU, on a CPU device.
GPU_DEFAULT = (10, 5)
CPU_DEFAULT = (3, 3)
#: The built-in workload's default precision target on a GPU: (half-width in points,
#: tests it applies to, the most processes per arm). Measured on the H200
#: (tinyllama-1.1b, evidence/h200-tinyllama-aa): the pp512 % of host intervals
#: reached +-2 points after 29 processes of 5 repetitions per arm (9.5 min with
#: four arms); generation is overhead-bound and noisier, so the target is pp only.
GPU_PRECISION = (2.0, ["pp512"], 30)
CPU_NOTE = ("{device} is a CPU device: the capabilities change which kernels llama.cpp picks (the path "
            "columns) but no speed effect is expected; the default is short here (fewer processes and "
            "repetitions) and shows the mechanism and the evidence chain, not a speed-up")
#: The same for a workload other than llama.cpp (``--metric``, ``--workload ncnn``).
CPU_NOTE_OTHER = ("{device} is a CPU device: the capabilities change which code paths the program takes "
                  "but no speed effect is expected; the bench shows the mechanism and the evidence chain")


@dataclass
class Plan:
    """A resolved bench: what :func:`execute` runs."""

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
    notes: list[str] | None = None
    #: default options of run_bench chosen by the plan (e.g. the GPU precision target);
    #: what the user gives overrides them
    defaults: dict | None = None


def _pick_vulkan_device(stock: dict) -> tuple[int, dict]:
    """Index of the first non-CPU device in probe order, else 0 (lavapipe)."""
    from capshim.backends import vulkan

    names = stock.get("devices") or [stock["device"]["name"]]
    for i in range(len(names)):
        data = stock if i == stock["device"]["index"] else vulkan.probe(device=i)
        if data["device"]["type"] != "cpu":
            return i, data
    return 0, stock if stock["device"]["index"] == 0 else vulkan.probe(device=0)


def make_plan(arm_opts: tuple[str, ...] | list[str], baseline: str | None, host_arm: str | None,
              host_baseline: str | None, repetitions: int | None, model: str | None, n_prompt: int, n_gen: int,
              check_output: bool | None, argv: list[str], platform: str, *, aa: bool = False,
              process_reps: int | None = None, warmup: int | None = None, metric: str | None = None,
              unit: str | None = None, better: str | None = None, output_file: str | None = None,
              controls: tuple[str, ...] | list[str] = (), workload_name: str | None = None,
              network: str | None = None, warmup_run: bool | None = None) -> Plan:
    """Turn the command line into a Plan.

    ``aa`` adds the A/A arm ``aa`` (``identity``); ``process_reps`` is the number
    of timed repetitions inside each built-in process (llama.cpp or ncnn); ``warmup``
    the unrecorded rounds (default: 0 for the built-in workloads, which warm up
    in-process; 1 for a command). ``metric``/``unit``/``better``/``output_file`` make
    a generic command workload and ``workload_name="ncnn"`` the ncnn one
    (:mod:`capshim.bench.workloads.command`, :mod:`capshim.bench.workloads.ncnn`); ``controls``
    are ``NAME=CMD`` control workloads. ``warmup_run``: the built-in llama.cpp worker's
    in-process warm-up run of each test (default: on a GPU, not on a CPU device).

    Raises:
        UsageError: bad arms, baseline, model or workload command (exit 2).
        CapshimError: the stock probe failed (no Vulkan driver).
    """
    if arm_opts:
        arms = [arms_mod.parse(o) for o in arm_opts]
        default_baseline, default_host = arms[0].name, None
        if any(a.name == "native" and not a.shimmed for a in arms):
            default_host = "native"
    else:
        arms, default_baseline, default_host = arms_mod.default_arms(platform)
    if aa:
        arms.append(arms_mod.Arm(arms_mod.AA_NAME, identity=True))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise UsageError(f"--arm: arm names must be unique ({', '.join(names)})")
    identities = [a.name for a in arms if a.identity]
    if len(identities) > 1:
        raise UsageError(f"--arm/--aa: one A/A (identity) arm at most ({', '.join(identities)})")
    if identities and platform == "darwin":
        raise UsageError("--aa / NAME=identity: the A/A arm needs the Vulkan layer (Linux)")
    baseline = baseline or ("vm-stock" if "vm-stock" in names and not arm_opts else default_baseline)
    if baseline not in names:
        raise UsageError(f"--baseline {baseline!r} is not an arm ({', '.join(names)})")
    host = None
    if host_baseline:
        from capshim.bench.analysis import host_from_file

        if Path(host_baseline).is_dir():  # a bundle is taken only when it verifies; a llama-bench file as is
            from capshim import evidence

            evidence.require_verified(host_baseline, "--host-baseline")
        host = host_from_file(host_baseline)
        host_arm = None
    else:
        host_arm = host_arm or default_host
        if host_arm is not None and host_arm not in names:
            raise UsageError(f"--host-arm {host_arm!r} is not an arm ({', '.join(names)})")
    if model and argv:
        raise UsageError("--model is for the built-in workload; a command after -- brings its own model")
    _check_workload_flags(argv, metric, unit, better, output_file, workload_name, network, model)
    device = None
    uses_vulkan = any(p is not None and p.api == "vulkan" for a in arms for p in (a.profile, a.simulate)) or any(
        a.restore or a.identity for a in arms) or (not argv and platform != "darwin") or workload_name == "ncnn"
    extra_env: dict[str, str] = {}
    if uses_vulkan:
        from capshim import profiles as profiles_mod
        from capshim.backends import vulkan
        from capshim.profiles import ondevice

        stock = vulkan.probe()
        index, chosen = _pick_vulkan_device(stock)
        device = chosen["device"]
        if chosen["device"]["type"] == "cpu" and "GGML_VK_VISIBLE_DEVICES" not in os.environ:
            extra_env["GGML_VK_VISIBLE_DEVICES"] = str(index)
        for a in arms:
            if a.restore:
                a.profile = ondevice.restore_profile(chosen, a.simulate)
                a.restore = False
            elif a.identity and a.profile is None:
                from capshim import profiles

                # the keys vulkan-paravirt lowers, answered with this device's own values
                a.profile = ondevice.restore_profile(chosen, profiles.load("vulkan-paravirt"), name="identity")
            for flag, prof in (("simulate", a.simulate), ("profile", a.profile)):
                # the consistency rules of the capability table, against this device
                # (the same check as run and probe: refusals are exit 2, warnings on stderr)
                if prof is None or prof.api != "vulkan":
                    continue
                for f in profiles_mod.check_against_device(prof, chosen):
                    if f.severity == "refuse":
                        raise UsageError(f"--arm {a.name}: {flag}:{prof.source}: {f.message}")
                    import sys

                    print(f"capshim: warning: arm {a.name}: {flag}:{prof.source}: {f.message}", file=sys.stderr)
            if a.profile is not None and a.profile.api == "vulkan" and a.profile.direction == "raise" \
                    and not a.profile.source.startswith("generated:"):
                over = [str(b) for b in ondevice.beyond_device(a.profile, chosen)]
                if over:
                    import sys

                    print(f"capshim: warning: arm {a.name}: profile {a.profile.source} answers more than "
                          f"{chosen['device']['name']} has: {'; '.join(over[:6])}"
                          + (f" (+{len(over) - 6} more)" if len(over) > 6 else ""), file=sys.stderr)
    notes: list[str] = []
    cpu = device is not None and device.get("type") == "cpu"
    if workload_name == "ncnn":
        workload = ncnn.bench_workload(network or ("tiny" if cpu else "standard"),
                                       check_output if check_output is not None else True,
                                       repetitions=process_reps or 10)
        reps = repetitions or (5 if cpu else 10)
        warm = 0 if warmup is None else warmup
    elif argv:
        if process_reps is not None:
            raise UsageError("--process-reps is for the built-in workloads; give the command its own repetitions")
        if metric:
            workload = command.command_workload(argv, metrics.parse_spec(metric, unit, better),
                                                bool(check_output), output_file)
        else:
            workload = llama_bench_workload(argv, check_output=bool(check_output))
        reps = repetitions or 10
        warm = 1 if warmup is None else warmup
    else:
        procs, k = CPU_DEFAULT if cpu else GPU_DEFAULT
        # On a CPU device no speed effect is expected and time is short: no
        # in-process warm-up run there (the default must stay within 3 minutes).
        workload = builtin.builtin_workload(model or "tiny", n_prompt, n_gen,
                                            check_output if check_output is not None else True, process_reps or k,
                                            warmup_run=not cpu if warmup_run is None else warmup_run)
        reps = repetitions or procs
        # On lavapipe a process that compiles llama.cpp's shaders measures faster than one that loads
        # them from Mesa's disk cache (tiny, pp64, 2 cores, alternating runs: 287-532 vs 198-223 tok/s
        # on a loaded machine, 444-639 vs 335-401 on a quiet one; whether the code or the CPU being
        # busy for 10 s first makes the difference is not established). So with a cold cache the first
        # process of each shader variant would skew its arm: on a CPU device one unrecorded warm-up
        # round fills the cache and every recorded process reads it.
        warm = (1 if cpu else 0) if warmup is None else warmup
        if cpu and (model or "tiny") != "tiny":
            import sys

            print(f"capshim: warning: --model {model} on a CPU Vulkan device ({device['name']}): each run may take "
                  "many minutes (the 'tiny' default takes seconds); --timeout is per run", file=sys.stderr)
    if cpu:
        notes.append((CPU_NOTE if workload.kind in ("builtin", "llama-bench") else CPU_NOTE_OTHER)
                     .format(device=device["name"]))
    workload.env.update(extra_env)
    if controls:
        workload.controls = [command.control_workload(c) for c in controls]
        names = [c.control for c in workload.controls]
        if len(set(names)) != len(names):
            raise UsageError(f"--control: names must be unique ({', '.join(names)})")
        for c in workload.controls:
            c.env.update(extra_env)
    title = "capshim bench"
    if device:
        title += f" — {device['name']}"
    defaults = None
    if not argv and not cpu and repetitions is None and n_prompt > 0:
        target, tests, cap = GPU_PRECISION
        defaults = {"precision": target, "precision_tests": [f"pp{n_prompt}" if t == "pp512" else t for t in tests],
                    "max_runs": cap}
    return Plan(arms, workload, baseline, host_arm, host, reps, title, device, warm, identities[0] if identities else None,
                notes, defaults)


def _check_workload_flags(argv, metric, unit, better, output_file, workload_name, network, model) -> None:
    """Refuse flag combinations that mean nothing (exit 2, naming the flags)."""
    if workload_name is not None and workload_name != "ncnn":
        raise UsageError(f"--workload {workload_name!r}: expected ncnn (llama.cpp is the default)")
    if workload_name == "ncnn":
        if argv:
            raise UsageError("--workload ncnn runs its own network; give no command after --")
        if model:
            raise UsageError("--model is for the llama.cpp workload; --workload ncnn takes --network")
        if metric:
            raise UsageError("--metric is for a command after --; --workload ncnn reports ms per inference")
    elif network:
        raise UsageError("--network is for --workload ncnn")
    if metric and not argv:
        raise UsageError(f"--metric {metric}: give the command to measure after --")
    for flag, value in (("--unit", unit), ("--better", better), ("--output-file", output_file)):
        if value is not None and not metric:
            raise UsageError(f"{flag} goes with --metric SPEC (a command after --)")


def arm_reason(arm: dict) -> str | None:
    """Why an arm of summary.json is not a result (failed, inert, invalid, wrong-output), short; else None.

    A failed arm: its first failed run's ``error`` (the runner's ``exit N: <the stderr line that
    says why>``, :func:`capshim.bench.runner.error_line`).
    """
    state = arm.get("state")
    runs = arm.get("runs") or []
    if state == "failed":
        errors = [r.get("error") for r in runs if r.get("error")]
        why = errors[0] if errors else "no run finished"
        return why + (f" (and {len(errors) - 1} more failed run(s))" if len(errors) > 1 else "")
    if state in ("inert", "invalid"):
        reasons = [f"{shim}: {s.get('reason')}" for r in runs for shim, s in (r.get("shims") or {}).items()
                   if s.get("state") == state]
        return f"the shim stayed {state} ({reasons[0] if reasons else state})"
    if state == "wrong-output":
        return arm.get("output_check") or "generated tokens differ"
    return None


def explain_arm(name: str, arm: dict) -> str:
    """One line saying why an arm is not a result (failed, inert, invalid, wrong-output), from summary.json."""
    state = arm.get("state")
    why = arm_reason(arm)
    if state == "failed":
        return f"arm {name} failed: {why}"
    if state in ("inert", "invalid"):
        return f"arm {name}: {why}: not a shim result"
    if state == "wrong-output":
        return f"arm {name}: {why}: not a result"
    return f"arm {name}: {state}"


def execute(plan: Plan, out: Path, warmup: int | None = None, timeout: float = 900.0, **options) -> BenchResult:
    """Run a Plan (see :func:`capshim.bench.runner.run_bench`; ``options`` are its keyword options:
    seed, precision, precision_tests, max_runs, exclude_contaminated, allow_mismatch). An option
    left None takes the plan's default (``Plan.defaults``: on a GPU, the built-in workload's
    precision target ``GPU_PRECISION`` unless ``-r`` was given)."""
    if options.get("precision") is None:
        for key, value in (plan.defaults or {}).items():
            if options.get(key) is None:
                options[key] = value
    return run_bench(plan.arms, plan.workload, plan.baseline, out, repetitions=plan.repetitions,
                     warmup=plan.warmup if warmup is None else warmup, timeout=timeout, host_arm=plan.host_arm,
                     host=plan.host, extra_metadata={"device": plan.device, "title": plan.title},
                     aa_arm=plan.aa_arm, notes=plan.notes, **options)


__all__ = ["make_plan", "execute", "explain_arm", "arm_reason", "Plan"]
