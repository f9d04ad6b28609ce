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
  memory, matrix cores: none / KHR_coopmat / NV_coopmat2);
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
comparison. The set of op classes of one run is its kernel fingerprint.

Differences between two models' fingerprints are sorted into:

* ``weight type``: the same (fusion, op, phase) in both, with other weight
  types (a real Q4_K_M file has q4_K/q6_K where the preset has q4_0/q8_0);
* ``path``: a matrix multiplication, flash attention or fused chain that one
  model runs and the other does not (flash attention on/off, a fusion taken
  or not);
* ``graph``: a plain op only one model's graph has (the architectures differ:
  an extra norm, a scale, another activation), not a kernel choice.
"""

from __future__ import annotations

import json
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

_HEADER = "Vulkan Timings:"
_LINE = re.compile(r"^(?P<name>\S.*?):\s+(?P<calls>\d+)\s+x\s+\S+\s+us\s+=\s+\S+\s+us(?:\s+\(.*\))?\s*$")
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
        blocks: perf logger blocks (graphs) read.
        flash_attention: whether any ``FLASH_ATTN_EXT`` ran.
        device: the device line's fields (:func:`capshim.bench.attest.parse_path` ``["vulkan"]``).
        unparsed: lines inside a block that were not op lines (kept for the report).
    """

    classes: dict[str, int] = field(default_factory=dict)
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


def compare_models(ref: Fingerprint, other: Fingerprint) -> dict:
    """Sort the op classes of two models (same answers) into shared, weight type, path and graph.

    Returns:
        ``shared``: labels in both; ``weight_type``: ``[{"class", "ref", "other"}]`` for each
        (fusion, op, phase) both run with different weight types; ``path`` and ``graph``:
        ``[{"class", "only_in": "ref"|"other"}]`` for each (fusion, op, phase) one model runs and
        the other does not (``path``: matrix multiplications, flash attention, fused chains);
        ``flash_attention``: ``[ref, other]``.
    """
    def by_untyped(fp: Fingerprint) -> dict[OpClass, set[str]]:
        out: dict[OpClass, set[str]] = {}
        for label in fp.classes:
            oc = fp.op(label)
            out.setdefault(oc.untyped, set()).add(oc.type)
        return out

    ra, ob = by_untyped(ref), by_untyped(other)
    result: dict = {"shared": sorted(set(ref.classes) & set(other.classes)), "weight_type": [], "path": [],
                    "graph": [], "flash_attention": [ref.flash_attention, other.flash_attention]}
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

