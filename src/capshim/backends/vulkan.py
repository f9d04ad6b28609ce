"""The Vulkan backend: the capshim layer (two roles), its configuration, and the probe.

The layer library (``native/vulkan/layer*.c``) is enabled for one process
through the Vulkan loader's own variables: ``VK_ADD_LAYER_PATH`` (the folder
of our two manifests) and ``VK_INSTANCE_LAYERS`` (Vulkan loader,
LoaderInterfaceArchitecture.md, "Table of Debug Environment Variables"); the
user's own loader settings that would hide the layers (``VK_LAYER_PATH``,
``VK_LOADER_LAYERS_DISABLE``, a Vulkan Configurator override layer or settings
file) are handled, or named, by :mod:`capshim.backends.vkloader`.

Roles:
    device  ``VK_LAYER_CAPSHIM_device``, next to the driver: ``--simulate``.
    app     ``VK_LAYER_CAPSHIM_app``, next to the application: ``--profile``.

Chain order: the app role must sit above the device role. The Debian 12
loader (1.3.239) orders explicit layers by where it found their manifests
(the order of ``VK_ADD_LAYER_PATH``) and ignores the order of
``VK_INSTANCE_LAYERS`` (measured here); newer loaders order by
``VK_INSTANCE_LAYERS``, first entry nearest the application. Each manifest
therefore has its own folder, and both variables list the app role first, so
either rule gives the right chain; every run checks it again from the status
file's ``entered`` fields (:mod:`capshim.status`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from capshim.contracts import bounded, environ
from capshim.contracts import output
from capshim import __version__, jsonread, paths, profiles
from capshim import status as st
from capshim.backends import Backend, answer_differences, placed_configs, run_probe, vkloader
from capshim.errors import EXIT_WORKLOAD, CapshimError, UsageError
from capshim.native import build as nb
from capshim.profiles import Profile, format_version
from capshim.profiles.model import encode_device_name
from capshim.profiles.targets import Device, Placement, normal_uuid

LAYER_APP = "VK_LAYER_CAPSHIM_app"
LAYER_DEVICE = "VK_LAYER_CAPSHIM_device"
ROLES = {"app": (LAYER_APP, "CAPSHIM_VK_APP_CONFIG"), "device": (LAYER_DEVICE, "CAPSHIM_VK_DEVICE_CONFIG")}
LIBRARY = "libcapshim_vulkan.so"
PROBE = "capshim-vk-probe"
#: The layer's own files (native/vulkan); the build adds every file of native/common (nb.COMMON_FILES).
LAYER_SOURCES = ["layer.c", "layer_settings.c", "layer_answers.c", "layer_enforce.c", "layer_tool.c", "layer_devices.c"]
SOURCES = [*LAYER_SOURCES, "layer.h", "probe.c", "caps_table.h", "fuzz_keys.h"]


def _source_paths() -> list[Path]:
    return [nb.source_dir("vulkan") / s for s in SOURCES] + nb.common_sources()


@dataclass(frozen=True)
class VulkanBuild:
    """Paths of a built Vulkan shim.

    Attributes:
        dir: the cache folder.
        library: the layer shared library (both roles).
        probe: the probe program.
        manifest_dirs: role -> folder holding that role's manifest (for VK_ADD_LAYER_PATH).
        fuzz_driver: the configuration parser's standalone fuzz driver (ASan+UBSan).
    """

    dir: Path
    library: Path
    probe: Path
    fuzz_driver: Path

    @property
    def manifest_dirs(self) -> dict[str, Path]:
        """Role ("app", "device") -> the folder of that role's manifest."""
        return {role: self.dir / "manifests" / role for role in ROLES}


