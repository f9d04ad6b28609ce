"""``capshim profiles`` and ``capshim profile show|check``."""

from __future__ import annotations

import json

import click

from capshim import backends, beyond, profiles
from capshim.cli.options import json_option
from capshim.errors import CapshimError, UsageError
from capshim.cli.suggest import SuggestingGroup
from capshim.export import terminal


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
    """Print the resolved profile REF (built-in name or file) as JSON."""

    p = profiles.load(ref)
    click.echo(p.text if as_toml else json.dumps(p.to_dict(), indent=2))


@profile_grp.command("check")
@click.argument("file")
@click.option("--device", type=click.IntRange(0, 15), default=None, metavar="N",
              help="Also check FILE against device N's own answers (a stock probe): the warnings "
                   "and refusals run and probe would give, one line per answer that changes nothing.")
def profile_check(file, device):
    """Validate FILE: exit 0 and say what the layer will answer per key, or exit 2 naming the
    key, value and reason of the first error. Warnings (stderr) name answers that stay
    inconsistent; kinds and rules: docs/capabilities.md.

    With --device N, FILE is also checked against that device, as run and probe
    do: one warning line per answer the layer will not give there (clamped by the
    profile's direction, or equal to the device's own), per answer beyond the
    device; a refusal exits 2.

    \b
    Examples:
      capshim profile check my.toml
      capshim profile check my.toml --device 0
    """

    p = profiles.load(file)
    click.echo(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version})")
    for line in profiles.describe(p):
        click.echo(f"  {line}")
    if device is None:
        for finding in profiles.check_alone(p):
            click.echo(f"warning: {finding.message}", err=True)
        return
    be = backends.get(p.api)
    why = be.unavailable()
    if why:
        raise CapshimError(f"--device {device}: {why}")
    found = beyond.check(be, p, None, device)  # check_against_device (check_alone's included) and beyond_device
    if found.problem:
        raise CapshimError(f"--device {device}: {found.problem}")
    for line in found.warnings + beyond.warning_lines(found.findings):
        click.echo(f"warning: {line}", err=True)
    if found.refusals:
        raise UsageError("\n".join(found.refusals))
