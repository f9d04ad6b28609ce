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

import datetime as _dt
import os
import random
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

from capshim import __version__, backends, paths
from capshim.bench import analysis, attest, inherited_env, metrics, schedule, summarize, telemetry
from capshim.bench.arms import Arm
from capshim.bench.plan import Plan
from capshim.bench.runs import PAD_RANGE, PAD_VAR, RunResult, make_launcher, run_one
from capshim.bench.workloads import kinds
from capshim.bench.workloads.base import Workload
from capshim.contracts import environ, folders, messages
from capshim.contracts.signals import SealGuard
from capshim.contracts.suggest import did_you_mean
from capshim.errors import CapshimError, UsageError
from capshim.evidence import Bundle, sha256_file
from capshim.profiles import targets
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
    """What :func:`run` produced: the sealed bundle and how it went.

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
    """The measuring loop of one bench (the runner's state): rounds of every (arm, workload) pair
    in a fresh order, as ``plan`` says.

    ``results`` / ``control_results``: ``{arm: [RunResult]}`` of the workload's and the controls'
    recorded runs. ``interrupted_by``: the stop signal's name; ``aborted``: an error that ended the
    loop; ``bad_tests``: a ``--precision-test`` that names no test (the loop stopped after one round);
    ``precision_state``: the precision loop's last check; ``env_warnings``: the bench's warnings.
    """

    plan: Plan
    bundle: Bundle
    guard: SealGuard
    console: Console
    env_warnings: list[str] = field(default_factory=list)
    results: dict[str, list[RunResult]] = field(default_factory=dict)
    control_results: dict[str, list[RunResult]] = field(default_factory=dict)
    interrupted_by: str | None = None
    aborted: str | None = None
    bad_tests: dict | None = None
    precision_state: dict | None = None
    workdir: Path | None = None
    tests_checked: bool = False
    busy_said: bool = False

    def __post_init__(self):
        for a in self.plan.arms:
            self.results.setdefault(a.name, [])
            self.control_results.setdefault(a.name, [])

    def stop(self) -> str | None:
        """The name of the stop signal the seal guard recorded, or None."""
        return signal.Signals(self.guard.first[0]).name if self.guard.first else None

    def precision(self, recorded: int) -> dict:
        """The precision check after ``recorded`` rounds (:func:`capshim.bench.summarize.precision_check`
        of the runs so far, every arm taken as native, the intervals at :data:`capshim.bench.schedule.LEVEL`)."""
        p = self.plan
        recipe = summarize.Recipe(_records(self.results, p.exclude_contaminated, self.control_results),
                                  {a.name: {"state": "native"} for a in p.arms}, p.baseline, host_arm=p.host_arm,
                                  host=p.host, allow_mismatch=True, confidence=schedule.LEVEL,
                                  **_metric_options(p.workload))
        return summarize.precision_check(recipe, p.precision, recorded, p.cap, p.precision_tests)

    def more(self, recorded: int) -> schedule.Round | None:
        """The next recorded round after ``recorded`` rounds, or None when enough: every arm in the
        first ``repetitions`` rounds, then the precision loop's choice (:func:`capshim.bench.schedule.next_round`)."""
        p = self.plan
        names = [a.name for a in p.arms]
        if recorded < p.repetitions:
            return schedule.first_rounds(names, p.repetitions)
        if p.precision is None:
            return None
        self.precision_state = check = self.precision(recorded)
        counts = {a: len(rs) for a, rs in self.results.items()}
        reference = p.host_arm or (None if p.host is not None else p.baseline)
        nxt = None if check["reached"] else schedule.next_round(check["comparisons"], counts, names, reference,
                                                                 p.precision, p.cap)
        if nxt is not None:
            self.console.print(f"precision after {recorded} rounds: {nxt.reason}; next round: {', '.join(nxt.arms)}",
                               markup=False, highlight=False)
        return nxt

    def run(self, rng: random.Random, probe: telemetry.Telemetry) -> None:
        """Warm-up rounds, then recorded rounds until :meth:`more` says enough or a stop request."""
        p = self.plan
        kinds_ = (p.workload, *p.workload.controls)
        every = [(a, w) for a in p.arms for w in kinds_]
        launcher = make_launcher(p.arms, p.workload, self.workdir, rng)
        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                            transient=False)
        with progress:
            task = progress.add_task("bench", total=len(every) * (p.warmup + p.repetitions))
            for rnd in range(p.warmup):
                if not self.round(every, rnd + 1, None, launcher, rng, probe, progress, task):
                    return
            recorded = 0
            while (nxt := self.more(recorded)) is not None:
                units = [(a, w) for a in p.arms if a.name in nxt.arms for w in kinds_]
                if recorded >= p.repetitions:
                    progress.update(task, total=progress.tasks[0].total + len(units))
                if not self.round(units, recorded + 1, nxt.reason, launcher, rng, probe, progress, task):
                    return
                recorded += 1
                if p.precision is not None and p.precision_tests and not self.tests_checked:
                    # a --precision-test that names no test of the workload would run to --max-runs
                    check = self.precision(recorded)
                    self.tests_checked = "known_tests" in check or check["max_half_width"] is not None
                    if check.get("unknown_tests"):
                        self.bad_tests = check
                        return

    def round(self, units, n: int, reason: str | None, launcher, rng, probe, progress, task) -> bool:
        """One round of ``units`` in a fresh order (recorded when ``reason`` says why it runs, else a
        warm-up); False when a stop request ended it."""
        order, record = list(units), reason is not None
        rng.shuffle(order)  # one permutation of the round's (arm, workload) pairs: the controls too
        if record:
            self.bundle.metadata["schedule"].append([w.label(a.name) for a, w in order])
            self.bundle.metadata["schedule_reasons"].append(reason)
        for pos, (arm, w) in enumerate(order, 1):
            if self.stop():
                return False
            who = arm.name + (f" control {w.control}" if w.control else "")
            run_no = len((self.control_results if w.control else self.results)[arm.name]) + 1
            what = (f"{who} run {run_no} (round {n})" if record else f"{who} warm-up {n}/{self.plan.warmup}")
            progress.update(task, description=what)
            res = run_one(self.bundle, arm, run_no if record else n, w, self.plan.timeout, self.workdir, record,
                          launcher, probe, (n if record else 0, pos), stop=self.stop)
            if record:
                self.keep(arm, w, res, run_no, (n, pos))
            if res.error:
                self.console.print(f"[yellow]{who} {'run ' + str(run_no) if record else 'warm-up'}: {res.error}[/]")
            progress.advance(task)
            self.say_busy(res)
            if not self.console.is_terminal:  # no live bar in a log: one line per run
                self.console.print(f"[{int(progress.tasks[0].completed)}/{int(progress.tasks[0].total)}] {what}: "
                                   f"{res.seconds:.1f} s" + (f" ({res.error})" if res.error else ""),
                                   markup=False, highlight=False)
        return not self.stop()

    def say_busy(self, res: RunResult) -> None:
        """The busy-machine note, once a bench (issue 28), at the first contaminated run."""
        if res.contaminated and not self.busy_said:
            self.busy_said = True
            self.console.print(messages.format_message(
                f"the machine is busy ({'; '.join(res.contaminated)}): runs made while it is are marked "
                "contaminated and kept; the results after the runs say how many (this note is not repeated)",
                "note", messages.width(self.console.file)),
                markup=False, highlight=False, soft_wrap=True)

    def keep(self, arm: Arm, w: Workload, res: RunResult, n: int, at: tuple[int, int]) -> None:
        """Record run ``n`` of an arm, made at ``at`` (round, position): in the results, and in
        metadata.json (a control's runs only there)."""
        (self.control_results if w.control else self.results)[arm.name].append(res)
        entry = {"run": n, "round": at[0], "position": at[1], "exec_argv": res.exec_argv, "env_delta": res.env_delta,
                 "telemetry": res.telemetry, "contaminated": res.contaminated}
        if w.control:
            entry = {**res.info(), **entry}
        self.bundle.metadata["arms"][arm.name].setdefault("control_runs" if w.control else "runs", []).append(entry)


