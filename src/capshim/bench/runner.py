"""Run the arms of a benchmark, interleaved, and write the evidence bundle.

Method (after pyperf and hyperfine): every arm run is its own process; arm runs
are interleaved (A B C A B C ...) so drift hits every arm alike; ``warmup``
rounds run first and are not recorded; each run's stdout (llama-bench JSON),
stderr and shim status file are kept in the bundle; the statistics are medians
of per-repetition samples (llama-bench's ``samples_ts``, never ``avg_ts``).

A run that crashes, is killed or times out is recorded with its exit code or
signal and the others go on; Ctrl-C stops the bench and still writes a valid
bundle of what finished.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from capshim import __version__, launch
from capshim.bench import attest, llamabench, metrics
from capshim.bench.arms import Arm
from capshim.errors import CapshimError
from capshim.evidence import Bundle, sha256_file


@dataclass
class Workload:
    """What each arm run executes.

    Attributes:
        kind: "llama-bench" (a command printing llama-bench JSON) or "builtin".
        argv: the command.
        env: variables every arm's process gets (device selection, shader cache).
        binary: the workload binary hashed into metadata (None when unknown).
        model: the model file hashed into metadata (None when unknown).
        check_output: compare each arm's generated token ids with the reference arm.
        versions: tool versions to record.
        adapter: for workloads that do not print llama-bench JSON (``--metric``, ``--workload
            ncnn``): reads each run's metric and output fingerprint (:class:`capshim.bench.metrics.Adapter`).
        control: set on a control workload (``--control NAME=CMD``): its name; its records' tests
            are ``NAME ... (control)``.
        controls: control workloads run next to this one, under the same arm, in every round.
    """

    kind: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    binary: Path | None = None
    model: Path | None = None
    check_output: bool = False
    versions: dict[str, str] = field(default_factory=dict)
    adapter: "metrics.Adapter | None" = None
    control: str | None = None
    controls: list["Workload"] = field(default_factory=list)


def llama_bench_workload(argv: list[str], check_output: bool = False) -> Workload:
    """A user's command. For ``llama-bench`` without ``-o``, ``-o json`` is added.

    Raises:
        CapshimError: the program is not found.
    """
    if not argv:
        raise CapshimError("no workload command after --")
    exe = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if exe is None or not os.access(exe, os.X_OK):
        raise CapshimError(f"workload '{argv[0]}': not found or not executable")
    argv = list(argv)
    if "llama-bench" in Path(argv[0]).name and "-o" not in argv and "--output" not in argv:
        argv += ["-o", "json"]
    model = None
    for flag in ("-m", "--model"):
        if flag in argv[:-1]:
            cand = Path(argv[argv.index(flag) + 1])
            if cand.is_file():
                model = cand
    return Workload("llama-bench", argv, binary=Path(exe).resolve(), model=model, check_output=check_output)


class Stop(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while benchmarking; ``signal_name`` says which."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name


class Interrupted(Exception):
    """A recorded run was stopped; ``result`` is its RunResult (recorded in the bundle)."""

    def __init__(self, result: "RunResult"):
        super().__init__(result.error)
        self.result = result


@dataclass
class RunResult:
    """One finished (or failed) arm run."""

    arm: str
    run: int
    exit_code: int | None
    signal: str | None
    timed_out: bool
    seconds: float
    records: list[dict]
    path: dict
    shim_states: dict[str, dict]
    token_ids: list[int] | None
    error: str | None = None
    exec_argv: list[str] = field(default_factory=list)
    env_delta: dict[str, str] = field(default_factory=dict)

    def info(self) -> dict:
        """The ``runs`` entry of the arm in summary.json."""
        return {"run": self.run, "exit_code": self.exit_code, "signal": self.signal, "timed_out": self.timed_out,
                "seconds": round(self.seconds, 3), "error": self.error, "shims": self.shim_states}


def _run_one(bundle: Bundle, arm: Arm, n: int, workload: Workload, timeout: float, work: Path,
             record: bool = True) -> RunResult:
    # A control workload's files are named <arm>.<control>-<n> in the bundle.
    label = f"{arm.name}.{workload.control}" if workload.control else arm.name
    run_dir = work / f"{label}-{n}{'' if record else '-warmup'}"
    status_file = bundle.status_file(label, n) if record else run_dir / "status.jsonl"
    lc = launch.prepare(workload.argv, arm.profile, arm.simulate, run_dir=run_dir, status_file=status_file)
    env = lc.env()
    env.update(workload.env)
    out_path = bundle.raw_json(label, n) if record else run_dir / "stdout.json"
    err_path = bundle.raw_stderr(label, n) if record else run_dir / "stderr.txt"
    if workload.adapter is not None:
        workload.adapter.before_run()
    t0 = time.monotonic()
    timed_out = False
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(lc.exec_argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            rc = proc.wait()
        except KeyboardInterrupt as stop:
            stop = stop if isinstance(stop, Stop) else Stop("SIGINT")
            _kill(proc)
            proc.wait()
            if not record:
                raise
            states = {name: s.to_dict() for name, s in lc.states().items()}
            raise Interrupted(RunResult(arm.name, n, None, stop.signal_name, False, time.monotonic() - t0, [], {},
                                        states, None, f"interrupted ({stop.signal_name})")) from None
    seconds = time.monotonic() - t0
    sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_ else None
    exit_code = rc if rc >= 0 else None
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    records: list[dict] = []
    error = None
    tokens = None
    if rc == 0 and not timed_out:
        try:
            if workload.adapter is not None:
                records, tokens = workload.adapter.parse_run(stdout, stderr, seconds, arm.name, n, str(out_path))
            else:
                rows = llamabench.parse_output(stdout, str(out_path))
                records = llamabench.to_records(rows, arm.name, n)
                for row in rows:
                    out_check = row.get("capshim_output")
                    if isinstance(out_check, dict) and isinstance(out_check.get("token_ids"), list):
                        tokens = out_check["token_ids"]
                        break
            if workload.control:
                for rec in records:
                    rec["test"] = metrics.control_test(workload.control,
                                                       rec["test"] if workload.adapter is None else None)
        except CapshimError as exc:
            error = str(exc)
            if workload.adapter is None and isinstance(exc, llamabench.LlamaBenchError):
                error += " (for a program that does not print llama-bench JSON, give --metric wall, " \
                         "json:PATH or regex:PATTERN)"
    elif timed_out:
        error = f"timed out after {timeout:g} s"
    else:
        error = f"killed by {sig}" if sig else f"exit {rc}"
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
        if tail:
            error += f": {tail[0][:300]}"
    states = {name: s.to_dict() for name, s in lc.states().items()}
    return RunResult(arm.name, n, exit_code, sig, timed_out, seconds, records, attest.parse_path(stderr), states,
                     tokens, error, lc.exec_argv, {**lc.env_delta, **workload.env})


def _kill(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def _run_controls(bundle: Bundle, arm: Arm, n: int, record: bool, workload: Workload, timeout: float, work: Path,
                  control_results: dict[str, list["RunResult"]], progress, task, console: Console, what: str,
                  total: int) -> None:
    """Run each control workload (``--control``) once under ``arm``'s shims, right after the arm's own run.

    Recorded runs go to ``control_results[arm.name]`` and to ``metadata.json`` (``arms.<arm>.control_runs``).

    Raises:
        Stop: a control run was stopped by Ctrl-C or SIGTERM (after it is recorded).
    """
    for ctl in workload.controls:
        progress.update(task, description=f"{what}: control {ctl.control}")
        try:
            cres = _run_one(bundle, arm, n, ctl, timeout, work, record)
        except Interrupted as stop:  # keep the stopped control run with the controls
            cres = stop.result
        if record:
            control_results[arm.name].append(cres)
            bundle.metadata["arms"][arm.name].setdefault("control_runs", []).append(
                {"control": ctl.control, **cres.info(), "exec_argv": cres.exec_argv, "env_delta": cres.env_delta})
        if cres.error and cres.error.startswith("interrupted ("):
            raise Stop(cres.signal or "SIGINT")
        if cres.error:
            console.print(f"[yellow]{arm.name} control {ctl.control}: {cres.error}[/]")
        progress.advance(task)
        if not console.is_terminal:
            console.print(f"[{int(progress.tasks[0].completed)}/{total}] {what}: control {ctl.control}: "
                          f"{cres.seconds:.1f} s")


def _arm_state(arm: Arm, results: list[RunResult]) -> str:
    ok = [r for r in results if r.error is None]
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
    """What :func:`run_bench` produced."""

    summary: dict
    bundle: Path
    interrupted: bool
    failed_runs: int
    non_shim_arms: list[str]
    interrupted_by: str | None = None


def run_bench(arms: list[Arm], workload: Workload, baseline: str, out: Path, repetitions: int = 10,
              warmup: int = 1, timeout: float = 900.0, host_arm: str | None = None, host: dict | None = None,
              reference_arm: str | None = None, extra_metadata: dict | None = None,
              console: Console | None = None) -> BenchResult:
    """Run every arm ``repetitions`` times, interleaved, and write the evidence bundle at ``out``.

    Args:
        arms: the arms, resolved (no pending ``restore``).
        workload: what each run executes.
        baseline: the arm speedups are relative to.
        out: the bundle folder (must not exist or be empty).
        repetitions: recorded runs per arm (each run is one process).
        warmup: unrecorded runs per arm before the recorded ones.
        timeout: seconds one run may take before it is killed (recorded as timed out).
        host_arm: an arm of this bench that plays the bare-metal host ("% of host").
        host: a host baseline measured elsewhere (analysis.host_from_file), used when host_arm is None.
        reference_arm: the arm whose token ids the others must match (correctness gate);
            default host_arm, else baseline.
        extra_metadata: merged into metadata.json.
        console: where progress goes (stderr by default).

    Returns:
        BenchResult with the summary (summary.json content) and the bundle path.

    Raises:
        CapshimError: the bundle folder cannot be created, or bad arms/baseline.
    """
    console = console or Console(stderr=True)
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise CapshimError(f"arm names must be unique: {', '.join(names)}")
    if baseline not in names:
        raise CapshimError(f"--baseline {baseline!r} is not an arm ({', '.join(names)})")
    if host_arm is not None and host_arm not in names:
        raise CapshimError(f"host arm {host_arm!r} is not an arm ({', '.join(names)})")
    meta = {
        "capshim_version": __version__,
        "started_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command_line": sys.argv,
        "method": {"repetitions": repetitions, "warmup_runs_per_arm": warmup, "order": "interleaved",
                   "process_per_run": True, "timeout_s": timeout, "statistic": "median of samples_ts"},
        "baseline": baseline, "host_arm": host_arm, "host_baseline": (host or {}).get("source"),
        "workload": {"kind": workload.kind, "argv": workload.argv, "env": workload.env,
                     "binary": str(workload.binary) if workload.binary else None,
                     "binary_sha256": sha256_file(workload.binary) if workload.binary else None,
                     "model": str(workload.model) if workload.model else None,
                     "model_sha256": _model_sha(workload.model),
                     "versions": workload.versions},
        "arms": {a.name: a.spec() for a in arms},
        "shims": _shim_hashes(arms),
    }
    if workload.adapter is not None:
        meta["workload"]["metric"] = workload.adapter.metric.to_dict()
        meta["workload"]["output_check"] = workload.adapter.check
    if workload.controls:
        meta["controls"] = {c.control: {"argv": c.argv, "metric": (c.adapter.metric.to_dict() if c.adapter
                                                                   else metrics.TOK_S.to_dict())}
                            for c in workload.controls}
    meta.update(extra_metadata or {})
    bundle = Bundle.create(out, meta)
    results: dict[str, list[RunResult]] = {a.name: [] for a in arms}
    control_results: dict[str, list[RunResult]] = {a.name: [] for a in arms}
    interrupted = False
    interrupted_by = None
    total = len(arms) * (warmup + repetitions) * (1 + len(workload.controls))
    work = Path(tempfile.mkdtemp(prefix="capshim-bench-"))
    def on_term(signum, frame):
        raise Stop("SIGTERM")

    old_term = signal.signal(signal.SIGTERM, on_term)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)
    try:
        with progress:
            task = progress.add_task("bench", total=total)
            for rnd in range(warmup + repetitions):
                record = rnd >= warmup
                n = rnd - warmup + 1
                for arm in arms:
                    what = f"{arm.name} run {n}/{repetitions}" if record else f"{arm.name} warm-up {rnd + 1}/{warmup}"
                    progress.update(task, description=what)
                    res = _run_one(bundle, arm, n if record else rnd + 1, workload, timeout, work, record)
                    if record:
                        results[arm.name].append(res)
                        bundle.metadata["arms"][arm.name].setdefault("runs", []).append(
                            {"run": n, "exec_argv": res.exec_argv, "env_delta": res.env_delta})
                    if res.error:
                        console.print(f"[yellow]{arm.name} {'run ' + str(n) if record else 'warm-up'}: {res.error}[/]")
                    progress.advance(task)
                    if not console.is_terminal:  # no live bar in a log: one line per run
                        done = int(progress.tasks[0].completed)
                        console.print(f"[{done}/{total}] {what}: {res.seconds:.1f} s"
                                      + (f" ({res.error})" if res.error else ""))
                    _run_controls(bundle, arm, n if record else rnd + 1, record, workload, timeout, work,
                                  control_results, progress, task, console, what, total)
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = True
        if isinstance(exc, Interrupted):
            results[exc.result.arm].append(exc.result)
        how = exc.result.signal if isinstance(exc, Interrupted) else getattr(exc, "signal_name", "SIGINT")
        interrupted_by = how
        console.print(f"[red]interrupted ({how}): writing the bundle of the runs that finished[/]")
    finally:
        signal.signal(signal.SIGTERM, old_term)
        shutil.rmtree(work, ignore_errors=True)
    result = _finish(bundle, arms, results, workload, baseline, host_arm, host, reference_arm, interrupted,
                     control_results)
    result.interrupted_by = interrupted_by
    return result


def _model_sha(model: Path | None) -> str | None:
    if model is None:
        return None
    side = model.with_name(model.name + ".sha256")
    try:
        if side.is_file() and side.stat().st_mtime >= model.stat().st_mtime:
            return side.read_text().split()[0]
    except OSError:
        pass
    return sha256_file(model)


def _shim_hashes(arms: list[Arm]) -> dict:
    out = {}
    apis = {p.api for a in arms for p in (a.profile, a.simulate) if p is not None}
    if any(a.restore for a in arms):
        apis.add("vulkan")
    if "vulkan" in apis:
        from capshim.backends import vulkan

        b = vulkan.build()
        out["vulkan_layer"] = {"path": str(b.library), "sha256": sha256_file(b.library)}
    if "metal" in apis:
        from capshim.backends import metal

        for name, path in metal.build().items():
            if Path(path).is_file():
                out[f"metal_{name}"] = {"path": str(path), "sha256": sha256_file(path)}
    return out


def _finish(bundle: Bundle, arms: list[Arm], results: dict[str, list[RunResult]], workload: Workload,
            baseline: str, host_arm: str | None, host: dict | None, reference_arm: str | None,
            interrupted: bool, control_results: dict[str, list[RunResult]] | None = None) -> BenchResult:
    control_results = control_results or {}
    records = [rec for rs in (*results.values(), *control_results.values()) for r in rs for rec in r.records]
    arm_info: dict[str, dict] = {}
    for arm in arms:
        rs = results[arm.name]
        ok = [r for r in rs if r.error is None]
        info = {"spec": arm.spec(), "state": _arm_state(arm, rs), "path": ok[0].path if ok else {},
                "runs": [r.info() for r in rs]}
        arm_info[arm.name] = info
    # Correctness gate: every arm's generated tokens must equal the reference arm's.
    ref = reference_arm or host_arm or baseline
    ref_tokens = next((r.token_ids for r in results.get(ref, []) if r.token_ids is not None), None)
    if workload.check_output:
        for arm in arms:
            toks = [r.token_ids for r in results[arm.name] if r.token_ids is not None]
            info = arm_info[arm.name]
            if ref_tokens is None or not toks:
                info["output_check"] = "not checked (no token ids)"
                continue
            same = all(metrics.same_output(t, ref_tokens) for t in toks)
            what, differ = ("tokens", "differ") if workload.adapter is None else ("output", "differs")
            info["output_check"] = f"same {what} as {ref}" if same else f"{what} {differ} from {ref}"
            if not same and info["state"] in ("native", "active"):
                info["state"] = "wrong-output"
    host_dict = host
    if host_arm is not None:
        tests: dict[str, list[float]] = {}
        for rec in records:
            if rec["arm"] == host_arm:
                tests.setdefault(rec["test"], []).append(rec["tok_s"])
        host_dict = {"name": host_arm, "tests": tests, "path": arm_info[host_arm]["path"],
                     "source": f"arm {host_arm} of this bench"}
    failed = sum(1 for rs in (*results.values(), *control_results.values()) for r in rs if r.error)
    tests_metric = {}
    for w in (workload, *workload.controls):
        if w.adapter is not None:
            tests_metric[metrics.control_test(w.control) if w.control else w.adapter.metric.name] = w.adapter.metric
    summary = bundle.finalize(records, arm_info, baseline, host_dict, interrupted=interrupted,
                              metadata_update={"failed_runs": failed}, title="capshim bench",
                              annotate=lambda s: metrics.annotate(s, tests_metric,
                                                                  [c.control for c in workload.controls]))
    bad = [a for a, i in arm_info.items() if i["state"] in ("inert", "invalid", "failed", "wrong-output")]
    return BenchResult(summary, bundle.root, interrupted, failed, bad)
