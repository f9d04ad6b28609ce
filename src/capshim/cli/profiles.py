"""``capshim profiles`` and ``capshim profile show|check``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from capshim.contracts.pasteable import command as pasteable
from capshim import backends, beyond, profiles
from capshim.cli import profiles_host
from capshim.cli.options import json_option, khronos_parts, unsupported_summary
from capshim.cli.options import write_new as _write
from capshim.profiles import khronos
from capshim.errors import EXIT_WORKLOAD, CapshimError, UsageError
from capshim.cli.suggest import SuggestingGroup
from capshim.export import terminal
from capshim.contracts import messages


@click.command("profiles")
@json_option()
def profiles_cmd(as_json):
    """List the built-in profiles."""

    rows = [profiles.load(n) for n in profiles.builtin_names()]
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in rows], indent=2))
        return

    terminal.print_grid(("name", "api", "direction", "description"),
                        [[p.name, p.api, p.direction, p.description] for p in rows])


@click.group("profile", cls=SuggestingGroup)
def profile_grp():
    """Show or check one profile (a built-in NAME or a FILE)."""


@profile_grp.command("show")
@click.argument("ref")
@click.option("--toml", "as_toml", is_flag=True, help="Print the profile as it is written instead of resolved JSON.")
def profile_show(ref, as_toml):
    """Print the resolved profile REF (built-in name or file) as JSON.

    A Khronos Vulkan Profiles file (FILE.json, FILE.json#NAME) is split per answer
    against device 0: the JSON has its "lower" and "raise" profiles (null when
    empty), every capability it states that capshim does not answer
    ("unsupported", one line each) and how it was resolved ("notes"); --toml
    prints the capshim profile(s) as TOML.
    """

    if khronos.is_khronos_ref(ref):
        reading, lower, higher = khronos_parts(ref, flag="profile show")
        if as_toml:
            click.echo("\n".join(profiles.to_toml(p) for p in (lower, higher) if p is not None))
            return
        click.echo(json.dumps({"khronos_profile": reading.name, "source": ref,
                               "lower": lower.to_dict() if lower else None,
                               "raise": higher.to_dict() if higher else None,
                               "unsupported": reading.unsupported, "notes": reading.notes}, indent=2))
        return
    p = profiles.load(ref)
    click.echo(p.text if as_toml else json.dumps(p.to_dict(), indent=2))


@profile_grp.command("check")
@click.argument("file")
@click.option("--device", type=click.IntRange(0, 15), default=None, metavar="N",
              help="Also check FILE against device N's own answers (a stock probe): the warnings "
                   "and refusals run and probe would give, one line per answer that changes nothing.")
@profiles_host.host_options
def profile_check(file, device, host, as_json, strict):
    """Validate FILE: exit 0 and say what the layer will answer per key, or exit 2 naming the
    key, value and reason of the first error. Warnings (stderr) name answers that stay
    inconsistent; kinds and rules: docs/capabilities.md.

    With --device N, FILE is also checked against that device, as run and probe
    do: one warning line per answer the layer will not give there (clamped by the
    profile's direction, or equal to the device's own), per answer beyond the
    device; a refusal exits 2.

    With --host CAPTURE.json (a Metal host's capture: capshim probe --api metal
    --json on the Mac that runs the VM), FILE is checked against that host: one
    warning line per answer above it, saying by how much. Exit codes
    (docs/contracts.md): 0 checked (warnings or not), 3 with --strict when an
    answer is above the host, 2 a bad profile or capture. --json prints the
    findings as one JSON object on stdout.

    \b
    Examples:
      capshim profile check my.toml
      capshim profile check my.toml --device 0
      capshim profile check --host m1-ultra.json metal-apple9
    """
    if host is not None or as_json or strict:
        profiles_host.check_host(file, host, device, as_json, strict)
        return

    if khronos.is_khronos_ref(file):
        reading, lower, higher = khronos_parts(file, device or 0, flag="profile check")
        for p in (lower, higher):
            if p is not None:
                click.echo(messages.wrap_out(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version}): "
                                             f"{'--simulate' if p.direction == 'lower' else '--profile'} role"))
                for line in profiles.describe(p):
                    click.echo(messages.wrap_out(f"  {line}"))
        for line in reading.notes:
            messages.emit(line, "note")
        for line in reading.unsupported:
            messages.emit(f"not answered: {line}", "warning")
        found = beyond.check(backends.get("vulkan"), higher, lower, device or 0)
        for line in found.warnings + beyond.warning_lines(found.findings):
            messages.emit(line, "warning")
        if found.refusals:
            raise UsageError("\n".join(found.refusals))
        return
    p = profiles.load(file)
    click.echo(messages.wrap_out(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version})"))
    for line in profiles.describe(p):
        click.echo(messages.wrap_out(f"  {line}"))
    if device is None:
        for finding in profiles.check_alone(p):
            messages.emit(finding.message, "warning")
        return
    be = backends.get(p.api)
    why = be.unavailable()
    if why:
        raise CapshimError(f"--device {device}: {why}")
    found = beyond.check(be, p, None, device)  # check_against_device (check_alone's included) and beyond_device
    if found.problem:  # no driver, the probe failed: exit 1, as probe and bench say it
        raise CapshimError(f"--device {device}: {found.problem}", exit_code=EXIT_WORKLOAD)
    for line in found.warnings + beyond.warning_lines(found.findings):
        messages.emit(line, "warning")
    if found.refusals:
        raise UsageError("\n".join(found.refusals))


@profile_grp.command("import")
@click.argument("file")
@click.option("--profile", "name", metavar="NAME", help="Which profile of FILE (same as FILE.json#NAME).")
@click.option("--direction", type=click.Choice(["lower", "raise"]), default=None,
              help="Write one profile of this direction (no device needed); default: split per answer "
                   "against device 0 (weaker: lower, stronger: raise).")
@click.option("-o", "out", metavar="X.toml", required=True,
              help="Output TOML. When the file splits into two profiles: X-lower.toml and X-raise.toml.")
@click.option("--device", type=click.IntRange(0, 15), default=0, show_default=True, help="Vulkan device to split against.")
def profile_import(file, name, direction, out, device):
    """Write the capshim profile(s) equivalent to a Khronos Vulkan Profiles FILE.

    Every capability FILE states is either in the written profile(s) or named
    on stderr as not answered (formats, queue families, video, structs or
    members capshim has no key for). One capshim profile has one direction:
    when FILE is weaker than the device in some answers and stronger in
    others, two files are written; run them as --simulate X-lower.toml
    --profile X-raise.toml.

    \b
    Examples:
      capshim profile import VP_VULKANINFO_llvmpipe.json -o llvmpipe.toml
      capshim profile import roadmap.json --profile VP_KHR_roadmap_2022 \\
          --direction raise -o roadmap.toml
    """
    given = khronos.split_ref(file)[1]
    if name and given and given != name:
        raise UsageError(f"{file} names profile #{given} and --profile {name} another: give one")
    ref = f"{khronos.split_ref(file)[0]}#{name}" if name else file
    if not khronos.is_khronos_ref(ref):
        raise CapshimError(f"{file}: not a .json file (a Khronos Vulkan Profiles file)")
    if direction:
        try:
            reading = khronos.read(ref)
            parts = [khronos.one_direction(reading, direction)]
        except profiles.ProfileError as exc:
            raise CapshimError(str(exc)) from None
    else:
        reading, lower, higher = khronos_parts(ref, device, flag="profile import")
        parts = [p for p in (lower, higher) if p is not None]
    parts = [p for p in parts if p.capabilities or p.extensions]
    if not parts:  # say what the file states that capshim cannot answer, then refuse
        for line in unsupported_summary(reading, shown=len(reading.unsupported)):
            messages.emit(line, "warning")
        raise CapshimError(f"{ref}: no answer capshim can give" + ("" if direction else " on this device")
                           + "; nothing written")
    stem = out[:-5] if out.endswith(".toml") else out
    if len(parts) == 2 and (out == "-" or not Path(stem).name or stem.endswith("/")):
        raise UsageError(f"-o {out}: {file} splits into a lower and a raise profile, written as X-lower.toml "
                         "and X-raise.toml: give -o X.toml")
    names = [out] if len(parts) == 1 else [f"{stem}-{p.direction}.toml" for p in parts]
    src = khronos.split_ref(file)[0]
    for path in names:  # all or nothing: a split import never leaves one half written (contracts.output)
        _write(path, "", inputs=[src], check_only=True)
    for p, path in zip(parts, names):
        _write(path, profiles.to_toml(p), inputs=[src])
        click.echo(f"wrote {path}: {p.direction}, {len(p.capabilities)} answers, {len(p.extensions)} extensions")
    if len(parts) == 2:
        click.echo(f"one capshim profile has one direction: run with {pasteable('--simulate', names[0], '--profile', names[1])}")
    for line in unsupported_summary(reading, shown=len(reading.unsupported)):
        messages.emit(line, "warning")


@profile_grp.command("capture")
@click.option("-o", "out", metavar="FILE", default=None, help="Output file (default: stdout; never overwritten).")
@click.option("--format", "fmt", type=click.Choice(["json", "toml"]), default=None,
              help="json: a Khronos Vulkan Profiles file (split per answer wherever it is used); toml: one "
                   "capshim profile of --direction. Default: from -o's suffix, else json.")
@click.option("--from", "from_file", metavar="FILE.json", default=None,
              help="Read the answers from a 'vulkaninfo --json' (or other Vulkan Profiles) file instead of "
                   "probing this device.")
@click.option("--device", type=click.IntRange(0, 15), default=0, show_default=True, help="Vulkan device to probe.")
@click.option("--direction", type=click.Choice(["lower", "raise"]), default="lower", show_default=True,
              help="With --format toml: the profile's direction (a lower profile cannot say a feature is on, "
                   "a raise one that it is off: those are named on stderr).")
def profile_capture(out, fmt, from_file, device, direction):
    """Write this device's answers (capshim's own stock probe, or --from FILE) as a profile, so
    that device X captured can be simulated on device Y (capshim run --simulate X.json).

    \b
    Examples:
      capshim profile capture -o lavapipe.json
      capshim run --simulate lavapipe.json -- vulkaninfo --summary
      capshim profile capture --from VP_VULKANINFO_x.json --format toml -o x.toml
    """
    fmt = fmt or ("toml" if out and out.lower().endswith(".toml") else "json")
    named = ("json" if khronos.is_khronos_ref(out) else "toml" if out.lower().endswith(".toml") else None) \
        if out else None
    if named and named != fmt:  # capshim reads a file by its name: this one could never be used
        reads = "a Khronos profiles file" if named == "json" else "TOML"
        raise UsageError(f"-o {out}: capshim reads a .{named} file as {reads}, and --format {fmt} writes "
                         f"{fmt.upper()}: name it .{fmt}")
    src = khronos.split_ref(from_file)[0] if from_file is not None else None
    _write(out, "", inputs=[src], check_only=True)  # refused before the device is probed
    try:
        if from_file is not None:
            reading = khronos.read(from_file)
        else:
            be = backends.get("vulkan")
            why = be.unavailable()
            if why:
                raise CapshimError(f"capture: the Vulkan device cannot be probed here: {why} (use --from FILE)")
            reading = khronos.reading_of_probe(be.stock_answers(device), f"device {device}")
        text = (profiles.to_toml(khronos.one_direction(reading, direction)) if fmt == "toml"
                else json.dumps(khronos.capture_reading(reading), indent=2) + "\n")
    except profiles.ProfileError as exc:
        raise CapshimError(str(exc)) from None
    _write(out, text, inputs=[src])
    if out:
        click.echo(f"wrote {out}: {reading.label}, {len(reading.capabilities)} answers, "
                   f"{len(reading.extensions)} extensions ({fmt})", err=True)
    for line in reading.unsupported:
        messages.emit(f"not captured: {line}", "warning")


profile_grp.add_command(profiles_host.from_host_cmd)
