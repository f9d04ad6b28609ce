"""Kernel fingerprints for ``capshim kernels``: what llama.cpp's own logs say a run did.

``capshim kernels`` (:mod:`capshim.studies.kernels`) asks whether a synthetic model and a real
one take the same llama.cpp kernels.

The synthetic presets (:mod:`capshim.bench.model`) have random weights and
their own weight types. This check runs llama.cpp's built-in worker
(:mod:`capshim.bench.builtin`) once per model and answers (native, and each
``--profile``), launched by the bench (:func:`capshim.studies.common.run_arms`:
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

import re
from dataclasses import asdict, dataclass, field

from capshim.bench.attest import parse_path, path_key

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
