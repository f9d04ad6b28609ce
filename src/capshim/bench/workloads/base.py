"""The workload seam: what every workload adapter gives the runner.

The runner calls only the methods of :class:`Workload`, the same way for every
kind; each adapter module fills them in:

- :mod:`.llama_bench`: a command printing llama-bench JSON (``-- llama-bench ...``),
  and the built-in llama.cpp worker (:mod:`.builtin`), which prints the same JSON;
- :mod:`.command`: any other command, with ``--metric SPEC``, and ``--control``;
- :mod:`.ncnn`: the built-in ncnn workload (a ``--metric`` workload);
- :mod:`.torch_sdpa`: the built-in PyTorch attention workload on CUDA (a ``--metric`` workload).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from capshim.bench import metrics
from capshim.contracts import names


class OutputDigest(str):
    """A run's output fingerprint for ``--check-output``: the string ``sha256:HEX`` of the bytes (what
    is compared: equal digests, equal output), which also keeps the first :data:`HEAD_LINES` lines
    (each cut to :data:`LINE_CHARS` characters, with a hash of the whole line) so that a difference
    can be named (:meth:`first_difference`) without keeping every run's output in memory.

    Args:
        data: the bytes compared (a run's stdout, or the file it wrote).
        what: how the message names them (``stdout``, ``--output-file out.txt``).
    """

    HEAD_LINES = 5000
    LINE_CHARS = 160

    def __new__(cls, data: bytes, what: str):
        self = super().__new__(cls, "sha256:" + hashlib.sha256(data).hexdigest())
        text = data.decode("utf-8", errors="replace")
        # lines split at LF (a CR before it dropped), only the first HEAD_LINES of them: 256 MiB of
        # empty lines would otherwise be 268 million strings
        n_lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        head = [x.removesuffix("\r") for x in text.split("\n", cls.HEAD_LINES)[:min(n_lines, cls.HEAD_LINES)]]
        self.what, self.n_lines = what, n_lines
        self.head = tuple((line[:cls.LINE_CHARS], hash(line)) for line in head)
        return self

    def first_difference(self, ref: "OutputDigest", arm: str, ref_arm: str) -> str:
        """``stdout line 12: vm-unlocked 'x', native 'y'`` (``<missing>`` past a run's last line), or
        what can be said when the first :data:`HEAD_LINES` lines agree; "" for equal digests."""
        if str(self) == str(ref):
            return ""
        for i, (mine, theirs) in enumerate(zip(self.head, ref.head)):
            if mine[1] != theirs[1]:
                return f"{self.what} line {i + 1}: {arm} {mine[0]!r}, {ref_arm} {theirs[0]!r}"
        n = min(len(self.head), len(ref.head))
        if self.n_lines != ref.n_lines and n < self.HEAD_LINES:
            longer, extra = (self, arm) if self.n_lines > ref.n_lines else (ref, ref_arm)
            return f"{self.what} line {n + 1}: {extra} {longer.head[n][0]!r}, " \
                   f"{ref_arm if extra == arm else arm} <missing>"
        return f"{self.what}: the first {n} lines agree; the bytes differ after them (or in line endings)"


@dataclass
class Workload:
    """What each arm run executes, and how its output becomes records (the workload adapter).

    Attributes:
        kind: "llama-bench" (a command printing llama-bench JSON), "builtin", "command"
            (``--metric``), "ncnn" or "torch-sdpa".
        argv: the command.
        env: variables every arm's process gets (device selection, shader cache).
        binary: the workload binary hashed into metadata (None when unknown).
        model: the model file hashed into metadata (None when unknown).
        check_output: compare each arm's output (token ids, an output hash) with the reference arm.
        versions: tool versions to record.
        control: set on a control workload (``--control NAME=CMD``): its name; its records'
            tests are ``NAME ... (control)`` and its files ``<arm>+NAME-<run>`` (:meth:`label`).
        controls: control workloads run in every round under every arm, expected not to change.
        log_level: the built-in llama.cpp worker's ``--log-level``, recorded in metadata.json;
            None for other workloads.
        api: the GPU API whose answers the workload's path goes through (a backend name,
            :func:`capshim.backends.get`), when the workload knows it; None for a command.
    """

    kind: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    binary: Path | None = None
    model: Path | None = None
    check_output: bool = False
    versions: dict[str, str] = field(default_factory=dict)
    control: str | None = None
    controls: list["Workload"] = field(default_factory=list)
    log_level: str | None = None
    api: str | None = None

    #: What ``--check-output`` compares, and the verb for "not equal" (the arm's ``output_check``).
    output_noun: tuple[str, str] = ("output", "differs")

    @property
    def metric(self) -> metrics.Metric:
        """What a run yields (unit, direction)."""
        raise NotImplementedError

    def metric_tests(self) -> dict[str, metrics.Metric]:
        """``{test: Metric}`` of the tests whose metric is not llama-bench tok/s."""
        return {}

    def label(self, arm: str) -> str:
        """The name of this workload's runs under ``arm`` in the bundle: the arm, or ``<arm>+<control>``.

        Run N's files are ``raw/LABEL-N.json`` (``.txt`` when stdout is not JSON), ``raw/LABEL-N.stderr`` and
        ``status/LABEL-N.jsonl``
        (:func:`capshim.contracts.names.run_stem`): ``+`` is in no name, so arm ``a.c`` and arm
        ``a``'s control ``c`` never share a file.
        """
        return names.run_label(arm, self.control)

    def metadata(self) -> dict:
        """Extra keys of metadata.json's ``workload`` entry (none here)."""
        return {}

    def before_run(self) -> None:
        """Called before each run's process starts (nothing to prepare here)."""

    def same_output(self, a, b) -> bool:
        """Whether two runs' output fingerprints agree."""
        return a == b

    def difference(self, a, b, arm: str, ref: str) -> str:
        """Where output fingerprint ``a`` (a run of ``arm``) first differs from ``b`` (of the reference
        arm ``ref``), for the arm's ``output_check``; "" when that cannot be said.

        Token-id lists name the first differing position; an :class:`OutputDigest` (a command's stdout
        or ``--output-file``) the first differing line, as the two runs wrote it (cut to
        :data:`OutputDigest.LINE_CHARS` characters).
        """
        if isinstance(a, list) and isinstance(b, list):
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            if i < min(len(a), len(b)):
                return f"first at token {i + 1}: {arm} {a[i]!r}, {ref} {b[i]!r}"
            return f"{arm} generated {len(a)} tokens, {ref} {len(b)}"
        if isinstance(a, OutputDigest) and isinstance(b, OutputDigest):
            return a.first_difference(b, arm, ref)
        if isinstance(a, dict) and isinstance(b, dict) and "values" in a and "values" in b:  # numeric output
            va, vb = a["values"], b["values"]
            if len(va) != len(vb):
                return f"{arm} gave {len(va)} values, {ref} {len(vb)}"
            if a.get("atol") is not None:
                i, worst = max(enumerate(abs(x - y) for x, y in zip(va, vb)), key=lambda p: p[1], default=(0, 0.0))
                return (f"largest absolute difference {worst:.3g} at value {i + 1}: {arm} {va[i]!r}, {ref} {vb[i]!r} "
                        f"(tolerance {a['atol']:g})") if va else ""
            den = math.sqrt(sum(y * y for y in vb))
            dist = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb))) / den if den else math.inf
            return f"relative L2 distance {dist:.3g} (tolerance {a.get('rtol', 'the default')})"
        return ""

    def parse(self, stdout: str, source: str, arm: str, run: int, *, stderr: str = "",
              seconds: float = 0.0) -> tuple[list[dict], object]:
        """One run's output -> (analysis records, output fingerprint or None).

        Records are ``{"arm", "run", "sample", "test", "tok_s"}`` (``tok_s``: the value in the
        metric's unit). ``stderr`` and ``seconds`` (the process's wall-clock time) are for
        workloads whose metric is read there.

        Raises:
            CapshimError: the output is not what the workload prints (names ``source``).
        """
        raise NotImplementedError


