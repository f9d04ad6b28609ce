"""Read the shims' status files and classify each shim as active, inert, invalid or absent.

One classifier for both APIs: the Vulkan layer roles and the Metal shim write
the same event schema through one C writer (``native/common/status.c``);
``docs/status.md`` describes the schema and the events once.

States:
    active   loaded, configuration accepted, hooks installed (Vulkan: in the
             right order)
    invalid  the configuration was rejected, or the Vulkan roles sat in the
             wrong order: the process kept its stock answers
    inert    asked for, but never loaded or never hooked anything (the loader
             skipped the layer, the program is not a Vulkan/Metal program, a
             SIP-protected binary dropped DYLD_INSERT_LIBRARIES...)
    absent   not asked for
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from capshim import jsonread, paths

ACTIVE, INERT, INVALID, ABSENT = "active", "inert", "invalid", "absent"

#: The event schema version this reader knows (``CAPSHIM_STATUS_SCHEMA`` in
#: native/common/status.h). Events without the field come from older builds
#: and read the same.
SCHEMA = 1


@dataclass
class StatusReport:
    """Parsed events of one status file.

    Attributes:
        events: the JSON objects in file order.
        bad_lines: 1-based numbers of lines that were not JSON objects.
    """

    events: list[dict] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)

    def for_shim(self, name: str) -> list[dict]:
        """Events of one shim: a Vulkan layer name, or "metal"."""
        return [e for e in self.events if e.get("layer") == name or (e.get("shim") == name and "layer" not in e)]

    def changes(self, name: str) -> list[dict]:
        """The ``changed`` events of one shim."""
        return [e for e in self.for_shim(name) if e.get("event") == "changed"]


@dataclass
class ShimState:
    """The classification of one shim in one run.

    Attributes:
        state: active, inert, invalid or absent.
        reason: why, in words.
        changes: number of distinct answers the shim changed.
        answered: what it changed, per key: ``{key: [stock, reported]}`` as its ``changed`` events
            give them (numbers: booleans 0/1, versions packed, a compute capability major * 10 +
            minor), the first stock and the last reported value of each key; what
            the bench shows as each arm's answers (:mod:`capshim.bench.answers`).
        devices: per device, when the run placed profiles on devices (docs/multi-gpu.md): device
            index (a string) -> ``{"uuid" (or None), "profile" (the configuration's profile
            name), "answered": {key: [stock, reported]}}``, from the ``changed`` events that name
            their device.
    """

    state: str
    reason: str
    changes: int = 0
    answered: dict = field(default_factory=dict)
    devices: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready form (``answered`` only when the shim changed an answer, ``devices`` only
        when a change named its device)."""
        out = {"state": self.state, "reason": self.reason, "changes": self.changes}
        if self.answered:
            out["answered"] = {k: list(v) for k, v in self.answered.items()}
        if self.devices:
            out["devices"] = self.devices
        return out


MAX_STATUS_BYTES = 64 << 20
"""Bytes of a status file that are read (the shims write lines of well under 4 KiB; a run writes a few KiB)."""
MAX_LINE_BYTES = 64 << 10
"""A longer line is counted as a bad line without being decoded."""


