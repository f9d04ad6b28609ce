"""The inherited environment that can change a GPU workload's behaviour, for metadata.json.

Every arm's process starts from capshim's own environment (runner.Launcher.build:
``os.environ``, then the variables capshim sets, then the workload's), so a variable
set in the user's shell (``GGML_VK_DISABLE_F16=1``, ``VK_ICD_FILENAMES=...``) reaches
every arm, and each run's ``env_delta`` in metadata.json only holds what capshim set.
:func:`record` keeps, for metadata.json's ``inherited_env``, the variables whose names
start with one of :data:`PREFIXES` or are one of :data:`NAMES` (never the whole
environment: it holds secrets), with their values; a name that looks like a secret
(:data:`SECRET_NAME`, e.g. llama.cpp's ``LLAMA_API_KEY``, ``LLAMA_ARG_HF_TOKEN``) keeps
its name, its value is recorded as :data:`REDACTED`.

:func:`warnings` says which inherited variables switch llama.cpp's Vulkan paths for
every arm (``GGML_VK_DISABLE_*``, ``GGML_VK_FORCE_*``): ggml-vulkan tests them with
``getenv(NAME) != nullptr``, so any value, ``0`` and empty included, turns them on.

:func:`loader_warnings` says which of the user's Vulkan loader settings will keep the
arms' layers from loading (:func:`capshim.backends.vulkan.loader_problems`: a Vulkan
Configurator override layer; ``VK_LAYER_PATH`` and ``VK_LOADER_LAYERS_DISABLE`` are
worked around by the launcher and need no warning).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from capshim import backends
from capshim.backends import vulkan
from capshim.contracts import environ as environ_contract
from capshim.errors import CapshimError

#: Name prefixes recorded, each with where its variables are documented or read.
PREFIXES: tuple[tuple[str, str], ...] = (
    ("GGML_", "ggml (llama.cpp's tensor library): ggml/src/ggml-vulkan/ggml-vulkan.cpp getenv(\"GGML_VK_*\"), "
              "ggml-cuda (GGML_CUDA_*), ggml-sched (GGML_SCHED_*)"),
    ("LLAMA_", "llama.cpp: common/arg.cpp (LLAMA_ARG_* set any command-line argument), LLAMA_CACHE, "
               "LLAMA_LOG_*"),
    ("VK_", "Vulkan loader: docs/LoaderInterfaceArchitecture.md, table of environment variables "
            "(VK_ICD_FILENAMES, VK_DRIVER_FILES, VK_ADD_DRIVER_FILES, VK_INSTANCE_LAYERS, VK_LAYER_PATH, "
            "VK_LOADER_LAYERS_ENABLE/DISABLE, VK_LOADER_DRIVERS_SELECT); layer settings (VK_LAYER_*)"),
    ("MESA_", "Mesa: docs/envvars.rst (MESA_VK_DEVICE_SELECT, MESA_SHADER_CACHE_DISABLE, MESA_LOADER_*)"),
    ("LP_", "Mesa llvmpipe/lavapipe: docs/envvars.rst (LP_NUM_THREADS, LP_DEBUG, LP_PERF)"),
    ("GALLIUM_", "Mesa Gallium: docs/envvars.rst (GALLIUM_DRIVER)"),
    ("RADV_", "Mesa RADV: docs/envvars.rst (RADV_DEBUG, RADV_PERFTEST)"),
    ("ACO_", "Mesa ACO compiler: docs/envvars.rst (ACO_DEBUG)"),
    ("AMD_", "AMD drivers: Mesa docs/envvars.rst (AMD_DEBUG), AMDVLK (AMD_VULKAN_ICD)"),
    ("ANV_", "Mesa ANV (Intel Vulkan): docs/envvars.rst (ANV_DEBUG)"),
    ("INTEL_", "Mesa Intel drivers: docs/envvars.rst (INTEL_DEBUG)"),
    ("NVK_", "Mesa NVK: docs/envvars.rst (NVK_DEBUG, NVK_I_WANT_A_BROKEN_VULKAN_DRIVER)"),
    ("NAK_", "Mesa NAK compiler: docs/envvars.rst (NAK_DEBUG)"),
    ("TU_", "Mesa Turnip: docs/envvars.rst (TU_DEBUG)"),
    ("NVIDIA_", "NVIDIA Container Toolkit: NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES"),
    ("__GL_", "NVIDIA driver README, 'Environment variables' (__GL_SHADER_DISK_CACHE*, "
              "__GL_THREADED_OPTIMIZATIONS; the shader disk cache also serves Vulkan)"),
    ("__NV_", "NVIDIA driver README, PRIME render offload (__NV_PRIME_RENDER_OFFLOAD)"),
    ("CUDA_", "CUDA C Programming Guide, 'CUDA Environment Variables' (CUDA_VISIBLE_DEVICES, "
              "CUDA_LAUNCH_BLOCKING, CUDA_CACHE_*)"),
    ("HIP_", "ROCm HIP environment variables (HIP_VISIBLE_DEVICES)"),
    ("ROCR_", "ROCm runtime (ROCR_VISIBLE_DEVICES)"),
    ("HSA_", "ROCm runtime (HSA_OVERRIDE_GFX_VERSION)"),
    ("ZE_", "oneAPI Level Zero specification, environment variables (ZE_AFFINITY_MASK)"),
    ("ONEAPI_", "oneAPI DPC++ (ONEAPI_DEVICE_SELECTOR)"),
    ("SYCL_", "oneAPI DPC++ environment variables (SYCL_CACHE_*)"),
    ("DXVK_", "DXVK README (DXVK_CONFIG, DXVK_HUD)"),
    ("VKD3D_", "vkd3d-proton README (VKD3D_CONFIG)"),
    ("MVK_", "MoltenVK: Docs/MoltenVK_Configuration_Parameters.md (MVK_CONFIG_*)"),
    ("OMP_", "OpenMP specification, environment variables (OMP_NUM_THREADS: ggml's CPU threads)"),
)
#: Whole names recorded (they change which libraries, and so which driver, a process loads).
NAMES: tuple[tuple[str, str], ...] = (
    ("LD_PRELOAD", "ld.so(8)"), ("LD_LIBRARY_PATH", "ld.so(8)"),
    ("DYLD_INSERT_LIBRARIES", "dyld(1)"), ("DYLD_LIBRARY_PATH", "dyld(1)"),
    ("DRI_PRIME", "Mesa docs/envvars.rst (GPU selection)"),
    ("CAPSHIM_BENCH_LAUNCH", "capshim: plain or template launching of the runs (docs/processes.md)"),
)
#: A name whose value is not recorded (only the name, with :data:`REDACTED`).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)
REDACTED = "<redacted>"

#: What each llama.cpp switch does to every arm (ggml-vulkan.cpp); others get a generic sentence.
SWITCHES: dict[str, str] = {
    "GGML_VK_DISABLE_F16": "fp16 shader paths (llama.cpp treats the device as without shaderFloat16)",
    "GGML_VK_DISABLE_BFLOAT16": "bf16 shader paths (VK_KHR_shader_bfloat16 ignored)",
    "GGML_VK_DISABLE_COOPMAT": "KHR cooperative matrix (VK_KHR_cooperative_matrix ignored)",
    "GGML_VK_DISABLE_COOPMAT2": "NV cooperative matrix 2 (VK_NV_cooperative_matrix2 ignored)",
    "GGML_VK_DISABLE_INTEGER_DOT_PRODUCT": "integer dot product (VK_KHR_shader_integer_dot_product ignored)",
    "GGML_VK_DISABLE_FUSION": "operator fusion",
    "GGML_VK_DISABLE_GRAPH_OPTIMIZE": "graph reordering",
    "GGML_VK_DISABLE_MMVQ": "quantized matrix-vector (MMVQ) shaders",
    "GGML_VK_DISABLE_HOST_VISIBLE_VIDMEM": "host-visible video memory",
}
SWITCH = re.compile(r"^GGML_VK_(DISABLE|FORCE)_")


def recorded(name: str) -> bool:
    """Whether ``name`` is one :func:`record` keeps."""
    return any(name.startswith(p) for p, _ in PREFIXES) or any(name == n for n, _ in NAMES)


def record(environ: Mapping[str, str]) -> dict:
    """``metadata.json``'s ``inherited_env``: ``{"variables": {name: value} (sorted; a secret-looking
    name's value is :data:`REDACTED`), "prefixes": [str], "names": [str], "redacted": [name]}``.
    Bytes that are not UTF-8 are recorded escaped (``\\xNN``, :func:`capshim.contracts.environ.record`)."""
    found = environ_contract.record({k: v for k, v in sorted(environ.items()) if recorded(k)})
    secret = [k for k in found if SECRET_NAME.search(k)]
    return {"variables": {k: REDACTED if k in secret else v for k, v in found.items()},
            "prefixes": [p for p, _ in PREFIXES], "names": [n for n, _ in NAMES], "redacted": secret}


def warnings(environ: Mapping[str, str], overridden: Mapping[str, str] | None = None) -> list[str]:
    """One warning per inherited ``GGML_VK_DISABLE_*`` / ``GGML_VK_FORCE_*`` variable (any value: llama.cpp
    tests only that it is set); a name the workload itself sets (``overridden``) is not inherited."""
    out = []
    for k, v in sorted(environ.items()):
        if not SWITCH.match(k) or k in (overridden or {}):
            continue
        shown = environ_contract.recordable(f"{k}={REDACTED if SECRET_NAME.search(k) else v}")
        what = SWITCHES.get(k)
        if what:
            effect = f"every arm runs without {what}"
        elif k.startswith("GGML_VK_FORCE_"):
            effect = "every arm runs with this llama.cpp override"
        else:
            effect = "every arm runs with this llama.cpp path turned off"
        out.append(f"{shown} inherited: {effect}, whatever the arm's answers (llama.cpp acts on the variable "
                   "being set, whatever its value); unset it to measure the capabilities themselves")
    return out


def loader_warnings(arms) -> list[str]:
    """One warning per loader setting that will keep the Vulkan layers of ``arms`` (objects with
    ``name``, ``profile`` and ``simulate``) from loading, naming the arms it hides and what to do;
    [] when none does. Never raises."""
    by_problem: dict[str, list[str]] = {}
    for arm in arms:
        try:  # the shims the arm asks for, from its profiles' backend; the Vulkan layers among them
            backend = backends.for_profiles(arm.profile, arm.simulate)
            shims = backend.requested_shims(arm.profile, arm.simulate) if backend is not None else []
        except CapshimError:
            shims = []
        layers = [s for s in shims if s in (vulkan.LAYER_APP, vulkan.LAYER_DEVICE)]
        for problem in vulkan.loader_problems(layers) if layers else []:
            by_problem.setdefault(problem, []).append(arm.name)
    return [f"arm{'s' if len(names) > 1 else ''} {', '.join(names)} will stay inert: {problem}"
            for problem, names in by_problem.items()]


# --- variables that select or filter the Vulkan devices a run sees (issue 20) -------------------

#: The device-selection variables checked before the first run, each with where it is read.
DEVICE_SELECTORS: tuple[tuple[str, str], ...] = (
    ("GGML_VK_VISIBLE_DEVICES", "llama.cpp ggml/src/ggml-vulkan/ggml-vulkan.cpp (ggml_vk_instance_init): indices "
                                "into vkEnumeratePhysicalDevices' list, separated by commas or blanks; an index "
                                "past the last device is 'Invalid device index' and ggml-vulkan does not start"),
    ("VK_DRIVER_FILES", "Vulkan loader docs/LoaderInterfaceArchitecture.md: the only driver manifests loaded"),
    ("VK_ICD_FILENAMES", "Vulkan loader: the older name of VK_DRIVER_FILES"),
    ("VK_LOADER_DRIVERS_SELECT", "Vulkan loader: only the driver manifests whose file names match"),
    ("VK_LOADER_DRIVERS_DISABLE", "Vulkan loader: the driver manifests whose file names match are not loaded"),
    ("VK_LOADER_DEVICE_SELECT", "Vulkan loader: VID:DID (hex) sorted first among the devices"),
    ("MESA_VK_DEVICE_SELECT", "Mesa docs/envvars.rst (device-select layer): VID:DID[!] (hex) made the default "
                              "device; 'list' prints the devices and exits"),
)
_VID_DID = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,8}):(?:0x)?([0-9a-fA-F]{1,8})!?$")


def ggml_visible_devices(value: str) -> list[int]:
    """The device indices ggml-vulkan reads from ``GGML_VK_VISIBLE_DEVICES``, as it reads them: commas
    become blanks, then ``while (ss >> size_t)``: each extraction skips blanks and reads an optional sign
    and ASCII digits, stopping before the first other byte (``0x1`` and ``0;`` read 0, then stop; ``1-2``
    reads 1 and -2); a negative number wraps to a huge index; a number past 2**64 - 1 fails and ends the
    list. ``""`` and ``"none"`` give ``[]``."""
    out = []
    text, pos = value.replace(",", " "), 0
    number = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)")
    while (m := number.match(text, pos)):
        n = int(m.group(2))
        if n > 2 ** 64 - 1:
            break
        out.append(2 ** 64 - n if m.group(1) == "-" and n else n)
        pos = m.end()
    return out


def _visible_problem(value: str, device: dict, devices: list[str]) -> str | None:
    listing = "; ".join(f"{i} = {n}" for i, n in enumerate(devices))
    idx = ggml_visible_devices(value)
    if not idx:
        return (f"selects no device: ggml-vulkan then uses none and llama.cpp runs on its CPU backend "
                f"(this machine's Vulkan devices: {listing})")
    bad = [i for i in idx if i >= len(devices)]
    if bad:
        return (f"index {bad[0]} names no device (this machine has {len(devices)}: {listing}); llama.cpp says "
                "'Invalid device index' and runs on its CPU backend in every arm")
    if device["index"] not in idx:
        return (f"does not select the probed device {device['index']} = {device['name']} (it selects "
                + ", ".join(f"{i} = {devices[i]}" for i in idx) + ")")
    return None


def device_selection_problems(run_env: Mapping[str, str], probe_env: Mapping[str, str], device: dict,
                              devices: list[str]) -> list[str]:
    """Why the variables of :data:`DEVICE_SELECTORS` in the runs' environment cannot select the probed device.

    Args:
        run_env: the environment every run gets (the inherited one plus what the workload sets).
        probe_env: the environment the stock probe ran in (capshim's own): a loader or Mesa variable
            with the same value there already shaped the device list the probe saw.
        device: the probed device (the probe's ``device``: ``index``, ``name``, ``vendorID``, ``deviceID``).
        devices: every device's name in the probe's order (the probe's ``devices``).

    Returns:
        One line per problem, naming the variable and its value, empty when none: an index
        ``GGML_VK_VISIBLE_DEVICES`` gives that names no device, a list without the probed device or
        selecting nothing; a ``VK_DRIVER_FILES``/``VK_ICD_FILENAMES``/``VK_LOADER_DRIVERS_*`` value
        the runs get but the probe did not; a ``VK_LOADER_DEVICE_SELECT``/``MESA_VK_DEVICE_SELECT``
        that is not VID:DID or names another device; ``MESA_VK_DEVICE_SELECT=list``.
    """
    out = []
    for name, _ in DEVICE_SELECTORS:
        if name not in run_env:
            continue
        value = run_env[name]
        shown = environ_contract.recordable(f"{name}={value}")
        why = None
        if name == "GGML_VK_VISIBLE_DEVICES":
            why = _visible_problem(value, device, devices)
        elif name in ("VK_LOADER_DEVICE_SELECT", "MESA_VK_DEVICE_SELECT"):
            m = _VID_DID.match(value.strip())
            want = f"{device.get('vendorID', 0):04x}:{device.get('deviceID', 0):04x}"
            if value.strip() == "list" and name.startswith("MESA"):
                why = "makes Mesa's device-select layer print the devices and exit: no run would measure anything"
            elif not m:
                why = "is not VID:DID in hex (e.g. 10de:2335)"
            elif (int(m.group(1), 16), int(m.group(2), 16)) != (device.get("vendorID"), device.get("deviceID")):
                why = f"selects device {m.group(1)}:{m.group(2)}, not the probed {device['name']} ({want})"
        elif probe_env.get(name) != value:
            why = (f"is set for the runs but the probe of {device['name']} ran "
                   + (f"with {name}={probe_env[name]}" if name in probe_env else "without it")
                   + ": the runs may not see the probed device")
        if why:
            out.append(f"{shown} {why}")
    return out
