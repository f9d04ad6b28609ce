"""The CUDA backend: a lower-only shim LD_PRELOADed into one process, its configuration, the probe.

The shim (``native/cuda/``: ``cuda_shim.c``, ``cuda_hooks.c``) exports the
runtime's and the driver's query entry points (``cudaGetDeviceProperties``,
``cudaGetDeviceProperties_v2``, ``cudaDeviceGetAttribute``, ``cuDeviceGetAttribute``,
``cuDeviceGetName``, ``cuDeviceComputeCapability``, ``cuDeviceGetProperties``),
the entry-point getters (``cuGetProcAddress`` and ``_v2``,
``cudaGetDriverEntryPoint`` and ``ByVersion``, each with ``_ptsz``) and
``dlsym``: NVIDIA's libraries reach libcuda through dlopen + dlsym (measured on
the H200, issue 22), so a pointer from dlsym or a getter is swapped for the
wrapper after the real call succeeded. The same configuration lowers NVML's
answers (``nvml_hooks.c``: capability, name, multiprocessor count, memory size,
architecture), linked, dlopen'ed or through ctypes (pynvml). Answers are min(device, profile): the
device's real kernels must still run. Docs: ``docs/backends.md`` (CUDA).

Enabled for one process with ``LD_PRELOAD`` (the shim first, the user's entries
kept after it) and ``CAPSHIM_CUDA_CONFIG`` (the key=value file of
:func:`render_config`, read by the Vulkan layer's strict parser with the CUDA
keyspec). The launcher's ``CAPSHIM_TARGET_PID`` / ``CAPSHIM_INHERIT`` scope it
(children stay stock and the target removes the shim from its ``LD_PRELOAD``
unless ``--inherit``).

Which real function a wrapper calls (``cuda_resolve.c``): an exported wrapper
resolves for the library that called it (that library's own dependencies, then
the global scope after the shim), so a plugin loaded ``RTLD_LOCAL`` with its
own runtime, or two runtimes in one process, each reach their own; a pointer
handed out is a wrapper bound to the one function it replaced. Docs:
``docs/cuda.md`` (Which runtime answers a call).

Stand-ins: the build also makes a stand-in ``libcudart.so.13``,
``libcudart.so.11.0`` (CUDA 11.8's 728-byte cudaDeviceProp), ``libcuda.so.1`` and
``libnvidia-ml.so.1`` (``standin_cudart.c``, ``standin_cuda.c``, ``standin_nvml.c``) answering fixed
H200-like values, so ``verify`` and the tests check the shim on a machine
without a GPU.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from capshim.contracts import bounded, environ
from capshim.contracts import output
from capshim import paths, profiles, program
from capshim import status as st
from capshim.backends import Backend, answer_differences, placed_configs, run_probe
from capshim.backends.cuda_program import loaded_into_program, no_call, program_notes, unreachable, who
from capshim.errors import CapshimError, UsageError
from capshim.native import build as nb
from capshim.profiles import Profile
from capshim.profiles.model import format_answer
from capshim.profiles.targets import Device, Placement, normal_uuid

SHIM = "cuda"
LIBRARY = "libcapshim_cuda.so"
PROBE = "capshim-cuda-probe"
FUZZ = "fuzz_config_cuda"
STANDIN_DIR = "standin"
STANDIN_RUNTIME = "libcudart.so.13"
#: The second stand-in runtime: CUDA 11.8's (cudaDeviceProp of 728 bytes), for two runtimes in one process.
STANDIN_RUNTIME_11 = "libcudart.so.11.0"
STANDIN_DRIVER = "libcuda.so.1"
STANDIN_NVML = "libnvidia-ml.so.1"
CONFIG_VAR = "CAPSHIM_CUDA_CONFIG"
#: The shim's own files, then what it shares with the other shims (native/common/: the parser,
#: the status writer, the name rule, the fuzz driver that takes this folder's fuzz_keys.h).
SOURCES = ["cuda_shim.c", "cuda_hooks.c", "cuda_resolve.c", "cuda_shim.h", "cuda_shim.map", "cuda_table.h", "cuda_probe.c",
           "standin_cuda.c", "standin_cuda.map", "standin_cudart.c", "standin_cudart13.map", "standin_cudart11.map",
           "nvml_hooks.c", "cuda_devices.c", "standin_nvml.c", "fuzz_keys.h"]
#: The NVML entry points the shim wraps (native/cuda/nvml_hooks.c; docs/cuda.md, NVML).
NVML_EXPORTS = frozenset({"nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetName", "nvmlDeviceGetAttributes",
                          "nvmlDeviceGetAttributes_v2", "nvmlDeviceGetArchitecture"})
SHARED = ["config.c", "config.h", "config_limits.h", "devname.h", "status.c", "status.h", "fuzz_config.c"]
#: The runtime entry points the shim wraps: each exported at the default version
#: :data:`RUNTIME_DEFAULT_VERSION` and once per :data:`RUNTIME_VERSION_NODES` (native/cuda/cuda_shim.map).
RUNTIME_EXPORTS = ("cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetAttribute",
                   "cudaGetDriverEntryPoint", "cudaGetDriverEntryPoint_ptsz", "cudaGetDriverEntryPointByVersion",
                   "cudaGetDriverEntryPointByVersion_ptsz")
#: The version nodes of NVIDIA's runtimes, named after their sonames (``objdump -T libcudart.so.13``
#: of CUDA 13.0: every symbol at version ``libcudart.so.13``); a reference linked against one binds
#: to the shim's alias of that version, which then calls that runtime (docs/cuda.md).
RUNTIME_VERSION_NODES = ("libcudart.so.11.0", "libcudart.so.12", "libcudart.so.13")
RUNTIME_DEFAULT_VERSION = "CAPSHIM_CUDA"
#: What the shim library exports, exactly, as ``nm -D`` names them (``verify`` checks it): the
#: runtime's names with their versions, the driver's, NVML's and dlsym unversioned.
EXPORTS = frozenset({
    *(f"{n}@@{RUNTIME_DEFAULT_VERSION}" for n in RUNTIME_EXPORTS),
    *(f"{n}@{node}" for n in RUNTIME_EXPORTS for node in RUNTIME_VERSION_NODES),
    "cuDeviceGetAttribute", "cuDeviceGetName",
    "cuDeviceComputeCapability", "cuDeviceGetProperties", "cuGetProcAddress", "cuGetProcAddress_v2", "dlsym",
    *NVML_EXPORTS})


@dataclass(frozen=True)
class CudaBuild:
    """Paths of a built CUDA shim.

    Attributes:
        dir: the cache folder.
        library: the shim (``libcapshim_cuda.so``).
        probe: the probe program (``capshim-cuda-probe``).
        fuzz_driver: the configuration parser with the CUDA keyspec, standalone (ASan+UBSan).
        standin: the folder of the stand-in ``libcudart.so.13``, ``libcudart.so.11.0`` (CUDA 11.8's
            728-byte cudaDeviceProp), ``libcuda.so.1`` and
            ``libnvidia-ml.so.1``.
    """

    dir: Path
    library: Path
    probe: Path
    fuzz_driver: Path
    standin: Path


#: NVML's ``nvmlDeviceArchitecture_t`` (``nvmlDeviceGetArchitecture``): the ``NVML_DEVICE_ARCH_*``
#: values of NVIDIA's nvml.h (CUDA 12.8+: 10 Blackwell; 11 T23X, Orin); anything else (0xffffffff
#: ``NVML_DEVICE_ARCH_UNKNOWN``) is shown as the number alone.
NVML_ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere", 8: "Ada",
                      9: "Hopper", 10: "Blackwell", 11: "T23X (Orin)"}


def nvml_answer_text(key: str, value: object) -> str:
    """One NVML answer (the probe's ``nvml.answers[key]``) as table text, in the notation of the
    runtime's answer of the same name: ``computeCapability`` 75 -> ``"7.5"``
    (:func:`capshim.profiles.model.format_answer`), ``architecture`` 6 -> ``"Turing (6)"``
    (:data:`NVML_ARCHITECTURES`); other keys and unknown values as they are."""
    if key == "architecture":
        name = NVML_ARCHITECTURES.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
        return f"{name} ({value})" if name else str(value)
    return str(format_answer(SHIM, key, value))


#: Where a machine without an NVIDIA driver goes on (docs/cuda.md, its section on the stand-ins).
STANDIN_HINT = "without a GPU, the stand-ins answer instead: docs/cuda.md, 'Without a GPU: the stand-ins'"

def _commands(cc: str, sanitize: bool = False) -> dict[str, list[str]]:
    """Compiler command per artifact (run in the staging folder). ``sanitize``: an
    AddressSanitizer + UBSan build of the shim and the stand-ins (the tests' second build)."""
    opt = ["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"] \
        if sanitize else ["-O2"]
    common = [cc, "-std=gnu11", *opt, "-g", *nb.WARNINGS, nb.VERSION_DEFINE]
    lib = [*common, "-fPIC", "-fvisibility=hidden", "-shared"]
    defs = [] if sanitize else ["-Wl,-z,defs"]  # ASan's runtime is found at load time
    return {
        LIBRARY: [*lib, *defs, "-Wl,-Bsymbolic", "-Wl,--version-script=cuda_shim.map", "-o", LIBRARY, "cuda_shim.c", "cuda_hooks.c", "cuda_resolve.c",
                  "nvml_hooks.c", "cuda_devices.c", "config.c", "status.c", "-ldl", "-lpthread"],
        PROBE: [*common, "-o", PROBE, "cuda_probe.c", "status.c", "-ldl", "-lpthread"],
        FUZZ: [cc, "-std=gnu11", "-O1", "-g", *nb.WARNINGS, "-fsanitize=address,undefined",
               "-fno-sanitize-recover=all", "-o", FUZZ, "fuzz_config.c", "config.c"],
        f"{STANDIN_DIR}/{STANDIN_DRIVER}": [*lib, *defs, "-Wl,--version-script=standin_cuda.map",
                                           f"-Wl,-soname,{STANDIN_DRIVER}", "-o", f"{STANDIN_DIR}/{STANDIN_DRIVER}",
                                           "standin_cuda.c"],
        **{f"{STANDIN_DIR}/{soname}": [*lib, *defs, f"-DSTANDIN_CUDART_MAJOR={major}", f"-Wl,-soname,{soname}",
                                        f"-Wl,--version-script=standin_cudart{major}.map", "-o",
                                        f"{STANDIN_DIR}/{soname}", "standin_cudart.c", "-ldl", "-lpthread"]
           for major, soname in ((13, STANDIN_RUNTIME), (11, STANDIN_RUNTIME_11))},
        f"{STANDIN_DIR}/{STANDIN_NVML}": [*lib, *defs, f"-Wl,-soname,{STANDIN_NVML}", "-o",
                                         f"{STANDIN_DIR}/{STANDIN_NVML}", "standin_nvml.c"],
    }


def _source_paths() -> list[Path]:
    return [nb.source_dir("cuda") / s for s in SOURCES] + nb.common_sources(SHARED)


def build_paths(sanitize: bool = False) -> CudaBuild:
    """Where :func:`build` puts (or finds) the build of these sources; nothing is built.

    Raises:
        OSError: a source cannot be read.
    """
    name = "cuda-asan" if sanitize else "cuda"
    final = nb.build_dir(name, _source_paths(), list(_commands(nb.compiler(), sanitize).values()))
    return CudaBuild(final, final / LIBRARY, final / PROBE, final / FUZZ, final / STANDIN_DIR)


def build(force: bool = False, repair: bool = True, sanitize: bool = False) -> CudaBuild:
    """Build the shim, the probe, the fuzz driver and the stand-ins (warnings are errors);
    reuse a cached build whose library and probe match its SHA256SUMS.

    Needs no CUDA installation: the few prototypes the shim uses are its own.

    Raises:
        BuildError: no compiler, or a compile error (the message names the command).
        StorageError: the cache cannot be written (exit 4).
    """
    result = build_paths(sanitize)
    final = result.dir
    present = result.library.is_file() and result.probe.is_file()
    if not force and present and (not repair or nb.cached_ok(final, [LIBRARY, PROBE])):
        return result
    force = force or final.is_dir()
    with nb.staging(final) as tmp:
        for src in _source_paths():
            (tmp / src.name).write_bytes(src.read_bytes())
        (tmp / STANDIN_DIR).mkdir()
        for cmd in _commands(nb.compiler(), sanitize).values():
            nb.run_compiler(cmd, tmp)
        paths.write_sums(tmp, [LIBRARY, PROBE], fsync=False)
        nb.publish(tmp, final, replace=force)
    return result


def render_config(profile: Profile) -> str:
    """The shim's key=value configuration for a CUDA profile (format: native/common/config.h;
    computeCapability as major * 10 + minor, sizes in bytes, deviceName percent-encoded).

    Raises:
        UsageError: the profile's api is not "cuda", or it is not a lower profile.
    """
    if profile.api != "cuda":
        raise UsageError(f"profile {profile.source}: api is '{profile.api}', the CUDA shim needs 'cuda'")
    if profile.direction != "lower":
        raise UsageError(f"profile {profile.source}: the CUDA shim is lower-only")
    lines = [f"# capshim profile {profile.name} version {profile.version} sha256 {profile.sha256}",
             "direction=lower", f"profile={profile.name}"]
    lines += [f"{k}={v}" for k, v in profile.capabilities.items()]
    if profile.device_name:
        lines.append(f"deviceName={urllib.parse.quote(profile.device_name, safe='')}")
    return "\n".join(lines) + "\n"


#: A sanitizer runtime must come first in the initial library list (ASan refuses to start
#: otherwise: "ASan runtime does not come first"); these stay before the shim.
_SANITIZER_RUNTIME = re.compile(r"lib(a|t|m|l|ub|hwa)san[.-]|libclang_rt\.")


def preload_value(library: Path, existing: str | None) -> str:
    """``LD_PRELOAD`` with the shim first and the user's entries after it (ld.so(8): entries
    separated by ':' or spaces; an entry that is already the shim is not repeated), except a
    sanitizer runtime (libasan, libtsan, ...), which must stay first and is kept before the shim."""
    entries = [e for e in (existing or "").replace(" ", ":").split(":") if e and e != str(library)]
    first = [e for e in entries if _SANITIZER_RUNTIME.match(Path(e).name)]
    return ":".join([*first, str(library), *[e for e in entries if e not in first]])


def launch_env(profile: Profile | None, status_file: Path, run_dir: Path, inherit: bool = False,
               quiet: bool = False, library: Path | None = None) -> dict[str, str]:
    """Variables to add so one process runs with the CUDA shim.

    Returns:
        ``LD_PRELOAD`` (:func:`preload_value` with the current value), ``CAPSHIM_CUDA_CONFIG``
        (a file written into ``run_dir``), ``CAPSHIM_STATUS_FILE``, ``CAPSHIM_QUIET`` and
        ``CAPSHIM_INHERIT`` ("1": children keep the shim); empty without a profile.

    Raises:
        UsageError: not a lower CUDA profile; BuildError: the shim cannot be built.
    """
    if profile is None:
        return {}
    text = render_config(profile)
    lib = library or build().library
    cfg = run_dir / "cuda.cfg"
    output.write_file(cfg, text.encode(), replace=True, fsync=False)  # never through a link left there
    return {"LD_PRELOAD": preload_value(lib, os.environ.get("LD_PRELOAD")), CONFIG_VAR: str(cfg),
            "CAPSHIM_STATUS_FILE": str(status_file), "CAPSHIM_QUIET": "1" if quiet else "0",
            "CAPSHIM_INHERIT": "1" if inherit else "0"}


def launch_env_targeted(placements: list[Placement], status_file: Path, run_dir: Path, inherit: bool = False,
                        quiet: bool = False, library: Path | None = None) -> dict[str, str]:
    """:func:`launch_env` for profiles placed on devices: ``CAPSHIM_CUDA_CONFIG`` lists one
    configuration per placement (:func:`capshim.backends.placed_configs`).

    Raises:
        UsageError: not a lower CUDA profile, or more placements than the shim takes.
    """
    files = placed_configs(placements, "profile", render_config, run_dir, "cuda")
    if not files:
        return {}
    lib = library or build().library
    return {"LD_PRELOAD": preload_value(lib, os.environ.get("LD_PRELOAD")), CONFIG_VAR: files,
            "CAPSHIM_STATUS_FILE": str(status_file), "CAPSHIM_QUIET": "1" if quiet else "0",
            "CAPSHIM_INHERIT": "1" if inherit else "0"}


def probe_env(b: CudaBuild | None = None) -> dict[str, str]:
    """The environment the probe runs in: this one without capshim's run variables, with the
    runtime :func:`find_runtime` names when ``CAPSHIM_CUDA_RUNTIME`` is not set."""
    env = environ.child_base()  # CONFIG_VAR and CAPSHIM_TEMPLATE_FD among them
    runtime = None if "CAPSHIM_CUDA_RUNTIME" in env else find_runtime()
    if runtime is not None:
        env["CAPSHIM_CUDA_RUNTIME"] = str(runtime)
    return env


def devices(b: CudaBuild | None = None) -> list[Device]:
    """The CUDA devices a process sees (after ``CUDA_VISIBLE_DEVICES``), by the probe's ``--list``
    (cuDeviceGetName, cuDeviceGetUuid_v2).

    Raises:
        CapshimError: no CUDA runtime, driver or device (exit 1).
    """
    b = b or build()
    data, _ = run_probe([str(b.probe), "--list"], probe_env(b), "the CUDA probe")
    if "error" in data:
        raise CapshimError(f"CUDA probe: {data['error']} (the devices cannot be listed; {STANDIN_HINT})",
                           exit_code=1)
    out = []
    for d in data.get("devices", []):
        out.append(Device(int(d["index"]), normal_uuid(d.get("uuid")), str(d.get("name", ""))))
    return out


def classify(report: st.StatusReport, requested: bool = True, prog: program.Program | None = None,
             wrapped: bool = False) -> st.ShimState:
    """:func:`capshim.status.classify` for the CUDA shim, in CUDA's words.

    Inert has the cause where the run tells it: with ``prog`` (the program's file,
    :func:`capshim.program.inspect`), a shim that never loaded into the program names why the
    dynamic linker did not load it (:func:`unreachable`), and one that loaded but saw no entry
    point reached names why none was (:func:`no_call`). ``wrapped``: the run went through the
    launcher's ``/bin/sh`` wrapper, whose own ``loaded`` event is not the program's. An active
    shim's reason names the entry points the process called, any layout_mismatch (answers left
    stock there), any ``unresolved`` entry point (a wrapper reached with no real function behind
    it: it returned 500) and any ``unbound`` one (no bound wrapper left: the real function was
    handed out, stock)."""
    state = st.classify(report, SHIM, requested=requested)
    events = report.for_shim(SHIM)
    missing = sorted({f"{e.get('entry_point')} (called from {e.get('caller')}): {e.get('reason')}"
                      for e in events if e.get("event") == "unresolved"})
    unbound = sorted({f"{e.get('entry_point')}: {e.get('reason')}" for e in events if e.get("event") == "unbound"})
    if state.state == st.INERT and prog is not None and not loaded_into_program(events, wrapped):
        why = unreachable(prog) or (f"{who(prog)} did not start, or the dynamic linker did not load the shim "
                                    "into it (see its messages above)")
        return st.ShimState(st.INERT, f"never loaded into the program: {why}", state.changes)
    if state.state == st.INERT and state.reason.startswith("loaded but installed no hooks"):
        why = no_call(prog or program.Program("", None, "other"))
        return st.ShimState(st.INERT, f"loaded, but no CUDA entry point was reached through it: {why}",
                            state.changes)
    if state.state != st.ACTIVE:
        return state
    called = sorted({n for e in events if e.get("event") == "called" for n in e.get("entry_points", [])})
    bad = sorted({f"{e.get('query')}: {e.get('reason')}" for e in events if e.get("event") == "layout_mismatch"})
    reason = state.reason + (f"; entry points called: {', '.join(called)}" if called else "")
    reason += f"; layout_mismatch (left stock): {'; '.join(bad)}" if bad else ""
    reason += f"; unresolved (no real function found): {'; '.join(missing)}" if missing else ""
    reason += f"; unbound (handed out stock): {'; '.join(unbound)}" if unbound else ""
    return st.ShimState(st.ACTIVE, reason, state.changes, state.answered, state.devices)


def standin_env(b: CudaBuild) -> dict[str, str]:
    """The variables that make the probe (or any program) load the stand-in runtime and driver."""
    old = os.environ.get("LD_LIBRARY_PATH")
    return {"LD_LIBRARY_PATH": f"{b.standin}:{old}" if old else str(b.standin),
            "CAPSHIM_CUDA_RUNTIME": str(b.standin / STANDIN_RUNTIME)}


#: Where pip's NVIDIA wheels put the runtime, under a site-packages folder (PyTorch's cu13 wheels:
#: nvidia/cu13/lib, measured on the H200; CUDA 12 wheels: nvidia/cuda_runtime/lib), then a toolkit.
_RUNTIME_PLACES = ("nvidia/cu13/lib/libcudart.so.13", "nvidia/cuda_runtime/lib/libcudart.so.12")
_TOOLKIT = ("/usr/local/cuda/lib64/libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.12")


def find_runtime(search: list[str] | None = None) -> Path | None:
    """The CUDA runtime library the probe should load when ``CAPSHIM_CUDA_RUNTIME`` is not set:
    the first of pip's NVIDIA wheels in ``search`` (default ``sys.path``: the site-packages of the
    Python running capshim, PyTorch's when capshim runs in its environment), else a CUDA toolkit
    in /usr/local/cuda; None when there is none (the probe then asks the dynamic linker for
    libcudart.so.13, then .12)."""
    for folder in (search if search is not None else sys.path):
        for rel in _RUNTIME_PLACES:
            candidate = Path(folder or ".") / rel
            if candidate.is_file():
                return candidate
    return next((Path(p) for p in _TOOLKIT if Path(p).is_file()), None)


def probe(profile: Profile | None = None, device: int = 0, extra_env: dict[str, str] | None = None,
          b: CudaBuild | None = None, placements: list[Placement] | None = None) -> dict:
    """What one process sees of CUDA device ``device``, stock or through the shim (``profile``).

    Returns:
        The probe's JSON (``native/cuda/cuda_probe.c``): ``device`` {index, name},
        ``runtime``, ``runtime_version``, ``driver_version``, ``layout``, ``capabilities``
        (key -> value from cudaGetDeviceProperties; computeCapability as major * 10 + minor),
        ``attributes`` (cudaDeviceGetAttribute), ``driver`` (cuDeviceGetAttribute and the
        other driver queries), ``nvml`` ({"library", "match", "answers": {computeCapability,
        deviceName, multiProcessorCount, memorySizeMB, architecture}, "refused": {query: NVML
        error}}, or {"error"} without NVML), and ``shim`` ({"cuda": {"state", "reason"}}).

    Raises:
        CapshimError: no CUDA runtime, driver or device (exit 1); UsageError: no device ``device``.
    """
    b = b or build()
    with tempfile.TemporaryDirectory(prefix="capshim-probe-") as td:
        tdp = Path(td)
        status_file = tdp / "status.jsonl"
        env = probe_env(b)
        if placements is not None:
            env.update(launch_env_targeted(placements, status_file, tdp, quiet=True, library=b.library))
        else:
            env.update(launch_env(profile, status_file, tdp, quiet=True, library=b.library))
        env.update(extra_env or {})
        data, _ = run_probe([str(b.probe), "--device", str(device)], env, "the CUDA probe")
        if "error" in data:
            if "no CUDA device with that index" in data["error"]:
                raise UsageError(f"--device {device}: {data['error']}")
            named = env.get("CAPSHIM_CUDA_RUNTIME")
            if named is not None and str(data["error"]).startswith(("no CUDA runtime", "not a CUDA runtime")):
                hint = f"CAPSHIM_CUDA_RUNTIME={named!r} should name the libcudart.so the application loads"
            else:
                hint = ("is an NVIDIA driver installed? try: nvidia-smi; CAPSHIM_CUDA_RUNTIME names the libcudart "
                        "the application loads" + (f"; {STANDIN_HINT}" if "no CUDA driver" in str(data["error"])
                                                   else ""))
            raise CapshimError(f"CUDA probe: {data['error']} ({hint})", exit_code=1)
        data["shim"] = {SHIM: classify(st.read(status_file),
                                       requested=profile is not None or bool(placements)).to_dict()}
        if is_standin(data.get("runtime")):
            # the stand-in answers the H200's name; everything that names the device says it is not one
            data["device"]["standin"] = f"capshim stand-in runtime {data['runtime']}"
        # what the shared probe printer shows on its first line (capshim.probe.print_probe)
        data["device"]["driver"] = f"CUDA driver {_version_text(data.get('driver_version'))}"
        data["device"]["apiVersion"] = f"CUDA runtime {_version_text(data.get('runtime_version'))}"
        return data


def _named(data: dict) -> dict:
    """``data`` with the device name (``cudaGetDeviceProperties``' ``name``, what ``deviceName`` lowers)
    as the first answer row, ``deviceName``, so ``probe --compare`` shows it beside the numbers."""
    name = (data.get("device") or {}).get("name")
    if name is not None:
        data["capabilities"] = {"deviceName": name, **data.get("capabilities", {})}
    return data


#: Bytes only the stand-in runtime and driver hold (the names of their own variables,
#: native/cuda/standin_cudart.c and standin_cuda.c): NVIDIA's libraries never contain them.
STANDIN_MARK = b"CAPSHIM_STANDIN_"


def is_standin(runtime: object) -> bool:
    """Whether the CUDA runtime the probe loaded (its path, the probe's ``runtime``) is capshim's
    stand-in: the library itself holds :data:`STANDIN_MARK`. A path that cannot be read (a bare
    soname the linker resolved) is not judged a stand-in."""
    if isinstance(runtime, str) and "/" not in runtime:  # a soname: where the dynamic linker looks first
        dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
        runtime = next((os.path.join(d, runtime) for d in dirs if os.path.isfile(os.path.join(d, runtime))), None)
    if not isinstance(runtime, str) or not os.path.isfile(runtime):
        return False
    try:
        with open(runtime, "rb") as fh:
            return STANDIN_MARK in fh.read(64 * 1024 * 1024)
    except OSError:
        return False


def _version_text(v: object) -> str:
    """A CUDA version number as "MAJOR.MINOR" (13000 -> "13.0"; CUDA's encoding is 1000 * major + 10 * minor)."""
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else "?"


# ELF e_machine values (System V ABI, elf.h): EM_X86_64 = 62, EM_AARCH64 = 183.
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


def _exports(library: Path) -> set[str]:
    """The dynamic symbols library defines, ``NAME@VERSION`` / ``NAME@@VERSION`` where versioned."""
    nm = bounded.run(["nm", "-D", "--defined-only", "--with-symbol-versions", str(library)])
    return {line.split()[-1] for line in nm.stdout.splitlines()
            if len(line.split()) >= 3 and line.split()[1] in "TtWw"}


def verify() -> list[dict]:
    """Check the built CUDA shim: ELF architecture, exported symbols (exactly :data:`EXPORTS`),
    SHA256SUMS, that answers change with a profile and stay stock with a broken configuration
    (both through the stand-in runtime and driver, so they run without a GPU), and a stock
    probe of this machine's real CUDA device (skipped, with the reason, where there is none).

    Returns:
        ``[{"check": "cuda: NAME", "status": "passed"|"failed"|"skipped (...)", "detail"}]``.

    Raises:
        BuildError: the shim cannot be built.
    """
    b = build(repair=False)
    out: list[dict] = []

    def check(name, ok, detail):
        out.append({"check": f"cuda: {name}", "status": "passed" if ok else "failed", "detail": detail})

    head = b.library.read_bytes()[:20]
    machine = int.from_bytes(head[18:20], "little") if len(head) >= 20 else -1
    arch = _ELF_MACHINES.get(machine, f"e_machine {machine}")
    check("architecture", head[:4] == b"\x7fELF" and arch == platform.machine(),
          f"{b.library.name}: ELF64 {arch} (host {platform.machine()})")
    names = _exports(b.library)
    check("exports", names == EXPORTS, "exactly the 13 CUDA and 5 NVML entry points (the runtime's also at "
          f"{', '.join(RUNTIME_VERSION_NODES)}) and dlsym" if names == EXPORTS
          else f"unexpected: {sorted(names ^ EXPORTS)}")
    wrong = paths.check_sums(b.dir, [LIBRARY, PROBE])
    check("SHA256SUMS", not wrong, "library and probe match" if not wrong else f"mismatch: {'; '.join(wrong)}")
    t4 = profiles.load("t4-class")
    fake = standin_env(b)
    try:
        stock, low = probe(None, b=b, extra_env=fake), probe(t4, b=b, extra_env=fake)
        diff = answer_differences(stock, low)
        state = low["shim"][SHIM]["state"]
        check("answers change with a profile (stand-ins)", state == "active" and "computeCapability" in diff,
              f"t4-class on the stand-in H200: {state}, {len(diff)} answers lowered")
        nvml = [(stock.get("nvml") or {}).get("answers", {}).get("computeCapability"),
                (low.get("nvml") or {}).get("answers", {}).get("computeCapability")]
        check("NVML answers change with a profile (stand-ins)", nvml == [90, 75],
              f"nvmlDeviceGetCudaComputeCapability on the stand-in H200: {nvml[0]} stock, {nvml[1]} under t4-class")
        with tempfile.TemporaryDirectory(prefix="capshim-verify-") as td:
            cfg = Path(td) / "broken.cfg"
            cfg.write_text("direction=lower\ncomputeCapability=75x\n")
            broken = probe(t4, b=b, extra_env={**fake, CONFIG_VAR: str(cfg)})
        bstate = broken["shim"][SHIM]["state"]
        check("stock with a broken configuration (stand-ins)",
              bstate == "invalid" and broken["capabilities"] == stock["capabilities"],
              f"'75x': {bstate}, answers {'stock' if broken['capabilities'] == stock['capabilities'] else 'CHANGED'}")
    except CapshimError as exc:
        check("answers change with a profile (stand-ins)", False, str(exc))
    try:
        real = probe(b=b)
        check("stock probe", True, f"{real['device']['name']}: runtime {real['runtime_version']}, "
              f"{len(real['capabilities'])} capabilities")
    except CapshimError as exc:
        out.append({"check": "cuda: stock probe", "status": "skipped (no CUDA device here)", "detail": str(exc)})
    return out


class CudaBackend(Backend):
    """The CUDA shim behind the :class:`capshim.backends.Backend` interface (lower-only, Linux)."""

    name = "cuda"
    shim_label = "the CUDA shim"
    platforms = ("linux",)
    can_simulate = False
    tabular_probe = True
    device_targets = True

    def unavailable(self) -> str | None:
        """The shim is an ELF library for LD_PRELOAD, built with a C compiler: Linux with gcc/cc."""
        if not sys.platform.startswith("linux"):
            return f"the CUDA shim builds on Linux only (this is {sys.platform})"
        if shutil.which(nb.compiler()) is None:
            return f"no C compiler ('{nb.compiler()}' not found: install build-essential, or set CC)"
        return None

    def build(self, force: bool = False) -> dict[str, Path]:
        """See :func:`build`: ``library``, ``probe``, ``fuzz_driver``, ``standin``, ``sums``."""
        b = build(force=force)
        return {"library": b.library, "probe": b.probe, "fuzz_driver": b.fuzz_driver, "standin": b.standin,
                "sums": b.dir / "SHA256SUMS"}

    def shim_artifacts(self) -> dict[str, Path]:
        """The shim library (metadata key ``cuda_shim``)."""
        return {"shim": build().library}

    def launch_env(self, profile, simulate, status_file, run_dir, inherit=False, quiet=False):
        """See :func:`launch_env` (the CUDA shim has no device role: ``simulate`` is refused earlier)."""
        return launch_env(profile, status_file, run_dir, inherit=inherit, quiet=quiet)

    def requested_shims(self, profile, simulate):
        """``["cuda"]`` with a profile."""
        return [SHIM] if profile is not None else []

    def summarize_status(self, report, shims):
        """See :func:`classify`."""
        return {name: classify(report) for name in shims}

    def run_states(self, report, shims, argv, wrapped=False):
        """See :func:`classify`, with the program's file read (:func:`capshim.program.inspect`)."""
        prog = program.inspect(argv[0]) if argv else None
        return {name: classify(report, prog=prog, wrapped=wrapped) for name in shims}

    def probe(self, profile=None, simulate=None, device=0, compare=False):
        """See :func:`probe`; with ``compare``: ``{"stock", "shimmed", "differences"}``.

        Raises:
            UsageError: ``compare`` without a profile; CapshimError: the probe failed.
        """
        if not compare:
            return probe(profile, device=device)
        if profile is None:
            raise UsageError("--compare needs --profile (the shimmed side)")
        stock, shimmed = _named(probe(None, device=device)), _named(probe(profile, device=device))
        return {"stock": stock, "shimmed": shimmed, "differences": answer_differences(stock, shimmed)}

    def devices(self) -> list[Device]:
        """See :func:`devices`."""
        return devices()

    def launch_env_targeted(self, placements, status_file, run_dir, inherit=False, quiet=False):
        """See :func:`launch_env_targeted`."""
        return launch_env_targeted(placements, status_file, run_dir, inherit=inherit, quiet=quiet)

    def probe_placed(self, placements, device):
        """:func:`probe` of ``device`` with the placements (None: stock), the name as a row."""
        return _named(probe(device=device, placements=placements))

    def verify(self, shim: Path | None = None) -> list[dict]:
        """See :func:`verify` (the shim checks its own build: ``shim`` is not supported)."""
        if shim is not None:
            raise UsageError("--shim: the CUDA shim checks its own build")
        return verify()

    def run_warnings(self, profile, simulate, argv):
        """See :func:`program_notes` and :func:`nvml_notes`."""
        return program_notes(profile, argv, self.stock_answers) + nvml_notes(profile, argv)

    def stock_answers(self, device: int = 0) -> dict:
        """A stock :func:`probe` of ``device`` (the driver's own answers)."""
        data = probe(device=device)
        data.pop("shim", None)
        return data


def nvml_notes(profile: Profile | None, argv: list[str]) -> list[str]:
    """What ``capshim run`` says once, before the program starts, about the NVML door (issue 27).

    - A program the dynamic linker will not load the shim into
      (:func:`capshim.backends.cuda_program.unreachable`: secure-execution mode, statically
      linked, another ELF class): none of its CUDA or NVML answers (nvidia-smi's ``compute_cap``
      included) can be lowered. The one sentence run prints about it.
    - ``nvidia-smi``: which of its answers the shim lowers through NVML and which stay the device's.

    Returns:
        Sentences naming the program; none without a profile or for a program not found.
    """
    if profile is None or not argv:
        return []
    prog = program.inspect(argv[0])
    if prog.path is None or prog.kind in ("missing", "folder", "special"):
        return []
    why = unreachable(prog)
    if why is not None:
        return [f"the shim cannot load: {why}; its CUDA and NVML answers stay the device's (nothing is lowered)"]
    if Path(prog.path).name == "nvidia-smi":
        return [f"{program.show(argv[0])}: through NVML the shim lowers compute_cap, the multiprocessor count, the "
                "architecture and, with deviceName, the name; memory, clocks, PCI ids and every other answer are "
                "the device's"]
    return []


BACKEND = CudaBackend()

__all__ = ["build", "build_paths", "render_config", "launch_env", "preload_value", "probe", "classify", "verify",
           "unreachable", "no_call", "standin_env", "find_runtime", "is_standin", "STANDIN_MARK", "program_notes",
           "nvml_notes", "CudaBuild",
           "CudaBackend", "BACKEND", "LIBRARY", "PROBE", "EXPORTS", "SHIM"]
