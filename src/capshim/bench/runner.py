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
import re
import secrets
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

from capshim import __version__, backends, evidence, launch
from capshim.bench import analysis, attest, inherited_env, llamabench, metrics, stats, telemetry
from capshim.bench.arms import Arm
from capshim.bench.workloads.base import Workload
from capshim.errors import CapshimError
from capshim.summary import run_failed
from capshim.evidence import Bundle, sha256_file


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
    """One finished (or failed) arm run; ``round``/``position`` say when it ran (position from 1);
    ``control`` names the control workload it ran (None: the workload itself)."""

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
    round: int = 0
    position: int = 0
    telemetry: dict = field(default_factory=dict)
    contaminated: list[str] = field(default_factory=list)
    excluded: bool = False
    control: str | None = None
    left_processes: int = 0
    stderr_truncated: int = 0

    def info(self) -> dict:
        """The ``runs`` entry of the arm in summary.json (``control_runs`` in metadata.json for a control)."""
        return {**({"control": self.control} if self.control else {}), "run": self.run, "round": self.round, "position": self.position, "exit_code": self.exit_code,
                "signal": self.signal, "timed_out": self.timed_out, "seconds": round(self.seconds, 3),
                "error": self.error, "shims": self.shim_states, "telemetry": self.telemetry,
                "contaminated": self.contaminated, "excluded": self.excluded,
                "left_processes": self.left_processes,
                **({"stderr_truncated_bytes": self.stderr_truncated} if self.stderr_truncated else {})}


#: The variable whose length pads every run's environment (hyperfine: HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET).
PAD_VAR = "CAPSHIM_BENCH_PAD"
#: Largest random offset added to the common environment size (bytes), as hyperfine uses.
PAD_RANGE = 4096


def _env_size(env: dict[str, str]) -> int:
    """Bytes the environment takes on the new process's stack: ``NAME=value\\0`` per variable."""
    return sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())


@dataclass
class Launcher:
    """Launches every arm the same way (module docstring): the same wrapper, the same variables,
    a padded environment. ``keys`` are the variables any arm sets; ``size`` the largest base
    environment of any arm (bytes)."""

    keys: list[str]
    size: int
    rng: random.Random

    @staticmethod
    def neutral(key: str) -> str:
        """The value of a variable that enables nothing: the user's own value for the loader's
        layer lists (so this process sees what a plain launch sees), else empty."""
        if key in ("VK_ADD_LAYER_PATH", "VK_INSTANCE_LAYERS"):
            return os.environ.get(key, "")
        return ""

    def build(self, lc: "launch.Launch", workload_env: dict[str, str]) -> tuple[list[str], dict, dict]:
        """(exec_argv, full environment, recorded delta) of one run."""
        delta = {k: lc.env_delta.get(k, self.neutral(k)) for k in self.keys}
        delta.update(lc.env_delta)
        env = dict(os.environ)
        for var in ("CAPSHIM_TARGET_PID", "CAPSHIM_INHERIT", "CAPSHIM_VK_APP_CONFIG", "CAPSHIM_VK_DEVICE_CONFIG",
                    PAD_VAR):
            env.pop(var, None)
        env.update(delta)
        env.update(workload_env)
        target = self.size + 64 + self.rng.randrange(PAD_RANGE)
        pad = max(0, target - _env_size(env) - len(PAD_VAR) - 2)
        delta[PAD_VAR] = env[PAD_VAR] = "x" * pad
        exec_argv = lc.exec_argv
        if exec_argv == lc.argv:  # no shim asked for: the same wrapper all the same
            exec_argv = ["/bin/sh", "-c", launch.PID_WRAPPER, "capshim-run", *lc.argv]
        return exec_argv, env, delta


