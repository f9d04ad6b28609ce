"""The built-in PyTorch attention workload's child program: scaled-dot-product attention on a CUDA device.

One process per run. The parent side (the command and its adapter) is
:mod:`capshim.bench.workloads.torch_sdpa`; this module imports only the standard
library, :mod:`capshim.bench.attest` (the SDPA kernel table) and, inside the run, torch.

Run as ``python -m capshim.bench.workloads.torch_sdpa_worker [--shape 8x32x4096x128]
[--block] [--warmup 3] [--repetitions 10] [--device 0] [--seed 0]``.

PyTorch picks its attention kernel from the compute capability the CUDA runtime reports
(``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``: flash and cuDNN attention need
sm80+, memory-efficient sm50+, math always): the workload a lowered capability changes. The
problem is ``torch.nn.functional.scaled_dot_product_attention`` on fp16 query, key and value
of shape B x H x S x D (pseudo-random, seeded: :func:`hashed_uniform`); with ``--block`` a
small transformer block around it (QKV projection, attention, output projection, residual,
layer norm, a 4x GELU MLP) on B x S x (H*D). The process warms up (``--warmup`` calls, not timed), times ``--repetitions``
calls (``time.perf_counter`` around the call and ``torch.cuda.synchronize()``), then runs one
more call under ``torch.profiler`` (CUDA activity only: no CPU events, shapes or stacks) to see
which kernels ran.

Inputs: each element is a hash of its index, the seed and the tensor's number (:func:`hashed_uniform`:
integer operations then one exact conversion, computed elementwise on the device), uniform on
[-sqrt(3), sqrt(3)) (mean 0, variance 1, like the unit normal it replaces). Elementwise, so the
same values whatever grid the device's kernels are launched with: PyTorch's CUDA random generator
sizes its grid from the multiprocessor count, so on the GPU the same seed gave other numbers in an
arm that lowers multiProcessorCount (seen on the H200: a100-class's output "differed" by 0.116 from
native's); drawing 3 x 134M normals on the CPU instead cost seconds per process (issue 31).

Throughput: attention FLOPs per call are ``4 * B * H * S^2 * D`` (the two matrix products
Q K^T and P V, two FLOPs per multiply-add; softmax not counted: the convention of the
FlashAttention papers), plus ``2 * B * S * E * (3E + E + 8E)`` for the block's projections and
MLP (E = H * D); ``tflops`` is that over each repetition's seconds, 1e12 FLOP/s.

On stderr, one path line (read by :func:`capshim.bench.attest.parse_path`)::

    torch-sdpa: device 0 = NVIDIA H200 | capability: 9.0 | sdpa: cudnn | kernel: cudnn_generated_... | torch: 2.11.0

STDOUT gets exactly one JSON object::

    {"workload": "torch-sdpa", "torch_version": str, "cuda_version": str | None,
     "device": int, "device_name": str, "capability": [major, minor],
     "shape": [B, H, S, D], "block": bool, "dtype": "float16", "flops_per_call": int,
     "warmup": int, "repetitions": int,
     "samples_ms": [float, ...],        # per timed call, milliseconds
     "tflops": [float, ...],            # per timed call, TFLOP/s
     "median_ms": float, "sdpa_backend": "flash" | "mem-efficient" | "cudnn" | "math" | "unknown",
     "kernels": [str, ...],             # CUDA kernel names the profiler saw in the profiled call
     "path": {"cuda": {...}},
     "output": [float, ...],            # OUTPUT_SAMPLES values of the output, evenly strided (float32)
     "checksum": float, "abs_sum": float,
     "capshim_phases": {phase: float | None, ...}}  # seconds per phase (phases.TORCH_PHASES)

and one phases line, ``capshim-torch-sdpa: phases {...}`` (the same object, plus ``forked``).

Exit codes: 0 success; 1 the workload failed (no CUDA device, a non-finite output, a CUDA error
such as out of memory: its first line); 2 bad
usage or torch not installed. Errors are one line on stderr, ``capshim-torch-sdpa: error: ...``.
"""

from __future__ import annotations

import time

#: perf_counter() when this module started running (the interpreter's start is before it).
_T_MODULE = time.perf_counter()

