"""``capshim probe``: run the API's probe stock and/or through shims, and print it.

The Vulkan probe is ``native/vulkan/probe.c`` (via :func:`capshim.backends.vulkan.probe`);
the Metal probe is the Metal backend's. With ``compare`` both a stock and a
shimmed probe run, each in its own process.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from capshim.profiles import Profile


def _backend(api: str):
    if api == "vulkan":
        from capshim.backends import vulkan

        return vulkan
    from capshim.backends import metal

    return metal


def run_probe(api: str, profile: Profile | None, simulate: Profile | None, device: int = 0,
              compare: bool = False) -> dict:
    """Probe once (or twice with ``compare``).

    Returns:
        Without compare: the probe result (see the backend's ``probe``).
        With compare: ``{"stock": ..., "shimmed": ..., "differences": {key: [stock, shimmed]}}``
        where keys are capability names and ``extension NAME`` (spec version or null).

    Raises:
        CapshimError: the probe failed; UsageError: --compare without a profile.
    """
    be = _backend(api)
    if api == "metal":
        if simulate is not None:
            from capshim.errors import UsageError

            raise UsageError("--simulate is Vulkan only: the Metal shim never lowers an answer")
        return be.probe(profile, compare=compare)
    if api == "vulkan":
        def once(p, s):
            data = be.probe(profile=p, simulate=s, device=device)
            data.pop("stderr", None)
            return data
    if not compare:
        return once(profile, simulate)
    if profile is None and simulate is None:
        from capshim.errors import UsageError

        raise UsageError("--compare needs --profile and/or --simulate (the shimmed side)")
    stock = once(None, None)
    shimmed = once(profile, simulate)
    return {"stock": stock, "shimmed": shimmed, "differences": differences(stock, shimmed)}


def _rows(data: dict) -> dict[str, object]:
    rows = dict(data.get("capabilities", {}))
    for name, spec in data.get("extensions", {}).items():
        rows[f"extension {name}"] = spec
    return rows


def differences(stock: dict, shimmed: dict) -> dict[str, list]:
    """Keys whose answer differs: ``key -> [stock, shimmed]`` (None when absent)."""
    a, b = _rows(stock), _rows(shimmed)
    out = {}
    for key in list(a) + [k for k in b if k not in a]:
        if a.get(key) != b.get(key):
            out[key] = [a.get(key), b.get(key)]
    return out


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
    a, b = _rows(stock), _rows(shimmed)
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
