"""A test stand-in for the CUDA backend and its keys, for the bench tests of the torch-sdpa workload.

The real backend (``capshim.backends.cuda``), its keys in the capability table and its shim come
from the cudacore branch (issue 22); until they land, :func:`install` registers this module as
the ``cuda`` backend and adds the keys of the spec to the catalog, for one test. Once the real
table has ``cuda`` keys, :func:`install` leaves the catalog alone and only the backend is this one.

The fake shim: :meth:`FakeCudaBackend.launch_env` writes the status events a loaded shim writes
(``loaded``, ``config`` accepted, ``hooks``) and sets ``CAPSHIM_STANDIN_CAPABILITY`` to the lowered
compute capability, which the stand-in ``torch`` (tests/fixtures/torch_standin) reports. With
:attr:`FakeCudaBackend.reach` False it writes the same events but sets nothing: a shim that loads
and hooks, yet never reaches what the application asks (the inert case the bench must catch).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from capshim.backends import REGISTRY, Backend
from capshim.profiles import catalog

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "torch_standin"
SRC = Path(__file__).resolve().parents[2] / "src"

#: The spec's keys (cuda-spec.md "Keys"): key -> (type, kind).
KEYS = {"computeCapability": ("u32", "upper"), "multiProcessorCount": ("u32", "upper"),
        "sharedMemPerBlock": ("u64", "upper"), "sharedMemPerMultiprocessor": ("u64", "upper"),
        "sharedMemPerBlockOptin": ("u64", "upper"), "regsPerBlock": ("u32", "upper"),
        "maxThreadsPerBlock": ("u32", "upper"), "l2CacheSize": ("u64", "upper")}
#: What the fake H200 answers (the H200's own numbers, issue 22 probe).
STOCK = {"computeCapability": 90, "multiProcessorCount": 132, "sharedMemPerBlock": 49152,
         "sharedMemPerMultiprocessor": 233472, "sharedMemPerBlockOptin": 232448, "regsPerBlock": 65536,
         "maxThreadsPerBlock": 1024, "l2CacheSize": 62914560}


class FakeCudaBackend(Backend):
    """The ``cuda`` backend of the tests (module docstring)."""

    name = "cuda"
    shim_label = "the CUDA shim (test stand-in)"
    platforms = ("linux",)
    reach = True

    def unavailable(self):
        return None

    def build(self, force=False):
        return {}

    def launch_env(self, profile, simulate, status_file, run_dir, inherit=False, quiet=False):
        if profile is None:
            return {}
        events = [{"event": "loaded"}, {"event": "config", "accepted": True, "profile": profile.name},
                  {"event": "hooks", "installed": ["cudaGetDeviceProperties", "cudaDeviceGetAttribute"]}]
        with open(status_file, "a", encoding="utf-8") as fh:
            for ev in events:
                fh.write(json.dumps({"schema": 1, "shim": "cuda", "pid": os.getpid(), **ev}) + "\n")
        env = {"CAPSHIM_FAKE_CUDA_PROFILE": profile.name}
        if self.reach:
            cc = min(STOCK["computeCapability"], profile.capabilities.get("computeCapability", 1 << 30))
            env["CAPSHIM_STANDIN_CAPABILITY"] = f"{cc // 10}.{cc % 10}"
        return env

    def requested_shims(self, profile, simulate):
        return ["cuda"] if profile is not None else []

    def probe(self, profile=None, simulate=None, device=0, compare=False):
        return self.stock_answers(device)

    def verify(self, shim=None):
        return []

    def stock_answers(self, device=0):
        return {"device": {"name": os.environ.get("CAPSHIM_STANDIN_DEVICE_NAME", "NVIDIA H200")},
                "capabilities": dict(STOCK), "extensions": {}}


BACKEND = FakeCudaBackend()


def install(monkeypatch, reach: bool = True) -> None:
    """Register the fake backend (and the spec's keys when the table has none) for one test, and put the
    stand-in torch on this process's path (the plan looks for it) and on the workers' PYTHONPATH."""
    monkeypatch.setitem(REGISTRY, "cuda", __name__)
    monkeypatch.setattr(FakeCudaBackend, "reach", reach)
    if "cuda" not in catalog.KEYS:
        monkeypatch.setitem(catalog.KEYS, "cuda", {k: t for k, (t, _) in KEYS.items()})
        monkeypatch.setitem(catalog.KINDS, "cuda", {k: kind for k, (_, kind) in KEYS.items()})
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), str(STANDIN)]))
    for var in ("CAPSHIM_CUDA_RUNTIME", "CAPSHIM_STANDIN_CAPABILITY", "CAPSHIM_STANDIN_WRONG"):
        monkeypatch.delenv(var, raising=False)


def profile_file(folder: Path, name: str, cc: int, direction: str = "lower") -> Path:
    """A CUDA profile file answering compute capability ``cc`` (major*10+minor)."""
    p = folder / f"{name}.toml"
    p.write_text(f'name = "{name}"\napi = "cuda"\ndirection = "{direction}"\nversion = 1\n'
                 f'description = "test: compute capability {cc // 10}.{cc % 10}"\n\n'
                 f'[capabilities]\ncomputeCapability = {cc}\nmultiProcessorCount = 40\n', encoding="utf-8")
    return p
