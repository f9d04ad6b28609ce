"""A worker process's phase clock: seconds per phase, reported in its rows as ``capshim_phases``.

Standard library only (the workers import it). docs/processes.md shows what the phases cost.
"""

from __future__ import annotations

import os
import time

#: Set (to the template's pid) in a process forked from a template
#: (:mod:`capshim.bench.workloads.template`); its ``python_start`` phase is then the fork's.
FORKED_VAR = "CAPSHIM_FORKED_FROM"

#: The phases ``capshim_phases`` reports, in order (seconds each): ``python_start`` from the
#: process's exec (``/proc/self/stat`` start time, 10 ms ticks; None elsewhere) to this module,
#: ``imports`` (cyllama), ``backend_init`` (ggml's backends: the Vulkan instance and devices),
#: ``model_load``, ``context``, ``warmup`` (the correctness pass), ``test_warmup`` (each test's
#: untimed run), ``measure`` (the timed repetitions).
PHASES = ("python_start", "imports", "backend_init", "model_load", "context", "warmup",
          "test_warmup", "measure")
#: The torch-sdpa worker's phases (:mod:`capshim.bench.workloads.torch_sdpa_worker`):
#: ``python_start`` as above, ``imports`` (the worker's modules and torch), ``cuda_init`` (the
#: first CUDA call: ``torch.cuda.is_available()``, the device count, capability and name),
#: ``inputs`` (making the input tensors on the device), ``warmup`` (the untimed calls),
#: ``measure`` (the timed calls), ``profile`` (the one call under ``torch.profiler``),
#: ``output`` (the correctness sample and the checksums).
TORCH_PHASES = ("python_start", "imports", "cuda_init", "inputs", "warmup", "measure", "profile",
                "output")


def process_age() -> float | None:
    """Seconds since this process was created (exec or fork), from ``/proc/self/stat`` field 22
    (start time in clock ticks since boot, proc(5)) and ``CLOCK_BOOTTIME``; None off Linux or when
    the two disagree (negative, or over an hour)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, counted after "pid (comm)"
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < 3600 else None  # another clock base (a sandbox's /proc): unknown


class Phases(dict):
    """Seconds per phase (``names``: :data:`PHASES` by default), filled as the worker goes;
    ``mark(name)`` adds the time since the previous mark (perf_counter seconds) to ``name``."""

    def __init__(self, start: float | None = None, python_start: float | None = None,
                 names: tuple[str, ...] = PHASES):
        super().__init__()
        self._last = time.perf_counter() if start is None else start
        self.names = names
        self["python_start"] = python_start

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self[name] = (self.get(name) or 0.0) + (now - self._last)
        self._last = now

    def record(self) -> dict:
        return {k: (round(self[k], 4) if self.get(k) is not None else None) for k in self.names}


def process_clock(module_start: float, names: tuple[str, ...] = PHASES) -> Phases:
    """A worker's clock, started at ``module_start`` (perf_counter when the worker module began;
    in a template's child, now: the fork), ``python_start`` from :func:`process_age` (None when
    unknown)."""
    age = process_age()  # since the exec, or since the fork in a template's child
    start = time.perf_counter() if os.environ.get(FORKED_VAR) else module_start
    return Phases(start, None if age is None else max(0.0, age - (time.perf_counter() - start)), names)
