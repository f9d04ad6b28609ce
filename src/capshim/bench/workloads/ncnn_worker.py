"""The built-in ncnn workload's child program: a synthetic network through ncnn's Vulkan backend.

One process per run. The parent side (the command and its adapter) is
:mod:`capshim.bench.workloads.ncnn`; this module imports only the standard
library, :mod:`capshim.bench.attest` (the capability-line parser) and, inside
the run, ncnn and numpy.

Run as ``python -m capshim.bench.workloads.ncnn_worker [--network tiny|standard]
[--warmup 3] [--repetitions 10] [--device N] [--seed 0]``.

A second real consumer of Vulkan capabilities next to llama.cpp: ncnn
(Tencent's inference engine, the ``ncnn`` pip wheel, Vulkan enabled) picks
fp16/int8/bf16 storage and arithmetic, subgroup operations and cooperative
matrix from what the device answers. The network is synthetic: convolutions
(3x3, ReLU), pooling and fully connected (InnerProduct, i.e. matrix) layers,
weights drawn from a seeded generator (no download), written as an ncnn
``.param``/``.bin`` pair into a temporary folder. The process warms up in
process (``--warmup`` inferences, not timed), then times ``--repetitions``
inferences (``time.perf_counter`` around ``Extractor.input``/``extract``,
which waits for the GPU's result).

ncnn prints one block of capability lines per device on stderr when its GPU
instance is created (ncnn ``src/gpu.cpp``, ``create_gpu_instance``)::

    [0 llvmpipe (LLVM 15.0.6, 256 bits)]  queueC=0[1]  queueT=0[1]  prefer-slm=0  rebar=1  r-score=4
    [0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-p/s/u/a=1/1/1/1  int8-p/s/u/a=1/1/1/1  bf16-p/s=1/0
    [0 llvmpipe (LLVM 15.0.6, 256 bits)]  subgroup=8(8~8)  ops=1/1/1/1/1/1/0/1/0/0
    [0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-cm=0  int8-cm=0  bf16-cm=0  fp8-cm=0  fp6-cm=0  fp4-cm=0

The worker captures them (file descriptor 2 during ``create_gpu_instance``),
writes them on stderr again (so the bench's path attestation reads them as
it reads llama.cpp's line) and parses them into ``"path"`` with
:func:`capshim.bench.attest.parse_ncnn`.

STDOUT gets exactly one JSON object::

    {"workload": "ncnn", "ncnn_version": str, "network": {"preset", "layers", "params", "macs"},
     "device": int, "warmup": int, "repetitions": int,
     "samples_ms": [float, ...],        # per timed inference, milliseconds
     "median_ms": float, "capability_lines": [str], "path": {"ncnn": {...}},
     "output": [float, ...]}            # the network's output of the last inference

Exit codes: 0 success; 1 the workload failed (no Vulkan device, the network
did not load or run); 2 bad usage or ncnn not installed. Errors are one line
on stderr, ``capshim-ncnn: error: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from capshim.bench import attest

PROG = "capshim-ncnn"
MISSING = ("the ncnn workload needs the ncnn Python wheel (Vulkan enabled): "
           "pip install 'capshim[ncnn]' (or pip install ncnn)")

#: Network presets: input (channels, height, width), conv stages [(out channels, stride, pool after)],
#: fully connected widths. "tiny" is for CI on lavapipe (milliseconds); "standard" is compute-heavy
#: (about 4.3 GMAC per inference) for GPUs.
PRESETS = {
    "tiny": {"input": (3, 32, 32), "convs": [(16, 1, False), (16, 1, True)], "fcs": [64, 32]},
    "standard": {"input": (3, 256, 256),
                 "convs": [(64, 2, False), (64, 1, False), (64, 1, False), (64, 1, False), (64, 1, True),
                           (128, 1, False), (128, 1, True), (256, 1, False), (256, 1, False)],
                 "fcs": [4096, 4096, 1000]},
}


class WorkerError(Exception):
    """An expected failure, reported as one line with its exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def build_network(preset: str, seed: int, folder: Path) -> tuple[Path, Path, dict]:
    """Write the synthetic network of ``preset`` as ``net.param`` and ``net.bin`` into ``folder``.

    Format (ncnn wiki "param and model file structure"): the param file is the magic
    ``7767517``, ``layer_count blob_count``, then one line per layer ``Type name
    n_in n_out in... out... key=value...``; in the bin file each Convolution and
    InnerProduct stores its weights as a 4-byte flag (0: float32) followed by the
    float32 values, then its bias as raw float32 (no flag).

    Returns:
        ``(param path, bin path, {"preset", "layers", "params", "macs"})``: parameter count
        and multiply-accumulates per inference.

    Raises:
        WorkerError: unknown preset (exit 2).
    """
    import numpy as np

    if preset not in PRESETS:
        raise WorkerError(f"--network {preset!r}: expected one of {', '.join(PRESETS)}", 2)
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    c, h, w = cfg["input"]
    lines = [f"Input data 0 1 data 0={w} 1={h} 2={c}"]
    chunks: list[bytes] = []
    params = macs = 0
    blob = "data"

    def weights(n: int, fan_in: int) -> bytes:
        # He-style scale keeps activations in range through ReLU layers.
        return (np.zeros(1, np.uint32).tobytes()
                + (rng.standard_normal(n) * np.sqrt(2.0 / fan_in)).astype(np.float32).tobytes())

    for i, (cout, stride, pool) in enumerate(cfg["convs"]):
        n = cout * c * 9
        h, w = (h + stride - 1) // stride, (w + stride - 1) // stride
        lines.append(f"Convolution conv{i} 1 1 {blob} c{i} 0={cout} 1=3 3={stride} 4=1 5=1 6={n} 9=1")
        chunks += [weights(n, c * 9), (rng.standard_normal(cout) * 0.01).astype(np.float32).tobytes()]
        params += n + cout
        macs += n * h * w
        blob, c = f"c{i}", cout
        if pool:
            lines.append(f"Pooling pool{i} 1 1 {blob} p{i} 0=0 1=2 2=2")
            blob, h, w = f"p{i}", h // 2, w // 2
    lines.append(f"Pooling gap 1 1 {blob} gap 0=1 4=1")  # global average pooling -> c values
    blob, width = "gap", c
    for i, out in enumerate(cfg["fcs"]):
        n = out * width
        act = " 9=1" if i < len(cfg["fcs"]) - 1 else ""
        lines.append(f"InnerProduct fc{i} 1 1 {blob} f{i} 0={out} 1=1 2={n}{act}")
        chunks += [weights(n, width), (rng.standard_normal(out) * 0.01).astype(np.float32).tobytes()]
        params += n + out
        macs += n
        blob, width = f"f{i}", out
    text = f"7767517\n{len(lines)} {len(lines)}\n" + "\n".join(lines) + "\n"
    param, binf = folder / "net.param", folder / "net.bin"
    param.write_text(text)
    binf.write_bytes(b"".join(chunks))
    return param, binf, {"preset": preset, "layers": len(lines), "params": params, "macs": macs,
                         "output_blob": blob}


