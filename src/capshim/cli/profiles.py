"""``capshim profiles`` and ``capshim profile show|check``."""

from __future__ import annotations

import json

import click

from capshim import profiles
from capshim.cli.options import json_option
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


@click.group("profile")
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
def profile_check(file):
    """Validate FILE: exit 0 and say what the layer will answer per key, or exit 2 naming the
    key, value and reason of the first error. Warnings (stderr) name answers that stay
    inconsistent; kinds and rules: docs/capabilities.md."""

    p = profiles.load(file)
    click.echo(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version})")
    for line in profiles.describe(p):
        click.echo(f"  {line}")
    for finding in profiles.check_alone(p):
        click.echo(f"warning: {finding.message}", err=True)
