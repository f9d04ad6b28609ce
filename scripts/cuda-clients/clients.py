"""One CUDA client asked what device it sees: run as its own process, under `capshim run` or stock.

Usage: python3 clients.py CLIENT     (CLIENT: one of CLIENTS below; table.py launches it)

Prints one line ``CAPSHIM-CLIENT {json}`` as the last line of stdout:
``{"client", "version", "facts": {fact: {"value": v} | {"error": text}}}``, or
``{"client", "installed": false, "why": text}`` when the client's package is missing.
The facts use capshim's key names (docs/cuda.md): ``computeCapability`` (major * 10 +
minor), ``multiProcessorCount``, ``sharedMemPerBlockOptin``, ``sharedMemPerMultiprocessor``,
``deviceName``. A client that has no way to read a fact leaves it out (the table says so).

Standard library only, and nothing of capshim: each client is a program nobody here wrote,
asked through its own public API (the versions the H200 image carries: PyTorch 2.11,
Triton 3.6, CuPy, numba-cuda, cuda.core, JAX, nvidia-ml-py).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

MARK = "CAPSHIM-CLIENT "


def _cc(major, minor) -> int:
    return int(major) * 10 + int(minor)


def _text(v) -> str:
    return v.decode("utf-8", "replace").rstrip("\0") if isinstance(v, (bytes, bytearray)) else str(v)


class Facts:
    """The facts of one client: each read on its own, an exception kept as that fact's error."""

    def __init__(self):
        self.out: dict[str, dict] = {}

    def read(self, fact: str, fn) -> None:
        try:
            self.out[fact] = {"value": fn()}
        except Exception as exc:  # noqa: BLE001 - a client's failure is the cell's content
            self.out[fact] = {"error": f"{type(exc).__name__}: {exc}"[:400]}


def torch_client(f: Facts) -> str:
    import torch
    cc = torch.cuda.get_device_capability(0)
    f.read("computeCapability", lambda: _cc(*cc))
    p = torch.cuda.get_device_properties(0)
    f.read("multiProcessorCount", lambda: int(p.multi_processor_count))
    f.read("deviceName", lambda: str(p.name))
    f.read("sharedMemPerBlockOptin", lambda: int(p.shared_memory_per_block_optin))
    f.read("sharedMemPerMultiprocessor", lambda: int(p.shared_memory_per_multiprocessor))
    return f"{torch.__version__} (CUDA {torch.version.cuda})"


def triton_client(f: Facts) -> str:
    import triton
    from triton.runtime import driver
    target = driver.active.get_current_target()
    f.read("computeCapability", lambda: int(target.arch))
    props = driver.active.utils.get_device_properties(driver.active.get_current_device())
    f.read("multiProcessorCount", lambda: int(props["multiprocessor_count"]))
    f.read("sharedMemPerBlockOptin", lambda: int(props["max_shared_mem"]))
    return triton.__version__


def cupy_client(f: Facts) -> str:
    import cupy
    f.read("computeCapability", lambda: int(cupy.cuda.Device(0).compute_capability))
    p = cupy.cuda.runtime.getDeviceProperties(0)
    f.read("multiProcessorCount", lambda: int(p["multiProcessorCount"]))
    f.read("deviceName", lambda: _text(p["name"]))
    f.read("sharedMemPerBlockOptin", lambda: int(p["sharedMemPerBlockOptin"]))
    f.read("sharedMemPerMultiprocessor", lambda: int(p["sharedMemPerMultiprocessor"]))
    return cupy.__version__