def _manifest(layer: str, role: str) -> dict:
    # Layer manifest format 1.2.0 (LoaderLayerInterface.md): "functions" renames
    # the entry points, so one library serves two layers with separate state; a
    # library_path with a separator is relative to the manifest, so the build
    # folder can move (manifests/<role>/ -> ../../LIBRARY).
    return {
        "file_format_version": "1.2.0",
        "layer": {
            "name": layer,
            "type": "GLOBAL",
            "library_path": f"../../{LIBRARY}",
            "api_version": "1.4.0",
            "implementation_version": str(nb.version_number()),  # capshim.__version__, the one version
            "description": f"capshim {__version__} capability layer, {role} role",
            # The loader answers vkEnumerateDeviceExtensionProperties(pLayerName) from this list;
            # the layer implements the entry point (layer_tool.c). The Khronos Profiles
            # layer's manifest (Vulkan-Profiles, layer/VkLayer_khronos_profiles.json.in) and the
            # validation layer's list it the same way.
            "device_extensions": [{"name": "VK_EXT_tooling_info", "spec_version": "1",
                                   "entrypoints": ["vkGetPhysicalDeviceToolPropertiesEXT"]}],
            "functions": {
                "vkNegotiateLoaderLayerInterfaceVersion": f"capshim_{role}_NegotiateLoaderLayerInterfaceVersion",
                "vkGetInstanceProcAddr": f"capshim_{role}_GetInstanceProcAddr",
                "vkGetDeviceProcAddr": f"capshim_{role}_GetDeviceProcAddr",
            },
        },
    }


