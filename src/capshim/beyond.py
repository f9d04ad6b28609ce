"""Beyond-device answers are never silent in ``capshim run`` and ``capshim probe``;
both also apply :func:`capshim.profiles.check_against_device` (refuse: exit 2, warn).

Before a run (or a probe) with a ``raise`` profile, the backend's stock
answers of the device are compared with the profile
(:func:`capshim.profiles.ondevice.beyond_device`). Each answer above the
device is named in one warning per profile on stderr (:func:`warning_lines`)
and gives one ``beyond_device`` event in the run's status file, written by
the launcher in the shims' JSON-lines shape (``schema``, ``event``, ``shim``, ``layer``, ``pid``, then ``key``,
``what``, ``device``, ``reported``, ``note``; ``pid`` is capshim's own,
``process`` is "capshim"). With ``--strict`` the command exits 3 instead
of starting the program (:data:`capshim.errors.EXIT_INERT`).

The comparison is against the real device, not a simulated one: a raise
profile over ``--simulate`` that answers the device's own values (the
restore profile) gives nothing.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from capshim.backends import Backend
from capshim.contracts import messages
from capshim.errors import EXIT_STORAGE, EXIT_USAGE, CapshimError
from capshim.profiles import Profile, answers_after, check_against_device
from capshim.profiles.ondevice import GENERIC_EXTENSION_NOTE, Beyond, beyond_device

__all__ = ["Finding", "Check", "check", "warning_lines", "events", "write_events"]


@dataclass(frozen=True)
class Finding:
    """One beyond-device answer of one profile.

    Attributes:
        flag: the option that gave the profile ("--profile", "--simulate").
        profile: the profile.
        shim: the shim that will answer it (a Vulkan layer name, "metal").
        beyond: what is above the device.
        device_name: the device's name from the stock probe.
    """

    flag: str
    profile: Profile
    shim: str
    beyond: Beyond
    device_name: str


@dataclass
class Check:
    """What the device check of one run found.

    Attributes:
        findings: the beyond-device answers of the raise profiles.
        refusals: lines naming what :func:`capshim.profiles.check_against_device`
            refuses (consistency rules after the profile): the run must not start.
        warnings: lines of its warnings (an exact property changed ...).
        problem: a sentence when the stock answers could not be read, else None.
        no_effect: the answers that change nothing (:func:`capshim.profiles.checks.no_effect`,
            also among ``warnings``), for ``probe --json``: ``{"flag", "profile", "key",
            "noop" ("clamped" or "same"), "message"}`` (a "same" entry's key is "no effect":
            the grouped line).
    """

    findings: list[Finding] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problem: str | None = None
    no_effect: list[dict] = field(default_factory=list)


def check(backend: Backend, profile: Profile | None, simulate: Profile | None, device: int = 0) -> Check:
    """Check the profiles of a run against the device's stock answers.

    Every profile goes through :func:`capshim.profiles.check_against_device`
    (``--profile`` over ``--simulate``: its no-effect warnings against the
    simulated answers, :func:`capshim.profiles.answers_after`); raise profiles
    also through :func:`capshim.profiles.ondevice.beyond_device`.

    Args:
        backend: the run's backend.
        profile: ``--profile`` (or None); simulate: ``--simulate`` (or None).
        device: the device index (Vulkan).

    Returns:
        A :class:`Check`, findings in profile order (``--profile`` first).
        Nothing is probed without a profile, or when the backend cannot know
        the hardware's answers.
    """
    roles = [(flag, p, shims[0]) for flag, p, shims in (
        ("--profile", profile, backend.requested_shims(profile, None) if profile else []),
        ("--simulate", simulate, backend.requested_shims(None, simulate) if simulate else []))
        if p is not None and shims]
    if not roles:
        return Check()
    try:
        stock = backend.stock_answers(device)
    except CapshimError as exc:
        return Check(problem=f"cannot check the profile against the device: {exc}")
    if stock is None:
        return Check()
    name = str(stock.get("device", {}).get("name", "the device"))
    note = backend.added_extension_note or GENERIC_EXTENSION_NOTE
    out = Check()
    for flag, p, shim in roles:
        # the app role sits above --simulate: what changes nothing is judged against what it sees
        over_sim = flag == "--profile" and simulate is not None
        base = answers_after(simulate, stock) if over_sim else None
        where = f"--simulate {simulate.source}" if over_sim else "the device"
        for f in check_against_device(p, stock, base=base, base_name=where):
            (out.refusals if f.severity == "refuse" else out.warnings).append(f"{flag} {p.source}: {f.message}")
            if f.noop:
                out.no_effect.append({"flag": flag, "profile": p.source, "key": f.key, "noop": f.noop,
                                      "message": f.message})
        out.findings += [Finding(flag, p, shim, b, name) for b in beyond_device(p, stock, extension_note=note)]
    return out


def warning_lines(findings: list[Finding]) -> list[str]:
    """One line per profile for stderr (without the "capshim: warning: " prefix): what it answers
    above the device, counted per kind (capabilities, extensions), the first few of each named
    (:func:`capshim.contracts.messages.summarise`; ``capshim --verbose``: every one).

    A capture of a bigger device (an H200's, 14 capabilities and 64 extensions over lavapipe) is
    two lines, not 78."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.flag, f.profile.source, f.device_name), []).append(f)
    out = []
    for (flag, source, device), fs in groups.items():
        caps = [str(f.beyond) for f in fs if f.beyond.what != "extension"]
        exts: dict[str, list[str]] = {}  # what becomes of them -> the extensions' names
        for f in fs:
            if f.beyond.what == "extension":
                seen = f"device: {f.beyond.device}" if f.beyond.device is not None else f.beyond.note
                exts.setdefault(seen, []).append(f"{f.beyond.key} {f.beyond.reported}")
        parts = [messages.summarise(caps, "capability")] + [
            messages.summarise(names, "extension", about=seen) for seen, names in exts.items()]
        out.append(f"{flag} {source} answers more than {device} has (a shim changes answers, not hardware): "
                   + "; ".join(p for p in parts if p))
    return out


def events(backend: Backend, findings: list[Finding]) -> list[dict]:
    """The ``beyond_device`` status events of the findings (module docstring)."""
    pid = os.getpid()
    return [f.beyond.event(backend.name, f.shim if f.shim != backend.name else None, pid) for f in findings]


def write_events(status_file: Path, backend: Backend, findings: list[Finding]) -> None:
    """Append the findings' events to ``status_file``, one JSON line each, in one write.

    Raises:
        CapshimError: the status file cannot be written (names it).
    """
    lines = "".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events(backend, findings))
    if not lines:
        return
    flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:  # the status file as launch made it: a link or FIFO put in its place is refused, never waited on
        fd = os.open(status_file, flags)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            os.write(fd, lines.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as exc:
        raise CapshimError(f"status file {status_file}: cannot write: {exc.strerror or exc}",
                           EXIT_STORAGE if exc.errno in (errno.ENOSPC, errno.EDQUOT) else EXIT_USAGE) from None
