"""Metrics of any workload: what number a run yields, its unit and direction.

``capshim bench --metric SPEC -- CMD ARGS`` benchmarks any command. SPEC is one of:

* ``wall``: the wall-clock seconds of each run's process, measured by the
  harness from start to exit (as hyperfine does; the few milliseconds of the
  ``sh -c exec`` wrapper every arm has are included). Unit ``s``, lower is
  better. One sample per run.
* ``json:PATH``: a number (one sample) or a list of numbers (one sample each,
  e.g. per-repetition times) from the JSON the command prints on stdout.
  PATH is dotted keys with ``[N]`` list indexes: ``results.fps``,
  ``runs[0].ms``, ``samples_ms``. The JSON is the whole stdout, or else the
  last JSON value that starts a line.
* ``regex:PATTERN``: every match of a Python regular expression in stdout,
  then stderr (without the shims' own banner and warning lines); the one capture
  group is the number.

``json:`` and ``regex:`` need ``--better higher|lower`` (a number's meaning
is the command's); ``--unit`` names the unit (shown in the table and
``summary.json``). Values must be finite and > 0 (ratios are taken).

The harness's statistics compare medians as ``median(arm) / median(baseline)``.
For a lower-is-better metric, :func:`annotate` turns every ratio of the
summary into ``median(baseline) / median(arm)``, so "speedup" always reads
"times faster than the baseline" and "% of host" "% of the host's speed"
(the bootstrap interval of the inverse is the inverse of the interval: the
percentile interval is invariant under a monotone map).

:class:`Adapter` turns one finished run (stdout, stderr, seconds) into
analysis records and an output fingerprint for ``--check-output``
(:func:`same_output`); :class:`capshim.bench.runner.MetricWorkload` plugs it
into the runner's workload seam (``Workload.parse``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from capshim.errors import CapshimError, UsageError

__all__ = ["Metric", "MetricError", "Adapter", "parse_spec", "extract", "json_path", "same_output",
           "annotate", "TOK_S", "CONTROL_SUFFIX", "control_test"]

KINDS = ("wall", "json", "regex")
DIRECTIONS = ("higher", "lower")
#: Test names of control workloads end with this (``NAME (control)``).
CONTROL_SUFFIX = " (control)"


class MetricError(CapshimError):
    """A run's output does not yield the metric; names the flag, the spec and the file (exit 2)."""


@dataclass(frozen=True)
class Metric:
    """One metric.

    Attributes:
        kind: ``wall``, ``json``, ``regex`` or ``tok/s`` (llama-bench rows).
        arg: the json PATH or the regex PATTERN (None for wall and tok/s).
        unit: the unit shown (``s`` for wall, ``tok/s``; free text otherwise, may be "").
        better: ``higher`` or ``lower``.
        name: the test name its records carry.
        flag: the option it came from (named in errors).
    """

    kind: str
    arg: str | None
    unit: str
    better: str
    name: str
    flag: str = "--metric"

    @property
    def spec(self) -> str:
        """The spec as written: ``wall``, ``json:PATH``, ``regex:PATTERN``."""
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"

    def to_dict(self) -> dict:
        """``{"spec", "kind", "unit", "better", "ratio"}`` for summary.json (``ratio`` says how speedups read)."""
        ratio = ("median(arm) / median(baseline)" if self.better == "higher"
                 else "median(baseline) / median(arm)")
        return {"spec": self.spec, "kind": self.kind, "unit": self.unit, "better": self.better,
                "ratio": f"{ratio}: above 1.00x is better ({self.better} is better)"}

    def label(self) -> str:
        """``s, lower is better`` for table cells."""
        return f"{self.unit + ', ' if self.unit else ''}{self.better} is better"


#: llama-bench and the built-in llama.cpp workload: tokens per second, higher is better.
TOK_S = Metric("tok/s", None, "tok/s", "higher", "", flag="llama-bench")


def control_test(name: str, test: str | None = None) -> str:
    """The test name of a control workload's records: ``NAME (control)`` or ``NAME test (control)``."""
    return f"{name}{' ' + test if test else ''}{CONTROL_SUFFIX}"


