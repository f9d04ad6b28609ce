"""The built-in llama.cpp workload's child program: one process per arm run, llama-bench JSON out.

The parent side (its command, environment and workload adapter) is
:mod:`capshim.bench.workloads.builtin`; this module imports only the standard
library (and cyllama inside the run; no numpy: the logits are read through
:mod:`array`, the same float32 bytes), never the bench.

Run as ``python -m capshim.bench.workloads.builtin_worker --model PATH [--n-prompt 512]
[--n-gen 128] [--repetitions 1] [--threads N] [--ngl 99] [--seed 0]
[--log-level info|debug]``.

It loads the model through ``cyllama.llama.llama_cpp`` (the low-level
llama.cpp binding of the ``cyllama-vulkan`` wheel), runs one untimed pass that
also serves as the correctness probe (the prompt, then ``n_gen`` greedy
tokens), then per repetition a prompt-processing test (``n_prompt`` tokens
from an empty cache) and a generation test (``n_gen`` single-token decodes from
an empty cache, the first token BOS, each next one the argmax), the same
tests llama-bench runs (``tools/llama-bench/llama-bench.cpp``: ``test_prompt``
and ``test_gen``). Times come from llama.cpp's own perf counters
(``llama_perf_context``: ``t_p_eval_ms``/``n_p_eval`` for batches of more
than one token, ``t_eval_ms``/``n_eval`` for single tokens; read through
``LlamaContext.get_perf_data()``, the same keys in cyllama 0.2.18 and 0.7.0).

STDOUT gets exactly one JSON array in llama-bench's ``-o json`` row format,
one row per test (``pp<n_prompt>``, ``tg<n_gen>``), each with an extra key
``capshim_output`` (greedy token ids, logits digest, smallest top-1 margin).
Everything else, llama.cpp's logs included, goes to STDERR: file descriptor 1
is pointed at stderr while llama.cpp runs, so no native print can reach stdout.
With ``--log-level info`` (the default) llama.cpp's and ggml's DEBUG messages
are dropped, except the GPU backends' capability lines (``ggml_vulkan: 0 =
...``, which recent llama.cpp logs at DEBUG; see :data:`KEEP_DEBUG_PREFIXES`);
every other message is written unchanged (see :class:`LogFilter`). Measured on
lavapipe, stderr bytes per process: tinyllama-1.1b 22,210 -> 8,131, tiny
10,491 -> 7,881 (an 8B model's load logs about 250 KB, nearly all DEBUG:
per-tensor, per-layer and per-graph-input lines).
``--log-level debug`` keeps llama.cpp's default logger, which writes every
level.

Each row also carries ``capshim_phases``: seconds of each phase of this process
(:data:`PHASES`: interpreter start, imports, backend and Vulkan instance, model,
context, warm-up pass, per-test warm-up, timed tests) and whether it was forked
from a process template (:mod:`capshim.bench.workloads.template`,
docs/processes.md); the same line goes to stderr as ``capshim-builtin: phases``.

Exit codes (docs/contracts.md, "Exit codes"): 0 success; 1 the workload failed (model
did not load, a decode failed); 2 bad usage (bad flag, missing model file).
Errors are one line on stderr, ``capshim-builtin: error: ...``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

from capshim.bench.workloads.logits import all_finite, argmax, float32s, top1_margin
from capshim.bench.workloads.phases import FORKED_VAR, Phases, process_clock
from capshim.contracts.environ import TEMPLATE_FD_VAR

#: perf_counter() when this module started running (the interpreter's start is before it).
_T_MODULE = time.perf_counter()

PROG = "capshim-builtin"
EXIT_WORKLOAD = 1
EXIT_USAGE = 2

#: ``--log-level`` choices: ``info`` drops llama.cpp's DEBUG messages (see :class:`LogFilter`),
#: ``debug`` keeps llama.cpp's default logger (every level).
LOG_LEVELS = ("info", "debug")
DEFAULT_LOG_LEVEL = "info"

#: ggml's log levels, ``enum ggml_log_level`` in llama.cpp ``ggml/include/ggml.h`` (NONE 0, DEBUG 1,
#: INFO 2, WARN 3, ERROR 4, CONT 5 "continue previous log"), checked by experiment on cyllama-vulkan
#: 0.2.18 (llama.cpp b9190: the model loader's lines arrive as 2, ``ggml_vulkan: 0 = ...`` as 1, the
#: progress dots as 5). ggml builds of 2024 numbered them INFO 1, WARN 2, ERROR 3, DEBUG 4.
GGML_LOG_LEVEL_NONE, GGML_LOG_LEVEL_DEBUG, GGML_LOG_LEVEL_INFO = 0, 1, 2
GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR, GGML_LOG_LEVEL_CONT = 3, 4, 5

#: DEBUG messages kept at ``info``: the GPU backends' capability lines that
#: :func:`capshim.bench.attest.parse_path` reads. ggml-vulkan.cpp logs ``ggml_vulkan: Found N Vulkan
#: devices:`` and ``ggml_vulkan: 0 = NAME (DRIVER) | uma: ...`` with ``GGML_LOG_DEBUG``.
KEEP_DEBUG_PREFIXES = (b"ggml_vulkan:", b"ggml_metal")


class WorkerError(Exception):
    """An expected failure: reported as one line with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_WORKLOAD):
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------
# llama.cpp's log


