"""``capshim launchagent`` and ``capshim host``: macOS helpers."""

from __future__ import annotations

import click

from capshim.contracts import pasteable
from capshim import host, launchagent, profiles
from capshim.cli.suggest import Choice, SuggestingGroup, refuse_option_as_program
from capshim.contracts import messages


@click.group("launchagent", cls=SuggestingGroup)
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

    refuse_option_as_program(list(argv), click.get_current_context())  # --dry-rn: a misspelt option
    res = launchagent.install(profiles.load(profile_ref), label, list(argv), dry_run=dry_run)
    for w in res["warnings"]:
        messages.emit(w, "warning")
    if dry_run:
        click.echo(res["plist"], nl=False)
        click.echo(f"# would write {res['path']} and run:", err=True)
        for cmd in res["commands"]:
            click.echo("#   " + pasteable.command(*cmd), err=True)  # runs as printed (a HOME with a space)
    else:
        click.echo(f"installed and loaded {res['path']}")


@launchagent_grp.command("uninstall")
@click.option("--label", required=True, help="The label given to install.")
def launchagent_uninstall(label):
    """Boot the agent out and remove its plist and its copy of the shim."""

    res = launchagent.uninstall(label)
    for path in res["removed"]:
        click.echo(f"removed {path}")


@click.command("host")
@click.argument("action", type=Choice(["status", "enable", "disable"]))
def host_cmd(action):
    """macOS host only: show, set or remove ForceUnrestrictedDeviceFeatureLevel
    (com.apple.gpusw.ParavirtualizedGraphics) for the VMs this Mac runs."""

    click.echo(host.run(action)["message"])
