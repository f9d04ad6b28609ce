"""``capshim profile from-host`` and ``capshim profile check --host``: Metal host ceilings
(issue 21, item 6; :mod:`capshim.profiles.metalhost`)."""

from __future__ import annotations

import json
import sys

import click

from capshim import profiles
from capshim.cli.options import write_new
from capshim.errors import EXIT_INERT, CapshimError, UsageError
from capshim.profiles import metalhost
from capshim.contracts import messages


def host_options(fn):
    """The ``profile check`` options of a host check: ``--host``, ``--json``, ``--strict``."""
    fn = click.option("--strict", is_flag=True,
                      help="With --host: exit 3 when an answer is above the host (as probe --strict).")(fn)
    fn = click.option("--json", "as_json", is_flag=True,
                      help="With --host: the findings as one JSON object on stdout.")(fn)
    return click.option("--host", "host", metavar="CAPTURE.json", default=None,
                        help="Check FILE against a Metal host's capture (capshim probe --api metal --json "
                             "on the Mac host): a warning per answer above the host, and by how much.")(fn)


def _capture(path: str, flag: str) -> metalhost.HostCapture:
    """The capture at ``path``, refused (exit 2, naming ``flag`` and the file) when it is not one or
    was made in a guest."""
    try:
        cap = metalhost.read_capture(path)
        metalhost.require_host(cap)
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None
    except CapshimError as exc:
        hint = "" if "capshim probe" in str(exc) else " (a capture is what capshim probe --api metal --json " \
                                                      "prints on the Mac host)"
        raise CapshimError(f"{flag}: {exc}{hint}") from None
    return cap


def check_host(file: str, host: str | None, device: int | None, as_json: bool, strict: bool) -> None:
    """``capshim profile check --host CAPTURE.json FILE``: warn on each answer of FILE above the host.

    Exit codes (capshim.errors): 0 checked; 3 (EXIT_INERT, as ``probe --strict`` for answers
    beyond the device) with ``strict`` when an answer is above; 2 a bad profile or capture, or
    --json/--strict without --host, or --host with --device.
    """
    if host is None:
        raise UsageError("--json and --strict of profile check go with --host CAPTURE.json")
    if device is not None:
        raise UsageError("--host and --device: a host capture is checked on its own, without a device")
    cap = _capture(host, "--host")
    try:
        p = profiles.load(file)
        found, notes = metalhost.above_host(p, cap)
    except profiles.ProfileError as exc:
        raise CapshimError(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"profile": p.name, "source": p.source, "host": {
            "capture": cap.source, "device": cap.device, "os": cap.os, "highest": cap.highest,
            "maxThreadgroupMemoryLength": cap.threadgroup, "recommendedMaxWorkingSetSize": cap.working_set},
            "above_host": [f.to_dict() for f in found], "notes": notes}, indent=2))
    else:
        click.echo(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version}) against {cap.label()}: "
                   + (f"{len(found)} answer{'s' if len(found) != 1 else ''} above the host" if found
                      else "nothing above the host"))
    for f in found:
        messages.emit(f.message, "warning")
    for line in notes:
        messages.emit(line, "note")
    if strict and found:
        sys.exit(EXIT_INERT)


@click.command("from-host")
@click.argument("capture", metavar="CAPTURE.json")
@click.option("-o", "out", metavar="FILE", default=None, help="Output TOML (default: stdout; never overwritten).")
@click.option("--name", "name", metavar="NAME", default=None,
              help="The profile's name (default: host-<device>, e.g. host-apple-m1-ultra).")
@click.option("--device-name", "with_name", is_flag=True,
              help="Also answer the host's device name (deviceName, off by default): for applications that "
                   "key tuning tables by device name.")
def from_host_cmd(capture, out, name, with_name):
    """Write the guest raise profile a Metal host allows: it answers exactly the
    host's Apple family and threadgroup memory from CAPTURE.json (capshim probe
    --api metal --json, run on the Mac that runs the VM), and never more. The
    working set is left out (a guest has less memory than its host), as are the
    Mac, Common and Metal families. Exit 2: CAPTURE.json is not a host capture.

    \b
    Examples:
      capshim probe --api metal --json > m1-ultra.json      # on the host
      capshim profile from-host m1-ultra.json -o host.toml
      capshim run --profile host.toml -- llama-bench ...    # in the guest
    """
    write_new(out, "", inputs=[capture], check_only=True)  # refused before anything is read (contracts.output)
    cap = _capture(capture, "from-host")
    try:
        p = metalhost.profile_from_host(cap, name=name, with_name=with_name)
    except profiles.ProfileError as exc:
        raise CapshimError(str(exc)) from None
    write_new(out, p.text, inputs=[capture])
    if out and out != "-":
        click.echo(f"wrote {out}: {p.name}, " + ", ".join(f"{k} = {v}" for k, v in p.capabilities.items())
                   + (f", deviceName = {p.device_name!r}" if p.device_name else ""), err=True)
    if cap.os.get("system") not in (None, "Darwin"):
        messages.emit(f"{cap.source} was made on {cap.os.get('system')}, not a Mac host (a test capture?)", "note")