def _write_stderr(data: bytes) -> None:
    """Write bytes to file descriptor 2 as they are, after what Python's ``sys.stderr`` holds."""
    sys.stderr.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(2, view):]


class LogFilter:
    """A ``ggml_log_callback``: writes llama.cpp's and ggml's messages to stderr, dropping DEBUG ones.

    Called as ``(level, text, user_data)`` with ``level`` a ggml log level (``GGML_LOG_LEVEL_*``
    above), ``text`` the message as bytes (one line with its newline, or part of one) and
    ``user_data`` unused. A kept message is written byte for byte, at once (no buffering, so it
    stays in order with the worker's own ``capshim-builtin:`` lines). Dropped: DEBUG messages
    other than those starting with :data:`KEEP_DEBUG_PREFIXES`, and a ``GGML_LOG_LEVEL_CONT``
    message whose message it continues was dropped (llama.cpp's progress dots continue an INFO
    message, so they stay). NONE, INFO, WARN, ERROR and unknown levels are kept. It never raises:
    a failure (a closed stderr, a bad argument) loses that one message and nothing else.
    """

    def __init__(self, write=_write_stderr):
        self._write = write
        self._keep_last = True  # whether the message a CONT continues was kept
        #: messages dropped and kept so far
        self.dropped = 0
        self.kept = 0

    def keep(self, level: int, text: bytes) -> bool:
        """Whether a message is written (and, for a non-CONT one, what its CONT messages do)."""
        if level == GGML_LOG_LEVEL_CONT:
            return self._keep_last
        self._keep_last = level != GGML_LOG_LEVEL_DEBUG or text.startswith(KEEP_DEBUG_PREFIXES)
        return self._keep_last

    def __call__(self, level, text, user_data=None) -> None:
        try:
            if text is None:  # a NULL text
                return
            data = text if isinstance(text, bytes) else str(text).encode("utf-8", "surrogateescape")
            if self.keep(int(level), data):
                self.kept += 1
                self._write(data)
            else:
                self.dropped += 1
        except BaseException:  # noqa: BLE001 - a log line must never take the worker down
            pass


_log_state: dict = {}


