"""``capshim kernels``: do a synthetic model and a real one take the same llama.cpp kernels?

The synthetic presets (:mod:`capshim.bench.model`) have random weights and
their own weight types. This check runs llama.cpp's built-in worker
(:mod:`capshim.bench.builtin`) once per model and answers (native, and each
``--profile``), launched by the bench (:func:`capshim.bench.ablate.run_arms`:
the same launch path, status files and evidence bundle as ``capshim bench``),
with ggml-vulkan's perf logger on (``GGML_VK_PERF_LOGGER=1``), and compares
what llama.cpp itself reports:

* the device line (``ggml_vulkan: 0 = NAME | uma: 0 | fp16: 1 | ... | matrix
  cores: none``), read by :func:`capshim.bench.attest.parse_path`: the
  capability-driven choices (fp16, bf16, integer dot, warp size, shared
  memory, matrix cores: none / KHR_coopmat / NV_coopmat2). ggml-vulkan prints
  it at backend start-up, before any model is loaded: it is per device and
  answers (it shows what the answers changed), not evidence about the model;
  that it is the same for two models is true by construction;
* the perf logger's op lines, one block per graph. Source of the format:
  llama.cpp ``ggml/src/ggml-vulkan/ggml-vulkan.cpp``, ``vk_perf_logger``
  (``print_timings``, ``get_node_fusion_name``)::

      ----------------
      Vulkan Timings:
      MUL_MAT q4_0 m=2048 n=64 k=2048: 4 x 705 us = 2820 us (11.9 GFLOPS/s)
      MUL_MAT_ADD MUL_MAT_VEC f16 m=128 n=1 k=384: 1 x 253.358 us = 253.358 us (0.387499 GFLOPS/s)
      FLASH_ATTN_EXT dst(64,2,16,1),  q(64,16,2,1),  k(64,256,1,1),  v(64,256,1,1),  m(256,16,1,1): 2 x ...
      RMS_NORM_MUL RMS_NORM(128,16,1,1): 3 x 30527.4 us = 91582.2 us
      ROPE_VIEW_SET_ROWS ROPE: 2 x 821.305 us = 1642.61 us
      GLU: 2 x 622.794 us = 1245.59 us
      Total time: 4.47534e+06 us.

  A line is ``NAME: CALLS x AVG us = TOTAL us [(RATE GFLOPS/s)]`` (times in
  microseconds). A fused chain prints the fusion's name first
  (``MUL_MAT_ADD``, ``RMS_NORM_MUL``) and then its first node. For
  ``MUL_MAT``/``MUL_MAT_ID`` the node is ``OP[_VEC] TYPE m= n= k=`` with
  TYPE the weight (``src0``) type; note that the logger appends ``_VEC``
  itself when ``n <= mul_mat_vec_max_cols`` (8): it names the op and the
  batch width, not the pipeline variant that ran (scalar, coopmat,
  coopmat2, integer dot). Those variants are chosen from the capabilities
  the device line prints, so the device line is the evidence for them.

A line becomes an op class (:class:`OpClass`): the fusion name (if any), the
node's op, the weight type (matrix multiplications) and the phase (``n=1``
or ``n>1``: the batch width of matrix multiplications and of flash
attention's queries); shapes, call counts and timings are left out of the
comparison. The set of op classes of one run is its kernel fingerprint: the
model-dependent evidence. The logger's own timings (``TOTAL us``) give each
run's share of logged GPU time per op class family (matrix multiplications,
flash attention, the rest), so a comparison can say how much of the work the
shared classes carry.

Only a run that succeeded (its arm's bench state is not failed, inert,
invalid or wrong-output, and no run of it failed or timed out), ran on the
Vulkan backend (a device line; llama.cpp did not fall back to its CPU
backend) and logged every expected graph (:func:`expected_graphs`) is
compared; every other run is named in the verdict with the reason, and every
comparison involving it is skipped, never done in part.

Differences between two models' fingerprints are sorted into:

* ``weight type``: the same (fusion, op, phase) in both, with other weight
  types (a real Q4_K_M file has q4_K/q6_K where the preset has q4_0/q8_0):
  other dequantising kernels, not the same kernels;
* ``path``: a matrix multiplication, flash attention or fused chain that one
  model runs and the other does not (flash attention on/off, a fusion taken
  or not);
* ``graph``: a plain op only one model's graph has (the architectures differ:
  an extra norm, a scale, another activation), not a kernel choice.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from capshim.errors import UsageError

#: The variable that turns ggml-vulkan's perf logger on (ggml-vulkan.cpp, ``vk_perf_logger_enabled``).
PERF_ENV = {"GGML_VK_PERF_LOGGER": "1"}
#: The synthetic reference model when none is given, and the answers compared with native.
DEFAULT_MODEL = "tinyllama-1.1b"
DEFAULT_PROFILES = ("vulkan-paravirt",)
#: One small untimed pass each: a prompt batch (matrix-matrix path) and a few generated
#: tokens (matrix-vector path). The worker runs its correctness pass and one timed
#: repetition of each test, so every run logs 2 + 2 x N_GEN graphs.
N_PROMPT = 64
N_GEN = 4
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

_HEADER = "Vulkan Timings:"
_LINE = re.compile(r"^(?P<name>\S.*?):\s+(?P<calls>\d+)\s+x\s+\S+\s+us\s+=\s+(?P<total>\S+)\s+us(?:\s+\(.*\))?\s*$")
_OP = re.compile(r"^[A-Z][A-Z0-9_]*$")
_OP_SHAPE = re.compile(r"^(?P<op>[A-Z][A-Z0-9_]*)\(.*$")
_KV = re.compile(r"^(?P<k>[a-z_]+)=(?P<v>\d+),?$")
_FA_Q = re.compile(r"\bq\(\d+,(?P<n>\d+),")
MATMUL_OPS = ("MUL_MAT", "MUL_MAT_VEC", "MUL_MAT_ID", "MUL_MAT_ID_VEC")
FLASH_ATTN = "FLASH_ATTN_EXT"


@dataclass(frozen=True, order=True)
class OpClass:
    """One kind of kernel call, with shapes and timings stripped.

    Attributes:
        op: the node's op as the logger names it (``MUL_MAT``, ``MUL_MAT_VEC``,
            ``FLASH_ATTN_EXT``, ``RMS_NORM``, ``GLU``, a unary op name ...).
        fused: the fusion's name when the line is a fused chain (``MUL_MAT_ADD``), else "".
        type: the weight type of a matrix multiplication (``q4_0``, ``q4_K``, ``f16``), else "".
        phase: ``n=1`` or ``n>1`` for matrix multiplications (the output's columns, i.e.
            tokens) and flash attention (the query's tokens), else "".
    """

    op: str
    fused: str = ""
    type: str = ""
    phase: str = ""

    @property
    def label(self) -> str:
        """``MUL_MAT_ADD(MUL_MAT_VEC) f16 [n=1]``-style text."""
        s = f"{self.fused}({self.op})" if self.fused else self.op
        if self.type:
            s += f" {self.type}"
        if self.phase:
            s += f" [{self.phase}]"
        return s

    @property
    def untyped(self) -> "OpClass":
        """The same class without its weight type."""
        return OpClass(self.op, self.fused, "", self.phase)

    @property
    def family(self) -> str:
        """``matmul`` (MUL_MAT, MUL_MAT_VEC, MUL_MAT_ID[_VEC], fused or not), ``flash_attention`` or ``other``."""
        return "matmul" if self.op in MATMUL_OPS else "flash_attention" if self.op == FLASH_ATTN else "other"

    @property
    def kind(self) -> str:
        """``path`` for matrix multiplications, flash attention and fused chains, else ``graph``."""
        return "path" if self.op in MATMUL_OPS or self.op == FLASH_ATTN or self.fused else "graph"


def parse_line(name: str) -> OpClass:
    """The op class of one perf logger line's name (the text before ``: CALLS x``)."""
    toks = name.replace(", ", ",").split()
    fused = ""
    if len(toks) > 1 and _OP.match(toks[0]) and (_OP.match(toks[1]) or _OP_SHAPE.match(toks[1])):
        fused, toks = toks[0], toks[1:]
    m = _OP_SHAPE.match(toks[0])
    op = m.group("op") if m else toks[0]
    wtype = phase = ""
    if op in MATMUL_OPS and len(toks) > 1:
        wtype = toks[1]
        kv = {mm.group("k"): int(mm.group("v")) for t in toks[2:] if (mm := _KV.match(t))}
        if "n" in kv:
            phase = "n=1" if kv["n"] == 1 else "n>1"
    elif op == FLASH_ATTN:
        q = _FA_Q.search(name.replace(" ", ""))
        if q:
            phase = "n=1" if int(q.group("n")) == 1 else "n>1"
    return OpClass(op, fused, wtype, phase)


@dataclass
class Fingerprint:
    """The kernel fingerprint of one run.

    Attributes:
        classes: op class label -> calls summed over all logged graphs.
        times: op class label -> the logger's total microseconds summed over all logged graphs.
        blocks: perf logger blocks (graphs) read.
        flash_attention: whether any ``FLASH_ATTN_EXT`` ran.
        device: the device line's fields (:func:`capshim.bench.attest.parse_path` ``["vulkan"]``).
        unparsed: lines inside a block that were not op lines (kept for the report).
    """

    classes: dict[str, int] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    blocks: int = 0
    flash_attention: bool = False
    device: dict = field(default_factory=dict)
    unparsed: list[str] = field(default_factory=list)
    _ops: dict[str, OpClass] = field(default_factory=dict, repr=False)

    def op(self, label: str) -> OpClass:
        """The :class:`OpClass` of one of this fingerprint's labels."""
        return self._ops[label]

    def to_dict(self) -> dict:
        """JSON form (classes sorted)."""
        d = asdict(self)
        d.pop("_ops")
        d["classes"] = dict(sorted(self.classes.items()))
        d["times"] = {k: round(v, 3) for k, v in sorted(self.times.items())}
        return d


def parse_stderr(text: str | bytes) -> Fingerprint:
    """Read a run's stderr: the device line and every perf logger block.

    Args:
        text: the worker's stderr (other lines are ignored; CR line ends and a BOM are fine).

    Returns:
        The :class:`Fingerprint`; ``blocks == 0`` when the logger printed nothing
        (``GGML_VK_PERF_LOGGER`` unset, an older build, or the run failed before a graph).
    """
    from capshim.bench.attest import parse_path

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    fp = Fingerprint(device=parse_path(text).get("vulkan", {}))
    inside = False
    for raw in text.replace("\ufeff", "").splitlines():
        line = raw.strip()
        if line == _HEADER:
            inside = True
            fp.blocks += 1
            continue
        if not inside:
            continue
        if line.startswith("Total time:") or line.startswith("----"):
            inside = False
            continue
        m = _LINE.match(line)
        if not m:
            if line:
                fp.unparsed.append(line)
            inside = bool(line)  # a blank line or another log line ends the block
            continue
        oc = parse_line(m.group("name"))
        fp.classes[oc.label] = fp.classes.get(oc.label, 0) + int(m.group("calls"))
        try:
            fp.times[oc.label] = fp.times.get(oc.label, 0.0) + float(m.group("total"))
        except ValueError:  # not a number: the class still counts, its time does not
            pass
        fp._ops[oc.label] = oc
        fp.flash_attention = fp.flash_attention or oc.op == FLASH_ATTN
    return fp


# --- comparisons ---------------------------------------------------------------

def device_choices(fp: Fingerprint) -> dict:
    """The device line's capability-driven fields (names and driver dropped)."""
    from capshim.bench.attest import path_key

    return path_key({"vulkan": fp.device})["vulkan"] if fp.device else {}


def profile_effect(native: Fingerprint, other: Fingerprint) -> dict:
    """What changes from native to a profile's answers, for one model.

    Returns:
        ``{"device": {field: [native, other]}, "only_native": [labels], "only_profile": [labels],
        "untyped": [[labels only under native], [labels only under the profile]]}`` (``untyped``:
        the same without weight types, what :func:`same_effect` compares across models).
    """
    a, b = device_choices(native), device_choices(other)
    only_n = sorted(set(native.classes) - set(other.classes))
    only_p = sorted(set(other.classes) - set(native.classes))
    return {"device": {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)},
            "only_native": only_n, "only_profile": only_p,
            "untyped": [sorted({native.op(x).untyped.label for x in only_n}),
                        sorted({other.op(x).untyped.label for x in only_p})]}