@dataclass(frozen=True)
class Kind:
    """One kind of workload.

    Attributes:
        name: the workload's ``kind`` (metadata.json ``workload.kind``); for a built-in workload
            chosen with ``--workload`` also that option's value.
        api: the GPU API its path goes through (a backend name: the device the bench probes), or
            None when the arms' profiles say it.
        defaults: its row kind in :data:`capshim.bench.request.DEFAULTS`.
        selectable: chosen with ``--workload NAME`` (ncnn, torch-sdpa).
        attested: its runs print which device they ran on, so a run that does not is off the
            device (:func:`capshim.bench.attest.device_state` with ``required=True``).
        llama_cpp: llama.cpp runs it (the CPU note speaks of kernels, not code paths).
        problem: ``(what it runs, the option that picks it, what it reports)`` for the flag
            checks' messages (``("its own network", "--network", "ms per inference")``).
        options: the options only this kind takes (``--network``; ``--shape``, ``--block``).
        build: ``build(request, cpu) -> Workload`` for a selectable kind (the plan calls it).
        label: how ``capshim bench --help`` names the kind beside its defaults (the kind whose
            name is its ``defaults`` row owns the row; "" for the others).
    """

    name: str
    api: str | None = None
    defaults: str = "command"
    selectable: bool = False
    attested: bool = False
    llama_cpp: bool = False
    problem: tuple[str, str, str] | None = None
    options: tuple[str, ...] = ()
    build: Callable | None = field(default=None, compare=False)
    label: str = ""