def install_log_filter(cy, level: str = DEFAULT_LOG_LEVEL) -> str | None:
    """Route llama.cpp's and ggml's log through :class:`LogFilter` (``level`` ``info``).

    Must run before ``ggml_backend_load_all()``, whose backends log through ggml's logger.
    The callback is handed to ``llama_log_set`` (which also sets ggml's logger) through
    ctypes, looked up via the handle of cyllama's extension module (``dlsym`` searches its
    libllama dependency too), not through cyllama's ``set_log_callback``: cyllama's Cython
    trampoline (``log_callback`` in its ``llama_cpp.pyx``) calls Python without taking the
    GIL, and recent cyllama sources run ``llama_decode`` inside ``with nogil``, so a message
    logged during a decode would run Python code without the GIL. A ctypes callback takes the
    GIL itself, from any thread. :func:`main` gives llama.cpp its default logger back after
    the run (:func:`uninstall_log_filter`, also registered with ``atexit``), so nothing calls
    into Python once the interpreter is going away.

    Args:
        cy: the ``cyllama.llama.llama_cpp`` module.
        level: ``info`` installs the filter; ``debug`` leaves llama.cpp's default logger.

    Returns:
        None when done (or nothing to do), else why the filter could not be installed
        (then llama.cpp's default logger stays: every level is written).
    """
    if level == "debug" or _log_state:
        return None
    import atexit
    import ctypes

    try:
        log_set = ctypes.CDLL(cy.__file__).llama_log_set
    except (OSError, AttributeError, TypeError) as exc:
        return f"llama_log_set not found through {getattr(cy, '__file__', cy)}: {exc}"
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    log_set.argtypes = [callback_type, ctypes.c_void_p]
    log_set.restype = None
    filt = LogFilter()
    callback = callback_type(filt)  # kept in _log_state: llama.cpp holds its address
    log_set(callback, None)
    _log_state.update(log_set=log_set, callback=callback, filter=filt, null=callback_type())
    atexit.register(uninstall_log_filter)
    return None


def uninstall_log_filter() -> None:
    """Give llama.cpp its default logger back (every level to stderr); a no-op when not installed."""
    log_set = _log_state.pop("log_set", None)
    if log_set is not None:
        try:
            log_set(_log_state["null"], None)  # NULL: llama_log_set restores llama.cpp's and ggml's default
        except Exception:  # noqa: BLE001 - at exit; the callback object stays alive in _log_state
            pass


def prompt_tokens(n_prompt: int, n_vocab: int, bos: int | None, seed: int = 0) -> list[int]:
    """Deterministic prompt token ids: BOS (when the model has one), then ids
    from a 64-bit LCG (Knuth's MMIX constants) over ``[3, n_vocab)`` (ids 0-2
    are the SentencePiece specials of most llama models)."""
    out: list[int] = []
    if n_prompt <= 0:
        return out
    if bos is not None and bos >= 0:
        out.append(bos)
    x = (seed * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF
    lo = 3 if n_vocab > 3 else 0
    while len(out) < n_prompt:
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out.append(lo + (x >> 33) % (n_vocab - lo))
    return out


# --------------------------------------------------------------------------
# the worker


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m capshim.bench.workloads.builtin_worker",
        description="capshim's built-in llama.cpp benchmark; prints llama-bench JSON rows.",
    )
    ap.add_argument("--model", required=True, help="GGUF model file")
    ap.add_argument("--n-prompt", type=int, default=512, help="prompt tokens (0: no pp test)")
    ap.add_argument("--n-gen", type=int, default=128, help="generated tokens (0: no tg test)")
    ap.add_argument("--repetitions", type=int, default=1, help="timed repetitions per test")
    ap.add_argument("--no-warmup", action="store_true",
                    help="skip the untimed warm-up run of each test (as llama-bench --no-warmup)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads")
    ap.add_argument("--ngl", type=int, default=99, help="layers on the GPU")
    ap.add_argument("--seed", type=int, default=0, help="seed of the prompt token ids")
    ap.add_argument("--n-batch", type=int, default=2048, help="logical batch size")
    ap.add_argument("--n-ubatch", type=int, default=512, help="physical batch size")
    ap.add_argument("--flash-attn", type=int, choices=(-1, 0, 1), default=-1,
                    help="flash attention: -1 auto (llama.cpp's default), 0 off, 1 on")
    ap.add_argument("--log-level", choices=LOG_LEVELS, default=DEFAULT_LOG_LEVEL,
                    help="llama.cpp log on stderr: info drops its DEBUG messages except the "
                         "ggml_vulkan/ggml_metal device lines; debug keeps every message")
    args = ap.parse_args(argv)
    for name in ("n_prompt", "n_gen"):
        if getattr(args, name) < 0:
            ap.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.n_prompt == 0 and args.n_gen == 0:
        ap.error("--n-prompt and --n-gen are both 0: nothing to run")
    if args.repetitions < 1:
        ap.error("--repetitions must be >= 1")
    if args.threads is not None and args.threads < 1:
        ap.error("--threads must be >= 1")
    if args.n_batch < 1 or args.n_ubatch < 1:
        ap.error("--n-batch and --n-ubatch must be >= 1")
    return args


