"""The CUDA shim's test harness: the built shim and stand-ins (``capshim build``'s, or an
AddressSanitizer build), the test driver ``tests/native/cuda/cuda_paths.c`` compiled against
the stand-ins, and a runner that starts each case in its own process with its own environment.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from capshim.backends import cuda
from capshim.native import build as nb
from capshim.native.build import run_compiler

HERE = Path(__file__).resolve().parent / "cuda"
#: The answers of the stand-in H200 (native/cuda/standin_cuda.c).
H200 = {1: 1024, 8: 49152, 12: 65536, 16: 132, 38: 62914560, 39: 2048, 75: 9, 76: 0, 81: 233472, 82: 65536,
        97: 232448, 200: 1200}
#: t4-class over the stand-in H200: min(device, profile) for every attribute (200 is no key: untouched).
T4 = {**H200, 16: 40, 38: 4194304, 39: 1024, 75: 7, 76: 5, 81: 65536, 97: 65536}
PATHS = ["direct", "dlsym", "procaddr", "procaddr_v2", "procaddr_self", "entry", "entry_ptsz", "entry_version",
         "entry_version_ptsz"]


def libasan() -> str:
    """The path of gcc's AddressSanitizer runtime (it must come first in LD_PRELOAD)."""
    return subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()


def compile_driver(b: cuda.CudaBuild, dest: Path, sanitize: bool = False) -> Path:
    """``cuda_paths`` linked against the stand-ins of ``b`` (rpath), into ``dest``."""
    out = dest / "cuda_paths"
    san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"] if sanitize else []
    run_compiler(["gcc", "-std=gnu11", "-O1", "-g", *nb.WARNINGS, *san, "-I", str(nb.source_dir("cuda")),
                  str(HERE / "cuda_paths.c"), "-o", str(out), f"-L{b.standin}", "-l:libcudart.so.13",
                  "-l:libcuda.so.1", f"-Wl,-rpath,{b.standin}", "-ldl"])
    return out


@dataclass
class Result:
    """One run of the driver: exit code, its JSON lines, the shim's status events, stderr."""

    rc: int
    lines: list[dict]
    events: list[dict]
    stderr: str

    def of(self, event: str) -> list[dict]:
        """The status events named ``event``."""
        return [e for e in self.events if e.get("event") == event]

    def path(self, name: str) -> dict:
        """The driver's line for ``name``."""
        return next(line for line in self.lines if line["path"] == name)


@dataclass
class Harness:
    """Runs ``cuda_paths`` with or without the shim, one fresh process per call."""

    build: cuda.CudaBuild
    driver: Path
    tmp: Path
    preload_first: list[str] = field(default_factory=list)
    runs: int = 0

    def config(self, text: str) -> Path:
        """A configuration file with ``text``."""
        self.runs += 1
        path = self.tmp / f"cfg-{self.runs}.cfg"
        path.write_text(text)
        return path

    def run(self, args: list[str], config: str | Path | None = None, env: dict | None = None,
            shim: bool = True) -> Result:
        """``cuda_paths ARGS`` with the shim (``config``: text, or a path) or stock."""
        self.runs += 1
        status = self.tmp / f"status-{self.runs}.jsonl"
        full = {k: v for k, v in os.environ.items() if not k.startswith("CAPSHIM_") and k != "LD_PRELOAD"}
        full.update({"CAPSHIM_STATUS_FILE": str(status), "CAPSHIM_QUIET": "1"})
        if shim:
            path = config if isinstance(config, Path) else self.config(config or "direction=lower\n")
            full["LD_PRELOAD"] = ":".join([*self.preload_first, str(self.build.library)])
            full[cuda.CONFIG_VAR] = str(path)
        full.update(env or {})
        proc = subprocess.run([str(self.driver), *args], env=full, capture_output=True, text=True, timeout=120)
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        events = [json.loads(line) for line in status.read_text().splitlines()] if status.exists() else []
        assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr
        return Result(proc.returncode, lines, events, proc.stderr)


def attrs(line: dict) -> dict[int, int]:
    """attribute -> value of a driver line (asserting every call succeeded)."""
    out = {}
    for k, (rc, v) in ((k, v) for k, v in line.items() if k.startswith("attr")):
        assert rc == 0, (k, rc)
        out[int(k[4:])] = v
    return out