def _commands(cc: str) -> dict[str, list[str]]:
    common = [cc, "-std=gnu11", "-O2", "-g", *nb.WARNINGS, nb.VERSION_DEFINE]
    return {
        LIBRARY: [*common, "-fPIC", "-fvisibility=hidden", "-shared", "-Wl,-z,defs", "-o", LIBRARY,
                  *LAYER_SOURCES, "config.c", "status.c", "-lpthread"],
        PROBE: [*common, "-o", PROBE, "probe.c", "config.c", "status.c", "-lvulkan", "-lpthread"],
        "fuzz_config": [*common, "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                        "-o", "fuzz_config", "fuzz_config.c", "config.c"],
    }


def build_paths() -> VulkanBuild:
    """Where :func:`build` puts (or finds) the build of these sources; nothing is built or checked.

    Raises:
        OSError: a source cannot be read.
    """
    # The manifest layout is part of the build: bump it when _manifest or the folders change.
    final = nb.build_dir("vulkan", _source_paths(),
                         [*_commands(nb.compiler()).values(), ["manifest-layout", "6"]])
    return VulkanBuild(final, final / LIBRARY, final / PROBE, final / "fuzz_config")


def build(force: bool = False, repair: bool = True) -> VulkanBuild:
    """Build the layer, the probe and the fuzz driver (warnings are errors); reuse a cached build.

    A cached build is used only when its library and probe match its
    SHA256SUMS (checked cheaply, see :func:`capshim.native.build.cached_ok`);
    otherwise it is rebuilt, unless ``repair`` is False (``capshim verify``
    reports the mismatch instead).

    Raises:
        BuildError: no compiler, missing Vulkan headers (libvulkan-dev), or a
            compile error; the message names the command.
    """
    cmds = _commands(nb.compiler())
    result = build_paths()
    final = result.dir
    present = result.library.is_file() and result.probe.is_file()
    if not force and present and (not repair or nb.cached_ok(final, [LIBRARY, PROBE])):
        return result
    force = force or final.is_dir()  # a corrupted cached build is replaced
    if not Path("/usr/include/vulkan/vulkan.h").is_file() and not os.environ.get("CPATH"):
        raise CapshimError("Vulkan headers not found (/usr/include/vulkan/vulkan.h): "
                           "install libvulkan-dev (./setup.sh does)")
    with nb.staging(final) as tmp:  # never left behind; a full cache disk is exit 4 naming the file
        for src in _source_paths():
            (tmp / src.name).write_bytes(src.read_bytes())
        for cmd in cmds.values():
            nb.run_compiler(cmd, tmp)
        for role, (layer, _env) in ROLES.items():
            data = _manifest(layer, role)
            (tmp / "manifests" / role).mkdir(parents=True)
            (tmp / "manifests" / role / f"{layer}.json").write_text(json.dumps(data, indent=2) + "\n")
        paths.write_sums(tmp, [LIBRARY, PROBE], fsync=False)
        nb.publish(tmp, final, replace=force)
    return result


EXPORTS = {f"capshim_{role}_{fn}" for role in ROLES
           for fn in ("NegotiateLoaderLayerInterfaceVersion", "GetInstanceProcAddr", "GetDeviceProcAddr")}
# ELF e_machine values (System V ABI, elf.h): EM_X86_64 = 62, EM_AARCH64 = 183.
ELF_MACHINES = {62: "x86_64", 183: "aarch64"}


def verify() -> list[dict]:
    """Check the user's loader settings (:func:`loader_check`) and the built Vulkan
    layer: ELF architecture, exported symbols, manifests, SHA256SUMS, a stock
    probe, that answers change with a profile and stay stock with a broken
    configuration. Each check has its own name, also
    when it fails with an error (a failed stock probe skips the two that
    need it).

    Returns:
        ``[{"check": "vulkan: NAME", "status": "passed"|"failed", "detail"}]``.

    Raises:
        BuildError: the layer cannot be built.
    """

    b = build(repair=False)  # a cached build that fails its SHA256SUMS is reported, not replaced
    out = [loader_check()]

    def check(name, ok, detail):
        out.append({"check": f"vulkan: {name}", "status": "passed" if ok else "failed", "detail": detail})

    head = b.library.read_bytes()[:20]
    machine = int.from_bytes(head[18:20], "little") if len(head) >= 20 else -1
    arch = ELF_MACHINES.get(machine, f"e_machine {machine}")
    check("architecture", head[:4] == b"\x7fELF" and head[4] == 2 and arch == platform.machine(),
          f"{b.library.name}: ELF64 {arch} (host {platform.machine()})")
    nm = bounded.run(["nm", "-D", "--defined-only", str(b.library)])
    names = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip() and line.split()[1] in "TtWw"}
    check("exports", nm.returncode == 0 and names == EXPORTS,
          "exactly the six role entry points" if names == EXPORTS else f"unexpected: {sorted(names ^ EXPORTS)}")
    bad = []
    for role, (layer, _var) in ROLES.items():
        try:
            m = jsonread.load(b.manifest_dirs[role] / f"{layer}.json", limit=1 << 20)
            lib = (b.manifest_dirs[role] / m["layer"]["library_path"]).resolve()
            if m["layer"]["name"] != layer or lib != b.library.resolve():
                bad.append(f"{layer}: names {m['layer']['name']} / {lib}")
        except (jsonread.JsonShapeError, KeyError, TypeError) as exc:
            bad.append(f"{layer}: {exc}")
    check("manifests", not bad, "; ".join(bad) or "both roles point at the library")
    wrong = paths.check_sums(b.dir, [LIBRARY, PROBE])
    check("SHA256SUMS", not wrong, "library and probe match" if not wrong else f"mismatch: {'; '.join(wrong)}")
    try:
        stock = probe()
    except CapshimError as exc:
        check("stock probe", False, str(exc))
        return out
    check("stock probe", True, f"{stock['device']['name']}: {len(stock['capabilities'])} capabilities")
    paravirt = profiles.load("vulkan-paravirt")
    try:
        sim = probe(simulate=paravirt)
        changed = [k for k in stock["capabilities"] if stock["capabilities"][k] != sim["capabilities"][k]]
        state = sim["shim"][LAYER_DEVICE]["state"]
        check("answers change with a profile", state == "active" and bool(changed),
              f"vulkan-paravirt: {state}, {len(changed)} capabilities changed on {stock['device']['name']}")
    except CapshimError as exc:
        check("answers change with a profile", False, str(exc))
    try:
        with tempfile.TemporaryDirectory(prefix="capshim-verify-") as td:
            cfg = Path(td) / "broken.cfg"
            cfg.write_text("direction=lower\nmaxComputeSharedMemorySize=1009x\n")
            broken = probe(simulate=paravirt, extra_env={"CAPSHIM_VK_DEVICE_CONFIG": str(cfg)})
        bstate = broken["shim"][LAYER_DEVICE]["state"]
        check("stock with a broken configuration",
              bstate == "invalid" and broken["capabilities"] == stock["capabilities"],
              f"'1009x': {bstate}, answers {'stock' if broken['capabilities'] == stock['capabilities'] else 'CHANGED'}")
    except CapshimError as exc:
        check("stock with a broken configuration", False, str(exc))
    return out


_CONFIG_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""A profile name the layer's configuration takes (``profile=``, config.h); the layer names it
in its VK_EXT_tooling_info description."""


def render_config(profile: Profile) -> str:
    """The layer's key=value configuration for a Vulkan profile (format: native/common/config.h)."""
    if profile.api != "vulkan":
        raise UsageError(f"profile {profile.source}: api is '{profile.api}', the Vulkan layer needs 'vulkan'")
    lines = [f"# capshim profile {profile.name} version {profile.version} sha256 {profile.sha256}",
             f"direction={profile.direction}"]
    if _CONFIG_NAME.fullmatch(profile.name):  # always, for a parsed profile (NAME_RE is narrower)
        lines.append(f"profile={profile.name}")
    lines += [f"{k}={v}" for k, v in profile.capabilities.items()]
    if profile.device_name:  # percent-encoded, as devname.h reads it
        lines.append(f"deviceName={encode_device_name(profile.device_name)}")
    lines += [f"extension.{k}={v}" for k, v in profile.extensions.items()]
    return "\n".join(lines) + "\n"


