"""The llama-bench command adapter: a command printing llama-bench JSON (tok/s, higher is better).

Used for ``capshim bench -- llama-bench ...`` and for the built-in llama.cpp
worker (:mod:`capshim.bench.workloads.builtin`), which prints the same rows.
The format itself is parsed by :mod:`capshim.bench.llamabench`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from capshim.bench import llamabench, metrics
from capshim.bench.workloads.base import Workload
from capshim.bench.workloads.base import Kind
from capshim.errors import CapshimError


@dataclass
class LlamaBenchWorkload(Workload):
    """A workload whose runs print llama-bench ``-o json``/``jsonl`` rows; see :class:`Workload`."""

    output_noun: tuple[str, str] = ("tokens", "differ")

    @property
    def metric(self) -> metrics.Metric:
        """Tok/s, higher is better (:data:`capshim.bench.metrics.TOK_S`)."""
        return metrics.TOK_S

    def parse(self, stdout: str, source: str, arm: str, run: int, *, stderr: str = "",
              seconds: float = 0.0) -> tuple[list[dict], list[int] | None]:
        """One run's output -> (analysis records, generated token ids or None).

        Raises:
            LlamaBenchError: the output is not llama-bench JSON (names ``source`` and says to give
                ``--metric`` for other programs).
        """
        try:
            rows = llamabench.parse_output(stdout, source)
        except llamabench.LlamaBenchError as exc:
            raise llamabench.LlamaBenchError(f"{exc} (for a program that does not print llama-bench JSON, give "
                                             "--metric wall, json:PATH or regex:PATTERN)") from None
        tokens = None
        for row in rows:
            out_check = row.get("capshim_output")
            if isinstance(out_check, dict) and isinstance(out_check.get("token_ids"), list):
                tokens = out_check["token_ids"]
                break
        records = llamabench.to_records(rows, arm, run)
        if self.control:
            for rec in records:
                rec["test"] = metrics.control_test(self.control, rec["test"])
        return records, tokens


def llama_bench_workload(argv: list[str], check_output: bool = False) -> LlamaBenchWorkload:
    """A user's llama-bench command. For ``llama-bench`` without ``-o``, ``-o json`` is added;
    a ``-m``/``--model`` file is recorded (hashed into metadata.json).

    Raises:
        CapshimError: no command, or the program is not found or not executable.
    """
    if not argv:
        raise CapshimError("no workload command after --")
    exe = shutil.which(argv[0]) if "/" not in argv[0] else argv[0]
    if exe is None or not os.access(exe, os.X_OK) or os.path.isdir(exe):
        raise CapshimError(f"workload '{argv[0]}': not found or not executable"
                           + (" (it is a folder)" if exe and os.path.isdir(exe) else ""))
    argv = list(argv)
    if "llama-bench" in Path(argv[0]).name and "-o" not in argv and "--output" not in argv:
        argv += ["-o", "json"]
    model = None
    for flag in ("-m", "--model"):
        if flag in argv[:-1]:
            cand = Path(argv[argv.index(flag) + 1])
            if cand.is_file():
                model = cand
    return LlamaBenchWorkload("llama-bench", argv, binary=Path(exe).resolve(), model=model,
                              check_output=check_output)


#: A llama-bench command after ``--``: its rows and stderr say which device it ran on.
KIND = Kind("llama-bench", attested=True, llama_cpp=True)