def run(plan: Plan, console: Console | None = None) -> BenchResult:
    """Run a Plan (:func:`capshim.bench.plan.make_plan`): ``plan.repetitions`` processes per arm at
    least, in a fresh order per round, then write and seal the evidence bundle. The one entry point.

    The bundle folder is ``plan.out`` (new or empty) or a new unique ``./capshim-bench-DATE-TIME``
    (:func:`capshim.contracts.folders.new_output_folder`). ``console``: where progress goes (stderr).

    Returns:
        BenchResult with the summary (summary.json content) and the bundle path; ``interrupted_by``
        names the stop signal when Ctrl-C, SIGTERM or SIGHUP ended the runs (the bundle of what
        finished is sealed: the seal guard is held from before the first run to the seal).

    Raises:
        UsageError: ``--out`` is a file, a non-empty folder or inside a sealed bundle (exit 2); a
            ``--precision-test`` that names no test (after sealing the first round).
        CapshimError: the bundle cannot be created; the bench stopped by an error (exit 1, after
            sealing what finished); ComparabilityError (after sealing, rows marked).
        SystemExit: 128+N after the seal when a signal arrived only while sealing.
    """
    console = console or Console(stderr=True)
    out = folders.new_output_folder(plan.out, "bench")
    meta = _metadata(plan)
    env_warnings = inherited_env.warnings(os.environ, plan.workload.env) + inherited_env.loader_warnings(plan.arms)
    for w in env_warnings:
        console.print(messages.format_message(w, "warning", messages.width(console.file)), markup=False,
                      highlight=False, soft_wrap=True)
    with SealGuard("the bundle") as guard:  # held from before the first run to the seal
        loop = _Rounds(plan, Bundle.create(out, meta), guard, console, env_warnings)
        _measure(loop, meta)
        result = _finish(loop)
    if not loop.interrupted_by:  # a signal that came only while sealing: exit 128+N now
        guard.exit_if_signalled()
    result.interrupted_by = loop.interrupted_by
    return _raise_after_seal(result, loop, loop.bundle)