def launch_env(profile: Profile | None, simulate: Profile | None, status_file: Path, run_dir: Path,
               quiet: bool = False) -> dict[str, str]:
    """Environment variables to add so one process runs with the layer roles asked for.

    Args:
        profile: the app-role profile (``--profile``), or None.
        simulate: the device-role profile (``--simulate``), or None.
        status_file: where the layers append their JSON-lines status.
        run_dir: a folder for this run's configuration files (must exist).
        quiet: set CAPSHIM_QUIET=1 (no stderr banner).

    Returns:
        A dict of variables to add to (or replace in) the process environment;
        the loader's variables (``VK_ADD_LAYER_PATH``, ``VK_INSTANCE_LAYERS``, and
        ``VK_LAYER_PATH`` / ``VK_LOADER_LAYERS_ENABLE`` where the user's settings
        would hide the layers: :func:`capshim.backends.vkloader.layer_env`) keep
        the user's entries after capshim's.

    Raises:
        UsageError: a profile whose api is not "vulkan".
        BuildError / CapshimError: the layer cannot be built or does not load.
    """
    b = build()
    configs = {}
    for role, prof in (("app", profile), ("device", simulate)):
        if prof is None:
            continue
        cfg = run_dir / f"vulkan-{role}.cfg"
        # the run folder may be the workload's working folder: never through a link left there (contracts.output)
        output.write_file(cfg, render_config(prof).encode(), replace=True, fsync=False)
        configs[role] = str(cfg)
    return _layers_env(b, configs, status_file, quiet)


def _layers_env(b, configs: dict[str, str], status_file: Path, quiet: bool) -> dict[str, str]:
    """The variables that enable the layers of ``configs`` (``{role: its configuration variable's
    value}``, app role first): the status file, quiet, each role's variable and the loader's; ``{}``
    when no role has one."""
    if not configs:
        return {}
    env: dict[str, str] = {"CAPSHIM_STATUS_FILE": str(status_file)}
    if quiet:
        env["CAPSHIM_QUIET"] = "1"
    roles = [r for r in ("app", "device") if r in configs]
    env.update({ROLES[r][1]: configs[r] for r in roles})
    # App role first in every list (module docstring: chain order); the loader's other
    # spellings (VK_LAYER_PATH, VK_LOADER_LAYERS_DISABLE) are handled by vkloader.layer_env.
    env.update(vkloader.layer_env(os.environ, [str(b.manifest_dirs[r]) for r in roles],
                                  [ROLES[r][0] for r in roles]))
    return env


def launch_env_targeted(placements: list[Placement], status_file: Path, run_dir: Path,
                        quiet: bool = False) -> dict[str, str]:
    """:func:`launch_env` for profiles placed on devices: each role's variable lists one
    configuration per placement (:func:`capshim.backends.placed_configs`).

    Raises:
        UsageError: a profile whose api is not "vulkan", or more placements in a role than the layer takes.
    """
    b = build()
    configs = {role: files for role, placed_role in (("app", "profile"), ("device", "simulate"))
               if (files := placed_configs(placements, placed_role, render_config, run_dir, f"vulkan-{role}"))}
    return _layers_env(b, configs, status_file, quiet)


def devices() -> list[Device]:
    """The Vulkan physical devices a process sees without capshim's layers, in the loader's order
    (the probe's ``--list``: deviceName, VkPhysicalDeviceIDProperties::deviceUUID).

    Raises:
        CapshimError: no Vulkan driver (exit 1).
    """
    b = build()
    env = environ.child_base()
    data, _ = run_probe([str(b.probe), "--list"], env, "the Vulkan probe")
    if "error" in data:
        raise CapshimError(f"Vulkan probe: {data['error']} (the devices cannot be listed; is a Vulkan driver "
                           "installed? try: vulkaninfo --summary)", exit_code=EXIT_WORKLOAD)
    return [Device(int(d["index"]), normal_uuid(d.get("uuid")), str(d.get("name", "")))
            for d in data.get("devices", [])]


