"""A small seeded mutation fuzzer for the standalone C fuzz drivers (no clang/libFuzzer on Debian's
default toolchain here): deterministic for a seed, bounded by a number of executions (not by time),
and counted, so every CI run reports how many inputs each parser saw.

Mutations (after AFL's havoc stage): flip a byte, insert random bytes, delete a range, insert a
dictionary token, splice in part of another corpus entry, truncate; 1-8 of them stacked.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from pathlib import Path

STATS: list[dict] = []
"""One entry per fuzz campaign of this pytest run: driver, seed, executions, seconds (printed at the end)."""


def mutate(rng: random.Random, corpus: list[bytes], dictionary: list[bytes]) -> bytes:
    """One mutated input from a corpus entry."""
    b = bytearray(rng.choice(corpus))
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 2 and b:
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 3:
            b[pos:pos] = rng.choice(dictionary)
        elif op == 4:
            other = rng.choice(corpus)
            i = rng.randrange(len(other) + 1)
            b[pos:pos] = other[i:i + rng.randint(1, 64)]
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def campaign(driver: Path, workdir: Path, corpus: list[bytes], dictionary: list[bytes], *, seed: int,
             executions: int, batch: int = 500, env: dict | None = None, name: str | None = None) -> list[str]:
    """Run ``driver FILE...`` over ``executions`` seeded mutations, ``batch`` files per process.

    Returns the driver's stdout lines. Fails (AssertionError) on a non-zero exit or any sanitizer
    report, and names the input that was being run. Records the counts in :data:`STATS`.
    """
    rng = random.Random(seed)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith(("ASAN_", "UBSAN_", "LD_PRELOAD"))}
    run_env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    run_env.update(env or {})
    out: list[str] = []
    t0 = time.monotonic()
    for start in range(0, executions, batch):
        files = []
        for i in range(start, min(start + batch, executions)):
            f = workdir / f"in{i}"
            f.write_bytes(mutate(rng, corpus, dictionary))
            files.append(str(f))
        proc = subprocess.run([str(driver), *files], capture_output=True, text=True, env=run_env, timeout=600)
        assert proc.returncode == 0, f"{driver.name} failed on a batch from {files[0]}: {proc.stderr[-3000:]}"
        assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, proc.stderr[-3000:]
        out += proc.stdout.splitlines()
        for f in files:
            Path(f).unlink()
    STATS.append({"driver": name or driver.name, "seed": seed, "executions": executions,
                  "seconds": round(time.monotonic() - t0, 2)})
    return out