def _make_launcher(arms: list[Arm], workload: Workload, work: Path, rng: random.Random) -> Launcher:
    """One launcher for the workload and its controls: the variables any arm sets, the largest environment."""
    keys: list[str] = []
    size = 0
    for w in (workload, *workload.controls):
        for arm in arms:
            probe_dir = work / f"probe-{w.label(arm.name)}"
            try:
                lc = launch.prepare(w.argv, arm.profile, arm.simulate, run_dir=probe_dir,
                                    status_file=probe_dir / "status.jsonl")
            except launch.UsageError:  # the command cannot start: each of its runs records why
                continue
            keys += [k for k in lc.env_delta if k not in keys]
            size = max(size, _env_size({**lc.env(), **w.env}))
    if "CAPSHIM_STATUS_FILE" not in keys:
        keys.append("CAPSHIM_STATUS_FILE")
    return Launcher(keys, size, rng)


def _copy_output(fh, dst: Path) -> None:
    """Copy what a run wrote to ``fh`` (capshim's own descriptor of its private output file)
    into the bundle file ``dst``, through that descriptor: whatever the workload did to the
    private path (replaced it with a link, say), the bundle gets only what was written to it."""
    fh.flush()
    fh.seek(0)
    with open(dst, "wb") as out:
        shutil.copyfileobj(fh, out, 1 << 20)


