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


# --- Metal ---

@main.group("launchagent")
def launchagent_grp():
    """macOS: start one program with the Metal shim from a LaunchAgent.

    \b
    capshim launchagent install --profile metal-apple9 --label com.example.llama \\
        [--dry-run] -- /opt/llama/llama-server -m model.gguf
    capshim launchagent uninstall --label com.example.llama
    """


@launchagent_grp.command("install", context_settings={"ignore_unknown_options": True})
@click.option("--profile", "profile_ref", required=True, help="Metal profile: built-in name or file.")
@click.option("--label", required=True, help="launchd label, e.g. com.example.llama.")
@click.option("--dry-run", is_flag=True, help="Print the plist; write and load nothing.")
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def launchagent_install(profile_ref, label, dry_run, argv):
    """Write ~/Library/LaunchAgents/LABEL.plist for PROGRAM ARGS (after '--'),
    lint it with plutil and bootstrap it (never launchctl setenv)."""
    from capshim import launchagent, profiles

    res = launchagent.install(profiles.load(profile_ref), label, list(argv), dry_run=dry_run)
    for w in res["warnings"]:
        click.echo(f"capshim: warning: {w}", err=True)
    if dry_run:
        click.echo(res["plist"], nl=False)
        click.echo(f"# would write {res['path']} and run:", err=True)
        for cmd in res["commands"]:
            click.echo("#   " + " ".join(cmd), err=True)
    else:
        click.echo(f"installed and loaded {res['path']}")


@launchagent_grp.command("uninstall")
@click.option("--label", required=True, help="The label given to install.")
def launchagent_uninstall(label):
    """Boot the agent out and remove its plist and its copy of the shim."""
    from capshim import launchagent

    res = launchagent.uninstall(label)
    for path in res["removed"]:
        click.echo(f"removed {path}")


@main.command("host")
@click.argument("action", type=click.Choice(["status", "enable", "disable"]))
def host_cmd(action):
    """macOS host only: show, set or remove ForceUnrestrictedDeviceFeatureLevel
    (com.apple.gpusw.ParavirtualizedGraphics) for the VMs this Mac runs."""
    from capshim import host

    click.echo(host.run(action)["message"])


@main.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def verify_cmd(as_json):
    """Check the built Metal shim: architectures, signature, exports,
    forbidden strings, SHA256SUMS, and that answers change with a profile and
    stay stock with a broken one. Exit 1 when a check failed; checks that need
    macOS are listed as skipped, never as passed."""
    from capshim.backends import metal

    checks = metal.verify()
    if as_json:
        click.echo(json.dumps(checks, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table("check", "status", "detail")
        for c in checks:
            table.add_row(c["check"], c["status"], c["detail"])
        Console().print(table)
    if any(c["status"] == "failed" for c in checks):
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