import argparse  # noqa: E402 - after the clock's start
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

from capshim.bench import attest  # noqa: E402
from capshim.bench.workloads.phases import FORKED_VAR, TORCH_PHASES, Phases, process_clock  # noqa: E402
from capshim.contracts.environ import TEMPLATE_FD_VAR  # noqa: E402

PROG = "capshim-torch-sdpa"
MISSING = ("the torch-sdpa workload needs PyTorch with CUDA: pip install torch "
           "(a CUDA build, e.g. from https://download.pytorch.org/whl/cu130)")
#: The default problem: the one measured on the H200 in issue 22 (flash 6.1 ms, mem-efficient 12.3, math 86.7).
DEFAULT_SHAPE = (8, 32, 4096, 128)
#: How many output values the correctness gate compares (evenly strided over the whole output).
OUTPUT_SAMPLES = 512
#: The largest problem accepted: elements of one of Q, K, V (2^31: 4 GiB of fp16 each).
MAX_ELEMENTS = 1 << 31


class WorkerError(Exception):
    """An expected failure, reported as one line with its exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """``"8x32x4096x128"`` -> (B, H, S, D): batch, heads, sequence length, head dimension.

    Raises:
        ValueError: not four positive integers joined by ``x``, or more than :data:`MAX_ELEMENTS`
            elements in one tensor.
    """
    # ASCII digits only: \d would take a full-width or Arabic-Indic digit as the number it looks like
    m = re.fullmatch(r"\s*([0-9]+)x([0-9]+)x([0-9]+)x([0-9]+)\s*", str(text), flags=re.ASCII)
    if not m:
        raise ValueError(f"{text!r}: expected BxHxSxD, four positive integers (e.g. 8x32x4096x128)")
    if any(len(g.lstrip("0")) > 7 for g in m.groups()):
        raise ValueError(f"{text!r}: a dimension more than 9999999")
    shape = tuple(int(g) for g in m.groups())
    if min(shape) < 1:
        raise ValueError(f"{text!r}: every dimension must be at least 1")
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"{text!r}: {math.prod(shape)} elements per tensor, more than {MAX_ELEMENTS}")
    return shape  # type: ignore[return-value]


def flops_per_call(shape: tuple[int, int, int, int], block: bool) -> int:
    """FLOPs of one call (module docstring): attention, plus the block's matrix products."""
    b, h, s, d = shape
    flops = 4 * b * h * s * s * d
    if block:
        e = h * d
        flops += 2 * b * s * e * (3 * e + e + 8 * e)
    return flops


#: 32-bit masks and the multipliers of the "lowbias32" integer hash (Chris Wellons, "Prospecting
#: for Hash Functions", 2018: https://nullprogram.com/blog/2018/07/31/).
_M32, _H1, _H2 = 0xFFFFFFFF, 0x7FEB352D, 0x846CA68B
#: sqrt(12): a uniform on [-0.5, 0.5) times this has variance 1.
_UNIT = math.sqrt(12.0)


def _mix32(x):
    """lowbias32 of ``x`` (a Python int, or each element of an int64 array, values in [0, 2^32)),
    in place where it can be.

    Works with Python's operators on any int64 array (a torch tensor on any device, a numpy
    array) as on an int: every product is masked to 32 bits, so an int64 product that wraps gives the same
    low bits everywhere."""
    x ^= x >> 16
    x = (x * _H1) & _M32
    x ^= x >> 15
    x = (x * _H2) & _M32
    x ^= x >> 16
    return x


def stream_key(seed: int, index: int) -> int:
    """The 32-bit key of input tensor ``index`` (0, 1, 2, ...) of seed ``seed`` (Python ints)."""
    return _mix32(((seed & _M32) * 0x9E3779B9 + (index + 1) * 0x85EBCA6B) & _M32)


