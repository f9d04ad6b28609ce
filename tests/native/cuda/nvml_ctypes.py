"""Asks NVML through Python, one JSON line on stdout: ``ctypes`` (pynvml's way, by hand: CDLL of
libnvidia-ml.so.1, RTLD_LOCAL, then a dlsym per function on that handle) or ``pynvml`` (the
nvidia-ml-py package itself). Run by tests/native/test_nvml_shim.py (and usable on a GPU host).

Usage: python nvml_ctypes.py ctypes|pynvml
Line: {"door", "cc": [major, minor], "name", "sms", "sms_v1", "mib", "arch"}. An NVML that
refuses an optional query (a real GPU answers nvmlDeviceGetAttributes for MIG devices only) gives
"NVML error N" in that field instead of a value.
"""

from __future__ import annotations

import ctypes
import json
import sys


class Attributes(ctypes.Structure):
    """nvmlDeviceAttributes_t (nvml.h; nvidia-ml-py's c_nvmlDeviceAttributes)."""

    _fields_ = [("multiprocessorCount", ctypes.c_uint), ("sharedCopyEngineCount", ctypes.c_uint),
                ("sharedDecoderCount", ctypes.c_uint), ("sharedEncoderCount", ctypes.c_uint),
                ("sharedJpegCount", ctypes.c_uint), ("sharedOfaCount", ctypes.c_uint),
                ("gpuInstanceSliceCount", ctypes.c_uint), ("computeInstanceSliceCount", ctypes.c_uint),
                ("memorySizeMB", ctypes.c_ulonglong)]


def by_ctypes() -> dict:
    lib = ctypes.CDLL("libnvidia-ml.so.1")

    def call(name: str, *args) -> None:
        rc = getattr(lib, name)(*args)
        if rc != 0:
            raise SystemExit(f"{name}: NVML error {rc}")

    call("nvmlInitWithFlags", ctypes.c_uint(0))
    dev = ctypes.c_void_p()
    call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(0), ctypes.byref(dev))
    major, minor = ctypes.c_int(), ctypes.c_int()
    call("nvmlDeviceGetCudaComputeCapability", dev, ctypes.byref(major), ctypes.byref(minor))
    name = ctypes.create_string_buffer(96)
    call("nvmlDeviceGetName", dev, name, ctypes.c_uint(96))
    a2, a1, arch = Attributes(), Attributes(), ctypes.c_uint()
    rc2 = lib.nvmlDeviceGetAttributes_v2(dev, ctypes.byref(a2))
    rc1 = lib.nvmlDeviceGetAttributes(dev, ctypes.byref(a1))
    rca = lib.nvmlDeviceGetArchitecture(dev, ctypes.byref(arch))

    def value(rc: int, v: int) -> int | str:
        return v if rc == 0 else f"NVML error {rc}"

    return {"door": "ctypes", "cc": [major.value, minor.value], "name": name.value.decode(),
            "sms": value(rc2, a2.multiprocessorCount), "sms_v1": value(rc1, a1.multiprocessorCount),
            "mib": value(rc2, a2.memorySizeMB), "arch": value(rca, arch.value)}


def by_pynvml() -> dict:
    import pynvml

    pynvml.nvmlInit()
    dev = pynvml.nvmlDeviceGetHandleByIndex(0)
    name = pynvml.nvmlDeviceGetName(dev)

    def ask(fn, field: str | None = None) -> int | str:
        try:
            v = fn(dev)
        except pynvml.NVMLError as exc:
            return f"NVML error {exc.value}"
        return getattr(v, field) if field else v

    out = {"door": "pynvml", "cc": list(pynvml.nvmlDeviceGetCudaComputeCapability(dev)),
           "name": name.decode() if isinstance(name, bytes) else name,
           "sms": ask(pynvml.nvmlDeviceGetAttributes_v2, "multiprocessorCount"),
           "sms_v1": ask(pynvml.nvmlDeviceGetAttributes, "multiprocessorCount"),
           "mib": ask(pynvml.nvmlDeviceGetAttributes_v2, "memorySizeMB"),
           "arch": ask(pynvml.nvmlDeviceGetArchitecture)}
    pynvml.nvmlShutdown()
    return out


if __name__ == "__main__":
    print(json.dumps(by_pynvml() if sys.argv[1:] == ["pynvml"] else by_ctypes()))