def read(path: Path | str) -> StatusReport:
    """Parse a status file; a missing file, or one that is not a regular file
    (a FIFO would block the reader; the shims refuse to write to one), is an
    empty report (nothing loaded).

    Bounded: the file is opened without blocking and checked before any read
    (:func:`capshim.paths.read_limited`), at most :data:`MAX_STATUS_BYTES` of
    it are read; lines longer than :data:`MAX_LINE_BYTES`, lines that the bounded
    JSON reader refuses (:func:`capshim.jsonread.loads`: deeper than 64, an
    integer of more than 20 digits, NaN) and lines that are not a JSON object
    are listed in ``bad_lines``. Never raises.
    """
    report = StatusReport()
    try:
        data = paths.read_limited(path, MAX_STATUS_BYTES, truncate=True)
    except OSError:  # missing, not a regular file, unreadable: nothing the shims wrote
        return report
    text = data.decode("utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            report.bad_lines.append(n)
            continue
        try:
            ev = jsonread.loads(line, f"line {n}", limit=MAX_LINE_BYTES)
        except jsonread.JsonShapeError:
            report.bad_lines.append(n)
            continue
        if isinstance(ev, dict):
            report.events.append(ev)
        else:
            report.bad_lines.append(n)
    return report


def classify(report: StatusReport, name: str, requested: bool = True, target_pid: int | None = None) -> ShimState:
    """Classify one shim (a Vulkan layer name or "metal") from a run's status report.

    Args:
        report: the parsed status file.
        name: ``VK_LAYER_CAPSHIM_app``, ``VK_LAYER_CAPSHIM_device`` or ``metal``.
        requested: whether the run asked for this shim; False gives ``absent``.
        target_pid: when given, only events of that process count.
    """
    if not requested:
        return ShimState(ABSENT, "not requested")
    events = [e for e in report.for_shim(name) if target_pid is None or e.get("pid") == target_pid]
    state = classify_events(events)
    if state.state == ACTIVE and name.startswith("VK_LAYER_CAPSHIM_"):
        order = _order_problem(report, target_pid)
        if order:
            return ShimState(INVALID, order, state.changes)
    return state


def classify_events(events: list[dict]) -> ShimState:
    """Classify one shim from its own events (already filtered to that shim).

    The rules, the same for every API: a rejected ``config`` is invalid; no
    ``loaded`` (or only ``skipped`` children) is inert; no ``hooks`` event
    with a non-empty ``installed`` list is inert (a shim installs hooks only
    after accepting its configuration); otherwise active. ``truncated``
    events (a line over the writer's limit) are named in the reason.
    """
    skipped = [e for e in events if e.get("event") == "skipped"]
    skipped_pids = {e.get("pid") for e in skipped}
    events = [e for e in events if e.get("event") != "skipped" and e.get("pid") not in skipped_pids]
    changes = len({(e.get("query"), e.get("key"), e.get("stock"), e.get("reported"), e.get("device"))
                   for e in events if e.get("event") == "changed"})
    answered: dict[str, list] = {}
    for e in events:
        if e.get("event") == "changed" and isinstance(e.get("key"), str):
            answered.setdefault(e["key"], [e.get("stock"), None])[1] = e.get("reported")
    cut = sorted({str(e.get("original_event", "?")) for e in events if e.get("event") == "truncated"})
    note = f"; status events truncated: {', '.join(cut)}" if cut else ""
    rejected = [e for e in events if e.get("event") == "config" and e.get("accepted") is False]
    if rejected:
        return ShimState(INVALID, f"configuration rejected: {rejected[0].get('reason', '?')}", changes)
    if not any(e.get("event") == "loaded" for e in events) and skipped:
        procs = sorted({str(e.get("process", e.get("pid"))) for e in skipped})
        return ShimState(INERT, "only child processes used the GPU API (" + ", ".join(procs[:3])
                         + "); children stay stock unless --inherit", changes)
    if not any(e.get("event") == "loaded" for e in events):
        return ShimState(INERT, "never loaded (the loader did not find or enable it, or the program "
                                "made no GPU API call)" + note, changes)
    # A hooks event with an empty "installed" list (Metal: the private entry
    # point was missing and no device class has been patched) is not a hook.
    hooks = [e for e in events if e.get("event") == "hooks" and e.get("installed")]
    if not hooks and all(e.get("template") for e in events if e.get("event") == "loaded"):
        return ShimState(INERT, "loaded as a process template (CAPSHIM_TEMPLATE_FD is set in its environment): "
                                "it stays stock and leaves the decision to processes it forks; unset "
                                "CAPSHIM_TEMPLATE_FD" + note, changes)
    if not hooks:
        return ShimState(INERT, "loaded but installed no hooks (no instance/device was created through it)"
                         + note, changes)
    return ShimState(ACTIVE, f"the shim recorded {changes} changed answer(s), one per query that returned one "
                     "(a key read through two queries counts twice)" + note, changes, answered, per_device(events))


def per_device(events: list[dict]) -> dict:
    """The changed events that name their device (``device``, ``uuid``, ``profile``: a run with
    profiles placed on devices), grouped: device index (a string) -> ``{"uuid", "profile",
    "answered": {key: [first stock, last reported]}}``, in index order."""
    out: dict[str, dict] = {}
    for e in events:
        if e.get("event") != "changed" or not isinstance(e.get("device"), int) or not isinstance(e.get("key"), str):
            continue
        d = out.setdefault(str(e["device"]), {"uuid": e.get("uuid"), "profile": e.get("profile"), "answered": {}})
        d["answered"].setdefault(e["key"], [e.get("stock"), None])[1] = e.get("reported")
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _order_problem(report: StatusReport, target_pid: int | None) -> str | None:
    """The Vulkan app role must be entered before (sit above) the device role."""
    by_pid: dict[object, dict[str, int]] = {}
    for e in report.events:
        if e.get("event") == "hooks" and "entered" in e and (target_pid is None or e.get("pid") == target_pid):
            by_pid.setdefault(e.get("pid"), {})[e.get("layer")] = e["entered"]
    for seen in by_pid.values():
        app, dev = seen.get("VK_LAYER_CAPSHIM_app"), seen.get("VK_LAYER_CAPSHIM_device")
        if app is not None and dev is not None and app > dev:
            return "layer order: VK_LAYER_CAPSHIM_app sat below VK_LAYER_CAPSHIM_device"
    return None