def parse_spec(spec: str, unit: str | None = None, better: str | None = None, flag: str = "--metric",
               name: str | None = None) -> Metric:
    """Parse a metric spec.

    Args:
        spec: ``wall``, ``json:PATH`` or ``regex:PATTERN``.
        unit: the unit (default ``s`` for wall, "" otherwise).
        better: ``higher`` or ``lower`` (default lower for wall; required otherwise).
        flag: the option named in errors.
        name: the test name (default ``wall``, PATH, or ``regex``).

    Raises:
        UsageError: unknown kind, empty PATH/PATTERN, a PATH or PATTERN that does
            not compile, a missing or bad direction; the message names ``flag``.
    """
    kind, sep, arg = (spec or "").partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        raise UsageError(f"{flag} {spec!r}: expected wall, json:PATH or regex:PATTERN")
    if kind == "wall":
        if sep:
            raise UsageError(f"{flag} {spec!r}: 'wall' takes no argument")
        arg = None
    elif not arg:
        raise UsageError(f"{flag} {spec!r}: {kind}: needs a {'PATH' if kind == 'json' else 'PATTERN'}")
    if kind == "json":
        _path_parts(arg, f"{flag} {spec!r}")
    if kind == "regex":
        try:
            rx = re.compile(arg)
        except re.error as exc:
            raise UsageError(f"{flag} {spec!r}: not a valid regular expression: {exc}") from None
        if rx.groups != 1:
            raise UsageError(f"{flag} {spec!r}: use exactly one capture group around the number, "
                             r"e.g. 'regex:elapsed_ms=([0-9.]+)'")
    if better is None:
        if kind != "wall":
            raise UsageError(f"{flag} {spec!r}: say whether higher or lower is better with --better higher|lower")
        better = "lower"
    if better not in DIRECTIONS:
        raise UsageError(f"--better {better!r}: expected higher or lower")
    if unit is None:
        unit = "s" if kind == "wall" else ""
    return Metric(kind, arg, unit, better, name or {"wall": "wall", "regex": "regex"}.get(kind, arg), flag)


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_parts(path: str, where: str) -> list[str | int]:
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        if path[pos] == "." and parts and pos + 1 < len(path):
            pos += 1
        m = _PART.match(path, pos)
        if not m:
            raise UsageError(f"{where}: bad PATH at character {pos + 1} (use keys.joined.by.dots and [N])")
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not parts:
        raise UsageError(f"{where}: empty PATH")
    return parts


def _find_json(text: str, where: str):
    text = text.replace("\ufeff", "").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    lines = text.split("\n")
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    for line, off in reversed(list(zip(lines, offsets))):
        s = line.lstrip()
        if s[:1] in ("{", "["):
            try:
                value, _ = dec.raw_decode(text, off + len(line) - len(s))
                return value
            except json.JSONDecodeError:
                continue
    raise MetricError(f"{where}: no JSON found on stdout")


def json_path(value, path: str, where: str):
    """Follow PATH (``a.b[0].c``) into a decoded JSON value.

    Raises:
        MetricError: a key is missing or an index is out of range (names ``where`` and the step).
    """
    cur = value
    done = ""
    for part in _path_parts(path, where):
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                raise MetricError(f"{where}: {done or 'the JSON'} has no item [{part}]")
            cur = cur[part]
            done += f"[{part}]"
        else:
            if not isinstance(cur, dict) or part not in cur:
                raise MetricError(f"{where}: key {part!r} not found" + (f" under {done}" if done else ""))
            cur = cur[part]
            done += ("." if done else "") + part
    return cur


def _number(v, where: str) -> float:
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise MetricError(f"{where}: {v!r} is not a number") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise MetricError(f"{where}: expected a finite number, got {v!r}")
    if v <= 0:
        raise MetricError(f"{where}: {v!r} must be > 0 (ratios of medians are taken)")
    return float(v)


#: stderr lines that capshim's shims and the Vulkan loader print into every shimmed
#: process (banners, warnings): never the workload's numbers. Their count differs by
#: arm, so a pattern matching them would give arms different samples.
_SHIM_LINE = re.compile(r"^(capshim[-:\w]*:|WARNING: \[Loader Message\]).*$\n?", re.M)


