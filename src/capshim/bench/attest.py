"""Path attestation: read the capability lines llama.cpp prints on stderr.

The seed's lesson is to benchmark the path the application actually selects,
so capshim records what llama.cpp itself says it decided.

Sources of the formats:

* Metal, llama.cpp ``ggml/src/ggml-metal/ggml-metal-device.m`` (and the older
  ``ggml-metal.m``)::

      ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)
      ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)
      ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)
      ggml_metal_device_init: simdgroup reduction   = false
      ggml_metal_device_init: simdgroup matrix mul. = false
      ggml_metal_device_init: has bfloat            = false
      ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB

  Older builds print ``ggml_metal_init:`` and ``simdgroup reduction support =``,
  ``hasUnifiedMemory =``; both spellings are read.
* Vulkan, llama.cpp ``ggml/src/ggml-vulkan/ggml-vulkan.cpp``
  (``ggml_vk_print_gpu_info``)::

      ggml_vulkan: 0 = NAME (DRIVER) | uma: 0 | fp16: 1 | bf16: 0 | warp size: 8 | shared memory: 32768 | int dot: 0 | matrix cores: none

  Older builds print fewer fields (``| uma: 0 | fp16: 1 | warp size: 32``),
  builds of early 2024 ``ggml_vulkan: Using NAME | uma: ...``, and recent ones
  add ``fp4: 0`` and write ``fp16: dot2``. Every ``key: value`` field is kept.
  Note that recent llama.cpp prints this line at debug level
  (``GGML_LOG_DEBUG``), older builds at info level.
"""

from __future__ import annotations

import re

__all__ = ["parse_path", "parse_ncnn", "path_key", "same_path"]

_METAL = re.compile(r"^ggml_metal_\w*:\s+(?P<body>.*)$")
_FAMILY = re.compile(r"GPU family:\s*MTLGPUFamily(?P<kind>[A-Za-z]+?)(?P<num>\d+)\s*\((?P<code>\d+)\)")
_METAL_NAME = re.compile(r"GPU name:\s*(?P<name>.*?)\s*$")
_METAL_KV = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9 ._/-]*?)\s*=\s*(?P<value>.+?)\s*$")
# Canonical keys for the Metal switches llama.cpp prints (old and new spellings).
_METAL_KEYS = {
    "simdgroup reduction": "simdgroup_reduction",
    "simdgroup reduction support": "simdgroup_reduction",
    "simdgroup matrix mul.": "simdgroup_mm",
    "simdgroup matrix mul. support": "simdgroup_mm",
    "has unified memory": "has_unified_memory",
    "hasunifiedmemory": "has_unified_memory",
    "has bfloat": "has_bfloat",
    "use bfloat": "use_bfloat",
    "has tensor": "has_tensor",
    "use residency sets": "use_residency_sets",
    "has residency sets": "has_residency_sets",
    "use shared buffers": "use_shared_buffers",
    "recommendedmaxworkingsetsize": "recommended_max_working_set_mb",
}

_VK_LINE = re.compile(
    r"^ggml_vulkan:\s+(?:(?P<idx>\d+)\s*=\s*|Using\s+)(?P<rest>.*\|.*)$")
_VK_NAME = re.compile(r"^(?P<name>.*?)(?:\s+\((?P<driver>[^()]*)\))?\s*$")
_VK_BOOL = {"uma", "bf16", "fp4", "int dot"}
_VK_INT = {"warp size", "shared memory"}


def _typed(value: str):
    v = value.strip()
    if v in ("true", "false"):
        return v == "true"
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*MB", v)
    if m:
        return float(m.group(1))
    return v


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def _parse_metal(body: str, out: dict) -> None:
    m = _FAMILY.search(body)
    if m:
        kind, num, code = m.group("kind"), int(m.group("num")), int(m.group("code"))
        fams = [f for f in out.get("gpu_families", "").split(", ") if f]
        out["gpu_families"] = ", ".join(fams + [f"{kind}{num}"])
        out[f"gpu_family_{kind.lower()}"] = f"{kind}{num}"
        out[f"gpu_family_{kind.lower()}_code"] = code
        if kind == "Apple":
            out["gpu_family"] = f"Apple{num}"
            out["gpu_family_code"] = code
        return
    m = _METAL_NAME.search(body)
    if m and body.lstrip().startswith("GPU name"):
        for k in [k for k in out if k.startswith("gpu_famil")]:
            del out[k]  # a new device init lists its families afresh
        out["gpu_name"] = m.group("name")
        return
    m = _METAL_KV.match(body)
    if m:
        raw_key = m.group("key").strip()
        key = _METAL_KEYS.get(raw_key.lower()) or _METAL_KEYS.get(raw_key.lower().replace(" ", "")) \
            or _norm(raw_key)
        out[key] = _typed(m.group("value"))


