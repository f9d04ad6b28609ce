"""``capshim probe``: run the API's probe stock and/or through shims, and print it.

Each backend runs its own probe (:meth:`capshim.backends.Backend.probe`).
With ``compare`` both a stock and a shimmed probe run, each in its own process.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from capshim import backends
from capshim.profiles import Profile


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


def _fmt(v: object) -> str:
    if v is None:
        return "—"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def print_probe(out: dict, compare: bool = False, show_all: bool = False, console: Console | None = None) -> None:
    """Print a probe result (or a comparison) as rich tables on stdout."""
    console = console or Console()
    if not compare:
        dev = out.get("device", {})
        console.print(f"[bold]{dev.get('name', '?')}[/] ({dev.get('driver') or dev.get('type', '')}), "
                      f"API {dev.get('apiVersion', '?')}")
        table = Table("capability", "value")
        for k, v in out.get("capabilities", {}).items():
            table.add_row(k, _fmt(v))
        console.print(table)
        console.print(f"{len(out.get('extensions', {}))} extensions; shims: " + ", ".join(
            f"{k} {v['state']}" for k, v in out.get("shim", {}).items()))
        return
    stock, shimmed, diff = out["stock"], out["shimmed"], out["differences"]
    dev = stock.get("device", {})
    console.print(f"[bold]{dev.get('name', '?')}[/] ({dev.get('driver') or dev.get('type', '')})")
    table = Table("capability", "stock", "shimmed", title="stock vs shimmed answers")
    a, b = backends.answer_rows(stock), backends.answer_rows(shimmed)
    keys = list(a) + [k for k in b if k not in a]
    for k in keys:
        changed = k in diff
        if not (changed or show_all):
            continue
        style = "bold yellow" if changed else None
        table.add_row(k, _fmt(a.get(k)), _fmt(b.get(k)), style=style)
    console.print(table)
    if not diff:
        console.print("no answer differs")
    for name, s in shimmed.get("shim", {}).items():
        if s["state"] != "absent":
            console.print(f"{name}: {s['state']} ({s['reason']})")
