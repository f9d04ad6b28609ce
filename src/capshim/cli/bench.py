"""``capshim bench``: options -> request -> plan -> runs -> bundle, then the table."""

from __future__ import annotations

import sys

import click

from capshim.contracts.pasteable import command as pasteable
from capshim import evidence as _evidence
from capshim.bench import plan, runner, schedule
from capshim.bench import request as bench_request
from capshim.bench.stats import MIN_PROCESSES
from capshim.bench.workloads.builtin import MODEL_PRESETS
from capshim.bench.workloads import kinds
from capshim.cli.suggest import Choice, refuse_option_as_program
from capshim.cli.options import json_option, out_option, timeout_option, wide_option
from capshim.contracts import messages, names, signals
from capshim.contracts.numbers import FiniteFloat
from capshim.errors import EXIT_FINALIZE, EXIT_INERT, EXIT_WORKLOAD, UsageError
from capshim.evidence import signing
from capshim.evidence import finite_or_null, strict_json
from capshim.export import mechanism
from capshim.report import print_table
from capshim.summary import OFF_DEVICE_STATES, STRICT_STATES, explain_arm


def _sign_key(key):
    """--sign's check, before any run: a missing key is said now, not after the bench (exit 2)."""
    signing.require_key(key)
    return key


def _sign(bundle, key) -> None:
    """Sign the sealed ``bundle`` with ``key`` (None: no --sign) and say where the signature is."""
    if key is not None:
        click.echo(f"signed: {signing.sign_sealed(bundle, key)}", err=True)


@click.command("bench", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--arm", "arm_opts", multiple=True, metavar="NAME=SPEC",
              help="An arm: NAME= (stock), NAME=simulate:P, NAME=profile:P, NAME=simulate:P,profile:Q; "
                   "profile:restore answers the stock values P lowered. Repeat for each arm.")
@click.option("--baseline", help="The arm speedups are relative to (default: vm-stock / stock / the first arm).")
@click.option("--host-baseline", type=click.Path(), metavar="PATH",
              help="Bare-metal host numbers measured elsewhere: a bundle or a llama-bench JSON file.")
@click.option("--host-arm", metavar="NAME", help="An arm of this bench that plays the host (default: native).")
@click.option("--repetitions", "-r", type=click.IntRange(1, 1000), default=None,
              help="Processes per arm that every arm runs, one round each, before --precision gives rounds only "
                   "to the arms whose interval is still wide " + kinds.help_default("processes")
                   + ". One process takes about: " + kinds.help_default("process_s") + ".")
@click.option("--process-reps", type=click.IntRange(1, 1000), default=None,
              help="Built-in workload: timed repetitions inside each process, after its in-process warm-up; "
                   "the process's median is one sample " + kinds.help_default("process_reps") + ".")
@click.option("--warmup", type=click.IntRange(0, 100), default=None,
              help="Unrecorded warm-up rounds (on a CPU device one fills Mesa's shader cache; on a GPU the "
                   "built-in workload warms up in-process) " + kinds.help_default("warmup") + ".")
@click.option("--aa", is_flag=True,
              help="Add the A/A arm 'aa': the app layer active, answering exactly the stock values "
                   "(also --arm NAME=identity). Its ratio to native is the harness's and the shim's own bias.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=None,
              help="Seed of the arm order per round and the environment padding [default: random, recorded].")
@click.option("--precision", type=FiniteFloat(0, 100, min_open=True), default=None, metavar="PCT",
              help="Add rounds, each to the arms whose interval is wider than PCT points (% of host; without a "
                   "host, percent of the speedup) and the host, until every interval is within PCT or --max-runs "
                   f"is hit (then the table says so); the intervals are then computed at {100 * schedule.LEVEL:g}%, which keeps 95% "
                   "coverage although the loop stops when they look narrow (docs/statistics.md) "
                   + kinds.help_default("precision") + ".")
@click.option("--precision-test", "precision_tests", multiple=True, metavar="TEST",
              help="With --precision: the test the target applies to, e.g. pp512 (repeatable) [default: the "
                   "workload's own (built-in llama.cpp: pp<n-prompt>, not tg, whose processes spread far more), "
                   "else every test].")
@click.option("--max-runs", type=click.IntRange(1, 100000), default=None,
              help="With --precision: the most processes per arm [default: 5 x --repetitions, at least 60].")
@click.option("--exclude-contaminated", is_flag=True,
              help="Leave runs whose telemetry shows contamination (load above the core count, another process "
                   "on the GPU, throttled clocks) out of the statistics; they stay listed and flagged.")
@click.option("--allow-mismatch", is_flag=True,
              help="Compare a host baseline measured with a different model or settings (rows marked) instead of exit 2.")