def _parse_vulkan(m: re.Match) -> dict:
    parts = [p.strip() for p in m.group("rest").split("|")]
    head = _VK_NAME.match(parts[0])
    dev: dict = {"device": int(m.group("idx")) if m.group("idx") is not None else 0,
                 "device_name": head.group("name") if head else parts[0]}
    if head and head.group("driver"):
        dev["driver"] = head.group("driver")
    for field in parts[1:]:
        if ":" not in field:
            continue
        k, v = (s.strip() for s in field.split(":", 1))
        key = _norm(k)
        if k == "fp16":
            dev["fp16"] = v not in ("0", "false")
            dev["fp16_dot2"] = v == "dot2"
        elif k in _VK_BOOL:
            dev[key] = v not in ("0", "false")
        elif k in _VK_INT and re.fullmatch(r"\d+", v):
            dev[key] = int(v)
        else:
            dev[key] = _typed(v)
    return dev


def parse_path(stderr: str) -> dict:
    """Extract llama.cpp's capability decisions from a run's stderr.

    Args:
        stderr: the workload's stderr text (a leading BOM and CR line ends are fine).

    Returns:
        ``{backend: {key: value}}`` with typed values, empty when no line was
        recognised. ``"metal"``: ``gpu_name`` (str), ``gpu_family`` ("Apple5"),
        ``gpu_family_code`` (1005), ``gpu_families`` (str, every family line
        in order, e.g. ``"Apple5, Common3"``), ``gpu_family_common``/
        ``gpu_family_metal`` and their ``_code``, ``simdgroup_reduction``,
        ``simdgroup_mm``, ``has_bfloat``, ``has_tensor``, ``has_unified_memory``,
        ``use_residency_sets`` ... (bool), ``recommended_max_working_set_mb``
        (float, MB). ``"vulkan"`` (device 0; ``"vulkan:1"`` ... for further
        devices): ``device`` (int), ``device_name``, ``driver`` (str), ``uma``,
        ``fp16``, ``fp16_dot2``, ``bf16``, ``fp4``, ``int_dot`` (bool),
        ``warp_size``, ``shared_memory`` (int, bytes), ``matrix_cores`` (str,
        ``none``/``KHR_coopmat``/``NV_coopmat2``). When a device prints twice
        (several backend inits) the last line wins. ``"ncnn"``, ``"ncnn:1"`` ...:
        ncnn's capability lines, see :func:`parse_ncnn`.

    Raises:
        nothing: unknown lines are ignored.
    """
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", errors="replace")
    out: dict = {}
    metal: dict = {}
    for raw in stderr.replace("\ufeff", "").splitlines():
        line = raw.strip()
        m = _METAL.match(line)
        if m:
            _parse_metal(m.group("body"), metal)
            continue
        m = _VK_LINE.match(line)
        if m:
            dev = _parse_vulkan(m)
            key = "vulkan" if dev["device"] == 0 else f"vulkan:{dev['device']}"
            out[key] = dev
    if metal:
        out["metal"] = metal
    out.update(parse_ncnn(stderr))
    return {k: out[k] for k in sorted(out, key=lambda k: (not k.startswith("metal"), k))}


_NCNN_LINE = re.compile(r"^\[(?P<idx>\d+) (?P<name>.*?)\]\s{2,}(?P<rest>\S.*)$")
_NCNN_LETTERS = {"p": "packed", "s": "storage", "u": "uniform", "a": "arithmetic"}
_NCNN_SUBGROUP = re.compile(r"^(?P<size>\d+)(?:\((?P<min>\d+)~(?P<max>\d+)\))?$")


