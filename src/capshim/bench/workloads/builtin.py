"""The built-in llama.cpp workload, parent side: the worker's command, environment and adapter.

The child program is :mod:`capshim.bench.workloads.builtin_worker` (``python -m``
that module; it never imports the bench). It prints llama-bench JSON, so the
runner reads it with :class:`capshim.bench.workloads.llama_bench.LlamaBenchWorkload`.

The worker runs with ``--log-level info`` (llama.cpp's DEBUG lines, except the
device lines, left out of the runs' stderr files);
``CAPSHIM_WORKER_LOG_LEVEL=debug`` keeps them. metadata.json records it as
``workload.log_level``.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from importlib import metadata
from pathlib import Path

from capshim.bench import model as model_mod
from capshim.bench.workloads.builtin_worker import DEFAULT_LOG_LEVEL, LOG_LEVELS
from capshim.bench.workloads.llama_bench import LlamaBenchWorkload
from capshim.bench.workloads.base import Kind
from capshim.contracts.suggest import did_you_mean
from capshim.errors import CapshimError, UsageError

#: The child program, run as ``python -m WORKER_MODULE``.
WORKER_MODULE = "capshim.bench.workloads.builtin_worker"
#: The synthetic models ``--model`` names (:mod:`capshim.bench.model`).
MODEL_PRESETS = tuple(model_mod.PRESETS)



def worker_env(cache_dir: Path | None = None) -> dict[str, str]:
    """Environment variables the bench should set for every worker run.

    ``MESA_SHADER_CACHE_DIR`` points Mesa's on-disk shader cache (used by
    lavapipe, RADV, ANV) at ``<cache_dir>/mesa-shader-cache``, so only the first
    run compiles llama.cpp's Vulkan pipelines (measured on lavapipe, 2 cores,
    tiny model, pp512 + tg128, one repetition: 26 s wall cold, 8-9 s warm, of
    which the warm-up pass is about 4.5 s); ``MESA_SHADER_CACHE_DISABLE=false``
    makes sure it is on. The cache is keyed by the shader and driver, so arms
    that select different shaders do not share wrong entries. NVIDIA's
    driver keeps its own cache (``__GL_SHADER_DISK_CACHE_PATH``), set to
    ``<cache_dir>/nv-shader-cache`` too. ``PYTHONUNBUFFERED=1`` keeps stderr
    lines in order with llama.cpp's.

    Args:
        cache_dir: the capshim cache folder (default ``capshim.bench.model.capshim_cache_dir()``,
            i.e. ``$XDG_CACHE_HOME/capshim``). The sub-folders are created.

    Returns:
        A dict of variable -> value to add to the worker's environment. It does
        not set ``GGML_VK_VISIBLE_DEVICES``: picking the device is the bench's.
    """
    base = Path(cache_dir) if cache_dir is not None else model_mod.capshim_cache_dir()
    mesa = base / "mesa-shader-cache"
    nv = base / "nv-shader-cache"
    for d in (mesa, nv):
        d.mkdir(parents=True, exist_ok=True)
    return {
        "MESA_SHADER_CACHE_DIR": str(mesa),
        "MESA_SHADER_CACHE_DISABLE": "false",
        "__GL_SHADER_DISK_CACHE": "1",
        "__GL_SHADER_DISK_CACHE_PATH": str(nv),
        "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1",
        "PYTHONUNBUFFERED": "1",
    }


def worker_command(
    model: Path | str,
    n_prompt: int = 512,
    n_gen: int = 128,
    repetitions: int = 1,
    threads: int | None = None,
    ngl: int = 99,
    seed: int = 0,
    flash_attn: int = -1,
    python: str | None = None,
    warmup_run: bool = True,
    log_level: str = DEFAULT_LOG_LEVEL,
) -> list[str]:
    """The argv of one worker run: ``[python, -m, capshim.bench.workloads.builtin_worker, ...]``.

    Args:
        model: GGUF model path (``capshim.bench.model.ensure_model()`` for the
            synthetic ones).
        n_prompt: prompt tokens of the pp test (0 skips it).
        n_gen: generated tokens of the tg test (0 skips it).
        repetitions: timed repetitions of each test in this process.
        threads: CPU threads (default: the worker's CPU affinity count).
        ngl: layers offloaded to the GPU (llama.cpp ``n_gpu_layers``).
        seed: seed of the deterministic prompt token ids.
        flash_attn: llama.cpp ``flash_attn_type``: -1 auto, 0 off, 1 on.
        python: interpreter (default ``sys.executable``).
        warmup_run: one untimed run of each test before the timed ones
            (``--no-warmup`` when false).
        log_level: ``--log-level``, always written out so the recorded argv says
            whether llama.cpp's DEBUG lines were dropped from stderr (``info``).

    The child needs ``capshim`` importable: the bench passes its own
    ``PYTHONPATH`` or runs from an installed package.
    """
    cmd = [python or sys.executable, "-m", WORKER_MODULE, "--model", str(model),
           "--n-prompt", str(n_prompt), "--n-gen", str(n_gen),
           "--repetitions", str(repetitions), "--ngl", str(ngl), "--seed", str(seed)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if flash_attn != -1:
        cmd += ["--flash-attn", str(flash_attn)]
    cmd += ["--log-level", log_level]
    if not warmup_run:
        cmd.append("--no-warmup")
    return cmd


def resolve_model(ref: str, write: bool = True) -> Path:
    """The GGUF file of ``--model``: a preset's (written once, unless ``write`` is false) or a file.

    Raises:
        UsageError: not a preset and not a readable GGUF file (names ``--model``): no such file,
            a folder, not a regular file (a FIFO or device is never opened), not starting with ``GGUF``.
    """
    if ref in MODEL_PRESETS:
        if not write:
            return model_mod.capshim_cache_dir() / "models" / model_mod.model_filename(ref)
        return model_mod.ensure_model(ref)
    path = Path(ref)
    try:
        st = os.stat(path)  # follows a symlink; never opens the file (a FIFO would block)
    except FileNotFoundError:
        raise UsageError(f"--model {ref}: no such file, and not a preset{did_you_mean(ref, MODEL_PRESETS)} "
                         f"({', '.join(MODEL_PRESETS)})") from None
    except OSError as exc:
        raise UsageError(f"--model {ref}: cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"--model {ref}: is a folder, not a GGUF file")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--model {ref}: is not a regular file (a FIFO, socket or device), not a GGUF file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise UsageError(f"--model {ref}: cannot read: {exc.strerror}") from None
    if magic != b"GGUF":  # GGUF files start with the magic "GGUF" (ggml docs/gguf.md)
        raise UsageError(f"--model {ref}: not a GGUF file (it does not start with 'GGUF')")
    return path


#: The built-in llama.cpp worker's ``--log-level`` for a bench: ``info`` (default) drops llama.cpp's
#: DEBUG lines from the runs' stderr files (about 250 KB per process for an 8B model), ``debug`` keeps them.
WORKER_LOG_LEVEL_VAR = "CAPSHIM_WORKER_LOG_LEVEL"


def builtin_workload(model: str, n_prompt: int, n_gen: int, check_output: bool,
                     process_reps: int = 1, warmup_run: bool = True) -> LlamaBenchWorkload:
    """The ``capshim bench`` built-in llama.cpp workload: one worker process per run.

    Args:
        model: a preset (:data:`MODEL_PRESETS`) or a GGUF file (:func:`resolve_model`).
        n_prompt, n_gen: tokens of the pp and tg tests.
        check_output: compare every arm's generated token ids with the reference arm's.
        process_reps: timed repetitions per process.
        warmup_run: the worker's in-process untimed run first.

    Returns:
        A :class:`LlamaBenchWorkload` of kind ``builtin`` (the worker prints llama-bench JSON).

    Raises:
        CapshimError: cyllama is not installed (says how to install it).
        UsageError: ``CAPSHIM_WORKER_LOG_LEVEL`` is not one of ``info``, ``debug``; a bad
            ``--model`` (:func:`resolve_model`).
    """
    if importlib.util.find_spec("cyllama") is None:
        raise CapshimError("the built-in workload needs llama.cpp's Python binding cyllama "
                           "(Linux: pip install cyllama-vulkan; macOS: pip install cyllama), "
                           "or give a llama-bench command after --")
    path = resolve_model(model)
    env = worker_env()
    versions = {}
    for dist in ("cyllama-vulkan", "cyllama", "gguf"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # not installed is fine
            pass
    binary = None
    try:
        spec = importlib.util.find_spec("cyllama.llama.llama_cpp")
        if spec is not None and spec.origin:
            binary = Path(spec.origin)
    except (ImportError, ValueError):
        binary = None
    log_level = os.environ.get(WORKER_LOG_LEVEL_VAR) or DEFAULT_LOG_LEVEL
    if log_level not in LOG_LEVELS:
        raise UsageError(f"{WORKER_LOG_LEVEL_VAR}={log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
    argv = worker_command(path, n_prompt=n_prompt, n_gen=n_gen, repetitions=process_reps,
                          warmup_run=warmup_run, log_level=log_level)
    return LlamaBenchWorkload("builtin", argv, env=env, binary=binary, model=path, check_output=check_output,
                              versions=versions, log_level=log_level)


#: The built-in llama.cpp workload (no command, no ``--workload``): the API is the first that runs
#: here (:func:`capshim.bench.plan.device_api`); its runs print llama.cpp's device line.
KIND = Kind("builtin", defaults="builtin", attested=True, llama_cpp=True, label="the llama.cpp workload")
