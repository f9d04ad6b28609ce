"""``capshim probe``: run the API's probe stock and/or through shims, and print it.

Each backend runs its own probe (:meth:`capshim.backends.Backend.probe`).
With ``compare`` both a stock and a shimmed probe run, each in its own process.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from capshim import backends
from capshim.contracts.names import device_label
from capshim.export import terminal
from capshim.profiles import Profile
from capshim.profiles.catalog import KEYS
from capshim.profiles.model import format_answer


def run_probe(api: str, profile: Profile | None, simulate: Profile | None, device: int = 0,
              compare: bool = False) -> dict:
    """Probe once (or twice with ``compare``) through the backend of ``api``.

    Returns:
        The backend's probe result (see its ``probe``). For a tabular backend
        (Vulkan): without compare the probe result; with compare
        ``{"stock": ..., "shimmed": ..., "differences": {key: [stock, shimmed]}}``
        where keys are capability names and ``extension NAME`` (spec version or null).

    Raises:
        CapshimError: the probe failed; UsageError: --compare without a
            profile, or --simulate for an API without a device role.
    """
    backends.for_profiles(profile, simulate)
    return backends.get(api).probe(profile, simulate, device=device, compare=compare)


def _fmt(v: object, key: str = "") -> str:
    """One answer as table text, in the profiles' notation (a compute capability "7.5", not 75)."""
    if v is None:
        return "—"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if key.startswith("NVML "):  # NVML's answers in the notation of the runtime's (9.0, not 90)
        from capshim.backends.cuda import nvml_answer_text

        return nvml_answer_text(key.removeprefix("NVML "), v)
    api = next((a for a, keys in KEYS.items() if key in keys), "")
    return str(format_answer(api, key, v)) if api else str(v)


def print_probe(out: dict, compare: bool = False, show_all: bool = False, console: Console | None = None,
                wide: bool = False, placed: dict | None = None) -> None:
    """Print a probe result (or a comparison) as tables on stdout, fitted to the terminal
    (:func:`capshim.export.terminal.width`; ``wide``: the full table). ``placed``: this is one
    device of a targeted probe (its entry: ``index``, ``profile``, ``simulate``): each shim's line
    then speaks of that device only."""
    limit = terminal.width(wide)
    console = console or Console(width=limit or terminal.PIPE_WIDTH)
    if not compare:
        dev = out.get("device", {})
        console.print(f"[bold]{escape(device_label(dev) or '?')}[/] ({dev.get('driver') or dev.get('type', '')}), "
                      f"API {dev.get('apiVersion', '?')}")
        rows = [[k, _fmt(v, k)] for k, v in out.get("capabilities", {}).items()]
        terminal.emit(terminal.grid(("capability", "value"), rows, limit), limit)
        exts = f"{len(out['extensions'])} extensions; " if "extensions" in out else ""
        console.print(exts + "shims: " + ", ".join(
            f"{k} {v['state']}" for k, v in out.get("shim", {}).items()))
        return
    stock, shimmed, diff = out["stock"], out["shimmed"], out["differences"]
    dev = stock.get("device", {})
    console.print(f"[bold]{escape(device_label(dev) or '?')}[/] ({dev.get('driver') or dev.get('type', '')})")
    a, b = backends.answer_rows(stock), backends.answer_rows(shimmed)
    keys = [k for k in list(a) + [k for k in b if k not in a] if k in diff or show_all]
    rows = [[k, _fmt(a.get(k), k), _fmt(b.get(k), k)] for k in keys]
    if rows or placed is None:  # a device of a targeted probe with nothing to show: no empty table
        terminal.emit(terminal.grid(("capability", "stock", "shimmed"), rows, limit, title="stock vs shimmed answers",
                                    styles=["bold yellow" if k in diff else None for k in keys]), limit)
    if not diff:
        console.print("no answer differs")
    for name, s in shimmed.get("shim", {}).items():
        if s["state"] != "absent":  # the rows above counted apart from the shim's own count (per query)
            console.print(escape(f"{name}: {_shim_line(s, len(diff), placed)}"))


def _shim_line(s: dict, differ: int, placed: dict | None) -> str:
    """What one shim did, after its table: the whole process's state, or, for one device of a
    targeted probe (``placed``: its entry of :meth:`capshim.backends.Backend.probe_targeted`), what
    it did on that device only (the state's ``devices`` record of its index)."""
    if s["state"] != "active":
        return f"{s['state']} ({s['reason']})"
    shown = f"{differ} answer(s) above differ; "
    if placed is None:
        return f"active ({shown}{s['reason']})"
    index = placed["index"]
    if not placed.get("profile") and not placed.get("simulate"):
        return f"stock: no profile targets device {index}"
    rec = s.get("devices", {}).get(str(index))
    if rec is None:
        return f"active ({shown}it changed no answer on device {index})"
    return (f"active ({shown}the shim changed {len(rec.get('answered', {}))} answer(s) on device {index}"
            f"{' under ' + rec['profile'] if rec.get('profile') else ''})")


def print_devices(out: dict, compare: bool = False, show_all: bool = False, console: Console | None = None,
                  wide: bool = False) -> None:
    """Print a probe of every device (:meth:`capshim.backends.Backend.probe_targeted`): per device a
    line naming its index, UUID, name and the profiles that answer for it (or "stock"), then
    :func:`print_probe` of it (``compare``: what was changed on that device)."""
    console = console or Console(width=terminal.width(wide) or terminal.PIPE_WIDTH)
    for n, entry in enumerate(out.get("devices", [])):
        if n:
            console.print()
        roles = [f"--{r} {entry[r]}" for r in ("profile", "simulate") if entry.get(r)]
        uuid = f" ({entry['uuid']})" if entry.get("uuid") else ""
        console.print(escape(f"device {entry['index']}{uuid}: {', '.join(roles) if roles else 'stock (no profile)'}"))
        print_probe(entry if compare else entry["answers"], compare=compare, show_all=show_all, console=console,
                    wide=wide, placed=entry)
