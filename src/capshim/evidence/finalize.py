"""The end of a bench: the steps the bench hands over, run isolated, then the seal.

Storage does not make the summary or the report: the bench (the runner, via
:func:`capshim.bench.summarize.steps`) hands :meth:`capshim.evidence.Bundle.finalize`
a list of :class:`Step` s. This module runs them so that the bundle is sealed
whatever they do:

- a step that raises is recorded as ``{"step", "error"}`` under
  ``"finalize_failures"`` (metadata.json and summary.json) and in report.md,
  and the next step runs;
- a slow step runs under the seal guard (:class:`capshim.contracts.signals.SealGuard`):
  a second stop signal, or the end of :data:`~capshim.contracts.signals.SEAL_WAIT_S`
  after the first, interrupts it (recorded as ``skipped: interrupted by SIG...``);
- summary.json, metadata.json and SHA256SUMS are always written, last the seal.

A full disk (:class:`~capshim.paths.StorageError`) while writing an optional
file (a slow step: the report, the chart) is recorded like any failed step and
the seal is still written (exit 5); while writing a required file (summary.json,
results.csv, metadata.json, SHA256SUMS) it stops finalize with exit 4 and no
partial file.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from capshim import paths
from capshim.contracts.signals import SealGuard, StepInterrupted
from capshim.evidence.files import finite_or_null, strict_json, utc_now
from capshim.paths import StorageError
from capshim.contracts import messages

__all__ = ["Step", "SUMMARY", "REPORT", "CHART", "run"]

SUMMARY = "summary.json"
REPORT = "report.md"
CHART = "chart.png"


class Step(NamedTuple):
    """One finalize step the bench hands to the bundle.

    Attributes:
        name: how a failure is recorded in ``finalize_failures`` (``"analysis"``, ``"chart"``).
        file: the bundle file it makes. ``"summary.json"``: ``make()`` returns the summary
            dict; these steps are tried in order until one returns it (none runs when the
            caller already has a summary). Any other file: ``make(summary)`` returns its
            bytes (or str, written as UTF-8), or None for no file. ``report.md`` is written
            last, with the bundle's notes added (interrupted, chart, failures).
        make: the callable (see ``file``).
        slow: True for an optional step a stop signal may cut short (report, chart); False
            for what is never skipped (the analysis that makes summary.json, results.csv).
    """

    name: str
    file: str
    make: Callable[..., Any]
    slow: bool = True


class _Run:
    """One finalize: the guard, the failures so far."""

    def __init__(self, guard: SealGuard):
        self.guard = guard
        self.failures: list[dict] = []
        self.cut_short = False

    def step(self, name: str, fn: Callable[[], Any], slow: bool = True):
        """``fn()``, or None when it raised or was interrupted (recorded in :attr:`failures`)."""
        try:
            if not slow:
                return fn()
            with self.guard.abortable():
                return fn()
        except StepInterrupted as stop:
            self.cut_short = True
            self.failures.append({"step": name, "error": f"skipped: interrupted by {stop.signal_name}"})
            messages.emit(f"finalize: {name} skipped ({stop.signal_name}); the data are still sealed")
            return None
        except StorageError as exc:
            if not slow:  # a required file: the bundle cannot be sealed whole (exit 4)
                raise
            # an optional file (report, chart) on a full disk: nothing partial is left (atomic
            # writes), the failure is recorded, and the small required files and the seal follow
            self.failures.append({"step": name, "error": f"skipped: {exc}"[:2000]})
            messages.emit(f"finalize: {name} skipped ({exc}); the data are still sealed")
            return None
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - isolated on purpose: the bundle must still be sealed
            self.failures.append({"step": name, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            messages.emit(f"finalize: {name} failed ({type(exc).__name__}: {exc}); "
                          "recorded in the bundle, the data are still sealed")
            return None

    def summary(self, steps: list[Step]) -> dict:
        """The first summary a summary step returns; ``{}`` when none does.

        Once a step is interrupted by a signal, the later slow ones are not tried.
        """
        for s in steps:
            if self.cut_short and s.slow:  # a signal stopped one: the other slow ones are not tried
                continue
            made = self.step(s.name, s.make, s.slow)
            if isinstance(made, dict):
                return made
            if made is not None:
                self.failures.append({"step": s.name, "error": f"returned {type(made).__name__}, not a summary"})
        return {}

    def write(self, root, s: Step, summary: dict):
        """Run a file step and write its file (atomically: a step cut short leaves no part of it).

        Returns:
            The text for report.md (written last, with the bundle's notes), else None.
        """
        def make_and_write():
            data = s.make(summary)
            if data is None:
                return None
            if s.file == REPORT:
                return data if isinstance(data, str) else bytes(data).decode("utf-8", errors="replace")
            paths.atomic_write(root / s.file, data.encode("utf-8") if isinstance(data, str) else bytes(data))
            return None

        return self.step(s.name, make_and_write, s.slow)


def _report_text(made: str | None, title: str | None, interrupted: bool, has_chart: bool,
                 failures: list[dict]) -> str:
    """report.md: the report step's text (or a note that it failed) and the bundle's own notes."""
    heading = title or "capshim bench"
    md = made if made is not None else (f"# {heading}\n\nThe report could not be rendered; "
                                        "see finalize_failures in metadata.json.\n")
    if interrupted:
        md += "\n**Interrupted:** this bundle holds only the runs that finished.\n"
    if has_chart:
        md += "\n![chart](chart.png)\n"
    if failures:
        md += "\n**Finalize failures** (the data above are complete and checksummed):\n\n" + "".join(
            f"- {f['step']}: {f['error']}\n" for f in failures)
    return md


def run(bundle, steps: list[Step], summary: dict | None, guard: SealGuard, *, interrupted: bool,
        metadata_update: dict | None, title: str | None) -> dict:
    """Finalize ``bundle`` (a :class:`capshim.evidence.Bundle`) under ``guard``; returns the summary.

    Raises:
        StorageError: the disk is full (exit 4). OSError: another write error of the data files.
    """
    fin = _Run(guard)
    if summary is None:
        summary = fin.summary([s for s in steps if s.file == SUMMARY])
    summary["interrupted"] = bool(interrupted)
    if metadata_update:
        bundle.metadata.update(metadata_update)
    bundle.metadata["interrupted"] = bool(interrupted)
    bundle.metadata["finished_utc"] = utc_now()
    data = fin.step(SUMMARY, lambda: strict_json(summary), slow=False)
    paths.atomic_write(bundle.root / SUMMARY, data if data is not None else strict_json(finite_or_null(summary)))
    md = None
    for s in steps:
        if s.file == SUMMARY:
            continue
        text = fin.write(bundle.root, s, summary)
        if s.file == REPORT:
            md = text
    failures = fin.failures
    if failures:
        summary["finalize_failures"] = failures
        bundle.metadata["finalize_failures"] = failures
        paths.atomic_write(bundle.root / SUMMARY, strict_json(finite_or_null(summary)))
    has_chart = (bundle.root / CHART).is_file()
    paths.atomic_write(bundle.root / REPORT, _report_text(md, title, interrupted, has_chart, failures).encode())
    bundle.write_metadata()
    bundle.write_sums()
    return summary
