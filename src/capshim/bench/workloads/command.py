"""The ``--metric``/``--control`` command adapter: any command's runs -> samples and an output fingerprint.

:class:`Adapter` turns one finished run (stdout, stderr, seconds) into
analysis records and an output fingerprint for ``--check-output``
(:func:`same_output`); :class:`MetricWorkload` plugs it into the runner's
workload seam (:class:`capshim.bench.workloads.base.Workload`). What a metric
spec means (``wall``, ``json:PATH``, ``regex:PATTERN``) is
:mod:`capshim.bench.metrics`.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from capshim import paths
from capshim.bench import llamabench, metrics
from capshim.bench.workloads.base import OutputDigest, Workload
from capshim.bench.workloads.base import Kind
from capshim.bench.workloads.llama_bench import llama_bench_workload
from capshim.contracts import bounded, folders, names, numbers
from capshim.errors import UsageError

__all__ = ["Adapter", "MetricWorkload", "extract", "same_output", "command_workload", "control_workload"]


JSON_TRIES = 16
"""Lines starting with ``{`` or ``[`` (from the last) tried as the start of a workload's JSON when
its stdout is not one JSON value: each try may read to the end of the output, so the time to
find it is bounded by this many reads of at most ``llamabench.MAX_OUTPUT_BYTES``."""


def _find_json(text: str, where: str):
    text = text.replace("\ufeff", "").strip()
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # not one value, or a line nested too deep
        pass
    dec = json.JSONDecoder()
    lines = text.split("\n")
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    tries = 0
    for line, off in reversed(list(zip(lines, offsets))):
        s = line.lstrip()
        if s[:1] in ("{", "["):
            tries += 1  # each try may read to the end of the output: at most JSON_TRIES of them
            if tries > JSON_TRIES:
                break
            try:
                value, _ = dec.raw_decode(text, off + len(line) - len(s))
                return value
            except (json.JSONDecodeError, RecursionError):  # a log line, or nested too deep: skip it
                continue
    raise metrics.MetricError(f"{where}: no JSON found on stdout" + (
        f" (the last {JSON_TRIES} lines that start with {{ or [ tried)" if tries > JSON_TRIES else ""))


def _number(v, where: str) -> float:
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise metrics.MetricError(f"{where}: {v!r} is not a number") from None
    try:  # a 401-digit integer is no measurement (and no float)
        v = numbers.finite(v, where)
    except UsageError as exc:
        raise metrics.MetricError(f"{exc}: expected a finite number") from None
    if v <= 0:
        raise metrics.MetricError(f"{where}: {v!r} must be > 0 (ratios of medians are taken)")
    return float(v)


#: stderr lines that capshim's shims and the Vulkan loader print into every shimmed
#: process (banners, warnings): never the workload's numbers. Their count differs by
#: arm, so a pattern matching them would give arms different samples.
_SHIM_LINE = re.compile(r"^(capshim[-:\w]*:|WARNING: \[Loader Message\]).*$\n?", re.M)


def _without_shim_lines(stderr: str) -> str:
    """``stderr`` without the lines capshim's shims and the loader add (see ``_SHIM_LINE``)."""
    return _SHIM_LINE.sub("", stderr)


def extract(metric: metrics.Metric, stdout: str, stderr: str, seconds: float, source: str) -> list[float]:
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
        v = metrics.json_path(_find_json(stdout, where), metric.arg, where)
        vals = v if isinstance(v, list) else [v]
        if len(vals) > metrics.MAX_RUN_SAMPLES:
            raise metrics.MetricError(f"{where}: {metric.arg} holds {len(vals)} values, more than the "
                                      f"{metrics.MAX_RUN_SAMPLES} capshim analyses of one run")
        if not vals:
            raise metrics.MetricError(f"{where}: {metric.arg} is an empty list")
        return [_number(x, f"{where}: {metric.arg}") for x in vals]
    rx = re.compile(metric.arg)
    found = []
    for text, name in ((stdout, "stdout"), (_without_shim_lines(stderr), "stderr")):
        for m in bounded.finditer(rx, text, f"{where} ({name})", metrics.MAX_RUN_SAMPLES + 1 - len(found)):
            found.append(m.group(1))
    if not found:
        raise metrics.MetricError(f"{where}: the pattern matched nothing on stdout or stderr")
    return [_number(x, where) for x in found]


def same_output(a, b, rtol: float = 0.02) -> bool:
    """Whether two output fingerprints agree.

    Strings (hashes) and token-id lists must be equal. A dict
    ``{"values": [float], "rtol": r}`` (numeric output, e.g. ncnn's; ``r``
    defaults to ``rtol``) agrees with another when the relative L2 distance
    ``|a - b| / |b|`` is at most ``r``: fp16 storage or arithmetic, which the
    shims switch, change the last digits of a network's output. With ``"atol": t``
    (the torch-sdpa workload) every value must be within ``t`` of the other's instead.
    """
    if isinstance(a, dict) and isinstance(b, dict) and "values" in a and "values" in b:
        va, vb = a["values"], b["values"]
        if len(va) != len(vb):
            return False
        if a.get("atol") is not None:
            return all(abs(x - y) <= float(a["atol"]) for x, y in zip(va, vb))
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
        rtol: relative tolerance of a numeric output check (relative L2 distance).
        atol: when set, a numeric output check compares every value instead: the largest absolute
            difference must be at most ``atol``.
    """

    metric: metrics.Metric
    check: str | None = None
    output_file: Path | None = None
    rtol: float = 0.02
    atol: float | None = None
    versions: dict = field(default_factory=dict)

    def before_run(self) -> None:
        """Remove the file the previous run wrote at ``output_file``, so this run's own file is the one hashed.

        Only a regular file is ever removed (never a device, a FIFO, a link or a folder); the
        path did not exist when the bench started (:func:`command_workload`), so what is there
        is a run's own output.

        Raises:
            MetricError: something other than a regular file is there, or it cannot be removed.
        """
        if self.output_file is None:
            return
        try:
            st = os.lstat(self.output_file)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise metrics.MetricError(f"--output-file {self.output_file}: cannot check it before the run: "
                                      f"{exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):
            raise metrics.MetricError(f"--output-file {self.output_file}: a run left something that is not a "
                                      "regular file there; capshim removes only regular files")
        try:
            self.output_file.unlink()
        except OSError as exc:
            raise metrics.MetricError(f"--output-file {self.output_file}: cannot remove before the run: "
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
            return OutputDigest(stdout.encode("utf-8", errors="replace"), "stdout")
        if self.check == "file":
            try:
                # a regular file, at most what capshim reads of a run's output (a FIFO left there waits)
                data = paths.read_limited(self.output_file, llamabench.MAX_OUTPUT_BYTES)
            except OSError as exc:
                raise metrics.MetricError(f"--output-file {self.output_file}: the run did not leave it readable: "
                                  f"{exc.strerror or exc} ({source})") from None
            return OutputDigest(data, f"--output-file {self.output_file.name}")
        path = self.check.partition(":")[2]
        where = f"--check-output {self.check}: {source}"
        vals = metrics.json_path(_find_json(stdout, where), path, where)
        if not isinstance(vals, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in vals):
            raise metrics.MetricError(f"{where}: expected a list of numbers")
        out = {"values": [float(v) for v in vals], "rtol": self.rtol}
        if self.atol is not None:
            out["atol"] = self.atol
        return out


@dataclass
class MetricWorkload(Workload):
    """A workload that does not print llama-bench JSON: any command with ``--metric SPEC``, the
    ncnn workload, a control that is timed. Its ``adapter`` reads each run's samples and output
    fingerprint.

    Attributes:
        adapter: the metric and what ``--check-output`` compares (required).
    """

    adapter: Adapter | None = None

    @property
    def metric(self) -> metrics.Metric:
        """The adapter's metric (unit, direction)."""
        return self.adapter.metric

    def _test(self) -> str:
        return metrics.control_test(self.control) if self.control else self.adapter.metric.name

    def metric_tests(self) -> dict[str, metrics.Metric]:
        """``{test: Metric}`` of this workload's one test."""
        return {self._test(): self.adapter.metric}

    def metadata(self) -> dict:
        """``{"output_check": what --check-output compares, or None}`` for metadata.json."""
        return {"output_check": self.adapter.check}

    def before_run(self) -> None:
        """Remove the declared output file (``--output-file``) so this run's own is the one hashed.

        Raises:
            MetricError: it cannot be removed.
        """
        self.adapter.before_run()

    def same_output(self, a, b) -> bool:
        """Hashes equal, or numeric output within the adapter's tolerance (:func:`same_output`)."""
        return same_output(a, b)

    def parse(self, stdout: str, source: str, arm: str, run: int, *, stderr: str = "",
              seconds: float = 0.0) -> tuple[list[dict], object]:
        """One run -> (records of the metric's samples, output fingerprint or None).

        Raises:
            MetricError: the metric or the checked output cannot be read (names the flag and ``source``).
        """
        return self.adapter.parse_run(stdout, stderr, seconds, arm, run, source, test=self._test())


def _resolve_exe(argv: list[str], flag: str) -> Path:
    if not argv:
        raise UsageError(f"{flag}: no command given")
    exe = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if exe is None or not os.access(exe, os.X_OK) or os.path.isdir(exe):
        raise UsageError(f"{flag}: '{argv[0]}': not found or not executable")
    return Path(exe).resolve()


def command_workload(argv: list[str], metric: metrics.Metric, check_output: bool = False,
                     output_file: str | Path | None = None):
    """A ``capshim bench --metric SPEC -- CMD ARGS`` workload (a :class:`MetricWorkload`).

    Args:
        argv: the command.
        metric: what each run yields.
        check_output: compare each arm's output with the reference arm's: the SHA-256 of
            ``output_file`` when given, else of stdout.
        output_file: the file the command writes (declared with ``--output-file``).

    Raises:
        UsageError: the program is not found, or ``--output-file`` names a folder or a missing folder.
    """
    exe = _resolve_exe(argv, "--")
    out = None
    if output_file is not None:
        out = Path(output_file).absolute()
        if os.path.lexists(out):  # it is removed before each run: never a file the user already had
            raise UsageError(f"--output-file {output_file}: exists; capshim removes this file before each run, "
                             "so give a path that does not exist yet (remove or move the file first)")
        if not out.parent.is_dir():
            raise UsageError(f"--output-file {output_file}: must be a file in an existing folder")
        folders.refuse_inside_sealed(out, "--output-file")
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
    name, sep, cmd = value.partition("=")
    if not sep:
        raise UsageError(f"--control {value!r}: expected NAME=CMD")
    name = names.check(name, f"--control {value!r}: NAME")
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
        w = command_workload(argv, metrics.parse_spec("wall", flag=f"--control {name}"))
    w.control = name
    return w


#: Any command after ``--`` with ``--metric``: nothing says which device it ran on.
KIND = Kind("command", label="a command")