@timeout_option
@out_option("bench", "Evidence bundle folder")
@click.option("--model", metavar="PATH|PRESET",
              help=f"Built-in workload: a GGUF file, or a preset ({', '.join(MODEL_PRESETS)}) "
                   f"[default: {bench_request.MODEL}].")
@click.option("--n-prompt", "-p", type=click.IntRange(1), default=None,
              help="Built-in: prompt tokens (pp test) " + kinds.help_default("n_prompt") + ".")
@click.option("--n-gen", "-n", type=click.IntRange(1), default=None,
              help="Built-in: generated tokens (tg test) " + kinds.help_default("n_gen") + ".")
@click.option("--check-output/--no-check-output", default=None,
              help="Compare every arm's output with the host/baseline arm's: generated token ids (llama.cpp), "
                   "the SHA-256 of stdout or --output-file (--metric), the network's output within 2% (ncnn), "
                   "every sampled attention output value within 0.01 (torch-sdpa) "
                   "[default: on for the built-in workloads].")
@click.option("--strict", is_flag=True, help="Exit 3 when an arm's shim stayed inert or invalid, or an arm did not "
              "run on the probed device (cpu-backend, off-device).")
@json_option("summary.json on stdout instead of the table")
@wide_option
@click.option("--db", "db_url", metavar="URL",
              help="Add the finished bundle to this results store (see capshim db --help); "
                   "'default' for $CAPSHIM_DB or the default SQLite file.")
@click.option("--metric", metavar="SPEC",
              help="Any command after --: 'wall' (seconds per process, lower is better), 'json:PATH' (a number "
                   "or list of numbers in the JSON on stdout, e.g. json:results.fps) or 'regex:PATTERN' (numbers "
                   "matched on stdout/stderr; one capture group).")
@click.option("--unit", help="With --metric: the unit shown [default: s for wall].")
@click.option("--better", type=Choice(["higher", "lower"]),
              help="With --metric: which direction is better (required for json: and regex:).")
@click.option("--output-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="With --metric and --check-output: the file the command writes, compared (SHA-256) across arms "
                   "instead of stdout; removed before each run.")
@click.option("--control", "control_opts", multiple=True, metavar="NAME=CMD",
              help="A control workload run in every round under each arm's shims (in the round's seeded order), expected "
                   "not to change (flagged when its interval excludes 1.00x). llama-bench commands report tok/s, "
                   "others wall seconds. Repeatable.")
@click.option("--workload", "workload_name", type=Choice(list(kinds.selectable())),
              help="A built-in workload other than llama.cpp: ncnn (a synthetic network through ncnn's Vulkan "
                   "backend; needs pip install 'capshim[ncnn]'), torch-sdpa (PyTorch's scaled-dot-product "
                   "attention on CUDA, TFLOP/s per call; needs a CUDA build of torch).")
@click.option("--network", type=Choice(["tiny", "standard"]),
              help="--workload ncnn: the network [default: tiny on a CPU device, standard on a GPU].")
@click.option("--shape", metavar="BxHxSxD",
              help="--workload torch-sdpa: batch x heads x sequence x head dimension, fp16 [default: 8x32x4096x128].")
@click.option("--sign", "sign_key", type=click.Path(), metavar="KEY", callback=lambda _c, _p, v: _sign_key(v),
              help="Sign the sealed bundle as the last step (capshim evidence sign BUNDLE --key KEY).")
