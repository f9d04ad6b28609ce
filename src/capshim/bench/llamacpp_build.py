"""Build a real ``llama-bench`` (CPU backend) from the llama.cpp source that the
``llama-cpp-python`` source distribution on PyPI carries, and cache it.

Used by the tests (real llama-bench output as parser fixtures) and usable by
anyone who wants a workload binary on a machine without one.

Source of the facts: the ``llama-cpp-python`` sdist vendors llama.cpp under
``vendor/llama.cpp`` (with a ``.git`` file, so build-info may read ``unknown``);
llama.cpp's CMake target for the bench tool is ``llama-bench``
(``tools/llama-bench/CMakeLists.txt``).

Cache layout (``~/.cache/capshim/llama-bench/`` unless ``cache_dir`` or
``CAPSHIM_CACHE_DIR`` says otherwise)::

    <cache>/llama-cpp-python-<version>/sdist/llama_cpp_python-<version>.tar.gz
    <cache>/llama-cpp-python-<version>/src/...          unpacked source
    <cache>/llama-cpp-python-<version>/build/...        cmake build tree
    <cache>/llama-cpp-python-<version>/llama-bench      the cached binary
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from capshim import paths
from capshim.errors import BuildError

#: The pinned ``llama-cpp-python`` release whose vendored llama.cpp we build.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"

#: CMake configure flags: CPU backend only, portable code, no network code.
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
]


def default_cache_dir() -> Path:
    """``llama-bench/`` under the cache root (:func:`capshim.paths.cache_root`)."""
    return paths.cache_root() / "llama-bench"


def _say(msg: str) -> None:
    print(f"capshim: llama-bench build: {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], cwd: Path | None = None, log: Path | None = None) -> None:
    _say("$ " + " ".join(cmd))
    with open(log, "ab") if log else open(os.devnull, "wb") as fh:
        proc = subprocess.run(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = ""
        if log and log.exists():
            tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"command failed (exit {proc.returncode}): {' '.join(cmd)}"
                         + (f"; log: {log}" if log else "") + tail)


def _download_sdist(version: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    _say(f"downloading the llama-cpp-python {version} source distribution from PyPI (about 75 MB)")
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          f"llama-cpp-python=={version}", "-d", str(dest)],
         log=dest / "pip-download.log")
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise BuildError(f"pip download left no llama_cpp_python-{version}.tar.gz in {dest}")
    return found[0]


def _unpack(sdist: Path, dest: Path) -> Path:
    root = dest / sdist.name[: -len(".tar.gz")]
    llama = root / "vendor" / "llama.cpp"
    if (llama / "CMakeLists.txt").exists():
        return llama
    _say(f"unpacking {sdist.name}")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        tf.extractall(tmp, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    if not (llama / "CMakeLists.txt").exists():
        raise BuildError(f"{sdist} carries no vendor/llama.cpp/CMakeLists.txt")
    return llama


def ensure_llama_bench(cache_dir: Path | str | None = None, *,
                       version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int = 2) -> Path:
    """Return the path of a cached ``llama-bench`` binary, building it first if needed.

    Steps (each skipped when its output is already cached): ``pip download
    --no-deps --no-binary :all: llama-cpp-python==VERSION``; unpack; ``cmake``
    configure with :data:`CMAKE_FLAGS`; ``cmake --build --target llama-bench
    -j JOBS``; copy the binary to ``<cache>/llama-cpp-python-VERSION/llama-bench``.
    Progress lines go to stderr. A cold build takes minutes (2 cores).

    Args:
        cache_dir: cache root; default :func:`default_cache_dir`.
        version: the ``llama-cpp-python`` release (default pinned).
        jobs: parallel compile jobs.

    Returns:
        Path to an executable ``llama-bench`` (statically linked to ggml/llama).

    Raises:
        BuildError: pip, cmake or the compiler failed (message names the command
            and the log file with its last lines), or ``cmake`` is missing.
    """
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    work = root / f"llama-cpp-python-{version}"
    binary = work / "llama-bench"
    if binary.exists() and os.access(binary, os.X_OK):
        return binary
    if shutil.which("cmake") is None:
        raise BuildError("cmake not found on PATH: install cmake and build-essential (setup.sh does)")
    t0 = time.monotonic()
    sdist = _download_sdist(version, work / "sdist")
    src = _unpack(sdist, work / "src")
    build = work / "build"
    log = work / "build.log"
    if not (build / "CMakeCache.txt").exists():
        _say(f"configuring {src} (log: {log})")
        _run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], log=log)
    _say(f"compiling the llama-bench target with -j{jobs} (a few minutes; log: {log})")
    _run(["cmake", "--build", str(build), "--target", "llama-bench", "-j", str(jobs)], log=log)
    built = build / "bin" / "llama-bench"
    if not built.exists():
        raise BuildError(f"cmake finished but {built} is missing; see {log}")
    tmp = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.rename(binary)
    _say(f"cached {binary} ({time.monotonic() - t0:.0f} s)")
    return binary


if __name__ == "__main__":  # pragma: no cover
    print(ensure_llama_bench())