FAMILIES = ("matmul", "flash_attention", "other")


def time_share(fp: Fingerprint, labels: set[str]) -> float | None:
    """Percent of a run's logged GPU time (the perf logger's totals) carried by ``labels``; None: no time logged."""
    total = sum(fp.times.values())
    if total <= 0:
        return None
    return round(100.0 * sum(t for lab, t in fp.times.items() if lab in labels) / total, 1)


def family_shares(fp: Fingerprint) -> dict:
    """``{"total_us": ..., "matmul": %, "flash_attention": %, "other": %}`` of a run's logged GPU time
    (percent None when nothing was timed)."""
    out: dict = {"total_us": round(sum(fp.times.values()), 1)}
    for fam in FAMILIES:
        out[fam] = time_share(fp, {lab for lab in fp.times if fp.op(lab).family == fam})
    return out


def compare_models(ref: Fingerprint, other: Fingerprint) -> dict:
    """Sort the op classes of two models (same answers) into shared, weight type, path and graph.

    Returns:
        ``in_both``: labels in both; ``weight_type``: ``[{"class", "ref", "other"}]`` for each
        (fusion, op, phase) both run with different weight types; ``path`` and ``graph``:
        ``[{"class", "only_in": "ref"|"other"}]`` for each (fusion, op, phase) one model runs and
        the other does not (``path``: matrix multiplications, flash attention, fused chains);
        ``flash_attention``: ``[ref, other]``; ``matmul_classes``: ``[ref, other]`` counts of
        matrix-multiplication classes; ``shared_matmul``: the shared ones; ``shared_time_pct``:
        ``[ref, other]``, percent of each run's logged GPU time the shared classes carry.
    """
    def by_untyped(fp: Fingerprint) -> dict[OpClass, set[str]]:
        out: dict[OpClass, set[str]] = {}
        for label in fp.classes:
            oc = fp.op(label)
            out.setdefault(oc.untyped, set()).add(oc.type)
        return out

    ra, ob = by_untyped(ref), by_untyped(other)
    shared = sorted(set(ref.classes) & set(other.classes))
    result: dict = {"in_both": shared, "weight_type": [], "path": [],
                    "graph": [], "flash_attention": [ref.flash_attention, other.flash_attention],
                    "matmul_classes": [sum(fp.op(lab).family == "matmul" for lab in fp.classes) for fp in (ref, other)],
                    "shared_matmul": [lab for lab in shared if ref.op(lab).family == "matmul"],
                    "shared_time_pct": [time_share(ref, set(shared)), time_share(other, set(shared))]}
    for u in sorted(set(ra) | set(ob)):
        if u in ra and u in ob:
            if ra[u] != ob[u]:
                result["weight_type"].append({"class": u.label, "ref": sorted(ra[u]), "other": sorted(ob[u])})
        else:
            result[u.kind].append({"class": u.label, "only_in": "ref" if u in ra else "other"})
    return result


