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
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from capshim.contracts import pasteable
from capshim import paths
from capshim.errors import BuildError
from capshim.contracts import messages

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
    messages.emit(f"llama-bench build: {msg}")


#: Seconds between two progress lines of a long build step (at most; a new tenth of the build sooner).
PROGRESS_EVERY_S = 30.0
_PERCENT = re.compile(rb"^\[\s*(\d{1,3})%\]")


def _run(cmd: list[str], cwd: Path | None = None, log: Path | None = None, say=_say) -> None:
    """Run ``cmd`` with its output appended to ``log``; say what runs, and how far a long step is.

    CMake's ``[ NN%]`` lines give the progress: ``say`` gets a line at each new tenth and at least
    every :data:`PROGRESS_EVERY_S` seconds (the build is minutes of silence otherwise).
    """
    say("$ " + pasteable.command(*cmd))  # runs as printed, a path with a space included
    t0 = last = time.monotonic()
    shown = -10
    with open(log, "ab") if log else open(os.devnull, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        pct = None
        for line in proc.stdout:
            fh.write(line)
            m = _PERCENT.match(line)
            pct = int(m.group(1)) if m else pct
            now = time.monotonic()
            if pct is not None and (pct >= shown + 10 or now - last >= PROGRESS_EVERY_S):
                say(f"{pct}% after {now - t0:.0f} s")
                shown, last = pct, now
        proc.wait()
    if proc.returncode != 0:
        tail = ""
        if log and log.exists():
            tail = "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"command failed (exit {proc.returncode}): {' '.join(cmd)}"
                         + (f"; log: {log}" if log else "") + tail)


def _download_sdist(version: str, dest: Path, say=_say) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    say(f"downloading the llama-cpp-python {version} source distribution from PyPI (about 75 MB)")
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          f"llama-cpp-python=={version}", "-d", str(dest)],
         log=dest / "pip-download.log", say=say)
    found = sorted(dest.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise BuildError(f"pip download left no llama_cpp_python-{version}.tar.gz in {dest}")
    return found[0]


def _refuse_unsafe(member: tarfile.TarInfo, into: Path, sdist: Path) -> None:
    """What tarfile's "data" filter refuses (PEP 706), for a Python without it: a member or a link
    target outside ``into``, an absolute path, a device or FIFO.

    Raises:
        BuildError: naming the archive and the member.
    """
    root = into.resolve()
    target = (root / member.name).resolve()
    bad = member.name.startswith("/") or not target.is_relative_to(root)
    if member.issym() or member.islnk():
        base = target.parent if member.issym() else root
        bad = bad or member.linkname.startswith("/") or not (base / member.linkname).resolve().is_relative_to(root)
    if bad or member.isdev() or member.isfifo():
        raise BuildError(f"{sdist}: refusing to unpack {member.name!r} (outside the folder, a device or a FIFO)")


def _unpack(sdist: Path, dest: Path, say=_say) -> Path:
    root = dest / sdist.name[: -len(".tar.gz")]
    llama = root / "vendor" / "llama.cpp"
    if (llama / "CMakeLists.txt").exists():
        return llama
    say(f"unpacking {sdist.name}")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(tmp, filter="data")
        else:  # Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters: the same refusals by hand
            for member in tf.getmembers():
                _refuse_unsafe(member, tmp, sdist)
            tf.extractall(tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    if not (llama / "CMakeLists.txt").exists():
        raise BuildError(f"{sdist} carries no vendor/llama.cpp/CMakeLists.txt")
    return llama


def ensure_llama_bench(cache_dir: Path | str | None = None, *,
                       version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int = 2, say=_say) -> Path:
    """Return the path of a cached ``llama-bench`` binary, building it first if needed.

    Steps (each skipped when its output is already cached): ``pip download
    --no-deps --no-binary :all: llama-cpp-python==VERSION``; unpack; ``cmake``
    configure with :data:`CMAKE_FLAGS`; ``cmake --build --target llama-bench
    -j JOBS``; copy the binary to ``<cache>/llama-cpp-python-VERSION/llama-bench``.
    Progress lines (each step, and the compile's percentage at least every
    :data:`PROGRESS_EVERY_S` seconds) go to ``say``. A cold build takes minutes (2 cores).

    Args:
        cache_dir: cache root; default :func:`default_cache_dir`.
        version: the ``llama-cpp-python`` release (default pinned).
        jobs: parallel compile jobs.
        say: where progress lines go (default: stderr, ``capshim: llama-bench build: ...``); the
            tests pass one that reaches the terminal through pytest's capture.

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
    sdist = _download_sdist(version, work / "sdist", say)
    src = _unpack(sdist, work / "src", say)
    build = work / "build"
    log = work / "build.log"
    if not (build / "CMakeCache.txt").exists():
        say(f"configuring {src} (log: {log})")
        _run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], log=log, say=say)
    say(f"compiling the llama-bench target with -j{jobs} (a few minutes; log: {log})")
    _run(["cmake", "--build", str(build), "--target", "llama-bench", "-j", str(jobs)], log=log, say=say)
    built = build / "bin" / "llama-bench"
    if not built.exists():
        raise BuildError(f"cmake finished but {built} is missing; see {log}")
    tmp = binary.with_suffix(".tmp")
    shutil.copy2(built, tmp)
    tmp.rename(binary)
    say(f"cached {binary} ({time.monotonic() - t0:.0f} s)")
    return binary


if __name__ == "__main__":  # pragma: no cover
    print(ensure_llama_bench())