def _without_shim_lines(stderr: str) -> str:
    """``stderr`` without the lines capshim's shims and the loader add (see ``_SHIM_LINE``)."""
    return _SHIM_LINE.sub("", stderr)


def extract(metric: Metric, stdout: str, stderr: str, seconds: float, source: str) -> list[float]:
    """The samples one run yields.

    Args:
        metric: the metric.
        stdout, stderr: what the run printed (text).
        seconds: the run's wall-clock seconds (for ``wall``).
        source: the run's stdout file, named in errors.

    Returns:
        One or more floats in the metric's unit, each > 0.

    Raises:
        MetricError: no JSON / key missing / no match / not a number / <= 0;
            the message names the flag, the spec and ``source``.
    """
    where = f"{metric.flag} {metric.spec}: {source}"
    if metric.kind == "wall":
        return [_number(seconds, where)]
    if metric.kind == "json":
        v = json_path(_find_json(stdout, where), metric.arg, where)
        vals = v if isinstance(v, list) else [v]
        if not vals:
            raise MetricError(f"{where}: {metric.arg} is an empty list")
        return [_number(x, f"{where}: {metric.arg}") for x in vals]
    rx = re.compile(metric.arg)
    found = []
    for text in (stdout, _without_shim_lines(stderr)):
        for m in rx.finditer(text):
            found.append(m.group(1))
    if not found:
        raise MetricError(f"{where}: the pattern matched nothing on stdout or stderr")
    return [_number(x, where) for x in found]


def same_output(a, b, rtol: float = 0.02) -> bool:
    """Whether two output fingerprints agree.

    Strings (hashes) and token-id lists must be equal. A dict
    ``{"values": [float], "rtol": r}`` (numeric output, e.g. ncnn's; ``r``
    defaults to ``rtol``) agrees with another when the relative L2 distance
    ``|a - b| / |b|`` is at most ``r``: fp16 storage or arithmetic, which the
    shims switch, change the last digits of a network's output.
    """
    if isinstance(a, dict) and isinstance(b, dict) and "values" in a and "values" in b:
        va, vb = a["values"], b["values"]
        if len(va) != len(vb):
            return False
        tol = float(a.get("rtol", rtol))
        num = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
        den = math.sqrt(sum(y * y for y in vb))
        return num <= tol * den if den else num == 0
    return a == b


@dataclass
class Adapter:
    """How the runner reads one run of a generic workload (the workload-adapter seam).

    Attributes:
        metric: what each run yields.
        check: what ``--check-output`` compares: ``"stdout"`` (SHA-256 of
            stdout), ``"file"`` (SHA-256 of ``output_file``), ``"json:PATH"``
            (a numeric array in the JSON output, compared with ``rtol``), or None.
        output_file: the declared output file (removed before each run so a
            stale one is never hashed).
        rtol: relative tolerance of a numeric output check.
    """

    metric: Metric
    check: str | None = None
    output_file: Path | None = None
    rtol: float = 0.02
    versions: dict = field(default_factory=dict)

    def before_run(self) -> None:
        """Remove the declared output file, so this run's own file is the one hashed."""
        if self.output_file is not None:
            try:
                self.output_file.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise MetricError(f"--output-file {self.output_file}: cannot remove before the run: "
                                  f"{exc.strerror or exc}") from None

    def parse_run(self, stdout: str, stderr: str, seconds: float, arm: str, run: int, source: str,
                  test: str | None = None) -> tuple[list[dict], object]:
        """Records (``{"arm", "run", "sample", "test", "tok_s"}``; ``tok_s`` holds the value in the
        metric's unit, the key the analysis reads) and the output fingerprint (None when unchecked).

        Raises:
            MetricError: the metric or the checked output cannot be read (names flag and file).
        """
        vals = extract(self.metric, stdout, stderr, seconds, source)
        t = test or self.metric.name
        records = [{"arm": arm, "run": run, "sample": i, "test": t, "tok_s": v} for i, v in enumerate(vals, 1)]
        return records, self.fingerprint(stdout, source)

    def fingerprint(self, stdout: str, source: str):
        """The output fingerprint of a run (see :attr:`check`), or None when not checked."""
        if self.check is None:
            return None
        if self.check == "stdout":
            return "sha256:" + hashlib.sha256(stdout.encode("utf-8", errors="replace")).hexdigest()
        if self.check == "file":
            try:
                data = self.output_file.read_bytes()
            except OSError as exc:
                raise MetricError(f"--output-file {self.output_file}: the run did not leave it readable: "
                                  f"{exc.strerror or exc} ({source})") from None
            return "sha256:" + hashlib.sha256(data).hexdigest()
        path = self.check.partition(":")[2]
        where = f"--check-output {self.check}: {source}"
        vals = json_path(_find_json(stdout, where), path, where)
        if not isinstance(vals, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in vals):
            raise MetricError(f"{where}: expected a list of numbers")
        return {"values": [float(v) for v in vals], "rtol": self.rtol}


