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


def _load_profile(ref, flag):
    from capshim import profiles

    if ref is None:
        return None
    try:
        return profiles.load(ref)
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None


@main.command("build")
@click.option("--api", type=click.Choice(["vulkan", "metal", "all"]), default="all", show_default=True,
              help="Which shims to build; 'all' builds those this platform can run.")
@click.option("--force", is_flag=True, help="Rebuild even when a cached build exists.")
def build_cmd(api, force):
    """Build the native shims (warnings are errors) into the capshim cache."""
    if api in ("vulkan", "all") and sys.platform.startswith("linux"):
        from capshim.backends import vulkan

        b = vulkan.build(force=force)
        click.echo(f"vulkan: {b.library}")
        click.echo(f"vulkan: {b.probe}")
    if api in ("metal", "all"):
        try:
            from capshim.backends import metal
        except ImportError:
            if api == "metal":
                raise CapshimError("the Metal backend is not part of this build") from None
        else:
            for name, path in metal.build(force=force).items():
                click.echo(f"metal: {name}: {path}")


@main.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--profile", "profile_ref", metavar="P", help="Shim profile (built-in name or file): the answers the command sees.")
@click.option("--simulate", "simulate_ref", metavar="P",
              help="Vulkan only: a profile applied next to the driver, to simulate a weaker GPU.")
@click.option("--inherit", is_flag=True, help="Let the command's child processes inherit the shims.")
@click.option("--strict", is_flag=True, help="Exit 3 when a requested shim stayed inert or was invalid.")
@click.option("--quiet", is_flag=True, help="No capshim banner on stderr (CAPSHIM_QUIET=1).")
@click.option("--status-file", type=click.Path(dir_okay=False), help="Keep the shims' JSON-lines status here.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(profile_ref, simulate_ref, inherit, strict, quiet, status_file, command):
    """Run COMMAND with the shims enabled for that process alone.

    \b
    Examples:
      capshim run --profile metal-apple9 -- llama-bench -m model.gguf
      capshim run --simulate vulkan-paravirt -- vulkaninfo --summary

    The exit code is the command's (128+N when killed by signal N); with
    --strict, 3 when a requested shim did not become active.
    """
    from pathlib import Path

    from capshim import launch

    profile = _load_profile(profile_ref, "--profile")
    simulate = _load_profile(simulate_ref, "--simulate")
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    lc = launch.prepare(argv, profile, simulate, inherit=inherit, quiet=quiet,
                        status_file=Path(status_file).resolve() if status_file else None)
    try:
        if profile is not None and profile.api == "metal":
            from capshim.backends import metal

            for warning in metal.warn_target(argv):
                click.echo(f"capshim: warning: {warning}", err=True)
        rc = launch.run(lc)
        bad = {n: s for n, s in lc.states().items() if s.state != "active"}
        for name, s in bad.items():
            click.echo(f"capshim: {name} stayed {s.state}: {s.reason}", err=True)
    finally:
        lc.cleanup()
    if strict and bad and rc == 0:
        sys.exit(3)
    sys.exit(rc)


@main.command("probe")
@click.option("--api", type=click.Choice(["vulkan", "metal"]), default=None,
              help="The GPU API (default: vulkan on Linux, metal on macOS).")
@click.option("--profile", "profile_ref", metavar="P", help="Shim profile to probe through.")
@click.option("--simulate", "simulate_ref", metavar="P", help="Vulkan: simulate a weaker device with this profile.")
@click.option("--device", type=click.IntRange(0, 15), default=0, show_default=True, help="Vulkan physical device index.")
@click.option("--compare", is_flag=True, help="Show stock and shimmed answers side by side.")
@click.option("--all", "show_all", is_flag=True, help="With --compare: show unchanged rows too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def probe_cmd(api, profile_ref, simulate_ref, device, compare, show_all, as_json):
    """Print the capability answers a process sees, stock or through shims.

    \b
    Examples:
      capshim probe --api vulkan --json
      capshim probe --compare --simulate vulkan-paravirt
    """
    from capshim import probe as pr

    profile = _load_profile(profile_ref, "--profile")
    simulate = _load_profile(simulate_ref, "--simulate")
    if api is None:
        api = (profile or simulate).api if (profile or simulate) else ("metal" if sys.platform == "darwin" else "vulkan")
    for flag, prof in (("--profile", profile), ("--simulate", simulate)):
        if prof is not None and prof.api != api:
            raise CapshimError(f"{flag} {prof.source}: api is '{prof.api}', but --api is '{api}'")
    out = pr.run_probe(api, profile, simulate, device=device, compare=compare)
    if as_json:
        click.echo(json.dumps(out, indent=2))
    else:
        pr.print_probe(out, compare=compare, show_all=show_all)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
