"""The built-in PyTorch attention workload, parent side: the command of one run and its adapter.

The child program is :mod:`capshim.bench.workloads.torch_sdpa_worker` (``python -m`` that
module); this side never imports torch. Its metric is ``json:tflops``: attention TFLOP/s of
each timed call (higher is better; the worker's docstring counts the FLOPs), read by the
``--metric`` adapter (:class:`capshim.bench.workloads.command.Adapter`); the worker reports
milliseconds per call too (``samples_ms``, in the raw output).

Its answers come through CUDA (``api = "cuda"``): the bench resolves its device and its A/A arm
through that API's backend (:func:`capshim.backends.get`).
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

from capshim.bench import metrics
from capshim.bench.workloads.command import Adapter, MetricWorkload
from capshim.bench.workloads.torch_sdpa_worker import DEFAULT_SHAPE, MISSING, parse_shape
from capshim.bench.request import defaults_for
from capshim.bench.workloads.base import Kind
from capshim.errors import CapshimError, UsageError

#: The child program, run as ``python -m WORKER_MODULE``.
WORKER_MODULE = "capshim.bench.workloads.torch_sdpa_worker"
#: The GPU API whose answers the workload's path goes through (a backend name).
API = "cuda"
#: The correctness gate: the largest absolute difference of an output value from the reference
#: arm's. fp16 attention kernels (flash, memory-efficient, cuDNN, math) accumulate in different
#: orders and precisions, so their outputs differ in the last fp16 digits (about 1e-3 for unit-scale
#: inputs); a wrong kernel differs by far more.
ATOL = 1e-2


def shape_dims(shape: str | None) -> tuple[int, int, int, int]:
    """``--shape`` as (B, H, S, D); None is the default 8x32x4096x128 (an empty text is an error,
    not the default: an unset shell variable should not run the largest problem).

    Raises:
        UsageError: a bad shape, naming it and what is wrong.
    """
    try:
        return parse_shape(shape if shape is not None else "x".join(map(str, DEFAULT_SHAPE)))
    except ValueError as exc:
        raise UsageError(f"--shape {exc}") from None


def bench_workload(shape: str | None = None, block: bool = False, check_output: bool = True,
                   repetitions: int = 10, warmup: int = 3) -> MetricWorkload:
    """The ``capshim bench --workload torch-sdpa`` workload (a :class:`MetricWorkload`).

    Args:
        shape: ``BxHxSxD`` (default 8x32x4096x128, fp16).
        block: time a small transformer block around the attention.
        check_output: compare each arm's output (512 evenly strided values) with the reference
            arm's: every value within :data:`ATOL`.
        repetitions, warmup: timed and untimed calls inside each process.

    Raises:
        UsageError: a bad shape.
        CapshimError: PyTorch is not installed (the message says how to install it).
    """
    dims = shape_dims(shape)
    spec = importlib.util.find_spec("torch")
    if spec is None:
        raise CapshimError(MISSING)
    name = "sdpa-" + "x".join(map(str, dims)) + ("-block" if block else "")
    metric = metrics.Metric("json", "tflops", "TFLOP/s", "higher", name, flag="--workload torch-sdpa")
    adapter = Adapter(metric, check="json:output" if check_output else None, atol=ATOL)
    argv = [sys.executable, "-m", WORKER_MODULE, "--shape", "x".join(map(str, dims)),
            "--repetitions", str(repetitions), "--warmup", str(warmup)] + (["--block"] if block else [])
    versions = {}
    try:
        versions["torch"] = metadata.version("torch")
    except metadata.PackageNotFoundError:  # a source build without metadata is fine
        pass
    binary = None
    if spec.submodule_search_locations:
        lib = Path(list(spec.submodule_search_locations)[0]) / "lib" / "libc10_cuda.so"
        binary = lib if lib.is_file() else None  # small, and specific to the build (not the 1 GB libtorch_cuda)
    env = {"PYTHONUNBUFFERED": "1"}
    return MetricWorkload("torch-sdpa", argv, env=env, binary=binary, check_output=check_output,
                          versions=versions, adapter=adapter, api=API)


def _build(req, cpu: bool):
    """The ``--workload torch-sdpa`` of a :class:`capshim.bench.request.BenchRequest`."""
    d = defaults_for("torch-sdpa", cpu)
    return bench_workload(req.shape, req.block, d.check_output if req.check_output is None else req.check_output,
                          repetitions=req.process_reps or d.process_reps)


#: ``--workload torch-sdpa``: PyTorch's scaled-dot-product attention on CUDA.
KIND = Kind("torch-sdpa", api=API, defaults="torch-sdpa", selectable=True, attested=True,
            problem=("its own attention problem", "--shape", "TFLOP/s per call"), options=("--shape", "--block"),
            build=_build, label="torch-sdpa")