def file_types(path: Path) -> dict[str, int]:
    """Tensor count per GGML type in a GGUF file (``gguf.GGUFReader``, the llama.cpp project's reader)."""
    import gguf

    counts: dict[str, int] = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        name = t.tensor_type.name
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


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
        n_prompt / n_gen: prompt tokens and generated tokens of the one pass.
        timeout: seconds one run may take.
        argv: the command line, recorded in the report.

    Files in ``out``: ``bench-<model>/`` (one evidence bundle per model: each run's raw stderr in
    ``raw/<arm>-1.stderr``, its status file in ``status/``), ``kernels.md``, ``kernels.json``.

    Raises:
        UsageError: a bad model, profile or ``out`` (exit 2).
        CapshimError: no Vulkan driver, no cyllama, or the bench was interrupted.
    """
    from capshim.bench import ablate, plan

    t0 = time.monotonic()
    models = list(models) or [DEFAULT_MODEL]
    added = None
    if not any(m in plan.MODEL_PRESETS for m in models):
        models.insert(0, DEFAULT_MODEL)
        added = DEFAULT_MODEL
    if len(set(models)) != len(models):
        raise UsageError(f"--model: a model is given twice ({', '.join(models)})")
    for ref in models:  # every --model checked before the first (long) run
        plan.resolve_model(ref, write=False)
    answers = answers_for(profile_refs)
    out = Path(out) if out else Path(f"capshim-kernels-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: exists and is not an empty folder")
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
        entry = {"model": ref, "label": label, "path": str(model_path), "bundle": str(m.bundle),
                 "seconds": round(time.monotonic() - r0, 1), "file_types": file_types(model_path), "answers": {}}
        for a in answers:
            arm = m.summary["arms"].get(a.arm, {})
            stderrs = sorted((m.bundle / "raw").glob(f"{a.arm}-*.stderr"))
            fp = parse_stderr(stderrs[0].read_bytes()) if stderrs else Fingerprint()
            entry["answers"][a.arm] = {"state": arm.get("state", "failed"), "stderr": str(stderrs[0]) if stderrs else None,
                                       "error": next((r.get("error") for r in arm.get("runs") or [] if r.get("error")),
                                                     None),
                                       "fingerprint": fp}
        runs.append(entry)
    result = _analyse(runs, answers, device, added)
    result.update({"schema": "capshim-kernels/1", "command": " ".join(argv) if argv else None,
                   "n_prompt": n_prompt, "n_gen": n_gen, "failed_runs": failed,
                   "elapsed_s": round(time.monotonic() - t0, 1), "out": str(out)})
    for e in result["models"]:
        for a in e["answers"].values():
            a["fingerprint"] = a["fingerprint"].to_dict()
    (out / "kernels.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "kernels.md").write_text(markdown(result), encoding="utf-8")
    return result


def _analyse(runs: list[dict], answers: list[Answers], device: dict | None, added: str | None) -> dict:
    """The comparisons and the verdict lines, from the runs' fingerprints."""
    ref = runs[0]
    verdict: list[str] = []
    devices, effects, versus = {}, {}, {}
    usable = lambda e, a: e["answers"][a.arm]["fingerprint"].blocks > 0  # noqa: E731
    for e in runs:
        for a in answers:
            fp = e["answers"][a.arm]["fingerprint"]
            if fp.blocks == 0:
                verdict.append(f"{e['label']} under {a.text}: no perf logger block in its stderr "
                               f"({e['answers'][a.arm]['error'] or 'the run logged no graph'}): not compared")
    for a in answers:
        per = {e["label"]: device_choices(e["answers"][a.arm]["fingerprint"]) for e in runs if usable(e, a)}
        same = len({json.dumps(v, sort_keys=True) for v in per.values()}) <= 1
        devices[a.arm] = {"same": same, "per_model": per}
        if len(per) > 1:
            diff = sorted({k for v in per.values() for k in v if len({json.dumps(x.get(k)) for x in per.values()}) > 1})
            verdict.append(f"{a.text}: device line (capability choices) "
                           + ("identical across models" if same else f"DIFFERS across models in {', '.join(diff)}"))
    for e in runs:
        if not usable(e, answers[0]):
            continue
        effects[e["label"]] = {a.arm: profile_effect(e["answers"]["native"]["fingerprint"],
                                                     e["answers"][a.arm]["fingerprint"])
                               for a in answers[1:] if usable(e, a)}
    for a in answers[1:]:
        eff = [effects[m][a.arm] for m in effects if a.arm in effects[m]]
        if len(eff) > 1:
            verdict.append(f"{a.text}: the profile's effect (device fields, op classes without weight types) is "
                           + ("the same in every model" if same_effect(eff) else "NOT the same across models"))
        for m in effects:
            if a.arm in effects[m]:
                x = effects[m][a.arm]
                verdict.append(f"{m}, {a.text} vs native: device fields changed: "
                               + (", ".join(f"{k} {v[0]}->{v[1]}" for k, v in x["device"].items()) or "none")
                               + f"; op classes only under native: {len(x['only_native'])}, "
                               f"only under the profile: {len(x['only_profile'])}")
    for e in runs[1:]:
        versus[e["label"]] = {}
        for a in answers:
            if not (usable(ref, a) and usable(e, a)):
                continue
            c = compare_models(ref["answers"][a.arm]["fingerprint"], e["answers"][a.arm]["fingerprint"])
            versus[e["label"]][a.arm] = c
            fa = c["flash_attention"]
            verdict.append(
                f"{ref['label']} vs {e['label']}, {a.text}: {len(c['shared'])} op classes shared; "
                f"{len(c['weight_type'])} differ only by weight type; {len(c['path'])} path difference(s)"
                + (f" ({', '.join(p['class'] + ' only in ' + (ref['label'] if p['only_in'] == 'ref' else e['label']) for p in c['path'])})"
                   if c["path"] else "")
                + f"; {len(c['graph'])} op(s) only one graph has; flash attention "
                + ("on in both" if all(fa) else "off in both" if not any(fa) else
                   f"{'on' if fa[0] else 'off'} vs {'on' if fa[1] else 'off'}"))
    if len(runs) == 1:
        verdict.append("one model only: no synthetic-vs-real comparison (give --model FILE.gguf)")
    notes = ["op classes: fusion(op) weight-type [phase]; shapes, call counts and timings are not compared",
             "the perf logger names ops and weight types, not the pipeline variant (scalar, coopmat, coopmat2, "
             "integer dot): llama.cpp picks those from the capabilities on the device line, which is the "
             "evidence for them; MUL_MAT vs MUL_MAT_VEC is the logger's own label for n <= 8 columns"]
    if device and device.get("type") == "cpu":
        notes.append(f"{device.get('name')} is a CPU Vulkan device: no cooperative matrix and no integer dot "
                     "acceleration to lose, so the check covers fewer capability-driven choices than on a GPU")
    if added:
        notes.append(f"{added} added as the synthetic reference (no preset among --model)")
    return {"device": device, "answers": [asdict(a) for a in answers], "reference": ref["label"],
            "models": runs, "device_lines": devices, "profile_effects": effects, "versus": versus,
            "verdict": verdict, "notes": notes}


