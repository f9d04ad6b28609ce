"""The Vulkan loader's settings that decide whether capshim's layers load, and what capshim does about them.

capshim enables its explicit layers for one process with ``VK_ADD_LAYER_PATH``
(the manifest folders) and ``VK_INSTANCE_LAYERS`` (the layer names). Other
settings of the loader can hide them; each fact below is quoted from the
Khronos Vulkan-Loader (``docs/LoaderLayerInterface.md``, "Linux Layer
Discovery" and "Override Meta-Layer"; ``docs/LoaderInterfaceArchitecture.md``,
"Table of Debug Environment Variables") and was checked against the Debian 12
loader (1.3.239, ``loader/loader.c``, ``loader/loader_environment.c``) by the
tests in ``tests/backends/test_vkloader.py``:

``VK_LAYER_PATH``
    "If ``VK_LAYER_PATH`` is present, then ``VK_ADD_LAYER_PATH`` will not be
    used by the loader and any values will be ignored" (LoaderLayerInterface.md;
    1.3.239 ``read_data_files_in_search_paths``: "If there's an override, use
    that ... and nothing else"; an empty value counts as present). The Vulkan
    SDK's ``setup-env.sh`` sets it. capshim adds its folders in front of the
    user's entries there (:func:`layer_env`), which keeps every layer the user
    pointed at.
``VK_LOADER_LAYERS_DISABLE``
    Comma-separated, case-insensitive globs (``*x*``, ``x*``, ``*x``, a full
    name) and ``~all~``/``*``/``**``, ``~explicit~``, ``~implicit~``
    (LoaderInterfaceArchitecture.md; 1.3.234 and later). The table says
    ``VK_INSTANCE_LAYERS`` "overrides any layers disabled with
    VK_LOADER_LAYERS_DISABLE", but the 1.3.239 loader drops a matching layer
    while it scans the manifests (``loader_layer_is_available``: "forced
    disabled because name matches filter"), before ``VK_INSTANCE_LAYERS`` is
    read (measured: the layer never loads). A layer that matches
    ``VK_LOADER_LAYERS_ENABLE`` stays available ("This is also checked before
    other layer environment variables (such as VK_LOADER_LAYERS_ENABLE) so
    that a user may easily disable all layers and then selectively re-enable
    individual layers"), so capshim adds its layer names, in full, to
    ``VK_LOADER_LAYERS_ENABLE`` when the disable filter matches one of them.
``VK_LOADER_LAYERS_ENABLE``
    Only enables more layers; the user's value is kept after capshim's names.
``VK_INSTANCE_LAYERS``
    capshim's names go first ("the initial layer being the closest to the
    application"), the user's follow, a name already there is not repeated.
Override meta-layer
    An implicit layer named ``VK_LAYER_LUNARG_override`` (the Vulkan
    Configurator writes ``~/.local/share/vulkan/implicit_layer.d/VkLayer_override.json``):
    "If the override layer is both present and contains ``override_paths``,
    the paths from the environment variable ``VK_LAYER_PATH`` are ignored when
    searching for explicit layers" (the 1.3.239 loader ignores ``VK_ADD_LAYER_PATH``
    too: measured), and ``blacklisted_layers`` "will prevent both implicitly
    enabled and explicitely enabled layers from activating". It applies to
    every program unless ``app_keys`` lists programs, and not at all while its
    ``disable_environment`` variable is set. capshim cannot undo it without
    dropping the user's Configurator setup, so it names the file and what to do
    (:func:`problems`).
Loader settings file
    ``vk_loader_settings.json`` in ``loader_settings.d`` (the Vulkan Configurator 3
    writes it; LoaderSettingsFile.md: "a replacement for setting debug environment
    variables"), read by loaders from 1.3.261 (the first tag holding
    ``loader/settings.c``). Its ``layers`` list, when not empty, is the whole
    list of layers unless one entry has ``"control": "unordered_layer_location"``
    (``settings.c``, ``combine_settings_layers_with_regular_layers``: "No regular
    layers or has_unordered_layer_location is false - just copy settings to
    output_layers"): capshim's layers, found through the environment, are then
    dropped. The Debian 12 loader (1.3.239) does not read the file; capshim asks
    the loader its version (``vkEnumerateInstanceVersion``) and names the file
    only for a loader that reads it (:func:`settings_problem`).
Elevated privileges
    "For security reasons, ``VK_LAYER_PATH``, ``VK_ADD_LAYER_PATH`` ... are
    ignored if running with elevated privileges" (the loader reads them with
    ``secure_getenv``): a set-user-ID or set-group-ID program never finds the
    layers (:func:`elevated`).

Not causes: a manifest's ``enable_environment``/``disable_environment`` apply
to implicit layers only (LoaderLayerInterface.md, "Layer Manifest File
Format"), and capshim's manifests are explicit; ``VK_LOADER_DISABLE_INST_EXT_FILTER``
turns off the loader's filtering of instance extensions, not layers.
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from capshim.contracts import pasteable
from capshim import jsonread

#: The loader's list variables capshim extends for a shimmed process; a process without
#: shims gets the user's own value of each (see :mod:`capshim.bench.runs`).
LIST_VARS = ("VK_ADD_LAYER_PATH", "VK_LAYER_PATH", "VK_INSTANCE_LAYERS", "VK_LOADER_LAYERS_ENABLE")
OVERRIDE_LAYER = "VK_LAYER_LUNARG_override"
#: Implicit-layer manifests read at most per folder, and bytes per manifest.
MAX_MANIFESTS, MAX_MANIFEST_BYTES = 256, 1 << 20


def _glob_matches(pattern: str, name: str) -> bool:
    """One loader filter entry against a layer name (loader_environment.c ``determine_filter_type``:
    ``*x*`` substring, ``x*`` prefix, ``*x`` suffix, else the full name; case-insensitive)."""
    p, n = pattern.strip().lower(), name.lower()
    if not p:
        return False
    if len(p) > 2 and p.startswith("*") and p.endswith("*"):
        return p[1:-1] in n
    if p.startswith("*"):
        return n.endswith(p[1:])
    if p.endswith("*"):
        return n.startswith(p[:-1])
    return p == n


def filter_match(value: str | None, layer: str, explicit: bool = True) -> str | None:
    """The first entry of a ``VK_LOADER_LAYERS_*`` value that selects ``layer``, or None.

    ``~all~``, ``*`` and ``**`` select every layer, ``~explicit~`` explicit ones,
    ``~implicit~`` implicit ones (LoaderInterfaceArchitecture.md).
    """
    for entry in (value or "").split(","):
        e = entry.strip().lower()
        if e in ("~all~", "*", "**") or (e == "~explicit~" and explicit) or (e == "~implicit~" and not explicit):
            return entry.strip()
        if not e.startswith("~") and _glob_matches(e, layer):
            return entry.strip()
    return None


def layer_env(environ: Mapping[str, str], folders: Sequence[str], layers: Sequence[str]) -> dict[str, str]:
    """The loader variables that enable ``layers`` (manifests in ``folders``, same order) for one process.

    Args:
        environ: the environment the process inherits (``os.environ``).
        folders: manifest folders, the layer nearest the application first.
        layers: layer names, in the same order.

    Returns:
        ``VK_ADD_LAYER_PATH`` and ``VK_INSTANCE_LAYERS`` always (capshim's entries
        first, the user's after); ``VK_LAYER_PATH`` when the user has it (even
        empty: the loader then ignores ``VK_ADD_LAYER_PATH``); ``VK_LOADER_LAYERS_ENABLE``
        when ``VK_LOADER_LAYERS_DISABLE`` selects one of ``layers``. Module docstring: why.
    """
    def joined(ours: Sequence[str], theirs: str | None, sep: str) -> str:
        kept = [p for p in (theirs or "").split(sep) if p and p not in ours] if theirs else []
        return sep.join([*ours, *kept])

    env = {"VK_ADD_LAYER_PATH": joined(folders, environ.get("VK_ADD_LAYER_PATH"), os.pathsep),
           "VK_INSTANCE_LAYERS": joined(layers, environ.get("VK_INSTANCE_LAYERS"), os.pathsep)}
    if "VK_LAYER_PATH" in environ:
        env["VK_LAYER_PATH"] = joined(folders, environ["VK_LAYER_PATH"], os.pathsep)
    disable = environ.get("VK_LOADER_LAYERS_DISABLE")
    if any(filter_match(disable, name) for name in layers):
        env["VK_LOADER_LAYERS_ENABLE"] = joined(layers, environ.get("VK_LOADER_LAYERS_ENABLE"), ",")
    return env


def notes(environ: Mapping[str, str], layers: Sequence[str]) -> list[str]:
    """Sentences saying which of the user's loader settings capshim worked around (for ``verify``)."""
    out = []
    if "VK_LAYER_PATH" in environ:
        out.append("VK_LAYER_PATH is set (the loader then ignores VK_ADD_LAYER_PATH): capshim adds its "
                   "manifest folders in front of its entries for the shimmed process")
    hit = [(n, filter_match(environ.get("VK_LOADER_LAYERS_DISABLE"), n)) for n in layers]
    hit = [(n, m) for n, m in hit if m]
    if hit:
        out.append(f"VK_LOADER_LAYERS_DISABLE entry '{hit[0][1]}' disables {', '.join(n for n, _ in hit)}: capshim "
                   "re-enables them by name with VK_LOADER_LAYERS_ENABLE for the shimmed process")
    return out