def numba_client(f: Facts) -> str:
    from numba import cuda
    d = cuda.get_current_device()
    f.read("computeCapability", lambda: _cc(*d.compute_capability))
    f.read("multiProcessorCount", lambda: int(d.MULTIPROCESSOR_COUNT))
    f.read("deviceName", lambda: _text(d.name))
    f.read("sharedMemPerBlockOptin", lambda: int(d.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    f.read("sharedMemPerMultiprocessor", lambda: int(d.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR))
    try:
        from importlib.metadata import version
        return f"numba-cuda {version('numba-cuda')}"
    except Exception:  # noqa: BLE001 - numba's own CUDA target (before numba-cuda was split out)
        import numba
        return f"numba {numba.__version__}"


def cuda_core_client(f: Facts) -> str:
    try:
        from cuda.core import Device
    except ImportError:
        from cuda.core.experimental import Device
    d = Device(0)
    f.read("computeCapability", lambda: _cc(*tuple(d.compute_capability)))
    p = d.properties
    f.read("multiProcessorCount", lambda: int(p.multiprocessor_count))
    f.read("deviceName", lambda: _text(d.name))
    f.read("sharedMemPerBlockOptin", lambda: int(p.max_shared_memory_per_block_optin))
    f.read("sharedMemPerMultiprocessor", lambda: int(p.max_shared_memory_per_multiprocessor))
    import cuda.core
    return getattr(cuda.core, "__version__", "?")


def jax_client(f: Facts) -> str:
    import jax
    d = jax.devices("gpu")[0]
    f.read("computeCapability", lambda: _cc(*str(d.compute_capability).split(".")))
    f.read("deviceName", lambda: str(d.device_kind))
    if hasattr(d, "core_count"):
        f.read("multiProcessorCount", lambda: int(d.core_count))
    return jax.__version__


def pynvml_client(f: Facts) -> str:
    import pynvml
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoDoor(f"no NVML here (nvmlInit: {exc})") from None
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    f.read("computeCapability", lambda: _cc(*pynvml.nvmlDeviceGetCudaComputeCapability(h)))
    f.read("deviceName", lambda: _text(pynvml.nvmlDeviceGetName(h)))
    f.read("multiProcessorCount", lambda: int(pynvml.nvmlDeviceGetAttributes_v2(h).multiprocessorCount))
    try:
        from importlib.metadata import version
        return f"nvidia-ml-py {version('nvidia-ml-py')}"
    except Exception:  # noqa: BLE001 - pynvml from another distribution
        return "?"


#: cudaDeviceGetAttribute numbers (CUDA's cudaDeviceAttr, stable since CUDA 9).
_ATTRS = {"multiProcessorCount": 16, "sharedMemPerMultiprocessor": 81, "sharedMemPerBlockOptin": 97}


def ctypes_client(f: Facts) -> str:
    """The runtime through ctypes (dlopen RTLD_LOCAL + dlsym), as a plain Python program would."""
    import ctypes
    rt = None
    for name in ("libcudart.so.13", "libcudart.so.12"):
        try:
            rt = ctypes.CDLL(name)
            break
        except OSError as exc:
            err = exc
    if rt is None:
        raise NoDoor(f"no libcudart.so.13 or .12 here ({err})")
    ver = ctypes.c_int()
    rt.cudaRuntimeGetVersion(ctypes.byref(ver))

    def attr(n):
        v = ctypes.c_int()
        rc = rt.cudaDeviceGetAttribute(ctypes.byref(v), n, 0)
        if rc != 0:
            raise RuntimeError(f"cudaDeviceGetAttribute({n}) returned {rc}")
        return v.value

    f.read("computeCapability", lambda: _cc(attr(75), attr(76)))
    for fact, n in _ATTRS.items():
        f.read(fact, lambda n=n: attr(n))

    def name():
        buf = ctypes.create_string_buffer(4096)  # name is char[256] at offset 0 in every layout
        fn = rt.cudaGetDeviceProperties if ver.value >= 13000 else rt.cudaGetDeviceProperties_v2
        rc = fn(buf, 0)
        if rc != 0:
            raise RuntimeError(f"cudaGetDeviceProperties returned {rc}")
        return _text(buf.raw[:256].split(b"\0", 1)[0])

    f.read("deviceName", name)
    return f"runtime {ver.value}"


def ext_client(f: Facts) -> str:
    """The C extension module (cuda_clients_ext.c), built by table.py, imported normally (RTLD_LOCAL)."""
    folder = os.environ.get("CAPSHIM_CLIENTS_EXT_DIR")
    if not folder:
        raise NoDoor("CAPSHIM_CLIENTS_EXT_DIR is not set (table.py builds the module)")
    if os.environ.get("CAPSHIM_CLIENTS_EXT_MODE") == "library":  # no Python.h where it was built
        import ctypes
        lib = ctypes.CDLL(os.path.join(folder, "libcuda_clients_ext.so"))  # RTLD_LOCAL, as an import
        buf = ctypes.create_string_buffer(4096)
        if lib.cuda_clients_query(0, buf, len(buf)) != 0:
            raise RuntimeError("cuda_clients_query: the answer did not fit")
        got = json.loads(buf.value.decode())
        got["layout"] += ", loaded with ctypes.CDLL"
    else:
        sys.path.insert(0, folder)
        import cuda_clients_ext as ext
        got = ext.query(0)
    props, attrs = got["props"], got["attrs"]

    def from_props(fact, key):
        if got["props_rc"] != 0:
            raise RuntimeError(f"cudaGetDeviceProperties returned {got['props_rc']}")
        return props[key]

    def from_attr(fact, *keys):
        rcs = [attrs[k][0] for k in keys]
        if any(rcs):
            raise RuntimeError(f"cudaDeviceGetAttribute returned {max(rcs, key=abs)}")
        return [attrs[k][1] for k in keys]

    f.read("computeCapability", lambda: _cc(from_props(0, "major"), from_props(0, "minor")))
    f.read("multiProcessorCount", lambda: from_props(0, "multiProcessorCount"))
    f.read("deviceName", lambda: from_props(0, "name"))
    f.read("sharedMemPerBlockOptin", lambda: from_props(0, "sharedMemPerBlockOptin"))
    f.read("sharedMemPerMultiprocessor", lambda: from_props(0, "sharedMemPerMultiprocessor"))
    # the same facts through cudaDeviceGetAttribute, a second door of the same runtime
    f.read("computeCapability (attribute)", lambda: _cc(*from_attr(0, "major", "minor")))
    f.read("multiProcessorCount (attribute)", lambda: from_attr(0, "multiProcessorCount")[0])
    return f"runtime {got['runtime_version']} (struct read with {got['layout']})"


class NoDoor(Exception):
    """The client is installed but has no way to the device here (no NVML, no runtime): the reason."""


#: client name (as the table names it) -> (the import that says whether it is installed, function).
CLIENTS = {
    "torch": ("torch", torch_client),
    "triton": ("triton", triton_client),
    "cupy": ("cupy", cupy_client),
    "numba-cuda": ("numba.cuda", numba_client),
    "cuda-core": ("cuda.core", cuda_core_client),
    "jax": ("jax", jax_client),
    "pynvml": ("pynvml", pynvml_client),
    "ctypes": ("ctypes", ctypes_client),
    "ext": ("ctypes", ext_client),
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in CLIENTS:
        print(f"usage: clients.py CLIENT (one of {', '.join(CLIENTS)})", file=sys.stderr)
        return 2
    name = argv[0]
    module, fn = CLIENTS[name]
    out: dict = {"client": name}
    try:
        importlib.import_module(module)
    except ImportError as exc:
        out.update(installed=False, why=f"not installed ({type(exc).__name__}: {exc})"[:300])
        print(MARK + json.dumps(out), flush=True)
        return 0
    f = Facts()
    try:
        out["version"] = fn(f)
    except NoDoor as exc:
        out["why"] = str(exc)[:400]
    except Exception as exc:  # noqa: BLE001 - the client failed before reading every fact: say where
        out["why"] = f"{type(exc).__name__}: {exc}"[:400]
        traceback.print_exc()
    out["facts"] = f.out
    print(MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
