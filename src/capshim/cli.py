"""The ``capshim`` command line: parse, call, print. Logic lives in the modules.

Exit codes (DESIGN.md section 3): 0 success; 1 the workload failed; 2 bad
usage or invalid profile; 3 ``--strict`` and a shim stayed inert.
"""

from __future__ import annotations

import json
import sys

import click

from capshim import __version__
from capshim.errors import CapshimError


class _Group(click.Group):
    """A click group that turns CapshimError into one line and its exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CapshimError as exc:
            click.echo(f"capshim: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="capshim")
def main():
    """Change, for one process only, the GPU capability answers it sees, and
    measure what that does.

    \b
    Profiles:  capshim profiles | capshim profile show NAME | capshim profile check FILE
    Shims:     capshim build | capshim run --profile P [--simulate P] -- CMD
    Answers:   capshim probe --api vulkan --compare --simulate vulkan-paravirt
    """


@main.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def profiles_cmd(as_json):
    """List the built-in profiles."""
    from capshim import profiles

    rows = [profiles.load(n) for n in profiles.builtin_names()]
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in rows], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "api", "direction", "description")
    for p in rows:
        table.add_row(p.name, p.api, p.direction, p.description)
    Console().print(table)


@main.group("profile")
def profile_grp():
    """Show or check one profile (a built-in NAME or a FILE)."""


@profile_grp.command("show")
@click.argument("ref")
@click.option("--toml", "as_toml", is_flag=True, help="Print the profile as it is written instead of resolved JSON.")
def profile_show(ref, as_toml):
    """Print the resolved profile REF (built-in name or file) as JSON."""
    from capshim import profiles

    p = profiles.load(ref)
    click.echo(p.text if as_toml else json.dumps(p.to_dict(), indent=2))


@profile_grp.command("check")
@click.argument("file")
def profile_check(file):
    """Validate FILE: exit 0, or 2 naming the key, value and reason of the first error."""
    from capshim import profiles

    p = profiles.load(file)
    click.echo(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version})")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