def same_effect(effects: list[dict]) -> bool:
    """Whether a profile changes the same things (device fields; op classes without weight types) in every model."""
    return all((e["device"], e["untyped"]) == (effects[0]["device"], effects[0]["untyped"]) for e in effects)


# --- models and answers ------------------------------------------------------------

def file_types(path: Path) -> tuple[dict[str, int], str | None]:
    """Tensor count per GGML type in a GGUF file (``gguf.GGUFReader``, the llama.cpp project's reader).

    Returns:
        ``(counts, None)``, or ``({}, "unreadable: REASON")`` when the reader raises anything (a
        truncated or malformed file): the report says so instead of failing.
    """
    try:
        import gguf

        counts: dict[str, int] = {}
        for t in gguf.GGUFReader(str(path)).tensors:
            name = t.tensor_type.name
            counts[name] = counts.get(name, 0) + 1
    except Exception as exc:  # noqa: BLE001 - any reader failure is a fact for the table
        return {}, f"unreadable: {type(exc).__name__}: {exc}"[:300]
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])), None


def _label(ref: str, taken: set[str]) -> str:
    """A bundle-safe short name for a model: the preset, or the file's stem."""
    from capshim.bench.plan import MODEL_PRESETS

    base = ref if ref in MODEL_PRESETS else re.sub(r"[^A-Za-z0-9._-]+", "-", Path(ref).stem).strip("-.")[:48]
    base = base or "model"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