def parse_ncnn(stderr: str, device: int | None = None) -> dict:
    """Extract ncnn's own capability decisions from a run's stderr.

    Source of the format: ncnn ``src/gpu.cpp`` (``create_gpu_instance``), one block per
    device, printed with ``NCNN_LOGE`` (stderr) when the GPU instance is created::

        [0 llvmpipe (LLVM 15.0.6, 256 bits)]  queueC=0[1]  queueT=0[1]  prefer-slm=0  rebar=1  r-score=4
        [0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-p/s/u/a=1/1/1/1  int8-p/s/u/a=1/1/1/1  bf16-p/s=1/0
        [0 llvmpipe (LLVM 15.0.6, 256 bits)]  subgroup=8(8~8)  ops=1/1/1/1/1/1/0/1/0/0
        [0 llvmpipe (LLVM 15.0.6, 256 bits)]  fp16-cm=0  int8-cm=0  bf16-cm=0  fp8-cm=0  fp6-cm=0  fp4-cm=0

    A cooperative-matrix field is ``0`` (none) or the shapes ncnn will use
    (``16x16x16/16x8x16``); ``-`` (unknown, the WebGPU build) is left out. Older
    builds print ``fp16-p/s/a=1/1/1`` and ``subgroup=32  basic/vote/ballot/shuffle=1/1/1/1``;
    both are read.

    Args:
        stderr: the run's stderr text.
        device: return only this device's block, under the key ``"ncnn"``.

    Returns:
        ``{"ncnn": {...}, "ncnn:1": {...}}`` (device 0 is ``"ncnn"``), or ``{}``. Per device:
        ``device`` (int), ``device_name`` (str), ``fp16_packed``/``_storage``/``_uniform``/
        ``_arithmetic``, ``int8_...``, ``bf16_packed``/``_storage`` (bool), ``subgroup_size``,
        ``subgroup_min``, ``subgroup_max`` (int), ``subgroup_ops`` (str, ncnn's flags),
        ``fp16_cm``, ``int8_cm``, ``bf16_cm``, ``fp8_cm`` ... (str: ``none`` or the shapes).

    Raises:
        nothing: unknown lines and fields are ignored.
    """
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", errors="replace")
    devs: dict[int, dict] = {}
    for raw in stderr.replace("\ufeff", "").splitlines():
        m = _NCNN_LINE.match(raw.strip())
        if not m:
            continue
        idx = int(m.group("idx"))
        dev = devs.setdefault(idx, {"device": idx, "device_name": m.group("name")})
        for tok in m.group("rest").split():
            key, sep, val = tok.partition("=")
            if not sep:
                continue
            if key.endswith("-cm"):
                if val != "-":
                    dev[_norm(key)] = "none" if val == "0" else val
            elif "/" in key and re.fullmatch(r"[\d/]+", val):
                prefix, dash, names = key.rpartition("-") if "-" in key else ("", "", key)
                vals = val.split("/")
                fields = names.split("/")
                if len(vals) != len(fields):
                    continue
                for f, v in zip(fields, vals):
                    name = _NCNN_LETTERS.get(f, f) if prefix else f
                    dev[_norm(f"{prefix}_{name}" if prefix else f"subgroup_{name}")] = v != "0"
            elif key == "subgroup":
                sm = _NCNN_SUBGROUP.match(val)
                if sm:
                    dev["subgroup_size"] = int(sm.group("size"))
                    if sm.group("min"):
                        dev["subgroup_min"], dev["subgroup_max"] = int(sm.group("min")), int(sm.group("max"))
            elif key == "ops":
                dev["subgroup_ops"] = val
    if device is not None:
        return {"ncnn": devs[device]} if device in devs else {}
    return {("ncnn" if i == 0 else f"ncnn:{i}"): d for i, d in sorted(devs.items())}


#: Keys that say which kernels llama.cpp picked; names and drivers are left out.
_IDENTITY = {"gpu_name", "device_name", "driver", "device"}


def path_key(path: dict) -> dict:
    """The decision-relevant part of an attested path (drops names and drivers)."""
    return {b: {k: v for k, v in caps.items() if k not in _IDENTITY} for b, caps in (path or {}).items()}


def same_path(a: dict, b: dict) -> bool | None:
    """True when two attested paths took the same decisions, None when either is unknown (empty)."""
    if not a or not b:
        return None
    return path_key(a) == path_key(b)