def _invert(cmp: dict | None, scale: float = 1.0) -> dict | None:
    """``{"value": v, "ci95": [lo, hi]}`` of a ratio r (times ``scale``) -> the same of 1/r (times ``scale``)."""
    if not cmp or not cmp.get("value"):
        return cmp
    k = scale * scale
    ci = cmp.get("ci95")
    return {**cmp, "value": k / cmp["value"],
            "ci95": [k / ci[1], k / ci[0]] if ci and ci[0] > 0 and ci[1] > 0 else ci}


#: What one process's samples are, per metric kind (the method line of the report).
_SAMPLES = {"wall": "its wall-clock seconds", "json": "the number(s) at {arg} in its JSON output",
            "regex": "every match of {arg} in its output"}


def annotate(summary: dict, metrics: dict[str, Metric], controls: list[str] | None = None) -> dict:
    """Add metric directions and control-workload verdicts to an analysis summary (in place).

    Args:
        summary: :func:`capshim.bench.analysis.analyze` output: ``arms[name]["tests"][test]`` with
            ``speedup`` and ``pct_of_host`` as ``{"value", "ci95"}``.
        metrics: ``{test: Metric}``; tests not named are llama-bench tok/s (:data:`TOK_S`).
        controls: names of the control workloads (their tests end in :data:`CONTROL_SUFFIX`).

    Returns:
        The summary with ``"metrics": {test: Metric.to_dict()}``, ``method.statistic`` saying
        what a process's samples are when a test is not tok/s; for lower-is-better tests
        ``speedup``, ``pct_of_host`` and the A/A ratio (``aa.tests``) inverted (baseline/arm); ``"controls": {name: {"expectation":
        "no change", "tests": [test], "arms": {arm: {test: {"ratio", "ci95", "moved": bool}}}}}``
        (``moved``: the 95% interval excludes 1.00x); a flag on each arm whose control moved, and
        ``"notes"`` ([str]) the report prints under the table.
    """
    summary["metrics"] = {t: (metrics.get(t) or TOK_S).to_dict() for t in summary.get("tests") or []}
    notes = summary.setdefault("notes", [])
    other = {t: m for t, m in metrics.items() if t in summary["metrics"]}
    if other and isinstance(summary.get("method"), dict):
        summary["method"]["statistic"] = (
            "median of per-process medians (each process one run; its samples: "
            + "; ".join(f"{t}: {_SAMPLES[m.kind].format(arg=m.arg)}" for t, m in other.items())
            + ("; other tests: llama-bench samples_ts" if len(other) < len(summary["metrics"]) else "") + ")")
    for t, m in metrics.items():
        if m.better == "lower" and t in summary["metrics"]:
            for arm in summary["arms"].values():
                entry = (arm.get("tests") or {}).get(t)
                if not entry:
                    continue
                entry["speedup"] = _invert(entry.get("speedup"))
                entry["pct_of_host"] = _invert(entry.get("pct_of_host"), 100.0)
            aa_tests = (summary.get("aa") or {}).get("tests") or {}
            if aa_tests.get(t):
                aa_tests[t] = _invert(aa_tests[t])
    lower = [t for t in summary["metrics"] if summary["metrics"][t]["better"] == "lower"]
    if lower:
        notes.append(f"lower is better for {', '.join(lower)}: speedup = median(baseline) / median(arm), "
                     "% of host = 100 * median(host) / median(arm)")
    out_controls = {}
    for name in controls or []:
        tests = [t for t in summary.get("tests") or [] if t.startswith(name) and t.endswith(CONTROL_SUFFIX)]
        per_arm: dict = {}
        for arm_name, arm in summary["arms"].items():
            for t in tests:
                sp = (arm.get("tests") or {}).get(t, {}).get("speedup")
                if not sp or arm_name == summary.get("baseline"):
                    continue
                ci = sp.get("ci95")
                moved = bool(ci) and not (ci[0] <= 1.0 <= ci[1])
                per_arm.setdefault(arm_name, {})[t] = {"ratio": sp["value"], "ci95": ci, "moved": moved}
                if moved:
                    arm.setdefault("flags", []).append(
                        f"control {name} moved: {sp['value']:.2f}x [{ci[0]:.2f}–{ci[1]:.2f}] excludes 1.00x "
                        "(expected no change)")
        out_controls[name] = {"expectation": "no change", "tests": tests, "arms": per_arm}
    if out_controls:
        summary["controls"] = out_controls
        notes.append(f"control workloads ({', '.join(out_controls)}): expectation no change (1.00x); "
                     "a control whose 95% interval excludes 1.00x is flagged")
    return summary