@dataclass
class Answers:
    """One set of answers: the bench arm name and ``--arm`` spec, and what it means."""

    arm: str
    spec: str
    text: str


def answers_for(profile_refs: list[str] | tuple[str, ...]) -> list[Answers]:
    """``native`` plus one arm per profile: a lowering profile as the simulated device
    (``simulate:P``), a raising one through the app layer (``profile:P``).

    Raises:
        UsageError: a profile does not load, is not Vulkan, or is given twice (names ``--profile``).
    """
    from capshim.bench.ablate import load_vulkan_profile

    out = [Answers("native", "native=", "native")]
    for ref in profile_refs:
        prof = load_vulkan_profile(ref, "kernels reads ggml-vulkan's perf logger (Vulkan only)")
        role = "simulate" if prof.direction == "lower" else "profile"
        arm = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{'sim' if role == 'simulate' else 'raise'}-{prof.name}")[:64]
        if any(a.arm == arm for a in out):
            raise UsageError(f"--profile {ref}: given twice (arm {arm})")
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
    from capshim.evidence import sha256_file

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
    import subprocess

    from capshim import __version__

    out = {"version": __version__, "commit": None, "dirty": None}
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode == 0:
            out["commit"] = commit.stdout.strip()
            st = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "."],
                                capture_output=True, text=True, timeout=10)
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


#: A Vulkan device in llama.cpp's load lines (``using device Vulkan0``, ``Vulkan0 model buffer size``).
_VK_USED = re.compile(r"\bVulkan\d+\b")
#: llama.cpp's CPU backend holding the model or the compute buffers.
_CPU_BUF = re.compile(r"^\s*\w+:\s+CPU(?:_Mapped)?\s+(?:model|compute|KV|output)\b.*buffer", re.MULTILINE)
#: Why ggml-vulkan did not start (``ggml_vulkan: Invalid device index 7 ...``, ``load_backend: failed ...``).
_VK_FAIL = re.compile(r"^(?:ggml_vulkan: .*(?:invalid|error|failed|no devices?)|load_backend: failed.*vulkan).*$",
                      re.IGNORECASE | re.MULTILINE)


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
    from capshim.bench.ablate import run_failed
    from capshim.bench.plan import arm_reason

    if arm is None:
        return "the bundle's summary has no result for it"
    runs = arm.get("runs") or []
    bad = [r for r in runs if run_failed(r)]
    state = arm.get("state")
    if state == "failed" or bad or not runs:
        err = next((r.get("error") for r in bad if r.get("error")), None)
        return f"run failed: {err or arm_reason(arm) or 'no run finished'}"
    if state in ("inert", "invalid"):
        return f"not a shim result: {arm_reason(arm)}"
    if state == "wrong-output":
        return f"wrong output: {arm_reason(arm)}"
    if stderr is None:
        return "no stderr file in the bundle"
    if not _VK_USED.search(stderr) and _CPU_BUF.search(stderr):
        why = _VK_FAIL.search(stderr)
        return ("llama.cpp ran on the CPU backend, not on Vulkan ("
                + (why.group(0).strip() if why else "no Vulkan device line, no Vulkan buffer") + ")")
    if not fp.device:
        why = _VK_FAIL.search(stderr)
        return "no Vulkan device line in its stderr" + (f" ({why.group(0).strip()})" if why else "")
    if fp.blocks == 0:
        return "no perf logger block in its stderr (the run succeeded on Vulkan but logged no graph)"
    if fp.blocks < expected:
        return f"logged {fp.blocks} of the {expected} graphs a complete run logs"
    return None