@click.option("--block", is_flag=True, help="--workload torch-sdpa: time a small transformer block around the attention.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bench_cmd(arm_opts, baseline, host_baseline, host_arm, repetitions, process_reps, warmup, aa, seed, precision,
              precision_tests, max_runs, exclude_contaminated, allow_mismatch, timeout, out, model, n_prompt, n_gen,
              check_output, strict, as_json, db_url, metric, unit, better, output_file, control_opts, workload_name,
              network, shape, block, sign_key, command, wide=False):
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
      capshim bench --metric json:fps --better higher --unit fps \\
          -- ./my-app --json
      capshim bench --workload ncnn --control cpu='python3 -c "sum(range(10**7))"'
      capshim bench --workload torch-sdpa --arm native --arm t4-class --aa
      capshim bench --arm stock= --arm apple9=profile:metal-apple9 \\
          -- llama-bench -m m.gguf -p 512 -n 128 -r 10
      capshim bench -r 5 --host-baseline host-llama-bench.json \\
          -- llama-bench -m m.gguf
      capshim bench --aa --model tinyllama-1.1b --precision 2 \\
          --precision-test pp512
    """

    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    refuse_option_as_program(argv, click.get_current_context())  # --repetitons: a misspelt option, not a program
    if max_runs is not None and precision is None:
        raise UsageError("--max-runs caps the rounds that --precision adds; give --precision PCT too")
    if max_runs is not None and max_runs < MIN_PROCESSES:
        raise UsageError(f"--max-runs {max_runs}: below {MIN_PROCESSES} processes per arm there is no 95% interval "
                         f"(docs/statistics.md), so --precision could never be reached; give {MIN_PROCESSES} or more")
    if precision_tests and precision is None:
        raise UsageError("--precision-test names the tests of --precision; give --precision PCT too")
    req = bench_request.BenchRequest(
        arms=tuple(arm_opts), baseline=baseline, host_arm=host_arm, host_baseline=host_baseline, aa=aa,
        command=tuple(argv), workload=workload_name, network=network, shape=shape, block=block, model=model,
        n_prompt=n_prompt,
        n_gen=n_gen, metric=metric, unit=unit, better=better, output_file=output_file,
        controls=tuple(control_opts), check_output=check_output, repetitions=repetitions,
        process_reps=process_reps, warmup=warmup, seed=seed, timeout=timeout, precision=precision,
        precision_tests=tuple(precision_tests), max_runs=max_runs, exclude_contaminated=exclude_contaminated,
        allow_mismatch=allow_mismatch, out=out, strict=strict, as_json=as_json, db=db_url)
    p = plan.make_plan(req, platform=sys.platform)
    cpu = names.is_cpu_device(p.device)  # the same rule as capshim report of the bundle
    if cpu and not as_json:  # said up front: on a CPU device the path is the result, not the speed
        for note in p.notes:
            messages.emit(note, "note")
    # held from before the first run until the table is printed and the seal checked: no order of
    # signals loses the seal or leaves a half-printed table; the exit code is the first signal's
    with signals.SealGuard("the bundle") as guard:
        result = runner.run(p)
        if as_json:  # strict JSON, as in summary.json: a non-finite number is null
            click.echo(strict_json(finite_or_null(result.summary)).decode(), nl=False)
        else:
            states = [a["state"] for a in result.summary["arms"].values()]
            off = p.device is not None and all(st in OFF_DEVICE_STATES for st in states)
            title = p.title + (" (no arm ran on it)" if off else "")
            if cpu:  # the mechanism first, no speed claim, a busy machine said once (issue 28)
                mechanism.print_cpu(result.summary, title, wide=wide, skip_notes=p.notes or ())
            else:
                print_table([result.summary], title=title, wide=wide)
        messages.emit(f"evidence bundle: {result.bundle} (check it: {pasteable('capshim', 'evidence', 'verify', result.bundle)})",
                      prefix="")
        sealed_problems = _evidence.verify(result.bundle)  # the seal is checked, never assumed
        if guard.first or result.interrupted_by:
            guard.ignore_after()  # stopping already: a burst of signals cannot end it before exit 128+N
    if sealed_problems:
        messages.emit(f"the sealed bundle does not verify (something else wrote into {result.bundle} "
                      "during the bench?):")
        for line in sealed_problems[:20]:
            click.echo(f"  {line}", err=True)
        sys.exit(EXIT_FINALIZE)  # sealed, but the seal does not verify
    if guard.first and not result.interrupted_by:  # a signal after the runs: stop now, sealed
        sys.exit(signals.exit_code(guard.first[0]))
    _sign(result.bundle, sign_key)  # --sign: the last step, after the seal is checked and before --db
    if db_url:
        from capshim.db.store import add_bundle  # SQLAlchemy only with --db (capshim --help lists bench)
        bid, added = add_bundle(None if db_url == "default" else db_url, result.bundle)
        click.echo(f"results store: {'added' if added else 'already stored'} as #{bid}", err=True)
    for line in _not_results(result):
        messages.emit(line)
    if result.interrupted:
        sys.exit(signals.exit_code(result.interrupted_by))
    if strict and any(result.summary["arms"][a]["state"] in STRICT_STATES for a in result.non_shim_arms):
        sys.exit(EXIT_INERT)
    if result.failed_runs:
        sys.exit(EXIT_WORKLOAD)
    if result.summary.get("finalize_failures"):

        for f in result.summary["finalize_failures"]:
            messages.emit(f"finalize step {f['step']} failed: {f['error']} (recorded in the bundle)")
        sys.exit(EXIT_FINALIZE)


def _not_results(result) -> list[str]:
    """One line per arm that is not a result (:func:`capshim.summary.explain_arm`); the arms a stop
    left without a finished run share one line."""
    names = result.non_shim_arms
    lines = [explain_arm(name, result.summary["arms"][name]) for name in names]
    idle = [n for n, line in zip(names, lines) if line == f"arm {n} failed: no run finished"]
    if len(idle) < 2:
        return lines
    return [f"arms {', '.join(idle)} failed: no run finished"] + [
        line for n, line in zip(names, lines) if n not in idle]