def _run_one(bundle: Bundle, arm: Arm, n: int, workload: Workload, timeout: float, work: Path,
             record: bool = True, launcher: Launcher | None = None, probe: telemetry.Telemetry | None = None,
             position: tuple[int, int] = (0, 0)) -> RunResult:
    label = workload.label(arm.name)
    run_dir = work / f"{label}-{n}{'' if record else '-warmup'}"
    # The status file lives in the private work folder, never in the bundle: the workload may write
    # that path (and its folder), so only a copy of the one file goes into status/ after the run.
    status_file = run_dir / "status.jsonl"
    t0 = time.monotonic()
    try:
        lc = launch.prepare(workload.argv, arm.profile, arm.simulate, run_dir=run_dir, status_file=status_file)
    except launch.UsageError as exc:  # the workload vanished or changed since the bench started
        return _not_started(bundle, arm, n, record, t0, str(exc), workload.argv, position=position,
                            control=workload.control)
    launcher = launcher or Launcher(list(lc.env_delta), 0, random.Random(0))
    if "CAPSHIM_STATUS_FILE" in launcher.keys:
        lc.env_delta.setdefault("CAPSHIM_STATUS_FILE", str(lc.status_file))  # absolute (launch.prepare)
    exec_argv, env, delta = launcher.build(lc, workload.env)
    # stdout and stderr go to private files too (a workload can find the path of its own stdout
    # through /proc/self/fd/1 and must not learn a path inside the bundle); the bundle gets copies
    # read through capshim's own descriptors after the run.
    run_dir.mkdir(parents=True, exist_ok=True)
    priv_out, priv_err = run_dir / "stdout.json", run_dir / "stderr.txt"
    out_path = bundle.raw_json(label, n) if record else priv_out
    err_path = bundle.raw_stderr(label, n) if record else priv_err
    workload.before_run()
    before = probe.snapshot() if probe else {}
    t0 = time.monotonic()
    timed_out = False
    with open(priv_out, "w+b") as out, open(priv_err, "w+b") as err:
        try:
            proc = subprocess.Popen(exec_argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:  # missing interpreter, not an executable format, a folder, deleted
            return _not_started(bundle, arm, n, record, t0, launch.exec_failure(workload.argv[0], exc),
                                exec_argv, lc.env_delta, position=position, control=workload.control)
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
            launch.end_group(proc.pid)
            if not record:
                raise
            _copy_output(out, out_path)
            _copy_output(err, err_path)
            bundle.write_run(label, n, status_src=status_file)
            states = {name: s.to_dict() for name, s in lc.states().items()}
            raise Interrupted(RunResult(arm.name, n, None, stop.signal_name, False, time.monotonic() - t0, [], {},
                                        states, None, f"interrupted ({stop.signal_name})",
                                        round=position[0], position=position[1],
                                        control=workload.control)) from None
        seconds = time.monotonic() - t0
        # what the workload left running in its session (a `( sleep 1000 ) &`): SIGTERM, grace, SIGKILL
        left = launch.end_group(proc.pid)
        if record:
            _copy_output(out, out_path)
            _copy_output(err, err_path)
            bundle.write_run(label, n, status_src=status_file)
    after = probe.snapshot() if probe else {}
    sig = signal.Signals(-rc).name if rc < 0 and -rc in signal.Signals._value2member_map_ else None
    exit_code = rc if rc >= 0 else None
    stdout = _read_output(out_path)
    stderr_cut = _cap_stderr(err_path)
    stderr = _read_output(err_path)
    records: list[dict] = []
    error = None
    tokens = None
    if rc == 0 and not timed_out:
        try:
            records, tokens = workload.parse(stdout, str(out_path), arm.name, n, stderr=stderr, seconds=seconds)
        except CapshimError as exc:
            error = str(exc)
    elif timed_out:
        error = f"timed out after {timeout:g} s"
    else:
        error = f"killed by {sig}" if sig else f"exit {rc}"
        line = error_line(stderr)
        if line:
            error += f": {line[:300]}"
    states = {name: s.to_dict() for name, s in lc.states().items()}
    dirty = telemetry.contamination(before, after, {os.getpid(), proc.pid}) if probe else []
    for rec in records:
        rec["round"], rec["position"], rec["contaminated"] = position[0], position[1], bool(dirty)
    recorded_delta = {k: (f"<{len(v)} bytes>" if k == PAD_VAR else v) for k, v in {**delta, **workload.env}.items()}
    return RunResult(arm.name, n, exit_code, sig, timed_out, seconds, records, attest.parse_path(stderr), states,
                     tokens, error, exec_argv, recorded_delta, position[0], position[1],
                     {"before": before, "after": after} if probe else {}, dirty, control=workload.control,
                     left_processes=left, stderr_truncated=stderr_cut)


#: llama.cpp's (and ggml's) own error lines: ``ggml_vulkan: Error: ...``,
#: ``llama_model_load: error loading model: ...``, ``..._impl: failed to load model``.
_LLAMA_ERROR = re.compile(r"^(?:ggml|llama)\w*: .*\berror\b", re.IGNORECASE)
_LLAMA_FAILED = re.compile(r"^(?:ggml|llama)\w*: .*\bfailed\b", re.IGNORECASE)


def error_line(stderr: str) -> str | None:
    """The line of a failed run's stderr that says why it failed (the run's ``error`` after ``exit N: ``).

    llama.cpp's own first error line (``ggml_vulkan: Error: ...``, ``llama_model_load: error ...``;
    else its first ``... failed ...`` line) when there is one: the root cause, which a binding's
    last line (cyllama's generic "could not load it. Possible causes: ...") hides; else the last
    non-empty line. None for an empty stderr.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in (_LLAMA_ERROR, _LLAMA_FAILED):
        own = next((line for line in lines if pattern.match(line)), None)
        if own:
            return own
    return lines[-1] if lines else None


#: The most of one run's stderr a bundle keeps (its first and last half; the rest is left out, with a
#: line saying how much, and the run records ``stderr_truncated_bytes``).
MAX_STDERR_KEEP = 32 << 20


def _cap_stderr(path: Path, cap: int = MAX_STDERR_KEEP) -> int:
    """Cut a run's stderr file over ``cap`` bytes down to its head and tail, in place, in bounded memory.

    Returns:
        How many bytes were left out (0: the file was kept whole).
    """
    try:
        size = os.stat(path).st_size
    except OSError:
        return 0
    if size <= cap:
        return 0
    half = cap // 2
    cut = size - 2 * half
    marker = (f"\n[capshim: {cut} bytes of this run's stderr left out here; the first and last "
              f"{half} bytes are kept]\n").encode()
    with open(path, "r+b") as fh:
        src, dst = size - half, half
        fh.seek(dst)
        fh.write(marker)
        dst += len(marker)
        while src < size:  # dst < src throughout: copying forward never overwrites unread bytes
            fh.seek(src)
            chunk = fh.read(min(1 << 20, size - src))
            fh.seek(dst)
            fh.write(chunk)
            src += len(chunk)
            dst += len(chunk)
        fh.truncate(dst)
    return cut


def _read_output(path: Path) -> str:
    """A run's stdout or stderr as text, at most llamabench.MAX_OUTPUT_BYTES (+1 so too much is seen)."""
    from capshim import paths

    data = paths.read_limited(path, llamabench.MAX_OUTPUT_BYTES + 1, truncate=True)
    return data.decode("utf-8", errors="replace")


def _not_started(bundle: Bundle, arm: Arm, n: int, record: bool, t0: float, reason: str, argv: list[str],
                 env_delta: dict | None = None, position: tuple[int, int] = (0, 0),
                 control: str | None = None) -> RunResult:
    """A run whose command could not be started: recorded as a failed run with the reason
    (a control's under ``<arm>.<control>``)."""
    if record:
        bundle.write_run(f"{arm.name}.{control}" if control else arm.name, n, stdout=b"",
                         stderr=f"capshim: {reason}\n")
    return RunResult(arm.name, n, None, None, False, time.monotonic() - t0, [], {}, {}, None,
                     f"not started: {reason}", list(argv), dict(env_delta or {}), position[0], position[1],
                     control=control)


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
              console: Console | None = None, *, seed: int | None = None, aa_arm: str | None = None,
              precision: float | None = None, max_runs: int | None = None, exclude_contaminated: bool = False,
              allow_mismatch: bool = False, notes: list[str] | None = None,
              precision_tests: list[str] | None = None) -> BenchResult:
    """Run ``repetitions`` processes per arm, in a fresh order per round, and write the evidence bundle.

    Args:
        arms: the arms, resolved (no pending ``restore``/``identity``).
        workload: what each run executes.
        baseline: the arm speedups are relative to.
        out: the bundle folder (must not exist or be empty).
        repetitions: recorded processes (rounds) per arm, at least.
        warmup: unrecorded rounds before the recorded ones.
        timeout: seconds one run may take before it is killed (recorded as timed out).
        host_arm: an arm of this bench that plays the bare-metal host ("% of host").
        host: a host baseline measured elsewhere (analysis.host_from_file), used when host_arm is None.
        reference_arm: the arm whose token ids the others must match (correctness gate);
            default host_arm, else baseline.
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
    seed = secrets.randbits(32) if seed is None else int(seed)
    cap = max(repetitions, max_runs or 5 * repetitions) if precision is not None else repetitions
    meta = {
        "capshim_version": __version__,
        "started_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command_line": sys.argv,
        "method": {"repetitions": repetitions, "warmup_runs_per_arm": warmup,
                   "order": "a fresh seeded permutation of the arms per round", "seed": seed,
                   "launch": "every arm through the same pid wrapper with the same variables, the environment "
                             f"padded to a common size plus a random 0-{PAD_RANGE - 1} bytes ({PAD_VAR})",
                   "process_per_run": True, "timeout_s": timeout,
                   "statistic": "median of per-process medians; cluster bootstrap over processes",
                   "precision_target": precision, "max_runs": cap if precision is not None else None,
                   "exclude_contaminated": exclude_contaminated},
        "baseline": baseline, "host_arm": host_arm, "host_baseline": (host or {}).get("source"),
        "aa_arm": aa_arm,
        "workload": {"kind": workload.kind, "argv": workload.argv, "env": workload.env,
                     "binary": str(workload.binary) if workload.binary else None,
                     "binary_sha256": sha256_file(workload.binary) if workload.binary else None,
                     "model": str(workload.model) if workload.model else None,
                     "model_sha256": _model_sha(workload.model),
                     "versions": workload.versions},
        "arms": {a.name: a.spec() for a in arms},
        "inherited_env": inherited_env.record(os.environ),
        "shims": _shim_hashes(arms),
        "schedule": [],
    }
    meta["workload"]["metric"] = workload.metric.to_dict()
    if workload.log_level is not None:
        meta["workload"]["log_level"] = workload.log_level
    meta["workload"].update(workload.metadata())
    if workload.controls:
        meta["controls"] = {c.control: {"argv": c.argv, "metric": c.metric.to_dict()} for c in workload.controls}
    meta.update(extra_metadata or {})
    env_warnings = inherited_env.warnings(os.environ, workload.env)
    for w in env_warnings:
        console.print(f"capshim: warning: {w}", markup=False, highlight=False)
    bundle = Bundle.create(out, meta)
    results: dict[str, list[RunResult]] = {a.name: [] for a in arms}
    control_results: dict[str, list[RunResult]] = {a.name: [] for a in arms}
    units = [(a, w) for a in arms for w in (workload, *workload.controls)]
    interrupted = False
    interrupted_by = None
    aborted = None
    bad_tests = None
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="capshim-bench-"))
    probe = telemetry.Telemetry()
    meta["telemetry"] = {"nvml": probe.nvml_reason or "available"}
    precision_state = None

    def on_term(signum, frame):
        raise Stop(signal.Signals(signum).name)

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_hup = signal.signal(signal.SIGHUP, on_term)  # a closed terminal seals like SIGTERM
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)
    try:
        launcher = _make_launcher(arms, workload, work, rng)
        tests_checked = False
        with progress:
            total = len(units) * (warmup + repetitions)
            task = progress.add_task("bench", total=total)
            rnd = 0
            recorded = 0
            while True:
                record = rnd >= warmup
                if record and recorded >= repetitions:
                    if precision is None:
                        break
                    precision_state = _precision(results, arms, baseline, host_arm, host, precision, recorded,
                                                 cap, exclude_contaminated, precision_tests, workload,
                                                 control_results)
                    if precision_state["reached"] or recorded >= cap:
                        break
                    worst = precision_state["max_half_width"]
                    console.print(f"precision: widest half-width "
                                  f"{'unknown' if worst is None else format(worst, '.2f')} "
                                  f"> {precision:g} points after {recorded} rounds: one more round")
                    total += len(units)
                    progress.update(task, total=total)
                n = recorded + 1 if record else rnd + 1
                # one permutation of every (arm, workload) pair: the controls are shuffled in as well
                order = list(units)
                rng.shuffle(order)
                if record:
                    bundle.metadata["schedule"].append([w.label(a.name) for a, w in order])
                for pos, (arm, w) in enumerate(order, 1):
                    who = arm.name + (f" control {w.control}" if w.control else "")
                    what = (f"{who} run {n}/{repetitions if n <= repetitions else n}" if record
                            else f"{who} warm-up {rnd + 1}/{warmup}")
                    progress.update(task, description=what)
                    res = _run_one(bundle, arm, n, w, timeout, work, record, launcher, probe,
                                   (n if record else 0, pos))
                    if record:
                        (control_results if w.control else results)[arm.name].append(res)
                        entry = {"run": n, "round": n, "position": pos, "exec_argv": res.exec_argv,
                                 "env_delta": res.env_delta, "telemetry": res.telemetry,
                                 "contaminated": res.contaminated}
                        if w.control:
                            entry = {**res.info(), **entry}
                        bundle.metadata["arms"][arm.name].setdefault(
                            "control_runs" if w.control else "runs", []).append(entry)
                    if res.error:
                        console.print(f"[yellow]{who} {'run ' + str(n) if record else 'warm-up'}: {res.error}[/]")
                    progress.advance(task)
                    if not console.is_terminal:  # no live bar in a log: one line per run
                        done = int(progress.tasks[0].completed)
                        console.print(f"[{done}/{total}] {what}: {res.seconds:.1f} s"
                                      + (f" ({res.error})" if res.error else "")
                                      + (f" [contaminated: {'; '.join(res.contaminated)}]" if res.contaminated else ""))
                if record:
                    recorded += 1
                    if precision is not None and precision_tests and not tests_checked:
                        # a --precision-test that names no test of the workload would run to --max-runs
                        check = _precision(results, arms, baseline, host_arm, host, precision, recorded, cap,
                                           exclude_contaminated, precision_tests, workload, control_results)
                        tests_checked = "known_tests" in check or check["max_half_width"] is not None
                        if check.get("unknown_tests"):
                            bad_tests = check
                            break
                rnd += 1
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = True
        if isinstance(exc, Interrupted):
            stopped = exc.result
            (control_results if stopped.control else results)[stopped.arm].append(stopped)
            if stopped.control:  # a control's runs are listed in metadata.json only: the stopped one too
                bundle.metadata["arms"][stopped.arm].setdefault("control_runs", []).append(stopped.info())
        how = exc.result.signal if isinstance(exc, Interrupted) else getattr(exc, "signal_name", "SIGINT")
        interrupted_by = how
        console.print(f"[red]interrupted ({how}): writing the bundle of the runs that finished[/]")
    except Exception as exc:  # noqa: BLE001 - whatever broke, the finished runs are sealed below
        interrupted = True
        aborted = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]bench stopped by an error ({aborted}): writing the bundle of the runs that finished[/]")
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGHUP, old_hup)
        shutil.rmtree(work, ignore_errors=True)
        probe.close()
    if aborted:
        bundle.metadata["aborted"] = aborted
    # From here a signal never stops capshim before the seal: it only cuts the slow steps short.
    guard_cm = evidence.seal_guard()
    with guard_cm as guard:
        result = _finish(bundle, arms, results, workload, baseline, host_arm, host, reference_arm, interrupted,
                         control_results=control_results, aa_arm=aa_arm, allow_mismatch=allow_mismatch,
                         exclude_contaminated=exclude_contaminated,
                         notes=notes, bench_warnings=env_warnings,
                         precision=precision_state if precision is not None else None,
                         precision_target=precision, cap=cap, precision_tests=precision_tests, guard=guard)
    guard_cm.exit_if_signalled()
    result.interrupted_by = interrupted_by
    if bad_tests is not None:
        from capshim.errors import UsageError

        raise UsageError(f"--precision-test {', '.join(bad_tests['unknown_tests'])}: no such test in this "
                         f"workload's results (its tests: {', '.join(bad_tests['known_tests'])}); stopped after "
                         f"round {bad_tests['rounds']}, the finished runs are sealed in {bundle.root}")
    if aborted:
        raise CapshimError(f"bench stopped by an error ({aborted}); the finished runs are sealed in {bundle.root}",
                           exit_code=1)
    return result


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
    from capshim import paths

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
            baseline: str, host_arm: str | None, host: dict | None, reference_arm: str | None,
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
        arm_info[arm.name] = info
    # Correctness gate: every arm's output (generated tokens, output hash) must equal the reference arm's.
    ref = reference_arm or host_arm or baseline
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
                print(f"capshim: output check skipped for arm {arm.name}: {whose} produced no {none} "
                      f"(no run finished with {'generated tokens' if what == 'tokens' else 'its output read'})",
                      file=sys.stderr)
                continue
            same = all(workload.same_output(t, ref_tokens) for t in toks)
            info["output_check"] = f"same {what} as {ref}" if same else f"{what} {differ} from {ref}"
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
    except evidence.StepInterrupted:  # finalize records the analysis as skipped and seals
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
    summary = bundle.finalize(all_records, arm_info, baseline, host_dict, interrupted=interrupted,
                              metadata_update={"failed_runs": failed}, title="capshim bench", summary=summary)
    if refused is not None and not (guard is not None and guard.first):  # a signal's exit code wins
        raise analysis.ComparabilityError(f"{refused} (bundle of the runs kept: {bundle.root})")
    bad = [a for a, i in arm_info.items() if i["state"] in ("inert", "invalid", "failed", "wrong-output")]
    return BenchResult(summary, bundle.root, interrupted, failed, bad)