def _capture_fd2(fn):
    """Call ``fn()`` with file descriptor 2 pointed at a temporary file; return (result, text)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", errors="replace")
    return result, text


def run(preset: str = "tiny", warmup: int = 3, repetitions: int = 10, device: int | None = None,
        seed: int = 0) -> dict:
    """Build the network, warm up, time ``repetitions`` inferences on the Vulkan device.

    Returns:
        The JSON object described in the module docstring.

    Raises:
        WorkerError: ncnn missing (exit 2), no Vulkan device, or the network failed (exit 1).
    """
    try:
        import ncnn
    except ImportError:
        raise WorkerError(MISSING, 2) from None
    import numpy as np

    rc, text = _capture_fd2(ncnn.create_gpu_instance)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if text:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    count = ncnn.get_gpu_count()
    if rc != 0 or count < 1:
        raise WorkerError(f"ncnn found no Vulkan device (create_gpu_instance returned {rc}, {count} device(s))")
    dev = ncnn.get_default_gpu_index() if device is None else device
    if not 0 <= dev < count:
        raise WorkerError(f"--device {dev}: ncnn sees {count} Vulkan device(s) (0..{count - 1})", 2)
    path = attest.parse_ncnn(text, device=dev)
    with tempfile.TemporaryDirectory(prefix="capshim-ncnn-") as tmp:
        param, binf, info = build_network(preset, seed, Path(tmp))
        net = ncnn.Net()
        net.opt.use_vulkan_compute = True
        net.set_vulkan_device(dev)
        if net.load_param(str(param)) != 0 or net.load_model(str(binf)) != 0:
            raise WorkerError(f"ncnn could not load the synthetic network ({param})")
        c, h, w = PRESETS[preset]["input"]
        # The Mat wraps the array's memory: keep the array alive as long as the Mat.
        x_arr = np.random.default_rng(seed + 1).standard_normal((c, h, w)).astype(np.float32)
        x = ncnn.Mat(x_arr)

        def infer():
            ex = net.create_extractor()
            if ex.input("data", x) != 0:
                raise WorkerError("ncnn: input failed")
            ret, out = ex.extract(info["output_blob"])
            if ret != 0:
                raise WorkerError(f"ncnn: extract returned {ret}")
            return np.array(out).ravel()

        for _ in range(warmup):
            infer()
        samples = []
        out = None
        for _ in range(repetitions):
            t0 = time.perf_counter()
            out = infer()
            samples.append((time.perf_counter() - t0) * 1000.0)
        net.clear()
        net = None  # ncnn frees the GPU objects before the instance goes
    if not np.all(np.isfinite(out)):
        raise WorkerError("ncnn: the network's output has non-finite values")
    return {"workload": "ncnn", "ncnn_version": getattr(ncnn, "__version__", None), "network": info,
            "device": dev, "warmup": warmup, "repetitions": repetitions, "samples_ms": samples,
            "median_ms": statistics.median(samples), "capability_lines": lines, "path": path,
            "output": [round(float(v), 6) for v in out]}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: print the result JSON on stdout; return the exit code."""
    ap = argparse.ArgumentParser(prog=PROG, description="Time a synthetic network through ncnn's Vulkan backend.")
    ap.add_argument("--network", default="tiny", choices=sorted(PRESETS), help="network preset (default tiny)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed inferences first (default 3)")
    ap.add_argument("--repetitions", type=int, default=10, help="timed inferences (default 10)")
    ap.add_argument("--device", type=int, default=None, help="ncnn Vulkan device index (default ncnn's choice)")
    ap.add_argument("--seed", type=int, default=0, help="weight and input seed (default 0)")
    args = ap.parse_args(argv)
    if args.warmup < 0 or args.repetitions < 1:
        print(f"{PROG}: error: --warmup must be >= 0 and --repetitions >= 1", file=sys.stderr)
        return 2
    try:
        result = run(args.network, args.warmup, args.repetitions, args.device, args.seed)
    except WorkerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