def hashed_uniform(index_array, to_float32, key: int):
    """Unit-variance uniform values on [-sqrt(3), sqrt(3)), one per element of ``index_array``.

    Args:
        index_array: int64 element indices (``torch.arange(n, dtype=torch.int64, device=...)``, or
            a numpy ``arange``); overwritten. Fewer than 2^32 (:data:`MAX_ELEMENTS` is 2^31).
        to_float32: converts an int64 array of values below 2^24 to float32 (exact).
        key: :func:`stream_key` of the seed and the tensor.

    Returns:
        float32 values: the top 24 bits of ``lowbias32(lowbias32(i ^ key) + key)``, times 2^-24,
        minus 0.5, times sqrt(12). Every step is an integer operation or one exactly rounded
        float32 operation, so a GPU and a CPU give the same bits.
    """
    index_array ^= key
    h = _mix32(index_array)
    h = _mix32((h + key) & _M32)
    u = to_float32(h >> 8)
    return (u * (1.0 / (1 << 24)) - 0.5) * _UNIT


def _make_call(torch, shape, block: bool, device: int, seed: int):
    """The timed function and the tensors it uses (kept alive by the closure)."""
    F = torch.nn.functional
    b, h, s, d = shape
    dev = f"cuda:{device}"
    count = [0]

    def randn(*size):
        """The next input tensor, fp16 on the device (:func:`hashed_uniform`; not torch's RNG)."""
        key = stream_key(seed, count[0])
        count[0] += 1
        idx = torch.arange(math.prod(size), dtype=torch.int64, device=dev)
        vals = hashed_uniform(idx, lambda t: t.to(dtype=torch.float32), key)
        return vals.to(dtype=torch.float16).reshape(*size)

    if not block:
        q, k, v = (randn(b, h, s, d) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v)
    e = h * d
    x = randn(b, s, e)
    w_qkv, w_o = randn(e, 3 * e) * (e ** -0.5), randn(e, e) * (e ** -0.5)
    w_1, w_2 = randn(e, 4 * e) * (e ** -0.5), randn(4 * e, e) * ((4 * e) ** -0.5)

    def call():
        qkv = (x @ w_qkv).reshape(b, s, 3, h, d).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        y = F.layer_norm(x + att.transpose(1, 2).reshape(b, s, e) @ w_o, (e,))
        return F.layer_norm(y + F.gelu(y @ w_1) @ w_2, (e,))
    return call


def _one_field(text: str) -> str:
    """``text`` fit for one field of the path line: no ``|``, no line breaks."""
    return " ".join(str(text).replace("|", "/").split())


def _kernels(torch, call) -> list[str]:
    """Names of the CUDA kernels one profiled call ran (torch.profiler, CUDA activity), in first-seen order."""
    # CUDA activity only (no CPU op events), no shapes, stacks, memory or FLOPs: the least it records
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA], record_shapes=False,
                                profile_memory=False, with_stack=False, with_flops=False) as prof:
        call()
        torch.cuda.synchronize()
    names: list[str] = []
    for evt in prof.key_averages():
        if str(getattr(evt, "device_type", "")).endswith("CUDA") and evt.key not in names:
            names.append(evt.key)
    return names


def import_torch():
    """``import torch`` (no CUDA call: torch initialises CUDA on its first use). Raises
    WorkerError (exit 2) when it is not installed. A template's ``prepare``."""
    try:
        import torch  # heavy optional library: imported only in the child process
    except ImportError:
        raise WorkerError(MISSING, 2) from None
    return torch


