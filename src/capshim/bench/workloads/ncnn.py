"""The built-in ncnn workload, parent side: the command of one run and its adapter.

The child program is :mod:`capshim.bench.workloads.ncnn_worker` (``python -m``
that module). Its metric is ``json:samples_ms`` (milliseconds per inference,
lower is better), read by the ``--metric`` adapter
(:class:`capshim.bench.workloads.command.Adapter`).
"""

from __future__ import annotations

import importlib.util
import sys
from importlib import metadata
from pathlib import Path

from capshim.bench import metrics
from capshim.bench.workloads.builtin import worker_env
from capshim.bench.workloads.command import Adapter, MetricWorkload
from capshim.bench.workloads.ncnn_worker import MISSING, PRESETS
from capshim.bench.request import defaults_for
from capshim.bench.workloads.base import Kind
from capshim.errors import CapshimError, UsageError

#: The child program, run as ``python -m WORKER_MODULE``.
WORKER_MODULE = "capshim.bench.workloads.ncnn_worker"


def bench_workload(network: str = "tiny", check_output: bool = True, repetitions: int = 10, warmup: int = 3):
    """The ``capshim bench --workload ncnn`` workload (a :class:`MetricWorkload`).

    Each run is one process of this module; its metric is ``json:samples_ms`` (milliseconds per
    inference, lower is better); ``check_output`` compares the network's output with the
    reference arm's within 2% relative L2 distance (fp16 storage or arithmetic, which the shims
    switch, change the last digits).

    Raises:
        CapshimError: the ncnn wheel is not installed (the message says how to install it).
        UsageError: unknown network preset.
    """
    if network not in PRESETS:
        raise UsageError(f"--network {network!r}: expected one of {', '.join(PRESETS)}")
    if importlib.util.find_spec("ncnn") is None:
        raise CapshimError(MISSING)
    metric = metrics.Metric("json", "samples_ms", "ms", "lower", f"ncnn-{network}", flag="--workload ncnn")
    adapter = Adapter(metric, check="json:output" if check_output else None, rtol=0.02)
    argv = [sys.executable, "-m", WORKER_MODULE, "--network", network,
            "--repetitions", str(repetitions), "--warmup", str(warmup)]
    versions = {}
    try:
        versions["ncnn"] = metadata.version("ncnn")
    except metadata.PackageNotFoundError:  # installed without metadata is fine
        pass
    binary = None
    spec = importlib.util.find_spec("ncnn")
    if spec is not None and spec.submodule_search_locations:
        libs = sorted(Path(list(spec.submodule_search_locations)[0]).glob("ncnn*.so"))
        binary = libs[0] if libs else None
    return MetricWorkload("ncnn", argv, env=worker_env(), binary=binary, check_output=check_output,
                          versions=versions, adapter=adapter)


def _build(req, cpu: bool):
    """The ``--workload ncnn`` of a :class:`capshim.bench.request.BenchRequest` (tiny on a CPU device)."""
    d = defaults_for("ncnn", cpu)
    return bench_workload(req.network or ("tiny" if cpu else "standard"),
                          d.check_output if req.check_output is None else req.check_output,
                          repetitions=req.process_reps or d.process_reps)


#: ``--workload ncnn``: a synthetic network through ncnn's Vulkan backend.
KIND = Kind("ncnn", api="vulkan", defaults="ncnn", selectable=True, attested=True,
            problem=("its own network", "--network", "ms per inference"), options=("--network",), build=_build,
            label="ncnn")