def _get(obj, name: str, default=None):
    """An attribute that is a property in one cyllama version and a method in another."""
    value = getattr(obj, name, default)
    return value() if callable(value) else value


def _model_class(cy):
    """LlamaModel with an ``n_vocab`` attribute.

    cyllama 0.2.18's ``LlamaContext.get_logits_ith`` reads ``self.model.n_vocab``,
    which its ``LlamaModel`` lacks (AttributeError); a subclass adds it.
    """
    base = cy.LlamaModel
    if hasattr(base, "n_vocab"):
        return base
    try:
        class _Model(base):  # type: ignore[misc, valid-type]
            @property
            def n_vocab(self):
                return self.get_vocab().n_vocab
    except TypeError:  # a final extension type
        return base
    return _Model


def _build_info(cy) -> tuple[str, int]:
    """(build_commit, build_number) of the llama.cpp inside cyllama."""
    commit = ""
    try:
        commit = str(cy.ggml_commit())
    except Exception:
        pass
    number = 0
    try:
        import cyllama

        cfg = json.loads((Path(cyllama.__file__).parent / "build_config.json").read_text())
        tag = str(cfg["versions"]["llama_cpp_version"])  # e.g. "b9190"
        number = int(tag.lstrip("b"))
    except Exception:
        pass
    return commit, number


def _devices(cy) -> tuple[str, str]:
    """(cpu_info, gpu_info) as llama-bench names them: device descriptions."""
    cpu, gpu = [], []
    try:
        for d in cy.ggml_backend_dev_info():
            kind = str(d.get("type", ""))
            (cpu if kind == "CPU" else gpu if kind in ("GPU", "iGPU") else []).append(
                str(d.get("description", d.get("name", ""))))
    except Exception:
        pass
    return ", ".join(cpu), ", ".join(gpu)