def run(shape=DEFAULT_SHAPE, block: bool = False, warmup: int = 3, repetitions: int = 10, device: int = 0,
        seed: int = 0, phases: Phases | None = None) -> dict:
    """Warm up, time ``repetitions`` calls, profile one, digest the output.

    Args:
        phases: the phase clock (:data:`capshim.bench.workloads.phases.TORCH_PHASES`); default
            one started now.

    Returns:
        The JSON object described in the module docstring.

    Raises:
        WorkerError: torch missing (exit 2), no CUDA device or a bad ``--device`` (exit 1 / 2),
            a non-finite output (exit 1).
    """
    phases = phases if phases is not None else Phases(names=TORCH_PHASES)
    torch = import_torch()
    phases.mark("imports")
    if not torch.cuda.is_available():
        raise WorkerError("PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    if not 0 <= device < count:
        raise WorkerError(f"--device {device}: PyTorch sees {count} CUDA device(s) (0..{count - 1})", 2)
    major, minor = torch.cuda.get_device_capability(device)
    name = torch.cuda.get_device_name(device)
    phases.mark("cuda_init")
    with torch.no_grad():
        call = _make_call(torch, shape, block, device, seed)
        torch.cuda.synchronize()
        phases.mark("inputs")
        for _ in range(warmup):
            call()
        torch.cuda.synchronize()
        phases.mark("warmup")
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1000.0)
        phases.mark("measure")
        kernels = _kernels(torch, call)
        phases.mark("profile")
        flat = call().float().reshape(-1)
    n = flat.numel()
    step = max(1, n // OUTPUT_SAMPLES)
    output = [round(float(v), 6) for v in flat[::step][:OUTPUT_SAMPLES].tolist()]
    checksum, abs_sum = float(flat.sum().item()), float(flat.abs().sum().item())
    if not (math.isfinite(checksum) and math.isfinite(abs_sum)):
        raise WorkerError("the attention output has non-finite values")
    backend = attest.sdpa_backend(kernels)
    flops = flops_per_call(shape, block)
    torch_version = str(getattr(torch, "__version__", "?"))
    cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
    fields = {"capability": f"{major}.{minor}", "sdpa": backend,
              "kernel": attest.sdpa_kernel(kernels) or "none", "torch": torch_version}
    # one line: a '|' or a line break inside a name would split it
    line = f"torch-sdpa: device {device} = {_one_field(name)} | " + \
        " | ".join(f"{k}: {_one_field(v)}" for k, v in fields.items())
    print(line, file=sys.stderr, flush=True)
    phases.mark("output")
    record = phases.record()
    print(f"{PROG}: phases " + json.dumps({**record, "forked": bool(os.environ.get(FORKED_VAR))}),
          file=sys.stderr, flush=True)
    return {"workload": "torch-sdpa", "torch_version": torch_version, "cuda_version": cuda_version,
            "device": device, "device_name": name, "capability": [major, minor], "shape": list(shape),
            "block": block, "dtype": "float16", "flops_per_call": flops, "warmup": warmup,
            "repetitions": repetitions, "samples_ms": samples,
            "tflops": [flops / (ms / 1000.0) / 1e12 for ms in samples],
            "median_ms": statistics.median(samples), "sdpa_backend": backend, "kernels": kernels,
            "path": attest.parse_path(line), "output": output, "checksum": checksum, "abs_sum": abs_sum,
            "capshim_phases": record}


def main(argv: list[str] | None = None, phases: Phases | None = None) -> int:
    """Command-line entry: print the result JSON on stdout; return the exit code.

    ``phases``: the phase clock (a template's child passes none: started at the fork then);
    default started at this module's import, ``python_start`` from the process's age."""
    phases = phases if phases is not None else process_clock(_T_MODULE, TORCH_PHASES)
    ap = argparse.ArgumentParser(prog=PROG, description="Time PyTorch's scaled-dot-product attention on CUDA.")
    ap.add_argument("--shape", default="x".join(map(str, DEFAULT_SHAPE)),
                    help="BxHxSxD: batch, heads, sequence length, head dimension (default 8x32x4096x128)")
    ap.add_argument("--block", action="store_true", help="a small transformer block around the attention")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    ap.add_argument("--repetitions", type=int, default=10, help="timed calls (default 10)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    args = ap.parse_args(argv)
    try:
        shape = parse_shape(args.shape)
    except ValueError as exc:
        print(f"{PROG}: error: --shape {exc}", file=sys.stderr)
        return 2
    if args.warmup < 0 or args.repetitions < 1:
        print(f"{PROG}: error: --warmup must be >= 0 and --repetitions >= 1", file=sys.stderr)
        return 2
    try:
        result = run(shape, args.block, args.warmup, args.repetitions, args.device, args.seed, phases)
    except WorkerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (RuntimeError, MemoryError) as exc:  # CUDA errors (out of memory, a bad device) reach us as these
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"{PROG}: error: PyTorch failed: {first[:300]}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    if os.environ.get(TEMPLATE_FD_VAR):
        from capshim.bench.workloads.template import serve

        sys.exit(serve(main, import_torch))
    sys.exit(main())