def _measure(loop: _Rounds, meta: dict) -> None:
    """The rounds, in a private work folder; whatever stops them (a signal, an error) is recorded
    on ``loop`` and said, and the finished runs are sealed after."""
    rng = random.Random(loop.plan.seed)
    loop.workdir = Path(tempfile.mkdtemp(prefix="capshim-bench-"))
    probe = telemetry.Telemetry()
    meta["telemetry"] = {"nvml": probe.nvml_reason or "available"}
    try:
        loop.run(rng, probe)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the finished runs are sealed below
        loop.aborted = f"{type(exc).__name__}: {exc}"
        loop.console.print(f"[red]bench stopped by an error ({loop.aborted}): writing the bundle of the runs "
                           "that finished[/]")
    finally:
        shutil.rmtree(loop.workdir, ignore_errors=True)
        probe.close()
    loop.interrupted_by = loop.stop()
    if loop.interrupted_by:
        loop.console.print(f"[red]interrupted ({loop.interrupted_by}): writing the bundle of the runs that "
                           "finished[/]")
    if loop.aborted:
        loop.bundle.metadata["aborted"] = loop.aborted


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


def _metadata(plan: Plan) -> dict:
    """metadata.json before the first run: method, arms, workload (hashed), environment, shims."""
    precision, workload, arms = plan.precision, plan.workload, plan.arms
    meta = {
        "capshim_version": __version__,
        "started_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command_line": [environ.recordable(a) for a in sys.argv],
        "method": {"repetitions": plan.repetitions, "warmup_runs_per_arm": plan.warmup,
                   "order": "a fresh seeded permutation of the arms per round", "seed": plan.seed,
                   "launch": "every arm through the same pid wrapper with the same variables, the environment "
                             f"padded to a common size plus a random 0-{PAD_RANGE - 1} bytes ({PAD_VAR})",
                   "process_per_run": True, "timeout_s": plan.timeout,
                   "statistic": "median of per-process medians; cluster bootstrap over processes",
                   "precision_target": precision, "max_runs": plan.cap if precision is not None else None,
                   "exclude_contaminated": plan.exclude_contaminated},
        "baseline": plan.baseline, "host_arm": plan.host_arm,
        "host_baseline": (plan.host or {}).get("source"), "aa_arm": plan.aa_arm,
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
        "schedule_reasons": [],
    }
    if workload.controls:
        meta["controls"] = {c.control: {"argv": c.argv, "metric": c.metric.to_dict()} for c in workload.controls}
    meta.update({"device": plan.device, "title": plan.title})
    return meta


