"""Run the arms of a benchmark and write the evidence bundle.

Method (after pyperf and hyperfine; issue 10 of this project says why):

- every run is its own process, and the process is the unit: it warms up
  in-process, then runs k timed repetitions; the statistics resample whole
  processes (:mod:`capshim.bench.stats`);
- every arm, native included, is launched the same way: the same pid wrapper
  (``/bin/sh -c '... exec "$@"'``) and the same variables present, set for an
  arm without shims to values that enable nothing (``VK_INSTANCE_LAYERS=""``,
  no configuration), so the only difference between arms is the layers and
  their answers;
- each round runs the arms in a fresh order (a permutation drawn from a seeded
  generator; the seed is in metadata.json, each run's round and position in
  results.csv), and each run's environment is padded to a common size plus a
  random offset of 0-4095 bytes (``CAPSHIM_BENCH_PAD``, after hyperfine's
  randomized environment offset), so memory-layout effects average out
  instead of biasing one arm;
- ``warmup`` rounds run first and are not recorded; each run's stdout, stderr,
  shim status file and telemetry (:mod:`capshim.bench.telemetry`) are kept;
- with a precision target, rounds are added until every interval is narrow
  enough or a cap on processes per arm is hit (and the summary says which).

A run that crashes, is killed or times out is recorded with its exit code or
signal and the others go on; Ctrl-C stops the bench and still writes a valid
bundle of what finished.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from capshim import __version__, backends, paths, report
from capshim.bench import analysis, attest, inherited_env, metrics, stats, telemetry
from capshim.bench.arms import Arm
from capshim.bench.plan import Plan
from capshim.bench.request import BenchRequest
from capshim.bench.runs import PAD_RANGE, PAD_VAR, RunResult, make_launcher, run_one
from capshim.bench.workloads.base import Workload
from capshim.contracts import environ, folders, messages
from capshim.contracts.signals import SealGuard, StepInterrupted
from capshim.contracts.suggest import did_you_mean
from capshim.errors import CapshimError, UsageError
from capshim.evidence import Bundle, sha256_file
from capshim.summary import NOT_SHIM_STATES, run_failed


def _arm_state(arm: Arm, results: list[RunResult]) -> str:
    ok = [r for r in results if run_failed(r.info()) is None]
    if not ok:
        return "failed"  # every run failed or was stopped, or none ran (interrupted before)
    if not arm.shimmed:
        return "native"
    shim_states = [s["state"] for r in results for s in r.shim_states.values()]
    if "invalid" in shim_states:
        return "invalid"
    if "inert" in shim_states or not shim_states:
        return "inert"
    return "active"


@dataclass
class BenchResult:
    """What :func:`run` / :func:`run_bench` produced: the sealed bundle and how it went.

    Attributes:
        summary: summary.json's content (:mod:`capshim.summary`), as sealed.
        bundle: the bundle folder.
        interrupted: a stop signal ended the runs (the bundle holds what finished).
        failed_runs: recorded runs that failed (:func:`capshim.summary.run_failed`), controls included.
        non_shim_arms: arms whose state is inert, invalid, failed or wrong-output.
        interrupted_by: the stop signal's name (``SIGINT``, ``SIGTERM``, ``SIGHUP``), else None;
            capshim exits :func:`capshim.contracts.signals.exit_code` of it.
    """

    summary: dict
    bundle: Path
    interrupted: bool
    failed_runs: int
    non_shim_arms: list[str]
    interrupted_by: str | None = None


@dataclass
class _Rounds:
    """The measuring loop of one bench: rounds of every (arm, workload) pair in a fresh order.

    ``results`` / ``control_results``: ``{arm: [RunResult]}`` of the workload's and the controls'
    recorded runs. ``interrupted_by``: the stop signal's name; ``aborted``: an error that ended the
    loop; ``bad_tests``: a ``--precision-test`` that names no test (the loop stopped after one round).
    """

    arms: list[Arm]
    workload: Workload
    bundle: Bundle
    guard: SealGuard
    console: Console
    opts: dict
    results: dict = field(default_factory=dict)
    control_results: dict = field(default_factory=dict)
    interrupted_by: str | None = None
    aborted: str | None = None
    bad_tests: dict | None = None
    precision_state: dict | None = None
    workdir: Path | None = None
    tests_checked: bool = False
    busy_said: bool = False

    def stop(self) -> str | None:
        """The name of the stop signal the seal guard recorded, or None."""
        return signal.Signals(self.guard.first[0]).name if self.guard.first else None

    def precision(self, recorded: int) -> dict:
        """The precision check after ``recorded`` rounds (:func:`_precision`)."""
        o = self.opts
        return _precision(self.results, self.arms, o["baseline"], o["host_arm"], o["host"], o["precision"],
                          recorded, o["cap"], o["exclude_contaminated"], o["precision_tests"],
                          self.workload, self.control_results)

    def more(self, recorded: int) -> bool:
        """Whether another recorded round is wanted after ``recorded`` rounds (the precision loop)."""
        o = self.opts
        if recorded < o["repetitions"]:
            return True
        if o["precision"] is None:
            return False
        self.precision_state = self.precision(recorded)
        if self.precision_state["reached"] or recorded >= o["cap"]:
            return False
        worst = self.precision_state["max_half_width"]
        self.console.print(f"precision: widest half-width {'unknown' if worst is None else format(worst, '.2f')} "
                           f"> {o['precision']:g} points after {recorded} rounds: one more round")
        return True

    def run(self, rng: random.Random, probe: telemetry.Telemetry) -> None:
        """Warm-up rounds, then recorded rounds until :meth:`more` says enough or a stop request."""
        o = self.opts
        units = [(a, w) for a in self.arms for w in (self.workload, *self.workload.controls)]
        launcher = make_launcher(self.arms, self.workload, self.workdir, rng)
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                            transient=False)
        with progress:
            task = progress.add_task("bench", total=len(units) * (o["warmup"] + o["repetitions"]))
            for rnd in range(o["warmup"]):
                if not self.round(units, rnd + 1, False, launcher, rng, probe, progress, task):
                    return
            recorded = 0
            while self.more(recorded):
                if recorded >= o["repetitions"]:
                    progress.update(task, total=progress.tasks[0].total + len(units))
                if not self.round(units, recorded + 1, True, launcher, rng, probe, progress, task):
                    return
                recorded += 1
                if o["precision"] is not None and o["precision_tests"] and not self.tests_checked:
                    # a --precision-test that names no test of the workload would run to --max-runs
                    check = self.precision(recorded)
                    self.tests_checked = "known_tests" in check or check["max_half_width"] is not None
                    if check.get("unknown_tests"):
                        self.bad_tests = check
                        return

    def round(self, units, n: int, record: bool, launcher, rng, probe, progress, task) -> bool:
        """One round in a fresh order; False when a stop request ended it."""
        order = list(units)
        rng.shuffle(order)  # one permutation of every (arm, workload) pair: the controls too
        if record:
            self.bundle.metadata["schedule"].append([w.label(a.name) for a, w in order])
        for pos, (arm, w) in enumerate(order, 1):
            if self.stop():
                return False
            who = arm.name + (f" control {w.control}" if w.control else "")
            reps = self.opts["repetitions"]
            what = (f"{who} run {n}/{max(n, reps)}" if record else f"{who} warm-up {n}/{self.opts['warmup']}")
            progress.update(task, description=what)
            res = run_one(self.bundle, arm, n, w, self.opts["timeout"], self.workdir, record, launcher, probe,
                          (n if record else 0, pos), stop=self.stop)
            if record:
                self.keep(arm, w, res, n, pos)
            if res.error:
                self.console.print(f"[yellow]{who} {'run ' + str(n) if record else 'warm-up'}: {res.error}[/]")
            progress.advance(task)
            if res.contaminated and not self.busy_said:  # said once, not per run (issue 28)
                self.busy_said = True
                self.console.print(messages.format_message(
                    f"the machine is busy ({'; '.join(res.contaminated)}): runs like this one are flagged "
                    "contaminated; the output counts them once", "note", messages.width(self.console.file)),
                    markup=False, highlight=False, soft_wrap=True)
            if not self.console.is_terminal:  # no live bar in a log: one line per run
                self.console.print(f"[{int(progress.tasks[0].completed)}/{int(progress.tasks[0].total)}] {what}: "
                                   f"{res.seconds:.1f} s" + (f" ({res.error})" if res.error else ""),
                                   markup=False, highlight=False)
        return not self.stop()

    def keep(self, arm: Arm, w: Workload, res: RunResult, n: int, pos: int) -> None:
        """Record one run: in the results, and in metadata.json (a control's runs only there)."""
        (self.control_results if w.control else self.results)[arm.name].append(res)
        entry = {"run": n, "round": n, "position": pos, "exec_argv": res.exec_argv, "env_delta": res.env_delta,
                 "telemetry": res.telemetry, "contaminated": res.contaminated}
        if w.control:
            entry = {**res.info(), **entry}
        self.bundle.metadata["arms"][arm.name].setdefault("control_runs" if w.control else "runs", []).append(entry)


def run_bench(arms: list[Arm], workload: Workload, baseline: str, out: Path, repetitions: int = 10,
              warmup: int = 1, timeout: float = 900.0, host_arm: str | None = None, host: dict | None = None,
              extra_metadata: dict | None = None, console: Console | None = None, *, seed: int | None = None,
              aa_arm: str | None = None, precision: float | None = None, max_runs: int | None = None,
              exclude_contaminated: bool = False, allow_mismatch: bool = False, notes: list[str] | None = None,
              precision_tests: list[str] | None = None) -> BenchResult:
    """Run ``repetitions`` processes per arm, in a fresh order per round, and write the evidence bundle.

    Args:
        arms: the arms, resolved (no pending ``restore``/``identity``).
        workload: what each run executes.
        baseline: the arm speedups are relative to.
        out: the bundle folder (new or empty: :func:`capshim.contracts.folders.new_output_folder`).
        repetitions: recorded processes (rounds) per arm, at least.
        warmup: unrecorded rounds before the recorded ones.
        timeout: seconds one run may take before it is killed (recorded as timed out).
        host_arm: an arm of this bench that plays the bare-metal host ("% of host").
        host: a host baseline measured elsewhere (analysis.host_from_file), used when host_arm is None.
        extra_metadata: merged into metadata.json.
        console: where progress goes (stderr by default).
        seed: the seed of the arm order and the environment padding (random when None; recorded).
        aa_arm: the A/A arm, whose ratio to native the table prints.
        precision: add rounds until every interval's half-width is at most this many points
            (% of host, or percent of the speedup without a host), or ``max_runs`` is hit.
        max_runs: the cap on processes per arm with ``precision`` (default 5 x ``repetitions``).
        precision_tests: the tests (``pp512``, or a whole series name) the precision
            target applies to; None: every test.
        exclude_contaminated: leave runs that telemetry flags out of the statistics.
        allow_mismatch: compare arms whose configurations differ (rows marked) instead of failing.
        notes: sentences for the table notes.

    Returns:
        BenchResult with the summary (summary.json content) and the bundle path; ``interrupted_by``
        names the stop signal when Ctrl-C, SIGTERM or SIGHUP ended the runs (the bundle of what
        finished is sealed: the seal guard is held from before the first run to the seal).

    Raises:
        CapshimError: bad arms/baseline; the bundle cannot be created; the bench stopped by an error
            (exit 1, after sealing what finished).
        UsageError: a ``--precision-test`` that names no test (after sealing the first round).
        SystemExit: 128+N after the seal when a signal arrived only while sealing.
    """
    console = console or Console(stderr=True)
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise CapshimError(f"arm names must be unique: {', '.join(names)}")
    if baseline not in names:
        raise CapshimError(f"--baseline {baseline!r} is not an arm ({', '.join(names)})")
    if host_arm is not None and host_arm not in names:
        raise CapshimError(f"host arm {host_arm!r} is not an arm ({', '.join(names)})")
    seed = secrets.randbits(32) if seed is None else int(seed)
    cap = max(repetitions, max_runs or 5 * repetitions) if precision is not None else repetitions
    opts = {"baseline": baseline, "host_arm": host_arm, "host": host, "repetitions": repetitions, "warmup": warmup,
            "timeout": timeout, "precision": precision, "precision_tests": precision_tests, "cap": cap,
            "exclude_contaminated": exclude_contaminated}
    meta = _metadata(arms, workload, opts, seed, aa_arm, extra_metadata)
    env_warnings = inherited_env.warnings(os.environ, workload.env) + inherited_env.loader_warnings(arms)
    for w in env_warnings:
        console.print(messages.format_message(w, "warning", messages.width(console.file)), markup=False,
                      highlight=False, soft_wrap=True)
    with SealGuard("the bundle") as guard:  # held from before the first run to the seal
        bundle = Bundle.create(out, meta)
        loop = _Rounds(arms, workload, bundle, guard, console, opts, {a.name: [] for a in arms},
                       {a.name: [] for a in arms})
        rng = random.Random(seed)
        loop.workdir = Path(tempfile.mkdtemp(prefix="capshim-bench-"))
        probe = telemetry.Telemetry()
        meta["telemetry"] = {"nvml": probe.nvml_reason or "available"}
        try:
            loop.run(rng, probe)
        except Exception as exc:  # noqa: BLE001 - whatever broke, the finished runs are sealed below
            loop.aborted = f"{type(exc).__name__}: {exc}"
            console.print(f"[red]bench stopped by an error ({loop.aborted}): writing the bundle of the runs "
                          "that finished[/]")
        finally:
            shutil.rmtree(loop.workdir, ignore_errors=True)
            probe.close()
        loop.interrupted_by = loop.stop()
        if loop.interrupted_by:
            console.print(f"[red]interrupted ({loop.interrupted_by}): writing the bundle of the runs that finished[/]")
        if loop.aborted:
            bundle.metadata["aborted"] = loop.aborted
        result = _finish(bundle, arms, loop.results, workload, baseline, host_arm, host,
                         bool(loop.interrupted_by or loop.aborted), control_results=loop.control_results,
                         aa_arm=aa_arm, allow_mismatch=allow_mismatch, exclude_contaminated=exclude_contaminated,
                         notes=notes, bench_warnings=env_warnings, precision=loop.precision_state,
                         precision_target=precision, cap=cap, precision_tests=precision_tests, guard=guard)
    if not loop.interrupted_by:  # a signal that came only while sealing: exit 128+N now
        guard.exit_if_signalled()
    result.interrupted_by = loop.interrupted_by
    return _raise_after_seal(result, loop, bundle)


def run(plan: Plan, req: BenchRequest, console: Console | None = None) -> BenchResult:
    """Run a Plan and write its evidence bundle (:func:`run_bench` with the request's options).

    The bundle folder is ``req.out`` (new or empty) or a new unique ``./capshim-bench-DATE-TIME``
    (:func:`capshim.contracts.folders.new_output_folder`). A run option the request leaves None
    takes the plan's default (``Plan.defaults``: on a GPU, the built-in workload's precision
    target unless ``-r`` was given).

    Raises:
        UsageError: ``--out`` is a file, a non-empty folder or inside a sealed bundle (exit 2);
            the errors of :func:`run_bench`.
    """
    options = {"seed": req.seed, "precision": req.precision, "max_runs": req.max_runs,
               "precision_tests": list(req.precision_tests) or None}
    if options["precision"] is None:
        for key, value in (plan.defaults or {}).items():
            if options.get(key) is None:
                options[key] = value
    out = folders.new_output_folder(req.out, "bench")
    return run_bench(plan.arms, plan.workload, plan.baseline, out, repetitions=plan.repetitions,
                     warmup=plan.warmup, timeout=req.timeout, host_arm=plan.host_arm, host=plan.host,
                     extra_metadata={"device": plan.device, "title": plan.title}, console=console,
                     aa_arm=plan.aa_arm, notes=plan.notes, exclude_contaminated=req.exclude_contaminated,
                     allow_mismatch=req.allow_mismatch, **options)


def _raise_after_seal(result: BenchResult, loop: _Rounds, bundle: Bundle) -> BenchResult:
    """``result``, or the error that ended the bench, raised now that its bundle is sealed."""
    if loop.bad_tests is not None:
        bad = loop.bad_tests
        raise UsageError(f"--precision-test {', '.join(bad['unknown_tests'])}: no such test in this "
                         f"workload's results{did_you_mean(bad['unknown_tests'][0], bad['known_tests'])} (its tests: {', '.join(bad['known_tests'])}); stopped after "
                         f"round {bad['rounds']}, the finished runs are sealed in {bundle.root}")
    if loop.aborted:
        raise CapshimError(f"bench stopped by an error ({loop.aborted}); the finished runs are sealed in "
                           f"{bundle.root}", exit_code=1)
    return result


def _metadata(arms: list[Arm], workload: Workload, opts: dict, seed: int, aa_arm: str | None,
              extra: dict | None) -> dict:
    """metadata.json before the first run: method, arms, workload (hashed), environment, shims."""
    precision = opts["precision"]
    meta = {
        "capshim_version": __version__,
        "started_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command_line": [environ.recordable(a) for a in sys.argv],
        "method": {"repetitions": opts["repetitions"], "warmup_runs_per_arm": opts["warmup"],
                   "order": "a fresh seeded permutation of the arms per round", "seed": seed,
                   "launch": "every arm through the same pid wrapper with the same variables, the environment "
                             f"padded to a common size plus a random 0-{PAD_RANGE - 1} bytes ({PAD_VAR})",
                   "process_per_run": True, "timeout_s": opts["timeout"],
                   "statistic": "median of per-process medians; cluster bootstrap over processes",
                   "precision_target": precision, "max_runs": opts["cap"] if precision is not None else None,
                   "exclude_contaminated": opts["exclude_contaminated"]},
        "baseline": opts["baseline"], "host_arm": opts["host_arm"],
        "host_baseline": (opts["host"] or {}).get("source"), "aa_arm": aa_arm,
        "workload": {"kind": workload.kind, "argv": [environ.recordable(a) for a in workload.argv],
                     "env": environ.record(workload.env),
                     "binary": str(workload.binary) if workload.binary else None,
                     "binary_sha256": sha256_file(workload.binary) if workload.binary else None,
                     "model": str(workload.model) if workload.model else None,
                     "model_sha256": _model_sha(workload.model),
                     "versions": workload.versions, "metric": workload.metric.to_dict(),
                     **({"log_level": workload.log_level} if workload.log_level is not None else {}),
                     **workload.metadata()},
        "arms": {a.name: a.spec() for a in arms},
        "inherited_env": inherited_env.record(os.environ),
        "shims": _shim_hashes(arms),
        "schedule": [],
    }
    if workload.controls:
        meta["controls"] = {c.control: {"argv": c.argv, "metric": c.metric.to_dict()} for c in workload.controls}
    meta.update(extra or {})
    return meta


def _comparisons(summary: dict, tests: list[str] | None = None) -> list[tuple[str, str, float | None]]:
    """(arm, series, half-width in points) of every interval a precision target applies to
    (only the series named in ``tests``, by whole name or first word, when given)."""
    out = []
    host = summary.get("host") or {}
    for name, arm in summary["arms"].items():
        for t, st in arm["tests"].items():
            if tests and t not in tests and t.split()[0] not in tests:
                continue
            if host.get("tests") and t in host["tests"]:
                if name == host.get("name"):
                    continue
                out.append((name, t, stats.half_width(st.get("pct_of_host"), percent=True)))
            elif name != summary["baseline"]:
                out.append((name, t, stats.half_width(st.get("speedup"), percent=False)))
    return out


def _precision(results, arms, baseline, host_arm, host, target, rounds, cap, exclude_contaminated,
               tests: list[str] | None = None, workload: Workload | None = None,
               control_results: dict[str, list[RunResult]] | None = None) -> dict:
    """Whether every interval is at most ``target`` points wide (half-width), from the runs so far."""
    records = _records(results, exclude_contaminated, control_results)
    arm_info = {a.name: {"state": "native"} for a in arms}
    try:
        summary = _analyze(workload, records, arm_info, baseline, _host_dict(records, host_arm, host, {}),
                           allow_mismatch=True)
    except CapshimError:
        return {"target": target, "reached": False, "max_half_width": None, "rounds": rounds, "cap": cap}
    widths = [w for _, _, w in _comparisons(summary, tests)]
    worst = None if any(w is None for w in widths) or not widths else max(widths)
    out = {"target": target, "reached": worst is not None and worst <= target, "max_half_width": worst,
           "rounds": rounds, "cap": cap}
    known = sorted({t for arm in summary["arms"].values() for t in arm["tests"]})
    unknown = [x for x in tests or [] if known and not any(t == x or t.split()[0] == x for t in known)]
    if unknown:
        out["unknown_tests"], out["known_tests"] = unknown, known
    return out


def _records(results: dict[str, list[RunResult]], exclude_contaminated: bool,
             control_results: dict[str, list[RunResult]] | None = None) -> list[dict]:
    return [rec for res in (results, control_results or {}) for rs in res.values() for r in rs
            if not (exclude_contaminated and r.contaminated) for rec in r.records]


def _analyze(workload: Workload | None, records: list[dict], arm_info: dict, baseline: str, host: dict | None,
             **options) -> dict:
    """The analysis step: :func:`capshim.bench.analysis.analyze`, then the workload's metric
    directions and the control verdicts (:func:`capshim.bench.metrics.annotate`): a
    lower-is-better metric's ratios read "times faster", a control whose interval excludes
    1.00x is flagged. Same errors as ``analyze``."""
    if workload is None:
        return analysis.analyze(records, arm_info, baseline, host, **options)
    tests_metric: dict[str, metrics.Metric] = {}
    for w in (workload, *workload.controls):
        tests_metric.update(w.metric_tests())
    lower = {t for t, m in tests_metric.items() if m.better == "lower"}
    summary = analysis.analyze(records, arm_info, baseline, host, lower_is_better=lower, **options)
    return metrics.annotate(summary, tests_metric, [c.control for c in workload.controls])


def _host_dict(records, host_arm, host, arm_info) -> dict | None:
    if host_arm is None:
        return host
    tests: dict[str, dict[object, list[float]]] = {}
    for rec in records:
        if rec["arm"] == host_arm:
            tests.setdefault(rec["test"], {}).setdefault(rec.get("run"), []).append(rec["tok_s"])
    return {"name": host_arm, "tests": {t: list(v.values()) for t, v in tests.items()},
            "path": (arm_info.get(host_arm) or {}).get("path") or {}, "source": f"arm {host_arm} of this bench"}


def _model_sha(model: Path | None) -> str | None:
    """The model's SHA-256 through the one sidecar cache (:func:`capshim.paths.cached_sha256`)."""
    if model is None:
        return None
    try:
        return paths.cached_sha256(model)
    except OSError as exc:
        raise CapshimError(f"model {model}: cannot read to hash: {exc.strerror or exc}") from None


def _shim_hashes(arms: list[Arm]) -> dict:
    out = {}
    apis = {p.api for a in arms for p in (a.profile, a.simulate) if p is not None}
    for api in backends.names():
        if api in apis:
            for name, path in backends.get(api).shim_artifacts().items():
                if Path(path).is_file():
                    out[f"{api}_{name}"] = {"path": str(path), "sha256": sha256_file(path)}
    return out


def _finish(bundle: Bundle, arms: list[Arm], results: dict[str, list[RunResult]], workload: Workload,
            baseline: str, host_arm: str | None, host: dict | None,
            interrupted: bool, *, control_results: dict[str, list[RunResult]] | None = None,
            aa_arm: str | None = None, allow_mismatch: bool = False,
            exclude_contaminated: bool = False, notes: list[str] | None = None,
            bench_warnings: list[str] | None = None, precision: dict | None = None,
            precision_target: float | None = None, cap: int | None = None,
            precision_tests: list[str] | None = None, guard=None) -> BenchResult:
    """The pipeline's end: analysis (typed summary) -> bundle (which runs the exporters and seals).

    ``guard`` (:func:`capshim.evidence.seal_guard`): the analysis runs as one of its slow steps, so
    a signal can cut it short (finalize then records it as skipped) but never stop the seal.
    """
    slow = guard.abortable if guard is not None else contextlib.nullcontext
    control_results = control_results or {}
    all_records = _records(results, False, control_results)
    for rs in (*results.values(), *control_results.values()):
        for r in rs:
            r.excluded = bool(exclude_contaminated and r.contaminated)
    records = _records(results, exclude_contaminated, control_results)
    arm_info: dict[str, dict] = {}
    for arm in arms:
        rs = results[arm.name]
        ok = [r for r in rs if run_failed(r.info()) is None]
        info = {"spec": arm.spec(), "state": _arm_state(arm, rs), "path": ok[0].path if ok else {},
                "runs": [r.info() for r in rs]}
        _attest_device(info, rs, arm, workload, bundle)
        _attest_reach(info, rs, arm)
        arm_info[arm.name] = info
    # Correctness gate: every arm's output (generated tokens, output hash) must equal the reference arm's.
    ref = host_arm or baseline
    ref_tokens = next((r.token_ids for r in results.get(ref, []) if r.token_ids is not None), None)
    if workload.check_output:
        what, differ = workload.output_noun
        for arm in arms:
            toks = [r.token_ids for r in results[arm.name] if r.token_ids is not None]
            info = arm_info[arm.name]
            if ref_tokens is None or not toks:
                whose = f"reference arm {ref}" if ref_tokens is None else f"arm {arm.name}"
                none = "token ids" if what == "tokens" else "output"
                info["output_check"] = f"not checked: {whose} produced no {none}"
                messages.emit(f"output check skipped for arm {arm.name}: {whose} produced no {none} "
                              f"(no run finished with {'generated tokens' if what == 'tokens' else 'its output read'})")
                continue
            bad = next((t for t in toks if not workload.same_output(t, ref_tokens)), None)
            same = bad is None
            where = "" if same else workload.difference(bad, ref_tokens, arm.name, ref)
            info["output_check"] = f"same {what} as {ref}" if same else \
                f"{what} {differ} from {ref}" + (f", {where}" if where else "")
            if not same and info["state"] in ("native", "active"):
                info["state"] = "wrong-output"
    host_dict = _host_dict(records, host_arm, host, arm_info)
    failed = sum(1 for rs in (*results.values(), *control_results.values()) for r in rs if run_failed(r.info()))
    refused = None
    try:
        with slow():
            try:
                summary = _analyze(workload, records, arm_info, baseline, host_dict, allow_mismatch=allow_mismatch,
                                   aa_arm=aa_arm, notes=notes, bench_warnings=bench_warnings)
            except analysis.ComparabilityError as exc:  # seal what finished (rows marked), then refuse
                refused = exc
                summary = _analyze(workload, records, arm_info, baseline, host_dict, allow_mismatch=True,
                                   aa_arm=aa_arm, notes=(notes or []) + [f"refused: {exc}"],
                                   bench_warnings=bench_warnings)
    except StepInterrupted:  # finalize records the analysis as skipped and seals
        summary = None
    except Exception:  # noqa: BLE001 - finalize runs the analysis again as an isolated, recorded step
        summary = None
    if precision_target is not None and summary is not None:
        if precision is None or interrupted:
            precision = {"target": precision_target, "reached": False, "max_half_width": None,
                         "rounds": max((len(v) for v in results.values()), default=0), "cap": cap}
        widths = [w for _, _, w in _comparisons(summary, precision_tests)]
        precision["tests"] = list(precision_tests) if precision_tests else "all"
        precision["max_half_width"] = None if any(w is None for w in widths) or not widths else max(widths)
        precision["reached"] = precision["max_half_width"] is not None and precision["max_half_width"] <= precision_target
        precision["stopped_by"] = ("target reached" if precision["reached"] else
                                   "interrupted" if interrupted else f"--max-runs {cap} reached")
        summary["precision"] = precision
    heading = bundle.metadata.get("title") if isinstance(bundle.metadata.get("title"), str) else "capshim bench"
    summary = bundle.finalize(report.bundle_steps(all_records, arm_info, baseline, host_dict, title=heading),
                              summary=summary, interrupted=interrupted, metadata_update={"failed_runs": failed},
                              title=heading)  # the device, a stand-in named as one (plan.title)
    if refused is not None and not (guard is not None and guard.first):  # a signal's exit code wins
        raise analysis.ComparabilityError(f"{refused} (bundle of the runs kept: {bundle.root})")
    bad = [a for a, i in arm_info.items() if i["state"] in NOT_SHIM_STATES]
    return BenchResult(summary, bundle.root, interrupted, failed, bad)


def _attest_device(info: dict, results: list[RunResult], arm: Arm, workload: Workload, bundle: Bundle) -> None:
    """Mark an arm whose runs' own output does not show they ran on the probed device (issue 20).

    Each finished run's stderr (its bundle copy) and llama-bench rows go through
    :func:`capshim.bench.attest.device_state`; the run entry gets ``device`` (the verdict) and
    ``device_reason``. When any run ran on the CPU backend or off the device, the arm's state
    becomes ``cpu-backend`` / ``off-device`` (a failed arm stays failed) and ``device_check``
    says why; an arm whose shim was inert or invalid keeps that state (the cause it names, e.g. a loader
    setting, is the one to act on). Nothing is checked without a probed Vulkan device (``metadata.json``'s
    ``device``).
    """
    device = (bundle.metadata.get("device") or {}).get("name")
    if not device or info["state"] == "failed":
        return
    required = workload.kind in ("builtin", "llama-bench", "ncnn", "torch-sdpa")
    bad: dict[str, list[tuple[int, str]]] = {}
    for r, entry in zip(results, info["runs"]):
        if run_failed(entry) is not None:
            continue
        path = bundle.raw_stderr(workload.label(arm.name), r.run)
        stderr = (paths.read_limited(path, attest.MAX_STDERR_READ, truncate=True).decode("utf-8", "replace")
                  if path.is_file() else "")
        rows = [rec.get("device_info") or {} for rec in r.records]
        verdict, why = attest.device_state(stderr, rows, device, required=required)
        entry["device"], entry["device_reason"] = verdict, why
        if verdict in (attest.CPU_BACKEND, attest.OFF_DEVICE):
            bad.setdefault(verdict, []).append((r.run, why))
    for state in (attest.CPU_BACKEND, attest.OFF_DEVICE):
        # an inert or invalid shim names its own cause (a loader setting, a bad profile): it outranks a missing
        # device line; the CPU backend outranks it (llama.cpp never used Vulkan, so no layer could load)
        if state == attest.OFF_DEVICE and info["state"] in ("inert", "invalid"):
            continue
        if state in bad:
            runs = bad[state]
            info["state"] = state
            info["device_check"] = (f"{len(runs)} of {len(info['runs'])} runs: {runs[0][1]}"
                                    if len(runs) < len(info["runs"]) else runs[0][1])
            return


def _attest_reach(info: dict, results: list[RunResult], arm: Arm) -> None:
    """Mark an arm inert when its runs' own output shows the shim did not reach the application:
    the profile lowered an answer the application reports unlowered (PyTorch's capability 9.0 under a
    7.5 profile: :func:`capshim.bench.attest.unreached`). Never a shim result, whatever the shim's
    status events say; the runs keep ``reach`` (why) and the arm ``reach_check``."""
    if arm.profile is None or info["state"] not in ("active", "wrong-output"):
        return
    bad = []
    for r, entry in zip(results, info["runs"]):
        why = attest.unreached(r.path, arm.profile.capabilities) if run_failed(entry) is None else None
        if why:
            entry["reach"] = why
            bad.append(why)
    if bad:
        info["state"] = "inert"
        info["reach_check"] = f"{len(bad)} of {len(info['runs'])} runs: {bad[0]}" if len(bad) < len(info["runs"]) \
            else bad[0]