def _note(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _stats(samples_ns: list[int], n_tokens: int) -> dict:
    """llama-bench's avg/stddev (sample stddev, 0 for one sample) of ns and tok/s."""
    ts = [n_tokens * 1e9 / ns for ns in samples_ns]
    sd = statistics.stdev if len(samples_ns) > 1 else (lambda _: 0.0)
    return {
        "avg_ns": int(round(statistics.fmean(samples_ns))),
        "stddev_ns": int(round(sd(samples_ns))),
        "avg_ts": round(statistics.fmean(ts), 6),
        "stddev_ts": round(sd(ts), 6),
        "samples_ns": [int(x) for x in samples_ns],
        "samples_ts": [round(x, 6) for x in ts],
    }


def import_cyllama():
    """``cyllama.llama.llama_cpp`` (the binding), without running the ``cyllama`` package's
    ``__init__`` when it can: that imports cyllama's high-level API (jinja2, its server; about
    0.15 s on lavapipe's machine of 2 cores, 0.4 s on the H200), none of which the worker
    uses. The package module is made from its spec without executing it, then the binding is
    imported as usual (``cyllama.llama``'s own ``__init__`` runs: it sets native library paths).
    Falls back to the plain import if that fails. Makes no GPU call (ggml's backends register
    on their first use, :meth:`_Runner.__init__`).

    Raises:
        WorkerError: cyllama is not installed.
    """
    import importlib
    import importlib.util

    try:
        if "cyllama" not in sys.modules:
            spec = importlib.util.find_spec("cyllama")
            if spec is not None and spec.loader is not None:
                sys.modules["cyllama"] = importlib.util.module_from_spec(spec)
        try:
            return importlib.import_module("cyllama.llama.llama_cpp")
        except ImportError:
            for name in [m for m in sys.modules if m == "cyllama" or m.startswith("cyllama.")]:
                del sys.modules[name]
            return importlib.import_module("cyllama.llama.llama_cpp")
    except ImportError as exc:
        raise WorkerError(f"cannot import cyllama (pip install cyllama-vulkan): {exc}") from None


class _Runner:
    """One loaded model and context, with the tests."""

    def __init__(self, args: argparse.Namespace, phases: Phases | None = None):
        self.args = args
        phases = phases if phases is not None else Phases()
        self.phases = phases
        cy = import_cyllama()
        phases.mark("imports")
        self.cy = cy
        why = install_log_filter(cy, args.log_level)  # before the backends log anything
        if why:
            _note(f"llama.cpp's log is not filtered, every level is kept: {why}")
        cy.ggml_backend_load_all()  # prints the ggml_vulkan device lines to stderr
        phases.mark("backend_init")
        mp = cy.LlamaModelParams()
        mp.n_gpu_layers = args.ngl
        try:
            self.model = _model_class(cy)(str(args.model), mp)
        except Exception as exc:
            raise WorkerError(f"llama.cpp could not load {args.model}: {exc}") from None
        phases.mark("model_load")
        self.vocab = self.model.get_vocab()
        self.n_vocab = int(_get(self.vocab, "n_vocab"))
        bos = _get(self.vocab, "token_bos")
        self.bos = int(bos) if bos is not None and int(bos) >= 0 else None
        cp = cy.LlamaContextParams()
        n_ctx = max(args.n_prompt, 1) + args.n_gen + 1
        cp.n_ctx = (n_ctx + 255) // 256 * 256
        cp.n_batch = args.n_batch
        cp.n_ubatch = min(args.n_ubatch, args.n_batch)
        cp.n_threads = args.threads
        cp.n_threads_batch = args.threads
        cp.no_perf = False
        if hasattr(cp, "flash_attn_type"):
            cp.flash_attn_type = args.flash_attn
        try:
            self.ctx = cy.LlamaContext(self.model, cp)
        except Exception as exc:
            raise WorkerError(f"llama.cpp could not create a context: {exc}") from None
        phases.mark("context")
        self.flash_attn = int(_get(cp, "flash_attn_type", -1))
        self.n_batch, self.n_ubatch = int(cp.n_batch), int(cp.n_ubatch)
        self.prompt = prompt_tokens(args.n_prompt, self._token_range(), self.bos, args.seed)

    def _token_range(self) -> int:
        """Upper bound of prompt ids: the synthetic model's chain (GGUF key
        ``capshim.chain_size``, see capshim.bench.model), else the vocabulary."""
        try:
            chain = int(str(self.model.meta_val_str("capshim.chain_size")).strip())
        except Exception:
            return self.n_vocab
        return min(self.n_vocab, 3 + chain) if chain > 0 else self.n_vocab

    # -- llama.cpp calls
    def _clear(self) -> None:
        self.ctx.kv_cache_clear()

    def _decode(self, tokens: list[int], pos: int) -> None:
        rc = self.ctx.decode(self.cy.llama_batch_get_one(tokens, pos))
        if isinstance(rc, int) and rc != 0:
            raise WorkerError(f"llama_decode returned {rc}")

    def _logits(self):
        lg = self.ctx.get_logits_ith(-1)
        if lg is None:
            raise WorkerError("llama.cpp returned no logits")
        return lg if isinstance(lg, list) else float32s(lg)  # a list: exact float32 values, quick to scan

    def _perf(self) -> dict:
        self.ctx.synchronize()
        return dict(self.ctx.get_perf_data())

    def _prompt(self) -> None:
        for i in range(0, len(self.prompt), self.n_batch):
            self._decode(self.prompt[i:i + self.n_batch], i)

    # -- passes
    def correctness_pass(self) -> dict:
        """Untimed warm-up: prompt, then n_gen greedy tokens (each one decoded).

        Returns the capshim_output record: greedy token ids, SHA-256 of the
        float32 logits of every step, smallest top-1 minus top-2 logit.
        """
        self._clear()
        digest = hashlib.sha256()
        ids: list[int] = []
        margins: list[float] = []
        pos = 0
        if self.prompt:
            self._prompt()
            pos = len(self.prompt)
        else:
            self._decode([self.bos if self.bos is not None else 0], 0)
            pos = 1
        steps = max(self.args.n_gen, 1)
        for _ in range(steps):
            lg = self._logits()
            digest.update(float32s(lg).tobytes())
            if not all_finite(lg):
                ids.append(-1)
                margins.append(float("nan"))
            else:
                margins.append(top1_margin(lg))
                ids.append(argmax(lg))
            self._decode([max(ids[-1], 0)], pos)  # also warms the single-token path
            pos += 1
        finite = [m for m in margins if m == m]
        return {
            "token_ids": ids[: self.args.n_gen] if self.args.n_gen else ids[:1],
            "logits_sha256": digest.hexdigest(),
            "top1_margin_min": round(min(finite), 6) if finite else None,
            "nonfinite_logits": len(finite) < len(margins),
        }

    def test_prompt(self) -> int:
        """One pp test from an empty cache; its time in ns (perf counters)."""
        self._clear()
        before = self._perf()
        self._prompt()
        after = self._perf()
        n = after["n_p_eval"] - before["n_p_eval"]
        if n != len(self.prompt):
            raise WorkerError(f"perf counters saw {n} prompt tokens, expected {len(self.prompt)}")
        return int(round((after["t_p_eval_ms"] - before["t_p_eval_ms"]) * 1e6))

    def test_gen(self) -> int:
        """One tg test from an empty cache: n_gen single-token decodes, greedy."""
        self._clear()
        before = self._perf()
        token = self.bos if self.bos is not None else 0
        for pos in range(self.args.n_gen):
            self._decode([token], pos)
            token = argmax(self._logits())
        after = self._perf()
        n = after["n_eval"] - before["n_eval"]
        if n != self.args.n_gen:
            raise WorkerError(f"perf counters saw {n} generated tokens, expected {self.args.n_gen}")
        return int(round((after["t_eval_ms"] - before["t_eval_ms"]) * 1e6))


def run(args: argparse.Namespace, phases: Phases | None = None) -> list[dict]:
    """Run the worker's passes and return the llama-bench rows (no printing).

    Raises:
        WorkerError: the model did not load or a decode failed.
    """
    phases = phases if phases is not None else Phases()
    t0 = time.perf_counter()
    r = _Runner(args, phases)
    cy = r.cy
    _note(f"model and context ready in {time.perf_counter() - t0:.2f} s")
    commit, number = _build_info(cy)
    cpu_info, gpu_info = _devices(cy)
    t1 = time.perf_counter()
    phases.mark("context")
    output = r.correctness_pass()
    phases.mark("warmup")
    _note(f"warm-up and correctness pass in {time.perf_counter() - t1:.2f} s, "
          f"top-1 margin >= {output['top1_margin_min']}")
    # Only what this worker measured or set (llama-bench's other fields, e.g. backends, type_k,
    # cpu_mask, poll, use_mmap, are left out rather than guessed).
    common = {
        "build_commit": commit,
        "build_number": number,
        "cpu_info": cpu_info,
        "gpu_info": gpu_info,
        "model_filename": str(args.model),
        "model_type": str(_get(r.model, "desc", "")),
        "model_size": int(_get(r.model, "size", 0)),
        "model_n_params": int(_get(r.model, "n_params", 0)),
        "n_batch": r.n_batch,
        "n_ubatch": r.n_ubatch,
        "n_threads": args.threads,
        "n_gpu_layers": args.ngl,
        "flash_attn": r.flash_attn,
    }
    tests = []
    if args.n_prompt > 0:
        tests.append((args.n_prompt, 0, r.test_prompt))
    if args.n_gen > 0:
        tests.append((0, args.n_gen, r.test_gen))
    rows = []
    for n_prompt, n_gen, fn in tests:
        if not args.no_warmup:
            # One untimed run of the test itself, as llama-bench does before its
            # repetitions (tools/llama-bench: "warmup run"). Measured on the H200
            # (tinyllama-1.1b, 8 processes x 8 repetitions): without it the first
            # timed pp512 repetition of every process was about 25% slower than the
            # rest (27-30k vs 36-39k tok/s), the correctness pass notwithstanding.
            fn()
        phases.mark("test_warmup")
        test_time = _now()
        samples = [fn() for _ in range(args.repetitions)]
        phases.mark("measure")
        name = f"pp{n_prompt}" if n_prompt else f"tg{n_gen}"
        _note(f"{name}: " + ", ".join(f"{(n_prompt + n_gen) * 1e9 / s:.2f}" for s in samples)
              + " tok/s")
        if any(s <= 0 for s in samples):
            raise WorkerError(f"perf counters gave a non-positive time: {samples}")
        rows.append({**common, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": 0,
                     "test_time": test_time, **_stats(samples, n_prompt + n_gen),
                     "capshim_output": output})
    record = {**phases.record(), "forked": bool(os.environ.get(FORKED_VAR))}
    _note("phases " + json.dumps(record))
    for row in rows:
        row["capshim_phases"] = record
    return rows


def main(argv: list[str] | None = None, phases: Phases | None = None) -> int:
    """Entry point: parse, run, print the JSON array on the real stdout.

    Args:
        argv: the flags (default ``sys.argv[1:]``).
        phases: the phase clock (a template's child passes its own; default: started at this
            module's import, ``python_start`` from the process's age).

    Returns the exit code (0, 1 or 2); argparse exits 2 itself on bad flags.
    """
    if phases is None:
        phases = process_clock(_T_MODULE)
    args = _parse_args(argv)
    if args.threads is None:
        try:
            args.threads = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            args.threads = os.cpu_count() or 1
    model = Path(args.model)
    if not model.is_file():
        print(f"{PROG}: error: model file not found: {model}", file=sys.stderr)
        return EXIT_USAGE
    # Keep stdout for the JSON only: point fd 1 at stderr while llama.cpp runs.
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        rows = run(args, phases)
    except WorkerError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # an unexpected failure inside llama.cpp or cyllama
        if os.environ.get("CAPSHIM_DEBUG"):
            import traceback

            traceback.print_exc()
        print(f"{PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_WORKLOAD
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        uninstall_log_filter()  # the model and context are freed by now
    with os.fdopen(real_stdout, "w") as out:
        json.dump(rows, out, indent=1)
        out.write("\n")
    return 0


if __name__ == "__main__":
    if os.environ.get(TEMPLATE_FD_VAR):
        from capshim.bench.workloads.template import serve

        sys.exit(serve(main, import_cyllama))
    sys.exit(main())