def _layer_folders(layers: list[str]) -> list[str]:
    """The manifest folders of ``layers`` (same order), without building anything."""
    b = build_paths()
    by_name = {name: str(b.manifest_dirs[role]) for role, (name, _var) in ROLES.items()}
    return [by_name[n] for n in layers if n in by_name]


def loader_problems(layers: list[str], exe: str | None = None) -> list[str]:
    """What in the user's loader setup keeps ``layers`` from loading, that capshim cannot undo
    (:func:`capshim.backends.vkloader.problems`, with this build's manifest folders)."""
    return vkloader.problems(os.environ, _layer_folders(layers), layers, exe)


def classify(report: st.StatusReport, layer: str, requested: bool = True, exe: str | None = None) -> st.ShimState:
    """:func:`capshim.status.classify`, and for a layer that never loaded the loader setting that
    explains it (:func:`loader_problems`), named in the reason."""
    state = st.classify(report, layer, requested=requested)
    if state.state == st.INERT and state.reason.startswith("never loaded"):
        why = loader_problems([layer], exe)
        if why:
            return st.ShimState(st.INERT, f"never loaded: {'; '.join(why)}", state.changes)
    return state


def loader_check() -> dict:
    """``verify``'s "loader settings" check: failed naming each setting that hides the layers
    (:func:`loader_problems`), else passed naming what capshim works around
    (:func:`capshim.backends.vkloader.notes`)."""
    layers = [LAYER_APP, LAYER_DEVICE]
    bad = loader_problems(layers)
    if bad:
        return {"check": "vulkan: loader settings", "status": "failed", "detail": "; ".join(bad)}
    done = vkloader.notes(os.environ, layers)
    version = vkloader.loader_version()
    loader = f"loader {'.'.join(map(str, version))}: " if version else ""
    return {"check": "vulkan: loader settings", "status": "passed",
            "detail": loader + ("; ".join(done) if done else "nothing in the loader's settings hides the layers")}


def requested_layers(profile: Profile | None, simulate: Profile | None) -> list[str]:
    """Layer names a run with these profiles asks for."""
    out = []
    if profile is not None:
        out.append(LAYER_APP)
    if simulate is not None:
        out.append(LAYER_DEVICE)
    return out


def probe(profile: Profile | None = None, simulate: Profile | None = None, device: int = 0,
          create_device: list[str] | None = None, extra_env: dict[str, str] | None = None,
          placements: list[Placement] | None = None) -> dict:
    """What one process sees through the layers asked for.

    Returns:
        The probe's JSON: ``device`` (name, driver, type, apiVersion ...),
        ``capabilities`` (Vulkan key -> value; null when the structure holding
        it was not queried because the device does not report it), ``extensions``
        (name -> spec version), and ``shim`` (layer name -> {"state", "reason"}
        for both roles: active, inert, invalid or absent).

    Raises:
        CapshimError: the probe failed (no Vulkan driver, bad device index).
    """

    b = build()
    with tempfile.TemporaryDirectory(prefix="capshim-probe-") as td:
        tdp = Path(td)
        status_file = tdp / "status.jsonl"
        env = environ.child_base()
        if placements is not None:
            env.update(launch_env_targeted(placements, status_file, tdp, quiet=True))
        else:
            env.update(launch_env(profile, simulate, status_file, tdp, quiet=True))
        env.update(extra_env or {})
        cmd = [str(b.probe), "--device", str(device)]
        if create_device:
            cmd += ["--create-device", ",".join(create_device)]
        data, stderr = run_probe(cmd, env, "the Vulkan probe")
        if "error" in data:
            if "no Vulkan device with index" in data["error"]:
                raise UsageError(f"--device {device}: {data['error']}")
            raise CapshimError(f"Vulkan probe: {data['error']} (is a Vulkan driver installed? "
                               "try: vulkaninfo --summary)", exit_code=EXIT_WORKLOAD)
        report = st.read(status_file)
        asked = requested_layers(profile, simulate)
        if placements is not None:
            asked = requested_layers(*(next((p.profile for p in placements if p.role == r), None)
                                       for r in ("profile", "simulate")))
        data["shim"] = {layer: classify(report, layer, requested=layer in asked).to_dict()
                        for layer in (LAYER_APP, LAYER_DEVICE)}
        data["stderr"] = stderr
        return data


