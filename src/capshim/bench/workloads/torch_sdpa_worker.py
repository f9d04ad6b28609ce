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
of shape B x H x S x D (random, seeded); with ``--block`` a small transformer block around it
(QKV projection, attention, output projection, residual, layer norm, a 4x GELU MLP) on
B x S x (H*D). The process warms up (``--warmup`` calls, not timed), times ``--repetitions``
calls (``time.perf_counter`` around the call and ``torch.cuda.synchronize()``), then runs one
more call under ``torch.profiler`` (CUDA activity) to see which kernels ran.

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
     "checksum": float, "abs_sum": float}

Exit codes: 0 success; 1 the workload failed (no CUDA device, a non-finite output, a CUDA error
such as out of memory: its first line); 2 bad
usage or torch not installed. Errors are one line on stderr, ``capshim-torch-sdpa: error: ...``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time

from capshim.bench import attest

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


def _make_call(torch, shape, block: bool, device: int, seed: int):
    """The timed function and the tensors it uses (kept alive by the closure)."""
    F = torch.nn.functional
    b, h, s, d = shape
    # The inputs are drawn on the CPU and copied: PyTorch's CUDA generator sizes its grid from the
    # multiprocessor count, so on the GPU the same seed gives other numbers in an arm that lowers
    # multiProcessorCount (seen on the H200: a100-class's output "differed" by 0.116 from native's).
    gen = torch.Generator().manual_seed(seed)

    def randn(*size):
        return torch.randn(*size, generator=gen, dtype=torch.float32).to(dtype=torch.float16, device=f"cuda:{device}")

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
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    names: list[str] = []
    for evt in prof.key_averages():
        if str(getattr(evt, "device_type", "")).endswith("CUDA") and evt.key not in names:
            names.append(evt.key)
    return names


def run(shape=DEFAULT_SHAPE, block: bool = False, warmup: int = 3, repetitions: int = 10, device: int = 0,
        seed: int = 0) -> dict:
    """Warm up, time ``repetitions`` calls, profile one, digest the output.

    Returns:
        The JSON object described in the module docstring.

    Raises:
        WorkerError: torch missing (exit 2), no CUDA device or a bad ``--device`` (exit 1 / 2),
            a non-finite output (exit 1).
    """
    try:
        import torch  # heavy optional library: imported only in the child process
    except ImportError:
        raise WorkerError(MISSING, 2) from None
    if not torch.cuda.is_available():
        raise WorkerError("PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    if not 0 <= device < count:
        raise WorkerError(f"--device {device}: PyTorch sees {count} CUDA device(s) (0..{count - 1})", 2)
    major, minor = torch.cuda.get_device_capability(device)
    name = torch.cuda.get_device_name(device)
    with torch.no_grad():
        call = _make_call(torch, shape, block, device, seed)
        for _ in range(warmup):
            call()
        torch.cuda.synchronize()
        samples = []
        for _ in range(repetitions):
            t0 = time.perf_counter()
            call()
            torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1000.0)
        kernels = _kernels(torch, call)
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
    return {"workload": "torch-sdpa", "torch_version": torch_version, "cuda_version": cuda_version,
            "device": device, "device_name": name, "capability": [major, minor], "shape": list(shape),
            "block": block, "dtype": "float16", "flops_per_call": flops, "warmup": warmup,
            "repetitions": repetitions, "samples_ms": samples,
            "tflops": [flops / (ms / 1000.0) / 1e12 for ms in samples],
            "median_ms": statistics.median(samples), "sdpa_backend": backend, "kernels": kernels,
            "path": attest.parse_path(line), "output": output, "checksum": checksum, "abs_sum": abs_sum}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the result JSON on stdout; return the exit code."""
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
        result = run(shape, args.block, args.warmup, args.repetitions, args.device, args.seed)
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
    sys.exit(main())