def _records(results: dict[str, list[RunResult]], exclude_contaminated: bool,
             control_results: dict[str, list[RunResult]] | None = None) -> list[dict]:
    return [rec for res in (results, control_results or {}) for rs in res.values() for r in rs
            if not (exclude_contaminated and r.contaminated) for rec in r.records]


def _metric_options(workload: Workload | None) -> dict:
    """The recipe's ``metric_tests`` and ``controls`` of a workload (its own and its controls' metrics)."""
    if workload is None:
        return {}
    tests_metric: dict[str, metrics.Metric] = {}
    for w in (workload, *workload.controls):
        tests_metric.update(w.metric_tests())
    return {"metric_tests": tests_metric, "controls": [c.control for c in workload.controls]}


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


def _finish(loop: _Rounds) -> BenchResult:
    """The pipeline's end: the arms' states and checks, then the bundle's finalize steps
    (:func:`capshim.bench.summarize.steps`: the one recipe makes the summary, the exporters the
    files, then the seal).

    The analysis is a finalize step: a signal can cut it short (finalize records it as skipped)
    but never stop the seal, and a fallback step makes the summary with the same recipe.
    """
    plan, results, controls = loop.plan, loop.results, loop.control_results
    interrupted = bool(loop.interrupted_by or loop.aborted)
    for rs in (*results.values(), *controls.values()):
        for r in rs:
            r.excluded = bool(plan.exclude_contaminated and r.contaminated)
    arm_info = {arm.name: _arm_info(arm, results[arm.name], plan.workload, loop.bundle) for arm in plan.arms}
    _check_outputs(arm_info, plan.arms, results, plan.workload, plan.host_arm or plan.baseline)
    failed = sum(1 for rs in (*results.values(), *controls.values()) for r in rs if run_failed(r.info()))
    prec = None
    if plan.precision is not None:
        state = loop.precision_state
        rounds = state["rounds"] if state is not None and not interrupted else \
            max((len(v) for v in results.values()), default=0)
        prec = summarize.Precision(plan.precision, plan.cap, plan.precision_tests, rounds, interrupted=interrupted,
                                   level=schedule.LEVEL)
    recipe = summarize.Recipe(_records(results, plan.exclude_contaminated, controls), arm_info, plan.baseline,
                              host_arm=plan.host_arm, host=plan.host, aa_arm=plan.aa_arm, notes=list(plan.notes),
                              bench_warnings=list(loop.env_warnings), allow_mismatch=plan.allow_mismatch,
                              precision=prec, confidence=schedule.LEVEL if plan.precision is not None else 0.95,
                              **_metric_options(plan.workload))
    heading = plan.title or "capshim bench"  # the device, a stand-in named as one (plan.title)
    summary = loop.bundle.finalize(summarize.steps(recipe, _records(results, False, controls), title=heading),
                                   interrupted=interrupted, metadata_update={"failed_runs": failed}, title=heading)
    if recipe.refused is not None and not loop.guard.first:  # a signal's exit code wins
        raise analysis.ComparabilityError(f"{recipe.refused} (bundle of the runs kept: {loop.bundle.root})")
    bad = [a for a, i in arm_info.items() if i["state"] in NOT_SHIM_STATES]
    return BenchResult(summary, loop.bundle.root, interrupted, failed, bad)


def _arm_info(arm: Arm, rs: list[RunResult], workload: Workload, bundle: Bundle) -> dict:
    """One arm as the analysis takes it: spec, state (after the device and reach checks), path, runs."""
    ok = [r for r in rs if run_failed(r.info()) is None]
    info = {"spec": arm.spec(), "state": _arm_state(arm, rs), "path": ok[0].path if ok else {},
            "runs": [r.info() for r in rs]}
    _attest_device(info, rs, arm, workload, bundle)
    _attest_reach(info, rs, arm)
    return info


