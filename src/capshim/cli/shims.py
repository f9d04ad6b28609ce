"""``capshim build``, ``run``, ``probe`` and ``verify``: the shims themselves."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from capshim import backends, beyond, launch
from capshim import probe as pr
from capshim.cli.suggest import Choice, refuse_option_as_program
from capshim.cli.options import json_option, load_placed, wide_option
from capshim.errors import EXIT_INERT, EXIT_WORKLOAD, CapshimError, UsageError
from capshim.export import terminal
from capshim.contracts import messages
from capshim.profiles import targets
from capshim.profiles.model import format_answer

_API_NAMES = backends.names()


def _selected_backends(api: str):
    """The backends ``--api`` names ("all": every registered one), each with why it is
    unavailable here (None when it is available).

    Raises:
        UsageError: an API named explicitly that this machine cannot build (exit 2).
    """

    chosen = [backends.get(a) for a in (backends.names() if api == "all" else [api])]
    out = [(be, be.unavailable()) for be in chosen]
    if api != "all" and out[0][1]:
        raise UsageError(f"--api {api}: {out[0][1]}")
    return out


@click.command("build")
@click.option("--api", type=Choice([*_API_NAMES, "all"]), default="all", show_default=True,
              help="Which shims to build; 'all' builds each one this machine can build and says "
                   "which it skipped and why.")
@click.option("--force", is_flag=True, help="Rebuild even when a cached build exists.")
@click.option("--target", type=Choice(["native", "macos"]), default="native", show_default=True,
              help="macos (with --api metal): cross-build the macOS Metal shim and probe for arm64 and "
                   "x86_64 on this machine with zig cc, and inspect them; arm64e needs a Mac with Xcode.")
def build_cmd(api, force, target):
    """Build the native shims (warnings are errors) into the capshim cache.

    \b
    Each API builds on its own: on Linux the Vulkan layer, and the Metal shim's
    stand-in build for the tests when an Objective-C compiler (gobjc) is
    there; on macOS the Metal shim. A shim this machine cannot build is
    skipped with a message (with --api naming it: exit 2). A build that fails
    (a compile error, missing Vulkan headers) is reported, the other APIs
    still build, and the exit code is the failure's (2).
    """
    if target != "native":
        be = backends.get(api) if api != "all" else None
        if be is None or target not in be.cross_targets:
            able = " or ".join(n for n in backends.names() if target in backends.get(n).cross_targets)
            raise CapshimError(f"--target {target}: only with --api {able}")
        lines, ok = be.cross_build(target, force=force)
        for line in lines:
            click.echo(line)
        if not ok:
            sys.exit(EXIT_WORKLOAD)
        return
    built, failed = 0, []
    for be, why in _selected_backends(api):
        if why:
            click.echo(f"{be.name}: skipped: {why}", err=True)
            continue
        try:
            artifacts = be.build(force=force)
        except CapshimError as exc:  # one API's failure does not stop the others
            messages.emit(f"{be.name}: build failed: {exc}")
            failed.append(exc)
            continue
        for name, path in artifacts.items():
            click.echo(f"{be.name}: {name}: {path}")
        built += 1
    if failed:
        sys.exit(failed[0].exit_code)
    if not built:
        raise CapshimError("--api all: no shim can be built on this machine (see the lines above)")


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--profile", "profile_ref", metavar="P[@DEV]", multiple=True,
              help="Shim profile (built-in name, TOML file, or Khronos Vulkan Profiles FILE.json[#NAME]): the "
                   "answers the command sees. P@DEV[,DEV...] applies it to those devices only (index or UUID; "
                   "repeat for other devices: --profile a@0 --profile b@1); the others answer stock.")
@click.option("--simulate", "simulate_ref", metavar="P[@DEV]", multiple=True,
              help="Vulkan only: a profile applied next to the driver, to simulate a weaker GPU; a Khronos "
                   "FILE.json[#NAME] is split per answer (lower here, raise as --profile). P@DEV as --profile.")
@click.option("--inherit", is_flag=True, help="Let the command's child processes inherit the shims.")
@click.option("--strict", is_flag=True,
              help="Exit 3 when a requested shim stayed inert or was invalid, or (without running the "
                   "command) when a raise profile answers beyond the device.")
@click.option("--quiet", is_flag=True, help="No capshim banner on stderr (CAPSHIM_QUIET=1).")
@click.option("--status-file", help="Keep the shims' JSON-lines status here: a new regular file (its folder is "
                                    "created); devices, FIFOs and links are refused.")
@click.option("--force", is_flag=True, help="Let --status-file empty an existing file.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(profile_ref, simulate_ref, inherit, strict, quiet, status_file, force, command):
    """Run COMMAND with the shims enabled for that process alone.

    \b
    Examples:
      capshim run --profile metal-apple9 -- llama-bench -m model.gguf
      capshim run --simulate vulkan-paravirt -- vulkaninfo --summary

    The exit code is the command's (128+N when killed by signal N); with
    --strict, 3 when a requested shim did not become active.

    A raise profile that answers more than the device has (a size above the
    real one, a feature or an extension the driver lacks) gets one warning
    per profile on stderr (its answers counted per kind, the first few named;
    capshim --verbose names each) and a beyond_device event per answer in the
    status file; with --strict the command is not started and capshim exits 3.

    \b
    One profile per device (docs/multi-gpu.md):
      capshim run --profile t4-class@1 -- python train.py
      capshim run --profile t4-class@0 --profile a100-class@GPU-8f3a... -- ./app
    """

    profile, simulate, notes, placed = load_placed(profile_ref, simulate_ref)
    for note in notes:
        messages.emit(note)
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    refuse_option_as_program(argv, click.get_current_context())  # --profle: a misspelt option, not a program
    read = [getattr(x, "source", None) for x in (profile, simulate, *[p.profile for p in placed or ()])]
    read.append(shutil.which(argv[0]) if argv else None)  # the program: never emptied by --force
    status_path = launch.check_status_file(status_file, force, tuple(r for r in read if r)) if status_file else None
    if simulate is not None and simulate.direction == "raise":
        messages.emit(f"--simulate {simulate.source} is a 'raise' profile: it raises answers next "
                      "to the driver (simulate is meant to lower them)", "warning")
    lc = launch.prepare(argv, profile, simulate, inherit=inherit, quiet=quiet,
                        status_file=status_path, placements=placed)
    try:
        if lc.backend is not None:
            for warning in lc.backend.run_warnings(profile, simulate, argv):
                messages.emit(warning, "warning")
            over = False
            for prof, sim, index in _per_device(profile, simulate, placed):
                over = bool(_beyond_device(lc.backend, prof, sim, index, lc.status_file)[0]) or over
            if over and strict:
                messages.emit("--strict: not starting the command: the profile answers beyond the device")
                sys.exit(EXIT_INERT)
        rc = launch.run(lc)
        states = lc.states()
        bad = {n: s for n, s in states.items() if s.state != "active"}
        for name, s in bad.items():
            messages.emit(f"{name} stayed {s.state}: {s.reason}")
        for line in _device_lines(states, lc.backend.name if lc.backend else "") if placed and not quiet else []:
            messages.emit(line)
    finally:
        lc.cleanup()
    if strict and bad and rc == 0:
        sys.exit(EXIT_INERT)
    sys.exit(rc)


def _device_lines(states, api: str) -> list[str]:
    """One line per shim and device a targeted run changed (:attr:`capshim.status.ShimState.devices`),
    answers in the profiles' notation: ``cuda: device 1 (UUID) under t4-class, changed 7 answers:
    computeCapability 9.0 -> 7.5, ...``."""
    out = []
    for name, s in states.items():
        for index, rec in s.devices.items():
            changed = [f"{k} {format_answer(api, k, a)} -> {format_answer(api, k, b)}"
                       for k, (a, b) in rec["answered"].items()]
            uuid = f" ({rec['uuid']})" if rec.get("uuid") else ""
            out.append(f"{name}: device {index}{uuid} under {rec.get('profile') or '?'}, changed "
                       + messages.summarise(changed, "answer"))
    return out


def _per_device(profile, simulate, placed, device: int = 0):
    """(profile, simulate, device index) for each device the run changes: the one device
    ``device`` without placements, else each device a placement names."""
    if placed is None:
        return [(profile, simulate, device)]
    out = []
    for index in sorted({d.index for p in placed for d in p.devices}):
        on = targets.on_device(placed, index)
        out.append(tuple(on[r].profile if on[r] else None for r in ("profile", "simulate")) + (index,))
    return out


def _beyond_device(backend, profile, simulate, device, status_file=None) -> tuple[list[dict], list[dict]]:
    """Check the profiles against the device: refuse (exit 2) what
    check_against_device refuses; warn on stderr about its warnings (the answers
    that change nothing among them) and about each answer a raise profile gives
    beyond the device; append the beyond_device events to ``status_file`` (when
    given); return those events and the no-effect entries (:class:`capshim.beyond.Check`)."""

    found = beyond.check(backend, profile, simulate, device)
    if found.refusals:
        raise UsageError("\n".join(found.refusals))
    for line in ([found.problem] if found.problem else []) + found.warnings + beyond.warning_lines(found.findings):
        messages.emit(line, "warning")
    if status_file is not None:
        beyond.write_events(status_file, backend, found.findings)
    return beyond.events(backend, found.findings), found.no_effect


@click.command("probe")
@click.option("--api", type=Choice(_API_NAMES), default=None,
              help="The GPU API (default: the profile's, else the one this platform runs: "
                   "vulkan on Linux, metal on macOS).")
@click.option("--profile", "profile_ref", metavar="P[@DEV]", multiple=True,
              help="Shim profile to probe through; P@DEV[,DEV...] on those devices only (repeatable): then "
                   "every device is probed and each says what was changed on it.")
@click.option("--simulate", "simulate_ref", metavar="P[@DEV]", multiple=True,
              help="Vulkan: simulate a weaker device with this profile (P@DEV as --profile).")
@click.option("--device", type=click.IntRange(0, 15), default=0, show_default=True,
              help="Vulkan physical device index (with P@DEV targets every device is probed).")
@click.option("--compare", is_flag=True, help="Show stock and shimmed answers side by side.")
@click.option("--list", "list_devices", is_flag=True,
              help="List the devices of the API (--api vulkan or cuda; default: this platform's), one a "
                   "line: index, name, UUID: what PROFILE@DEVICE takes (docs/multi-gpu.md).")
@click.option("--all", "show_all", is_flag=True, help="With --compare: show unchanged rows too.")
@json_option("JSON")
@click.option("--strict", is_flag=True, help="Exit 3 when a raise profile answers beyond the device.")
@wide_option
def probe_cmd(api, profile_ref, simulate_ref, device, compare, list_devices, show_all, as_json, strict, wide):
    """Print the capability answers a process sees, stock or through shims.

    A raise profile that answers more than the device has gets one warning
    on stderr (the first few answers named, capshim --verbose: each), and the JSON a "beyond_device" list of events
    (key, device, reported, note); --strict then exits 3. An answer the layer
    will not give (clamped by the profile's direction, or the device's own
    already) is a warning line too, and in the JSON's "no_effect" list.

    Metal without a profile prints a host capture (on the Mac that runs the
    VM): what profile from-host and profile check --host read.

    \b
    Examples:
      capshim probe --api vulkan --json
      capshim probe --compare --simulate vulkan-paravirt
      capshim probe --api metal --json > host.json
      capshim probe --list --api cuda      # the devices P@DEV names
    """
    if list_devices:
        _list_devices(api, bool(profile_ref or simulate_ref or compare), as_json)
        return

    profile, simulate, notes, placed = load_placed(profile_ref, simulate_ref, device)
    for note in notes:
        messages.emit(note)
    if api is None:
        api = (profile or simulate).api if (profile or simulate) else backends.default_api()
    for flag, prof in (("--profile", profile), ("--simulate", simulate)):
        if prof is not None and prof.api != api:
            raise CapshimError(f"{flag} {prof.source}: api is '{prof.api}', but --api is '{api}'")
    be = backends.get(api)
    for warning in be.run_warnings(profile, simulate, []):  # loader settings that hide the shims
        messages.emit(warning, "warning")
    if placed is not None:
        return _probe_targeted(be, profile, simulate, placed, compare, show_all, as_json, strict, wide)
    # the probe first: a device it cannot probe (no driver) is its one error, not also a warning of the check
    out = pr.run_probe(api, profile, simulate, device=device, compare=compare)
    over, no_effect = _beyond_device(be, profile, simulate, device)
    if over:
        out["beyond_device"] = over
    if no_effect:
        out["no_effect"] = no_effect
    if as_json or not be.tabular_probe:
        click.echo(json.dumps(out, indent=2))
    else:
        pr.print_probe(out, compare=compare, show_all=show_all, wide=wide)
    if strict and over:
        sys.exit(EXIT_INERT)


def _list_devices(api: str | None, other: bool, as_json: bool) -> None:
    """``probe --list``: the devices :meth:`capshim.backends.Backend.devices` lists, one a line
    (``0: NVIDIA H200 (ca950000-...)``; a UUID several devices share is marked), or
    ``{"api", "devices": [{"index", "name", "uuid"}]}``.

    Raises:
        UsageError: with a profile or --compare, or for an API with one device by nature (exit 2);
            CapshimError: the devices cannot be listed (no driver, exit 1).
    """
    if other:
        raise UsageError("--list: lists the devices only (drop --profile, --simulate and --compare)")
    api = api or backends.default_api()
    listed = backends.target_devices(api)
    if listed is None:
        able = " or ".join(f"--api {n}" for n in _API_NAMES if backends.get(n).device_targets)
        raise UsageError(f"--list --api {api}: {api} has one device per process, so there is none to "
                         f"name (devices are listed for {able})")
    if as_json:
        click.echo(json.dumps({"api": api, "devices": [
            {"index": d.index, "name": d.name, "uuid": targets.uuid_text(d.uuid) if d.uuid else None}
            for d in listed]}, indent=2))
        return
    uuids = [d.uuid for d in listed if d.uuid]
    for d in listed:  # a UUID two devices share names neither (targets.resolve refuses it)
        click.echo(targets.device_line(d) + (" [UUID shared: name it by index]" if uuids.count(d.uuid) > 1 else ""))


def _probe_targeted(be, profile, simulate, placed, compare, show_all, as_json, strict, wide):
    """``probe`` with profiles placed on devices: every device, each with what was changed on it."""
    devices = placed[0].devices if not placed[0].targets else be.devices()
    out = be.probe_targeted(placed, devices, compare=compare)
    over_all = []
    for entry in out["devices"]:
        on = targets.on_device(placed, entry["index"])
        prof, sim = (on[r].profile if on[r] else None for r in ("profile", "simulate"))
        over, no_effect = _beyond_device(be, prof, sim, entry["index"]) if prof or sim else ([], [])
        if over:
            entry["beyond_device"] = over
        if no_effect:
            entry["no_effect"] = no_effect
        over_all += over
    if as_json or not be.tabular_probe:
        click.echo(json.dumps(out, indent=2))
    else:
        pr.print_devices(out, compare=compare, show_all=show_all, wide=wide)
    if strict and over_all:
        sys.exit(EXIT_INERT)


@click.command("verify")
@click.option("--api", type=Choice([*_API_NAMES, "all"]), default="all", show_default=True,
              help="Which shims to check; 'all' checks each one this machine can build and lists "
                   "the others as skipped, with the reason.")
@json_option()
@click.option("--shim", "shim_file", type=click.Path(dir_okay=False), default=None,
              help="With --api metal: check this Mach-O dylib (built on a Mac or with "
                   "'capshim build --api metal --target macos') instead of the built shim, on any OS.")
def verify_cmd(api, as_json, shim_file):
    """Check the built shims: architectures, signature (macOS), exported symbols,
    forbidden strings (Metal), SHA256SUMS, and that answers change with a
    profile and stay stock with a broken one. Exit 1 when a check failed;
    checks that need macOS are listed as skipped, never as passed; an --api
    this machine cannot build exits 2."""
    if shim_file is not None:

        be = backends.get(api) if api != "all" else None
        if be is None or not be.verifies_files:
            able = " or ".join(n for n in backends.names() if backends.get(n).verifies_files)
            raise CapshimError(f"--shim: only with --api {able}")
        checks = be.verify(shim=Path(shim_file))
    else:
        checks = []
        for be, why in _selected_backends(api):
            if why:
                checks.append({"check": f"{be.name}: build", "status": f"skipped ({why})", "detail": why})
                continue
            checks += be.verify()
    if as_json:
        click.echo(json.dumps(checks, indent=2))
    else:

        terminal.print_grid(("check", "status", "detail"), [[c["check"], c["status"], c["detail"]] for c in checks])
    if any(c["status"] == "failed" for c in checks):
        sys.exit(EXIT_WORKLOAD)
