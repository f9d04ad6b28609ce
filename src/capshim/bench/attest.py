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
* Vulkan, llama.cpp ``ggml/src/ggml-vulkan/ggml-vulkan.cpp`` (``ggml-vulkan.cpp`` at the
  repository root before February 2024), ``ggml_vk_print_gpu_info``: one line per device
  ggml-vulkan uses. Every format llama.cpp has printed since Vulkan support began is read
  (:data:`VULKAN_FORMATS`; the commits are those of the file's history as synced into
  ggml-org/ggml, each naming its llama.cpp pull request; docs/bench.md, "Path
  attestation", has the same table)::

      ggml_vulkan: Using NAME | fp16: 1 | warp size: 32                          llama.cpp #2059
      ggml_vulkan: Using NAME | uma: 0 | fp16: 1 | warp size: 32                 llama.cpp #5199
      Vulkan0: NAME | uma: 0 | fp16: 1 | warp size: 32                           llama.cpp #5321
      Vulkan0: NAME (DRIVER) | uma: 0 | fp16: 1 | warp size: 32                  llama.cpp #7582
      ggml_vulkan: 0 = NAME (DRIVER) | uma: 0 | fp16: 1 | warp size: 32          whisper.cpp #2547
      ... | warp size: 32 | matrix cores: 1                                      llama.cpp #10597
      ... | warp size: 32 | matrix cores: KHR_coopmat                            llama.cpp #10713
      ... | warp size: 32 | shared memory: 49152 | matrix cores: none            llama.cpp #11719
      ... | shared memory: 49152 | int dot: 1 | matrix cores: none               llama.cpp #12135
      ... | fp16: 1 | bf16: 0 | warp size: 32 | ...                              llama.cpp #14707
      ... | fp16: dot2 | bf16: 0 | ...                                           llama.cpp #24123
      ... | bf16: 0 | fp4: 0 | warp size: 32 | ...                               llama.cpp #25338

  Every ``key: value`` field is kept. In the ``VulkanN: NAME ...`` form of llama.cpp #5321
  (no driver) a device name that ends in parentheses (``llvmpipe (LLVM 15.0.6, 256 bits)``)
  is read as NAME (DRIVER); :func:`names_device` matches either reading. llama.cpp's
  ``--list-devices`` lines (``  Vulkan0: NAME (12288 MiB, 11000 MiB free)``) have no ``|``
  and are not device lines. Since whisper.cpp #2547 the line is printed at debug level
  (``GGML_LOG_DEBUG``); before it, with ``std::cerr`` whatever the log level.

* CUDA, PyTorch (capshim's own torch-sdpa worker,
  :mod:`capshim.bench.workloads.torch_sdpa_worker`): one line with what ``torch.cuda``
  reported and the attention kernel the profiler saw (:data:`SDPA_KERNELS` names the backend)::

      torch-sdpa: device 0 = NVIDIA H200 | capability: 9.0 | sdpa: cudnn | kernel: cudnn_generated_... | torch: 2.11.0

Whether a run ran on the probed device at all (:func:`device_state`): its device lines, the
llama-bench row's ``gpu_info``/``backends``, llama.cpp's ``using device VulkanN (NAME)`` and
buffer lines, and the lines that say ggml-vulkan did not start (``ggml_vulkan: Invalid
device index 7 in GGML_VK_VISIBLE_DEVICES.``): one detection, shared by the bench and
``capshim kernels``.
"""

from __future__ import annotations

import re

from capshim import summary

__all__ = ["parse_path", "parse_ncnn", "parse_cuda", "SDPA_KERNELS", "sdpa_backend", "sdpa_kernel", "REACHES",
           "unreached", "reach_devices", "path_key", "same_path", "VULKAN_FORMATS", "names_device", "cpu_backend",
           "device_state", "vulkan_failure", "OFF_DEVICE", "CPU_BACKEND"]

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

#: The device-line formats (module docstring): (example, source). The commit is ggml-org/ggml's
#: sync of the change (``git log -G 'warp size' -- src/ggml-vulkan*``), the pull request llama.cpp's.
VULKAN_FORMATS: tuple[tuple[str, str], ...] = (
    ("ggml_vulkan: Using NAME | fp16: 1 | warp size: 32",
     "llama.cpp #2059 (2024-01-28, first Vulkan backend; ggml-org/ggml edf45c091e7d)"),
    ("ggml_vulkan: Using NAME | uma: 0 | fp16: 1 | warp size: 32",
     "llama.cpp #5199 (2024-01-30; ggml-org/ggml ede7a714a4b4)"),
    ("Vulkan0: NAME | uma: 0 | fp16: 1 | warp size: 32",
     "llama.cpp #5321 (2024-02-07, multi-GPU; ggml-org/ggml 1c8791cdf208)"),
    ("Vulkan0: NAME (DRIVER) | uma: 0 | fp16: 1 | warp size: 32",
     "llama.cpp #7582 (2024-06-12; ggml-org/ggml d9f2562ec0f0)"),
    ("ggml_vulkan: 0 = NAME (DRIVER) | uma: 0 | fp16: 1 | warp size: 32",
     "whisper.cpp #2547 (2024-11-13, GGML_LOG_DEBUG; ggml-org/ggml 07c5b2a8d192)"),
    ("... | warp size: 32 | matrix cores: 1", "llama.cpp #10597 (2024-12-07; ggml-org/ggml 72f04e91375c)"),
    ("... | warp size: 32 | matrix cores: KHR_coopmat", "llama.cpp #10713 (2024-12-08; ggml-org/ggml 58e5644479e7)"),
    ("... | shared memory: 49152 | matrix cores: none", "llama.cpp #11719 (2025-02-07; ggml-org/ggml d839efb4a66a)"),
    ("... | int dot: 1 | matrix cores: none", "llama.cpp #12135 (2025-03-31; ggml-org/ggml 930dae5a11e5)"),
    ("... | fp16: 1 | bf16: 0 | warp size: 32", "llama.cpp #14707 (2025-07-19; ggml-org/ggml ef3def59812d)"),
    ("... | fp16: dot2 | bf16: 0", "llama.cpp #24123 (2026-06-09; ggml-org/ggml 069d43d5f670)"),
    ("... | bf16: 0 | fp4: 0 | warp size: 32", "llama.cpp #25338 (2026-07-13; ggml-org/ggml e13e9d84e460)"),
)
_VK_LINE = re.compile(
    r"^(?:ggml_vulkan:\s+(?:(?P<idx>\d+)\s*=\s*|Using\s+)|Vulkan(?P<vidx>\d+):\s+)(?P<rest>[^|]*\|.*)$")
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
    idx = m.group("idx") if m.group("idx") is not None else m.group("vidx")
    dev: dict = {"device": int(idx) if idx is not None else 0,
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
    out.update(parse_cuda(stderr))
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


# --- CUDA: PyTorch's attention path (the torch-sdpa worker's line) ------------------------------

#: Which SDPA backend a CUDA kernel name belongs to, first match wins (cuDNN's names contain
#: ``flash_fprop``, so it comes first): (backend, pattern, source). No fused attention kernel at
#: all means ``math`` (matrix products and a softmax: PyTorch's reference path).
SDPA_KERNELS: tuple[tuple[str, str, str], ...] = (
    ("cudnn", r"cudnn.*sdpa|cudnn_generated_fort_native_sdpa",
     "cuDNN frontend SDPA graphs; name seen on the H200 with PyTorch 2.11 (issue 22, probe_stock.json): "
     "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"),
    ("flash", r"pytorch_flash::|flash_fwd",
     "PyTorch aten/src/ATen/native/transformers/cuda/flash_attn/ (namespace pytorch_flash, flash_fwd_kernel)"),
    ("mem-efficient", r"fmha_cutlass|efficient_attention|PyTorchMemEffAttention",
     "PyTorch aten/src/ATen/native/transformers/cuda/mem_eff_attention/ (fmha_cutlassF_* kernels, "
     "PyTorchMemEffAttention::AttentionKernel; the aten op _efficient_attention_forward)"),
)
_SDPA_RX = tuple((b, re.compile(p)) for b, p, _ in SDPA_KERNELS)


def sdpa_kernel(kernels: list[str]) -> str | None:
    """The first kernel name that :data:`SDPA_KERNELS` knows, or None."""
    for name in kernels:
        if any(rx.search(name) for _, rx in _SDPA_RX):
            return name
    return None


def sdpa_backend(kernels: list[str]) -> str:
    """The SDPA backend that ran, from the CUDA kernel names of one profiled call.

    Returns:
        ``cudnn``, ``flash``, ``mem-efficient`` (:data:`SDPA_KERNELS`), ``math`` when kernels ran
        but none of them is a fused attention kernel, ``unknown`` when the profiler saw no kernel.
    """
    for name in kernels:
        for backend, rx in _SDPA_RX:
            if rx.search(name):
                return backend
    return "math" if kernels else "unknown"


_CUDA_LINE = re.compile(r"^torch-sdpa: device (?P<idx>\d+) = (?P<name>[^|]*?)\s*\|(?P<rest>.*)$")


def parse_cuda(stderr: str) -> dict:
    """Extract the torch-sdpa worker's path line(s) (module docstring).

    Returns:
        ``{"cuda": {...}, "cuda:1": {...}}`` (device 0 is ``"cuda"``), or ``{}``: ``device`` (int),
        ``device_name``, ``capability`` ("9.0": what ``torch.cuda.get_device_capability()``
        returned), ``sdpa_backend`` (:func:`sdpa_backend`), ``sdpa_kernel``, ``torch`` (str).
        The last line of a device wins.

    Raises:
        nothing: other lines are ignored.
    """
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", errors="replace")
    keys = {"capability": "capability", "sdpa": "sdpa_backend", "kernel": "sdpa_kernel", "torch": "torch"}
    out: dict = {}
    for raw in stderr.replace("\ufeff", "").splitlines():
        m = _CUDA_LINE.match(raw.strip())
        if not m:
            continue
        idx = int(m.group("idx"))
        dev: dict = {"device": idx, "device_name": m.group("name")}
        for part in m.group("rest").split("|"):
            k, sep, v = (x.strip() for x in part.partition(":"))
            if sep and k in keys:
                dev[keys[k]] = v
        out["cuda" if idx == 0 else f"cuda:{idx}"] = dev
    return out


#: What an attested path says about a profile's answer: (path backend, path key, profile key, how
#: the path's text reads as the profile's number, how that number reads as text). The compute
#: capability ``"7.5"`` is 75 (the capability table's unit: major * 10 + minor).
REACHES: tuple[tuple[str, str, str, object, object], ...] = (
    ("cuda", "capability", "computeCapability",
     lambda text: int(text.split(".")[0]) * 10 + int(text.split(".")[1]), lambda v: f"{v // 10}.{v % 10}"),
)


def reach_devices(path: dict) -> list[dict]:
    """The devices a run's own path lines report for the backends of :data:`REACHES` (``"cuda"``,
    ``"cuda:1"``, ...), each as a path of its own (``{"cuda": {"device": 1, ...}}``) that
    :func:`unreached` reads: the device's ``device`` (its index as the application numbers it) and,
    where the line gives one, ``uuid``. Empty when no line reports a device."""
    backends = dict.fromkeys(b for b, *_ in REACHES)
    return [{b: entry} for b in backends for key, entry in (path or {}).items()
            if (key == b or key.startswith(f"{b}:")) and isinstance(entry, dict)]


def unreached(path: dict, answers: dict[str, int]) -> str | None:
    """Why a run's own output shows the shim did not reach the application, or None.

    A profile that answers ``computeCapability`` 75 while PyTorch reports 9.0 changed nothing
    the application used: the arm is inert (never a result), whatever the shim's status says.

    Args:
        path: the run's attested path (:func:`parse_path`).
        answers: the profile's capability values (``Profile.capabilities``: key -> number).

    Returns:
        ``the application reported capability 9.0; the profile answers 7.5 (computeCapability)``,
        or None (the path agrees, or says nothing about the profile's keys).
    """
    for backend, key, pkey, read, show in REACHES:
        text = (path or {}).get(backend, {}).get(key)
        if text is None or pkey not in answers:
            continue
        try:
            seen = read(text)
        except (ValueError, IndexError):
            return f"the application reported {key} {text!r}, which is no {pkey}"
        if seen > answers[pkey]:
            return f"the application reported {key} {text}; the profile answers {show(answers[pkey])} ({pkey})"
    return None


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


# --- did the run run on the probed device at all ------------------------------------------------

#: Arm states (:data:`capshim.summary.STATES`) of a run whose own output does not show it ran on the
#: probed device: llama.cpp ran on its CPU backend, or on another device / no device it names.
CPU_BACKEND, OFF_DEVICE = summary.CPU_BACKEND, summary.OFF_DEVICE  # the states, named once
#: The most of one run's stderr read for :func:`device_state` (bytes): llama.cpp's device and
#: buffer lines come in its first few KiB.
MAX_STDERR_READ = 16 << 20

#: A Vulkan device in llama.cpp's load lines (``using device Vulkan0``, ``Vulkan0 model buffer size``).
_VK_USED = re.compile(r"\bVulkan\d+\b")
#: llama.cpp's CPU backend holding the model or the compute buffers.
_CPU_BUF = re.compile(r"^\s*\w+:\s+CPU(?:_Mapped)?\s+(?:model|compute|KV|output)\b.*buffer", re.MULTILINE)
#: Why ggml-vulkan did not start (``ggml_vulkan: Invalid device index 7 in GGML_VK_VISIBLE_DEVICES.``,
#: ``ggml_vulkan: No devices found.``, ``load_backend: failed to initialize backend from ...vulkan...``).
_VK_FAIL = re.compile(r"^(?:ggml_vulkan: .*(?:invalid|error|failed|no devices?)|load_backend: failed.*vulkan).*$",
                      re.IGNORECASE | re.MULTILINE)
#: llama.cpp's own "which device" line (``llama_prepare_model_devices: using device Vulkan0 (NVIDIA H200) ...``).
_USING = re.compile(r"\busing device (?:Vulkan\d+) \((?P<rest>.*)$", re.MULTILINE)


def vulkan_failure(stderr: str) -> str | None:
    """The line that says ggml-vulkan did not start (``ggml_vulkan: Invalid device index 7 in
    GGML_VK_VISIBLE_DEVICES.``), or None."""
    m = _VK_FAIL.search(stderr or "")
    return m.group(0).strip() if m else None


def _vulkan_devices(stderr: str) -> list[dict]:
    return [d for k, d in parse_path(stderr).items() if k == "vulkan" or k.startswith("vulkan:")]


def cpu_backend(stderr: str, rows: list[dict] | None = None) -> str | None:
    """Why a llama.cpp run ran on its CPU backend instead of Vulkan, or None.

    One detection for the bench (:func:`device_state`) and ``capshim kernels``. A run ran on
    the CPU backend when its stderr shows CPU model/compute buffers and no ``VulkanN`` at all,
    or says ggml-vulkan did not start (:func:`vulkan_failure`) and prints no device line, or
    when llama-bench's rows say ``"backends": "CPU"`` (llama-bench ``get_backend``: every
    backend but the CPU one that registered; a Vulkan library that failed to load is absent).

    Returns:
        ``llama.cpp ran on the CPU backend, not on Vulkan (WHY)``, WHY being llama.cpp's own
        failure line, ``llama-bench reports backends CPU`` or ``no Vulkan device line, no
        Vulkan buffer``.
    """
    stderr = stderr or ""
    why = vulkan_failure(stderr)
    devices = _vulkan_devices(stderr)
    if not _VK_USED.search(stderr) and _CPU_BUF.search(stderr):
        reason = why or ("its buffers are all on the CPU (-ngl 0?), none on a Vulkan device" if devices
                         else "no Vulkan device line, no Vulkan buffer")
    elif why and not devices:
        reason = why
    elif not devices and rows and all(r.get("backends") == "CPU" for r in rows):
        reason = "llama-bench reports backends CPU"
    else:
        return None
    return f"llama.cpp ran on the CPU backend, not on Vulkan ({reason})"


def names_device(dev: dict, name: str) -> bool:
    """Whether one parsed device line (:func:`parse_path`'s ``"vulkan"`` entries) names the device
    ``name`` (the probe's ``device.name``): as NAME, or as NAME (DRIVER) read together (the
    ``VulkanN: NAME | ...`` form of early 2024 prints no driver, see the module docstring)."""
    got = dev.get("device_name")
    return name in (got, f"{got} ({dev.get('driver')})" if dev.get("driver") else got)


def _in_gpu_info(name: str | None, info: str) -> bool:
    """Whether llama-bench's ``gpu_info`` (its GPU devices' descriptions joined by ``", "``, llama-bench.cpp
    ``get_gpu_info``) has ``name`` as one whole entry: ``NVIDIA H200`` does not name an ``NVIDIA H20``, nor
    ``NVIDIA GeForce RTX 4090 D`` an ``NVIDIA GeForce RTX 4090``."""
    if not name:
        return False
    return info == name or info.startswith(f"{name}, ") or info.endswith(f", {name}") or f", {name}, " in info


def device_state(stderr: str, rows: list[dict] | None, device_name: str | None, *,
                 required: bool = True) -> tuple[str, str | None]:
    """Whether a run's own output shows that it ran on the probed device through Vulkan.

    Args:
        stderr: the run's stderr text.
        rows: llama-bench rows' :func:`capshim.bench.llamabench.device_info` (``gpu_info``,
            ``backends``), or ncnn's and torch-sdpa's nothing (their device lines are on stderr).
        device_name: the probed device's name (``NVIDIA H200``, ``llvmpipe (LLVM 15.0.6, 256 bits)``).
        required: True for workloads that always name their device (llama-bench, the built-in
            llama.cpp and ncnn workloads): no evidence at all is ``off-device``. False for any
            other command (``--metric``): no evidence is ``unknown``.

    Returns:
        ``(verdict, reason)``: ``("attested", None)``; ``("unknown", None)``; ``(CPU_BACKEND,
        why)`` (:func:`cpu_backend`); ``(OFF_DEVICE, why)`` when its device lines (llama.cpp's,
        ncnn's), llama-bench's ``gpu_info`` or llama.cpp's ``using device`` line name other
        devices, or nothing names a device and ``required``.
    """
    stderr = stderr or ""
    rows = rows or []
    cpu = cpu_backend(stderr, rows)
    if cpu:
        return CPU_BACKEND, cpu
    named: list[str] = []  # what the output names, for the reason
    devices = _vulkan_devices(stderr)
    if devices:
        if any(names_device(d, device_name) for d in devices):
            return "attested", None
        named = [d.get("device_name", "?") for d in devices]
        where = "llama.cpp's device lines name"
    if not named:
        ncnn = list(parse_ncnn(stderr).values())
        if ncnn:
            if any(d.get("device_name") == device_name for d in ncnn):
                return "attested", None
            named, where = [d.get("device_name", "?") for d in ncnn], "ncnn's device lines name"
    if not named:
        cuda = list(parse_cuda(stderr).values())
        if cuda:
            if any(d.get("device_name") == device_name for d in cuda):
                return "attested", None
            named, where = [d.get("device_name", "?") for d in cuda], "the torch-sdpa worker's device line names"
    if not named:
        using = [m.group("rest") for m in _USING.finditer(stderr)]
        if using:
            if any(u.startswith(f"{device_name})") for u in using):
                return "attested", None
            named, where = [u.split(")")[0] for u in using], "llama.cpp's 'using device' lines name"
    if not named:
        infos = [str(r["gpu_info"]) for r in rows if r.get("gpu_info")]
        if infos:
            if all(_in_gpu_info(device_name, i) for i in infos):
                return "attested", None
            named, where = sorted(set(infos)), "llama-bench's gpu_info names"
    if named:
        return OFF_DEVICE, f"{where} {', '.join(named)}, not the probed {device_name}"
    if required:
        return OFF_DEVICE, (f"its output does not show it ran on {device_name} (no device line, no "
                            "gpu_info; llama.cpp prints the device line at debug level: give llama-bench -v)")
    return "unknown", None