def _check_outputs(arm_info: dict, arms: list[Arm], results: dict[str, list[RunResult]], workload: Workload,
                   ref: str) -> None:
    """The correctness gate: every arm's output (generated tokens, output hash) must equal the
    reference arm's (the host arm, else the baseline); an arm whose output differs is ``wrong-output``."""
    if not workload.check_output:
        return
    ref_tokens = next((r.token_ids for r in results.get(ref, []) if r.token_ids is not None), None)
    what, differ = workload.output_noun
    skipped: dict[str, list[str]] = {}  # why -> arms: one line each, not one per arm
    for arm in arms:
        toks = [r.token_ids for r in results[arm.name] if r.token_ids is not None]
        info = arm_info[arm.name]
        if ref_tokens is None or not toks:
            whose = f"reference arm {ref}" if ref_tokens is None else f"arm {arm.name}"
            none = "token ids" if what == "tokens" else "output"
            info["output_check"] = f"not checked: {whose} produced no {none}"
            skipped.setdefault(f"{whose} produced no {none} (no run finished with "
                               f"{'generated tokens' if what == 'tokens' else 'its output read'})", []).append(arm.name)
            continue
        bad = next((t for t in toks if not workload.same_output(t, ref_tokens)), None)
        where = "" if bad is None else workload.difference(bad, ref_tokens, arm.name, ref)
        info["output_check"] = f"same {what} as {ref}" if bad is None else \
            f"{what} {differ} from {ref}" + (f", {where}" if where else "")
        if bad is not None and info["state"] in ("native", "active"):
            info["state"] = "wrong-output"
    for why, names in skipped.items():
        messages.emit(f"output check skipped for arm{'s' if len(names) > 1 else ''} {', '.join(names)}: {why}")


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
    required = kinds.attested(workload.kind)  # the registry: its runs say which device they ran on
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
    status events say; the runs keep ``reach`` (why) and the arm ``reach_check``.

    Each run is judged by the device it reported (:func:`capshim.bench.attest.reach_devices`) against
    the profile the arm places on that device (``profile:t4-class@1,profile:a100-class@0``); a device
    no placement names answers stock by the arm's own choice: the run keeps ``reach`` and the arm
    ``reach_note`` (``ran on device 0, which this arm leaves stock``), neither inert nor a shim failure."""
    if arm.profile is None or info["state"] not in ("active", "wrong-output"):
        return
    bad, stock = [], []
    for r, entry in zip(results, info["runs"]):
        if run_failed(entry) is not None:
            continue
        for dev in attest.reach_devices(r.path):
            seen = next(iter(dev.values()))
            answers = _placed_answers(arm, seen)
            if answers is None:
                entry["reach"] = f"ran on device {seen.get('device', 0)}, which this arm leaves stock"
                stock.append(entry["reach"])
            elif why := attest.unreached(dev, answers):
                entry["reach"] = why
                bad.append(why)
    for key, found in (("reach_note", stock), ("reach_check", bad)):
        if found:
            info[key] = f"{len(found)} of {len(info['runs'])} runs: {found[0]}" if len(found) < len(info["runs"]) \
                else found[0]
    if bad:
        info["state"] = "inert"


def _placed_answers(arm: Arm, dev: dict) -> dict | None:
    """The answers ``arm``'s profile role gives the device one run reported (``dev``: a path entry with
    ``device``, its index, and where the line gives one ``uuid``), from the placement that names it
    (by UUID when both sides have one, else by index); ``{}`` when only a device-role placement names
    it; None when no placement names it (the arm leaves it stock). An arm without device targets
    answers with its one profile everywhere."""
    if not arm.placements:
        return arm.profile.capabilities
    uuid = targets.normal_uuid(dev.get("uuid"))
    hits = [p for p in arm.placements
            if any(d.uuid == uuid if uuid and d.uuid else d.index == dev.get("device", 0) for d in p.devices)]
    if not hits:
        return None
    prof = next((p for p in hits if p.role == "profile"), None)
    return prof.profile.capabilities if prof is not None else {}
