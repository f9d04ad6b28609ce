"""The bench's API boundary: what a caller asks for (:class:`BenchRequest`) and the defaults table.

    BenchRequest -> plan.make_plan -> Plan -> runner.run -> BenchResult

``capshim bench`` parses its options into a :class:`BenchRequest`; the studies
(ablate, tune, kernels) build one too. Every default that depends on the
workload or the device lives in :data:`DEFAULTS` (one row per workload and
device class), and ``capshim bench --help`` reads its text from the same table
(:func:`capshim.bench.workloads.kinds.help_default`, which names the kinds from the workload
registry), so the help never disagrees with what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BenchRequest", "Defaults", "DEFAULTS", "defaults_for", "N_PROMPT", "N_GEN",
           "TIMEOUT_S", "MODEL", "GPU_PRECISION"]

#: Built-in llama.cpp workload: prompt and generated tokens (llama-bench's own defaults, -p 512 -n 128).
N_PROMPT = 512
N_GEN = 128
#: Seconds one run may take before it is killed.
TIMEOUT_S: float = 900
#: The built-in workload's model when ``--model`` is not given (:mod:`capshim.bench.model`).
MODEL = "tiny"
#: The built-in workload's default precision target on a GPU: (half-width in points, tests it
#: applies to, the most processes per arm). The simulation of the whole precision loop
#: (capshim.bench.sequential, docs/statistics.md) resampling the H200's pp512 process values
#: (evidence/h200-tinyllama-aa) reaches +-2 after about 16 processes of the host arm and 15, 15 and
#: 10 of the others on average, and hits a cap of 24 in none of 2,000 benches (1.5% at 20).
#: Generation is overhead-bound and noisier, so the target is pp only.
GPU_PRECISION = (2.0, ("pp512",), 24)
#: The other kinds' default target on a GPU: +-2 points on every test, at most 20 processes per arm.
GPU_PRECISION_ANY = (2.0, None, 20)


@dataclass(frozen=True)
class Defaults:
    """The defaults of one workload kind on one device class.

    Attributes:
        processes: recorded processes (rounds) per arm (``-r``).
        process_reps: timed repetitions inside each process (built-in workloads; None: the
            command brings its own).
        warmup: unrecorded warm-up rounds (``--warmup``).
        warmup_run: the built-in llama.cpp worker's in-process untimed run (None: not applicable).
        check_output: ``--check-output`` when not given.
        precision: (half-width, tests, cap) of the default precision target, or None.
        why: the reason, for the help and the docs.
        n_prompt, n_gen: the built-in llama.cpp workload's prompt and generated tokens (``-p``,
            ``-n``; None: not applicable).
        process_s: (low, high) seconds one process of this workload takes on this device class,
            as measured (the source is beside the row), or None where not measured; the help
            and docs/bench.md turn it into the bench's expected duration.
    """

    processes: int
    process_reps: int | None
    warmup: int
    warmup_run: bool | None
    check_output: bool
    precision: tuple | None = None
    why: str = ""
    n_prompt: int | None = None
    n_gen: int | None = None
    process_s: tuple[float, float] | None = None


#: ``{(workload kind, device class): Defaults}``; kinds ``builtin`` (llama.cpp), ``ncnn``, ``torch-sdpa``
#: (PyTorch attention on CUDA), ``command``
#: (a command after ``--``, llama-bench or ``--metric``); device classes ``gpu`` and ``cpu`` (a CPU
#: Vulkan device such as lavapipe, where no speed effect is expected and time is short).
DEFAULTS: dict[tuple[str, str], Defaults] = {
    # GPU: every arm runs 5 rounds (below 5 processes there is no interval), then the precision loop
    # (capshim.bench.schedule) gives rounds to the arms whose pp interval is wider than +-2 points.
    # A process takes 3.6 s on the H200 through the bench with the cheaper worker (median of 32,
    # evidence/h200-default-2min; 2.5 s with --process-reps 3, evidence/h200-precision-1-pp512);
    # before it, about 4-8 s (evidence/h200-aa-geomean, issue 31).
    ("builtin", "gpu"): Defaults(5, 5, 0, True, True, GPU_PRECISION,
                                 "it warms up in-process, then more rounds until pp512 is +-2 points",
                                 n_prompt=N_PROMPT, n_gen=N_GEN, process_s=(2.5, 3.6)),
    # On lavapipe a process that compiles llama.cpp's shaders measures faster than one that loads
    # them from Mesa's disk cache (tiny, pp64, 2 cores, alternating runs: 287-532 vs 198-223 tok/s
    # on a loaded machine, 444-639 vs 335-401 on a quiet one), so one unrecorded round fills the
    # cache and every recorded process reads it; no in-process warm-up. The first command
    # (./setup.sh && capshim bench, setup included) must finish within 3 minutes on 2 cores: with
    # pp512/tg128 a process took about 12.5 s (3.2 s of correctness pass, 3 x 1.2 s of pp512, 3 x 1.3 s
    # of tg128, 2 s to start), 12 processes 2.5 min; pp128/tg32 runs the same kernels (matrix-matrix
    # for the prompt, matrix-vector for generation: the path columns are the same) in about a third.
    # No precision target: no speed effect is expected on a CPU device, and lavapipe's processes
    # spread far more than +-2 points. process_s: docs/bench.md (2 cores, shared, loaded).
    ("builtin", "cpu"): Defaults(3, 3, 1, False, True, None,
                                 "one round fills Mesa's shader cache; no speed effect is expected",
                                 n_prompt=128, n_gen=32, process_s=(5.0, 16.0)),
    # ncnn on the H200: 8 processes x 4 arms in 84 s (evidence/h200-ncnn-first-profile), about 2.6 s each.
    ("ncnn", "gpu"): Defaults(5, 10, 0, None, True, GPU_PRECISION_ANY, process_s=(2.0, 3.0)),
    ("ncnn", "cpu"): Defaults(5, 10, 0, None, True),
    # torch-sdpa: each process warms up 3 calls in-process (cuDNN and flash pick their kernel on the
    # first call); 10 timed calls of the 8x32x4096x128 default take 35-870 ms on the H200 by backend;
    # a process, PyTorch's import (3.5 s) and the profiler call (4.3 s) included, 9.0 s (median of 15,
    # evidence/h200-torch-sdpa-phases; before the phase clock's cuts, about 11 s: evidence/h200-torch-sdpa).
    ("torch-sdpa", "gpu"): Defaults(5, 10, 0, None, True, GPU_PRECISION_ANY, process_s=(9.0, 9.0)),
    ("torch-sdpa", "cpu"): Defaults(5, 5, 0, None, True),
    # a command's process takes what the command takes: no figure
    ("command", "gpu"): Defaults(5, None, 1, None, False, GPU_PRECISION_ANY),
    ("command", "cpu"): Defaults(10, None, 1, None, False),
}


def defaults_for(kind: str, cpu: bool) -> Defaults:
    """The :data:`DEFAULTS` row of a workload kind (``builtin``, ``ncnn``, ``torch-sdpa``, ``command``) on a
    GPU or CPU device."""
    return DEFAULTS[(kind, "cpu" if cpu else "gpu")]


@dataclass
class BenchRequest:
    """Everything ``capshim bench`` takes: what to measure, how, and what to do after.

    A None means "the default of :data:`DEFAULTS` for this workload and device".

    Attributes:
        arms: ``NAME=SPEC`` strings (:func:`capshim.bench.arms.parse`); empty: the embedded default.
        baseline, host_arm: arm names; host_baseline: a bundle or llama-bench file (path).
        aa: add the A/A arm ``aa``.
        command: the workload command after ``--`` (empty: a built-in workload).
        workload: ``"ncnn"``, ``"torch-sdpa"`` or None (llama.cpp); network: the ncnn preset;
            shape, block: the torch-sdpa problem (``BxHxSxD``; a transformer block around it).
        model, n_prompt, n_gen: the built-in llama.cpp workload (GGUF path or preset; tokens;
            None: the :data:`DEFAULTS` row's).
        metric, unit, better, output_file: a ``--metric`` command (:mod:`capshim.bench.metrics`).
        controls: ``NAME=CMD`` control workloads.
        check_output: compare every arm's output with the reference arm's.
        repetitions: recorded processes per arm; process_reps: timed repetitions per process;
            warmup: unrecorded rounds; warmup_run: the worker's in-process warm-up run.
        seed: the order and padding seed; timeout: seconds per run.
        precision (points), precision_tests, max_runs: the precision loop.
        exclude_contaminated, allow_mismatch: analysis options.
        env: variables every arm's process gets on top of the workload's (the studies).
        out: the bundle folder (None: a new unique ``./capshim-bench-DATE-TIME``).
        strict, as_json, db: what ``capshim bench`` does after the run (exit 3 on an inert shim,
            summary.json on stdout, add the bundle to a results store).
    """

    arms: tuple[str, ...] = ()
    baseline: str | None = None
    host_arm: str | None = None
    host_baseline: str | None = None
    aa: bool = False
    command: tuple[str, ...] = ()
    workload: str | None = None
    network: str | None = None
    shape: str | None = None
    block: bool = False
    model: str | None = None
    n_prompt: int | None = None
    n_gen: int | None = None
    metric: str | None = None
    unit: str | None = None
    better: str | None = None
    output_file: str | None = None
    controls: tuple[str, ...] = ()
    check_output: bool | None = None
    repetitions: int | None = None
    process_reps: int | None = None
    warmup: int | None = None
    warmup_run: bool | None = None
    seed: int | None = None
    timeout: float = TIMEOUT_S
    precision: float | None = None
    precision_tests: tuple[str, ...] = ()
    max_runs: int | None = None
    exclude_contaminated: bool = False
    allow_mismatch: bool = False
    env: dict[str, str] = field(default_factory=dict)
    out: str | None = None
    strict: bool = False
    as_json: bool = False
    db: str | None = None