@dataclass(frozen=True)
class Override:
    """One override meta-layer manifest the loader would read.

    Attributes:
        path: the manifest file.
        override_paths: the only folders searched for explicit layers while it applies ([] when none).
        blacklisted: layer names it blocks.
        app_keys: the programs it applies to ([]: every program).
        disable_env: (name, value) that turns it off, or None.
    """

    path: Path
    override_paths: list[str]
    blacklisted: list[str]
    app_keys: list[str]
    disable_env: tuple[str, str] | None

    def active(self, environ: Mapping[str, str]) -> bool:
        """Whether its ``disable_environment`` variable is not set to its value (then it applies)."""
        return self.disable_env is None or environ.get(self.disable_env[0]) != self.disable_env[1]


def implicit_folders(environ: Mapping[str, str]) -> list[Path]:
    """The folders the Linux loader searches for implicit layers, in its order (LoaderLayerInterface.md,
    "Linux Layer Discovery": XDG_CONFIG_HOME (default ~/.config), XDG_CONFIG_DIRS (default /etc/xdg),
    SYSCONFDIR (/etc; /usr/local/etc as EXTRASYSCONFDIR), XDG_DATA_HOME (default ~/.local/share),
    XDG_DATA_DIRS (default /usr/local/share:/usr/share), each + ``/vulkan/implicit_layer.d``);
    ``VK_IMPLICIT_LAYER_PATH`` replaces them and ``VK_ADD_IMPLICIT_LAYER_PATH`` comes first (newer loaders)."""
    if environ.get("VK_IMPLICIT_LAYER_PATH"):
        return [Path(p) for p in environ["VK_IMPLICIT_LAYER_PATH"].split(os.pathsep) if p]
    home = environ.get("HOME", "")
    bases = [environ.get("XDG_CONFIG_HOME") or (f"{home}/.config" if home else ""),
             *(environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep), "/etc", "/usr/local/etc",
             environ.get("XDG_DATA_HOME") or (f"{home}/.local/share" if home else ""),
             *(environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(os.pathsep)]
    added = [Path(p) for p in environ.get("VK_ADD_IMPLICIT_LAYER_PATH", "").split(os.pathsep) if p]
    return added + [Path(b) / "vulkan" / "implicit_layer.d" for b in dict.fromkeys(bases) if b]


def _strings(value) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def overrides(environ: Mapping[str, str]) -> list[Override]:
    """The override meta-layer manifests in the implicit-layer folders (at most :data:`MAX_MANIFESTS`
    files a folder, each read bounded by :mod:`capshim.jsonread`; an unreadable one is skipped). Never raises."""
    found = []
    for folder in implicit_folders(environ):
        try:
            files = sorted(p for p in folder.iterdir() if p.suffix == ".json")[:MAX_MANIFESTS]
        except OSError:
            continue
        for f in files:
            try:
                doc = jsonread.load(f, limit=MAX_MANIFEST_BYTES)
            except (jsonread.JsonShapeError, OSError):
                continue
            layers = doc.get("layers") if isinstance(doc, dict) else None
            for layer in (layers if isinstance(layers, list) else [doc.get("layer") if isinstance(doc, dict) else None]):
                if not isinstance(layer, dict) or layer.get("name") != OVERRIDE_LAYER:
                    continue
                dis = layer.get("disable_environment")
                pair = next(iter(dis.items()), None) if isinstance(dis, dict) and dis else None
                found.append(Override(f, _strings(layer.get("override_paths")), _strings(layer.get("blacklisted_layers")),
                                      _strings(layer.get("app_keys")),
                                      (str(pair[0]), str(pair[1])) if pair else None))
    return found


#: The first loader version that reads the loader settings file (tag sdk-1.3.261.0 adds loader/settings.c).
SETTINGS_SINCE = (1, 3, 261)
SETTINGS_FILE = "vk_loader_settings.json"


@functools.cache
def loader_version() -> tuple[int, int, int] | None:
    """The installed loader's own version, (major, minor, patch), from ``vkEnumerateInstanceVersion``
    (Vulkan 1.1; a loader "must" return its version, VK_API_VERSION packing), or None when
    ``libvulkan.so.1`` cannot be loaded or lacks the function (a 1.0 loader). Cached."""
    try:
        lib = ctypes.CDLL("libvulkan.so.1")
        fn = lib.vkEnumerateInstanceVersion
    except (OSError, AttributeError):
        return None
    v = ctypes.c_uint32(0)
    fn.argtypes = [ctypes.POINTER(ctypes.c_uint32)]
    if fn(ctypes.byref(v)) != 0:
        return None
    return (v.value >> 22) & 0x7F, (v.value >> 12) & 0x3FF, v.value & 0xFFF


def settings_file(environ: Mapping[str, str]) -> Path | None:
    """The loader settings file a loader would use: the first that exists of XDG_CONFIG_HOME,
    XDG_DATA_HOME, ~/.config and ~/.local/share (when those are unset), XDG_CONFIG_DIRS (default
    /etc/xdg), /etc, /usr/local/etc, XDG_DATA_DIRS (default /usr/local/share:/usr/share), each +
    ``/vulkan/loader_settings.d/vk_loader_settings.json`` (``settings.c``, ``get_unix_settings_path``)."""
    home = environ.get("HOME", "")
    cfg, data = environ.get("XDG_CONFIG_HOME", ""), environ.get("XDG_DATA_HOME", "")
    bases = [cfg, data, f"{home}/.config" if home and not cfg else "", f"{home}/.local/share" if home and not data
             else "", *(environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep), "/etc", "/usr/local/etc",
             *(environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(os.pathsep)]
    for base in bases:
        path = Path(base) / "vulkan" / "loader_settings.d" / SETTINGS_FILE if base else None
        if path is not None and path.is_file():
            return path
    return None


def settings_problem(environ: Mapping[str, str], layers: Sequence[str]) -> str | None:
    """Why the loader settings file will drop ``layers``, in words (module docstring), or None: no
    file, a loader older than :data:`SETTINGS_SINCE`, an unreadable file, no global ``layers`` list,
    an ``unordered_layer_location`` entry, or every one of ``layers`` listed on or auto. Never raises."""
    path = settings_file(environ)
    version = loader_version() if path is not None else None
    if path is None or (version is not None and version < SETTINGS_SINCE):
        return None
    try:
        doc = jsonread.load(path, limit=MAX_MANIFEST_BYTES)
    except (jsonread.JsonShapeError, OSError):
        return None
    objs = doc.get("settings_array") if isinstance(doc, dict) else None
    objs = objs if isinstance(objs, list) else [doc.get("settings") if isinstance(doc, dict) else None]
    glob = next((o for o in objs if isinstance(o, dict) and "app_keys" not in o), None)
    listed_layers = glob.get("layers") if isinstance(glob, dict) else None
    entries = [e for e in listed_layers if isinstance(e, dict)] if isinstance(listed_layers, list) else []
    if not entries or any(e.get("control") == "unordered_layer_location" for e in entries):
        return None
    listed = {e.get("name") for e in entries if e.get("control") in ("on", "auto")}
    missing = [n for n in layers if n not in listed]
    if not missing:
        return None
    which = f"loader {'.'.join(map(str, version))}" if version else "a loader of 1.3.261 or later"
    return (f"the loader settings file {path} (Vulkan Configurator) lists the layers to load and has no "
            f"unordered_layer_location entry: the {which} drops every other layer, {', '.join(missing)} "
            "included; close vkconfig or remove the file")


def elevated(exe: str | None) -> str | None:
    """Why the loader would ignore the layer-path variables for program ``exe`` (set-user-ID or
    set-group-ID, run by another user or group), or None."""
    if not exe:
        return None
    try:
        st = os.stat(exe)
    except OSError:
        return None
    if st.st_mode & stat.S_ISUID and st.st_uid != os.getuid():
        return f"{exe} is set-user-ID"
    if st.st_mode & stat.S_ISGID and st.st_gid != os.getgid():
        return f"{exe} is set-group-ID"
    return None


def problems(environ: Mapping[str, str], folders: Sequence[str], layers: Sequence[str],
             exe: str | None = None) -> list[str]:
    """What keeps ``layers`` (manifests in ``folders``) from loading that capshim cannot undo, one
    sentence each naming the file or variable and what to do; [] when nothing does. Never raises."""
    out = []
    for o in overrides(environ):
        if not o.active(environ):
            continue
        scope = f"for {', '.join(o.app_keys[:3])}" if o.app_keys else "for every program"
        off = (f"run with {o.disable_env[0]}={pasteable.arg(o.disable_env[1])} (its disable_environment)" if o.disable_env
               else "remove the file")
        ours = [str(Path(f).resolve()) for f in folders]
        if o.override_paths and not all(f in {str(Path(p).resolve()) for p in o.override_paths} for f in ours):
            out.append(f"the Vulkan Configurator's override layer {o.path} sets override_paths ({scope}): the "
                       "loader then searches only those folders for explicit layers and ignores VK_LAYER_PATH and "
                       f"VK_ADD_LAYER_PATH, so capshim's layers are never found; close vkconfig, {off}, "
                       f"or add {os.pathsep.join(folders)} to its override_paths")
        blocked = [n for n in layers if n in o.blacklisted]
        if blocked:
            out.append(f"the Vulkan Configurator's override layer {o.path} blacklists {', '.join(blocked)} "
                       f"({scope}): the loader will not load it; close vkconfig, {off}, or remove it from "
                       "blacklisted_layers")
    unlisted = settings_problem(environ, layers)
    if unlisted:
        out.append(unlisted)
    why = elevated(exe)
    if why:
        out.append(f"{why}: the loader ignores VK_LAYER_PATH and VK_ADD_LAYER_PATH in a program running with "
                   "elevated privileges, so capshim's layers are never found; run a copy without the bit")
    return out


def explain_inert(environ: Mapping[str, str], folders: Sequence[str], layers: Sequence[str],
                  exe: str | None = None) -> str | None:
    """The loader setting that best explains a layer that never loaded, in words, or None."""
    found = problems(environ, folders, layers, exe)
    return "; ".join(found) if found else None