# --- output ----------------------------------------------------------------------------

def _table(cols: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]) + "\n"


def markdown(res: dict) -> str:
    """``kernels.md`` from the result as ``kernels.json`` holds it: verdict, device lines, op
    classes per run, differences, profile effects, notes."""
    from capshim.bench.attest import DISPLAY_COLUMNS, display_value

    answers = [Answers(**a) for a in res["answers"]]
    dev = (res.get("device") or {}).get("name", "?")
    parts = [f"# capshim kernels — {dev}\n"]
    if res.get("command"):
        parts.append(f"`{res['command']}` ({res['elapsed_s']:.0f} s; one pass per run: -p {res['n_prompt']} "
                     f"-n {res['n_gen']}, perf logger on)\n")
    parts.append("## Verdict\n\n" + "\n".join(f"- {v}" for v in res["verdict"]) + "\n")
    models = res["models"]
    parts.append("## Models\n\n" + _table(
        ["model", "file", "tensor types in the file", "bundle", "seconds"],
        [[e["label"], f"`{Path(e['path']).name}`", ", ".join(f"{k} {v}" for k, v in e["file_types"].items()),
          f"`{Path(e['bundle']).name}/`", e["seconds"]] for e in models]))
    cols = [(h, k) for h, b, k in DISPLAY_COLUMNS if b == "vulkan" and k != "device_name"]
    rows = []
    for a in answers:
        for e in models:
            r = e["answers"][a.arm]
            path = {"vulkan": r["fingerprint"]["device"]}
            rows.append([a.text, e["label"], r["state"], *(display_value(path, "vulkan", k) for _, k in cols)])
    parts.append("## Device line (capability-driven choices)\n\n" + _table(
        ["answers", "model", "arm state", *(h for h, _ in cols)], rows))
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
            parts.append(f"## {res['reference']} vs {m}, answers {arm}\n\n"
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
           "same_effect", "kernels", "answers_for", "markdown", "PERF_ENV"]
if __name__ == "__main__":  # pragma: no cover - python -m capshim.bench.kernels FILE: print a fingerprint
    print(json.dumps(parse_stderr(Path(sys.argv[1]).read_bytes()).to_dict(), indent=2))