def _resolve_exe(argv: list[str], flag: str) -> Path:
    import os
    import shutil

    if not argv:
        raise UsageError(f"{flag}: no command given")
    exe = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if exe is None or not os.access(exe, os.X_OK) or os.path.isdir(exe):
        raise UsageError(f"{flag}: '{argv[0]}': not found or not executable")
    return Path(exe).resolve()


def command_workload(argv: list[str], metric: Metric, check_output: bool = False,
                     output_file: str | Path | None = None):
    """A ``capshim bench --metric SPEC -- CMD ARGS`` workload (:class:`capshim.bench.runner.MetricWorkload`).

    Args:
        argv: the command.
        metric: what each run yields.
        check_output: compare each arm's output with the reference arm's: the SHA-256 of
            ``output_file`` when given, else of stdout.
        output_file: the file the command writes (declared with ``--output-file``).

    Raises:
        UsageError: the program is not found, or ``--output-file`` names a folder or a missing folder.
    """
    from capshim.bench.runner import MetricWorkload

    exe = _resolve_exe(argv, "--")
    out = None
    if output_file is not None:
        out = Path(output_file).resolve()
        if out.is_dir() or not out.parent.is_dir():
            raise UsageError(f"--output-file {output_file}: must be a file in an existing folder")
    check = ("file" if out is not None else "stdout") if check_output else None
    return MetricWorkload("command", list(argv), binary=exe, check_output=bool(check),
                          adapter=Adapter(metric, check=check, output_file=out))


def control_workload(value: str):
    """Parse ``--control NAME=CMD`` into a control workload.

    CMD is split like a shell would (``shlex``). A ``llama-bench`` command reports its
    tok/s tests (``-o json`` is added); any other command is timed (``wall``, seconds,
    lower is better). Its tests are named ``NAME ... (control)``.

    Raises:
        UsageError: no ``=``, a bad NAME (letters, digits, ``.``, ``_``, ``-``), an empty or
            unparsable CMD, or a program not found; the message names ``--control``.
    """
    import shlex

    from capshim.bench.runner import llama_bench_workload

    name, sep, cmd = value.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise UsageError(f"--control {value!r}: expected NAME=CMD, NAME of letters, digits, '.', '_', '-'")
    try:
        argv = shlex.split(cmd)
    except ValueError as exc:
        raise UsageError(f"--control {value!r}: cannot split the command: {exc}") from None
    if not argv:
        raise UsageError(f"--control {value!r}: no command after '='")
    _resolve_exe(argv, f"--control {name}")
    if "llama-bench" in Path(argv[0]).name:
        w = llama_bench_workload(argv)
    else:
        w = command_workload(argv, parse_spec("wall", flag=f"--control {name}"))
    w.control = name
    return w