# --- the run -------------------------------------------------------------------------

def kernels(models: list[str] | tuple[str, ...] = (), profile_refs: list[str] | tuple[str, ...] = DEFAULT_PROFILES,
            out: Path | None = None, n_prompt: int = N_PROMPT, n_gen: int = N_GEN,
            timeout: float = 900.0, argv: list[str] | None = None) -> dict:
    """Run every model under every answers once and compare their kernel fingerprints.

    Args:
        models: presets or GGUF paths; the first is the reference the others are compared with.
            Empty: :data:`DEFAULT_MODEL`. When none is a preset, :data:`DEFAULT_MODEL` is put first.
        profile_refs: the answers besides native (built-in profile names or files).
        out: the output folder (must be new or empty).
        n_prompt / n_gen: prompt tokens (at least :data:`MIN_PROMPT`) and generated tokens of the one pass.
        timeout: seconds one run may take.
        argv: the command line, recorded (shell-quoted) in the report.

    Files in ``out``: ``bench-<model>/`` (one evidence bundle per model: each run's raw stderr in
    ``raw/<arm>-1.stderr``, its status file in ``status/``), ``kernels.md``, ``kernels.json``; last, the
    study seal (``study.json``, ``SHA256SUMS``: :mod:`capshim.study`), also after an error once files were written.
    The result's ``complete`` is true only when every model/answers pair was compared; the
    others are in ``not_compared`` and in the verdict.

    Raises:
        UsageError: a bad model (missing, a folder, not a regular file, not a readable GGUF file, the
            same model twice), profile, ``-p``, ``out`` or ``GGML_VK_PERF_LOGGER_*`` variable (exit 2),
            before anything runs or is written.
        CapshimError: no Vulkan driver, no cyllama, or the bench was interrupted.
    """
    import shlex

    from capshim.bench import ablate, plan

    t0 = time.monotonic()
    if n_prompt < MIN_PROMPT:
        raise UsageError(f"--n-prompt {n_prompt}: give at least {MIN_PROMPT}: ggml-vulkan runs n <= 8 columns "
                         "as the mat-vec path (MUL_MAT_VEC), so a shorter prompt never runs the batched MUL_MAT path")
    inherited = ggml_env()
    models = list(models) or [DEFAULT_MODEL]
    added = None
    if not any(m in plan.MODEL_PRESETS for m in models):
        models.insert(0, DEFAULT_MODEL)
        added = DEFAULT_MODEL
    if len(set(models)) != len(models):
        raise UsageError(f"--model: a model is given twice ({', '.join(models)})")
    # every --model checked before the first (long) run: the file, then the GGUF reader on it
    paths = [plan.resolve_model(ref, write=False) for ref in models]
    _same_models(models, paths)
    types: dict[str, tuple[dict, str | None]] = {}
    for ref, path in zip(models, paths):
        if ref not in plan.MODEL_PRESETS:
            types[ref] = file_types(path)
            if types[ref][1]:
                raise UsageError(f"--model {ref}: not a readable GGUF file ({types[ref][1].split(': ', 1)[1]})")
    answers = answers_for(profile_refs)
    out = Path(out) if out else Path(f"capshim-kernels-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: exists and is not an empty folder")
    from capshim import study

    with study.sealing(out, "kernels"):  # the study seal: written last, also after an error
        expected = expected_graphs(n_prompt, n_gen)
        taken: set[str] = set()
        runs: list[dict] = []
        device = None
        failed = 0
        for ref in models:
            label = _label(ref, taken)
            bundle_dir = out / f"bench-{label}"
            r0 = time.monotonic()
            m = ablate.run_arms([a.spec for a in answers], bundle_dir, repetitions=1, warmup=0, model=ref,
                                n_prompt=n_prompt, n_gen=n_gen, timeout=timeout, env=PERF_ENV, check_output=False,
                                warmup_run=False, process_reps=1)
            device = device or m.device
            failed += m.failed_runs
            model_path = plan.resolve_model(ref)
            ftypes, ferr = types.get(ref) or file_types(model_path)
            entry = {"model": ref, "label": label, "path": str(model_path), "bundle": str(m.bundle),
                     "seconds": round(time.monotonic() - r0, 1), "file_types": ftypes, "file_types_error": ferr,
                     "answers": {}}
            for a in answers:
                arm = m.summary["arms"].get(a.arm)
                stderrs = sorted((m.bundle / "raw").glob(f"{a.arm}-*.stderr"))
                text = stderrs[0].read_bytes().decode("utf-8", errors="replace") if stderrs else None
                fp = parse_stderr(text) if text is not None else Fingerprint()
                entry["answers"][a.arm] = {"state": (arm or {}).get("state", "failed"),
                                           "stderr": str(stderrs[0]) if stderrs else None,
                                           "error": next((r.get("error") for r in (arm or {}).get("runs") or []
                                                          if r.get("error")), None),
                                           "expected_graphs": expected,
                                           "not_compared": not_compared(arm, fp, text, expected),
                                           "gpu_time": family_shares(fp), "fingerprint": fp}
            runs.append(entry)
        result = _analyse(runs, answers, device, added)
        command = shlex.join(argv) if argv else None
        result.update({"schema": "capshim-kernels/3", "command": command, "capshim": capshim_source(),
                       "ggml_env": inherited, "run_env": dict(PERF_ENV),
                       "n_prompt": n_prompt, "n_gen": n_gen, "expected_graphs": expected, "failed_runs": failed,
                       "elapsed_s": round(time.monotonic() - t0, 1), "out": str(out)})
        for e in result["models"]:
            for a in e["answers"].values():
                a["fingerprint"] = a["fingerprint"].to_dict()
        (out / "kernels.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        (out / "kernels.md").write_text(markdown(result), encoding="utf-8")
        return result


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def _analyse(runs: list[dict], answers: list[Answers], device: dict | None, added: str | None) -> dict:
    """The comparisons and the verdict lines, from the runs' fingerprints.

    A run whose ``not_compared`` is set is named in the verdict, and every comparison involving it
    (the device line under its answers, its model's profile effects, the same-effect check across
    models, the model-vs-model comparison under its answers) is skipped whole.
    """
    ref = runs[0]
    verdict: list[str] = []
    missing: list[dict] = []
    devices, effects, versus = {}, {}, {}

    def usable(e: dict, a: Answers) -> bool:
        return e["answers"][a.arm]["not_compared"] is None

    for e in runs:
        for a in answers:
            why = e["answers"][a.arm]["not_compared"]
            if why:
                missing.append({"model": e["label"], "answers": a.text, "arm": a.arm, "reason": why})
                verdict.append(f"{e['label']} under {a.text}: not compared: {why}")
    for a in answers:
        if not all(usable(e, a) for e in runs):
            continue
        per = {e["label"]: device_choices(e["answers"][a.arm]["fingerprint"]) for e in runs}
        same = len({json.dumps(v, sort_keys=True) for v in per.values()}) <= 1
        devices[a.arm] = {"same": same, "per_model": per}
        first = next(iter(per.values()))
        text = ", ".join(f"{k} {v}" for k, v in first.items())
        if same:
            verdict.append(f"{a.text}: device line {text} (ggml-vulkan prints it at start-up, before the model "
                           "loads: per device and answers, not evidence about the model)")
        else:
            diff = sorted({k for v in per.values() for k in v if len({json.dumps(x.get(k)) for x in per.values()}) > 1})
            verdict.append(f"{a.text}: device line DIFFERS between runs with the same answers in {', '.join(diff)} "
                           "(printed before the model loads: the device or the answers changed between runs)")
    for e in runs:
        if not usable(e, answers[0]):
            continue
        effects[e["label"]] = {a.arm: profile_effect(e["answers"]["native"]["fingerprint"],
                                                     e["answers"][a.arm]["fingerprint"])
                               for a in answers[1:] if usable(e, a)}
    for a in answers[1:]:
        eff = [effects[m][a.arm] for m in effects if a.arm in effects[m]]
        if len(runs) > 1 and len(eff) == len(runs):
            verdict.append(f"{a.text}: the profile's effect on the op classes (weight types left out; with the "
                           "device fields it changes) is "
                           + ("the same in every model" if same_effect(eff) else "NOT the same across models"))
        elif len(runs) > 1:
            verdict.append(f"{a.text}: the profile's effect across models: not compared (a run above is not)")
        for m in effects:
            if a.arm in effects[m]:
                x = effects[m][a.arm]
                verdict.append(f"{m}, {a.text} vs native: device fields changed: "
                               + (", ".join(f"{k} {v[0]}->{v[1]}" for k, v in x["device"].items()) or "none")
                               + f"; op classes only under native: {len(x['only_native'])}, "
                               f"only under the profile: {len(x['only_profile'])}")
    for e in runs:
        for a in answers[:1]:
            if usable(e, a):
                g = e["answers"][a.arm]["gpu_time"]
                verdict.append(f"{e['label']} under {a.text}: logged GPU time {g['total_us'] / 1e3:.1f} ms: matrix "
                               f"multiplications {_pct(g['matmul'])}, flash attention {_pct(g['flash_attention'])}, "
                               f"other ops {_pct(g['other'])} (the perf logger's own timings)")
    for e in runs[1:]:
        versus[e["label"]] = {}
        for a in answers:
            r, o = ref["label"], e["label"]
            if not (usable(ref, a) and usable(e, a)):
                verdict.append(f"{r} vs {o}, {a.text}: not compared (a run above is not)")
                continue
            c = compare_models(ref["answers"][a.arm]["fingerprint"], e["answers"][a.arm]["fingerprint"])
            versus[e["label"]][a.arm] = c
            fa, sm, mc, st = c["flash_attention"], c["shared_matmul"], c["matmul_classes"], c["shared_time_pct"]
            wt = "; ".join(f"{x['class']}: {', '.join(x['ref'])} vs {', '.join(x['other'])}" for x in c["weight_type"])
            verdict.append(
                f"{r} vs {o}, {a.text}: {len(c['in_both'])} op classes shared, of them {len(sm)} matrix-multiplication "
                f"class(es)" + (f" ({', '.join(sm)})" if sm else "") + f" of {mc[0]} in {r} and {mc[1]} in {o}; "
                f"the shared classes carry {_pct(st[0])} of {r}'s logged GPU time and {_pct(st[1])} of {o}'s; "
                f"{len(c['weight_type'])} matrix-multiplication op(s) run with other weight types (other kernels)"
                + (f" ({wt})" if wt else "")
                + f"; {len(c['path'])} path difference(s)"
                + (f" ({', '.join(p['class'] + ' only in ' + (r if p['only_in'] == 'ref' else o) for p in c['path'])})"
                   if c["path"] else "")
                + f"; {len(c['graph'])} op(s) only one graph has; flash attention "
                + ("on in both" if all(fa) else "off in both" if not any(fa) else
                   f"{'on' if fa[0] else 'off'} vs {'on' if fa[1] else 'off'}"))
    if len(runs) == 1:
        verdict.append("one model only: no synthetic-vs-real comparison (give --model FILE.gguf)")
    total = len(runs) * len(answers)
    if missing:
        verdict.insert(0, f"INCOMPLETE: {len(missing)} of {total} model/answers runs not compared (listed below)")
    notes = ["op classes: fusion(op) weight-type [phase]; shapes, call counts and timings are not compared; "
             "the op classes are the model-dependent evidence",
             "the device line is printed by ggml-vulkan at backend start-up, before the model loads: it is per "
             "device and answers (it shows what the answers change: fp16, shared memory, ...), so it is the same "
             "for every model by construction and says nothing about the model",
             "the perf logger names ops and weight types, not the pipeline variant (scalar, coopmat, coopmat2, "
             "integer dot): llama.cpp picks those from the capabilities on the device line; MUL_MAT vs "
             "MUL_MAT_VEC is the logger's own label for n <= 8 columns",
             "a matrix multiplication with another weight type runs another (dequantising) kernel: 'differ only "
             "by weight type' means the same op and phase, not the same kernels",
             "compared: runs whose bench state is a success and that ran on Vulkan and logged every expected "
             "graph; any comparison involving another run is skipped whole"]
    if device and device.get("type") == "cpu":
        notes.append(f"{device.get('name')} is a CPU Vulkan device: no cooperative matrix and no integer dot "
                     "acceleration to lose, so the check covers fewer capability-driven choices than on a GPU")
    if added:
        notes.append(f"{added} added as the synthetic reference (no preset among --model)")
    return {"device": device, "answers": [asdict(a) for a in answers], "reference": ref["label"],
            "models": runs, "complete": not missing, "not_compared": missing, "device_lines": devices,
            "profile_effects": effects, "versus": versus, "verdict": verdict, "notes": notes}


# --- output ----------------------------------------------------------------------------

def _table(cols: list[str], rows: list[list]) -> str:
    from capshim.export.markdown import pipe_table

    return pipe_table(cols, rows)


def markdown(res: dict) -> str:
    """``kernels.md`` from the result as ``kernels.json`` holds it: verdict, models, GGML_* variables,
    device lines, GPU time by family, op classes per run, differences, profile effects, notes."""
    from capshim.bench.attest import DISPLAY_COLUMNS, display_value

    answers = [Answers(**a) for a in res["answers"]]
    dev = (res.get("device") or {}).get("name", "?")
    models = res["models"]
    n_runs = len(models) * len(answers)
    missing = res.get("not_compared") or []
    if len(missing) == n_runs:
        title = f"capshim kernels — nothing compared (the bench picked {dev}; no run is usable)"
    elif missing:
        title = f"capshim kernels — {dev} — INCOMPLETE ({len(missing)} of {n_runs} runs not compared)"
    else:
        title = f"capshim kernels — {dev}"
    parts = [f"# {title}\n"]
    if res.get("command"):
        src = res.get("capshim") or {}
        ver = f"capshim {src.get('version', '?')}" + (
            f", commit {src['commit'][:12]}{' (uncommitted changes)' if src.get('dirty') else ''}"
            if src.get("commit") else "")
        parts.append(f"```sh\n{res['command']}\n```\n\n{ver}; {res['elapsed_s']:.0f} s; one pass per run: "
                     f"-p {res['n_prompt']} -n {res['n_gen']} ({res.get('expected_graphs', '?')} graphs), "
                     "perf logger on\n")
    parts.append("## Verdict\n\n" + "\n".join(f"- {v}" for v in res["verdict"]) + "\n")
    parts.append("## Models\n\n" + _table(
        ["model", "file", "tensor types in the file", "bundle", "seconds"],
        [[e["label"], f"`{Path(e['path']).name}`",
          e.get("file_types_error") or ", ".join(f"{k} {v}" for k, v in e["file_types"].items()),
          f"`{Path(e['bundle']).name}/`", e["seconds"]] for e in models]))
    genv = res.get("ggml_env") or {}
    parts.append("## GGML_* variables\n\n- inherited from the environment (every run got them): "
                 + (", ".join(f"`{k}={v}`" for k, v in genv.items()) or "none") + "\n"
                 + "- set by kernels: " + ", ".join(f"`{k}={v}`" for k, v in (res.get("run_env") or {}).items())
                 + "\n")
    cols = [(h, k) for h, b, k in DISPLAY_COLUMNS if b == "vulkan" and k != "device_name"]
    rows = []
    for a in answers:
        for e in models:
            r = e["answers"][a.arm]
            path = {"vulkan": r["fingerprint"]["device"]}
            rows.append([a.text, e["label"], r["state"] + ("" if not r.get("not_compared") else ", not compared"),
                         *(display_value(path, "vulkan", k) for _, k in cols)])
    parts.append("## Device line (per device and answers)\n\nggml-vulkan prints it at backend start-up, before "
                 "the model loads: it shows what the answers change, not anything about the model.\n\n" + _table(
                     ["answers", "model", "arm state", *(h for h, _ in cols)], rows))
    rows = []
    for e in models:
        for a in answers:
            r = e["answers"][a.arm]
            g = r.get("gpu_time") or {}
            rows.append([e["label"], a.text, f"{r['fingerprint']['blocks']} / {r.get('expected_graphs', '?')}",
                         f"{g.get('total_us', 0) / 1e3:.1f}", _pct(g.get("matmul")), _pct(g.get("flash_attention")),
                         _pct(g.get("other")), r.get("not_compared") or "yes"])
    parts.append("## Runs: graphs and logged GPU time by family (the perf logger's timings)\n\n" + _table(
        ["model", "answers", "graphs logged / expected", "GPU ms", "matrix mult.", "flash attention", "other ops",
         "compared"], rows))
    fps = {(e["label"], a.arm): e["answers"][a.arm]["fingerprint"] for e in models for a in answers}
    labels = sorted({lab for fp in fps.values() for lab in fp["classes"]})
    parts.append("## Op classes (calls over all logged graphs; — not run)\n\n" + _table(
        ["op class", *(f"{m} / {a}" for m, a in fps)],
        [[f"`{lab}`", *(fp["classes"].get(lab, "—") for fp in fps.values())] for lab in labels]))
    for m, per in res["versus"].items():
        for arm, c in per.items():
            rows = [[x["class"], "weight type", ", ".join(x["ref"]), ", ".join(x["other"])] for x in c["weight_type"]]
            for kind in ("path", "graph"):
                rows += [[x["class"], kind, "yes" if x["only_in"] == "ref" else "—",
                          "yes" if x["only_in"] == "other" else "—"] for x in c[kind]]
            st = c.get("shared_time_pct") or [None, None]
            head = (f"- shared op classes: {len(c['in_both'])}; shared matrix-multiplication classes: "
                    f"{', '.join(f'`{x}`' for x in c.get('shared_matmul', [])) or 'none'} "
                    f"(of {c.get('matmul_classes', ['?', '?'])[0]} in {res['reference']} and "
                    f"{c.get('matmul_classes', ['?', '?'])[1]} in {m})\n"
                    f"- logged GPU time the shared classes carry: {_pct(st[0])} in {res['reference']}, "
                    f"{_pct(st[1])} in {m}\n\n")
            parts.append(f"## {res['reference']} vs {m}, answers {arm}\n\n" + head
                         + (_table(["op class (no weight type)", "difference", res["reference"], m], rows)
                            if rows else "No difference.\n"))
    for m, per in res["profile_effects"].items():
        for arm, x in per.items():
            parts.append(f"## Profile effect on {m}: native vs {arm}\n\n"
                         f"- device fields changed: {', '.join(f'{k} {v[0]} -> {v[1]}' for k, v in x['device'].items()) or 'none'}\n"
                         f"- op classes only under native: {', '.join(f'`{c}`' for c in x['only_native']) or 'none'}\n"
                         f"- op classes only under {arm}: {', '.join(f'`{c}`' for c in x['only_profile']) or 'none'}\n")
    parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in res["notes"]) + "\n")
    return "\n".join(parts)


__all__ = ["OpClass", "Fingerprint", "parse_line", "parse_stderr", "compare_models", "profile_effect",
           "same_effect", "kernels", "answers_for", "markdown", "not_compared", "expected_graphs", "ggml_env",
           "file_types", "family_shares", "time_share", "PERF_ENV", "MIN_PROMPT"]
if __name__ == "__main__":  # pragma: no cover - python -m capshim.bench.kernels FILE: print a fingerprint
    print(json.dumps(parse_stderr(Path(sys.argv[1]).read_bytes()).to_dict(), indent=2))