class VulkanBackend(Backend):
    """The Vulkan layer behind the :class:`capshim.backends.Backend` interface."""

    name = "vulkan"
    shim_label = "the Vulkan layer"
    platforms = ("linux",)
    can_simulate = True
    tabular_probe = True
    device_targets = True
    # Measured on the Debian 12 loader (1.3.239) and lavapipe (issue 8's field
    # report, and tests/backends/test_backends.py): vkCreateDevice with such an
    # extension enabled succeeds, the extension is not there and its entry
    # points are NULL.
    added_extension_note = "the driver does not have it: will be dropped by the loader at vkCreateDevice"

    def unavailable(self) -> str | None:
        """The layer is an ELF shared library for the Vulkan loader's layer interface: Linux only."""
        if not sys.platform.startswith("linux"):
            return f"the Vulkan layer builds on Linux only (this is {sys.platform})"
        return None

    def build(self, force: bool = False) -> dict[str, Path]:
        """See :func:`build`: ``library``, ``probe``, ``fuzz_driver``, ``sums``."""
        b = build(force=force)
        return {"library": b.library, "probe": b.probe, "fuzz_driver": b.fuzz_driver, "sums": b.dir / "SHA256SUMS"}

    def shim_artifacts(self) -> dict[str, Path]:
        """The layer library (metadata key ``vulkan_layer``)."""
        return {"layer": build().library}

    def launch_env(self, profile, simulate, status_file, run_dir, inherit=False, quiet=False):
        """See :func:`launch_env` (``inherit`` is the launcher's: ``CAPSHIM_INHERIT``)."""
        return launch_env(profile, simulate, status_file, run_dir, quiet=quiet)

    def requested_shims(self, profile, simulate):
        """See :func:`requested_layers`."""
        return requested_layers(profile, simulate)

    def run_warnings(self, profile, simulate, argv):
        """The loader settings that will keep the requested layers from loading (:func:`loader_problems`)."""
        layers = requested_layers(profile, simulate)
        exe = (argv[0] if "/" in argv[0] else shutil.which(argv[0])) if argv else None
        return loader_problems(layers, exe) if layers else []

    def summarize_status(self, report, shims):
        """See :func:`classify`: a layer that never loaded names the loader setting that hid it."""
        return {name: classify(report, name) for name in shims}

    def probe(self, profile=None, simulate=None, device=0, compare=False):
        """See :func:`probe` (without its ``stderr``); with ``compare``:
        ``{"stock", "shimmed", "differences": {key: [stock, shimmed]}}``.

        Raises:
            UsageError: ``compare`` without a profile; CapshimError: the probe failed.
        """
        def once(p, s):
            data = probe(profile=p, simulate=s, device=device)
            data.pop("stderr", None)
            return data

        if not compare:
            return once(profile, simulate)
        if profile is None and simulate is None:
            raise UsageError("--compare needs --profile and/or --simulate (the shimmed side)")
        stock, shimmed = once(None, None), once(profile, simulate)
        return {"stock": stock, "shimmed": shimmed, "differences": answer_differences(stock, shimmed)}

    def devices(self) -> list[Device]:
        """See :func:`devices`."""
        return devices()

    def launch_env_targeted(self, placements, status_file, run_dir, inherit=False, quiet=False):
        """See :func:`launch_env_targeted`."""
        return launch_env_targeted(placements, status_file, run_dir, quiet=quiet)

    def probe_placed(self, placements, device):
        """:func:`probe` of ``device`` with the placements (None: stock), without its ``stderr``."""
        data = probe(device=device, placements=placements)
        data.pop("stderr", None)
        return data

    def verify(self, shim: Path | None = None) -> list[dict]:
        """See :func:`verify` (the layer checks its own build: ``shim`` is not supported)."""
        if shim is not None:
            raise UsageError("--shim: the Vulkan layer checks its own build")
        return verify()

    def stock_answers(self, device: int = 0) -> dict:
        """A stock :func:`probe` of ``device`` (its capabilities and extensions are the driver's)."""
        data = probe(device=device)
        data.pop("stderr", None)
        return data


BACKEND = VulkanBackend()

__all__ = ["build", "render_config", "launch_env", "probe", "requested_layers", "verify",
           "LAYER_APP", "LAYER_DEVICE", "VulkanBuild", "VulkanBackend", "BACKEND", "format_version"]
