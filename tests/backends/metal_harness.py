"""Sanitized (ASan + UBSan) builds of the Metal shim, the GNU-runtime stand-in,
the test driver and the fuzz driver, and a runner that starts each case in a
fresh child process with its own environment.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from capshim.backends import metal
from capshim.backends.metal import compile as metal_build
from capshim.native.build import run_compiler

HERE = Path(__file__).resolve().parent.parent / "native" / "metal"
SAN = ["-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
       "-fno-omit-frame-pointer"]


def libasan() -> str:
    out = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True)
    return out.stdout.strip()


def build_sanitized(dest: Path) -> dict[str, Path]:
    """Build everything under ``dest`` with the sanitizers; return the paths."""
    metal.compile_into(dest, metal_build._linux_commands(opt=SAN))
    full = dest / "standin" / "full"
    native = str(metal.NATIVE_DIR)
    run_compiler(["gcc", *metal_build.WARN_FLAGS, *SAN, "-I", native, "-I", str(metal_build.SHARED_DIR),
                        str(HERE / "metal_driver.c"), "-L", str(full), "-lcapshim_metal_standin",
                        f"-Wl,--enable-new-dtags,-rpath,{full}", "-rdynamic", "-lobjc", "-ldl", "-lpthread",
                        "-o", str(dest / "driver")])
    run_compiler(["gcc", *metal_build.WARN_FLAGS, *SAN, "-I", native, "-I", str(metal_build.SHARED_DIR),
                  str(HERE / "fuzz_config.c"),
                        str(metal.NATIVE_DIR / "metal_config.c"), "-o", str(dest / "fuzz_config")])
    return {"shim": dest / metal.SO_NAME, "probe": dest / metal_build.PROBE_NAME,
            "standin": full / metal_build.STANDIN_NAME,
            "standin_noprivate": dest / "standin" / "noprivate" / metal_build.STANDIN_NAME,
            "driver": dest / "driver", "fuzz": dest / "fuzz_config", "dir": dest}


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    events: list[dict]

    def devices(self) -> list[dict]:
        return [json.loads(ln) for ln in self.stdout.splitlines() if ln.startswith("{\"device\"")]

    def one(self) -> dict:
        devs = self.devices()
        assert len(devs) == 1, self.stdout
        return devs[0]

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == event]


class Harness:
    """Runs the driver with or without the shim, each call a new process."""

    def __init__(self, arts: dict[str, Path], tmp: Path):
        self.arts = arts
        self.tmp = tmp
        self.asan = libasan()
        self.n = 0

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CAPSHIM_", "LUME_METAL_", "LD_PRELOAD", "ASAN_", "UBSAN_",
                                    "LSAN_", "STANDIN_"))}
        env["ASAN_OPTIONS"] = "detect_leaks=1:fast_unwind_on_malloc=0:exitcode=86"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=87"
        env["LSAN_OPTIONS"] = f"suppressions={HERE / 'lsan.supp'}:print_suppressions=0:exitcode=88"
        env["LD_PRELOAD"] = self.asan
        return env

    def run(self, args: list[str], config: dict[str, str] | None = None, *, shim: bool = True,
            status: bool = True, noprivate: bool = False, extra: dict[str, str] | None = None,
            program: Path | None = None) -> Run:
        self.n += 1
        env = self.base_env()
        status_file = self.tmp / f"status-{self.n}.jsonl"
        if shim:
            env["LD_PRELOAD"] = f"{self.asan}:{self.arts['shim']}"
            env.update(config or {})
            if status:
                env["CAPSHIM_STATUS_FILE"] = str(status_file)
        if noprivate:
            env["LD_LIBRARY_PATH"] = str(self.arts["standin_noprivate"].parent)
        env.update(extra or {})
        r = subprocess.run([str(program or self.arts["driver"]), *args], env=env,
                           capture_output=True, text=True, timeout=120)
        sanitizer = any(s in r.stderr for s in ("AddressSanitizer", "runtime error:",
                                                 "LeakSanitizer"))
        assert not sanitizer, r.stderr
        events = []
        if status_file.exists():
            events = [json.loads(ln) for ln in status_file.read_text().splitlines()]
        return Run(r.returncode, r.stdout, r.stderr, events)
