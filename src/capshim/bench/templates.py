"""The bench's side of process templates: one per run label, started on its first run, with a
fall back to plain launching whenever a template cannot serve.

:func:`capshim.bench.runs.run_one` calls :func:`run_forked` for every run; it returns None
(launch plainly) unless the launcher's mode is ``template`` and the workload's command is
``python -m`` a worker that serves templates (:data:`TEMPLATE_WORKERS`). The template is
started with exactly the run's launch (wrapper, argv, environment: the arm's shim variables)
except its status file, a private one, so no run's status file gets the template's events.
A template that refuses (GPU state before the fork), dies or breaks the protocol is closed
and that label is launched plainly from then on; the run says why in its ``launch`` field.
docs/processes.md describes what a child shares with its template.
"""

from __future__ import annotations

import atexit
from pathlib import Path

from capshim.bench.workloads.template import Template, TemplateError, worker_flags

#: Workers whose ``__main__`` serves as a template (:func:`capshim.bench.workloads.template.serve`).
TEMPLATE_WORKERS = ("capshim.bench.workloads.builtin_worker", "capshim.bench.workloads.torch_sdpa_worker")
#: Seconds a template may take to import before it counts as failed.
READY_TIMEOUT_S = 120.0


class _Failed:
    """A label whose template failed: ``why`` goes into each of its runs' ``launch``."""

    def __init__(self, why: str):
        self.why = why


def _flags(workload) -> list[str] | None:
    for module in TEMPLATE_WORKERS:
        flags = worker_flags(list(workload.argv), module)
        if flags is not None:
            return flags
    return None


def _start(exec_argv: list[str], env: dict[str, str], folder: Path) -> Template:
    folder.mkdir(parents=True, exist_ok=True)
    tenv = {**env, "CAPSHIM_STATUS_FILE": str(folder / "status.jsonl")}
    with open(folder / "template.log", "ab") as log:
        return Template(exec_argv, tenv, log, READY_TIMEOUT_S)


def run_forked(launcher, label: str, workload, exec_argv: list[str], env: dict[str, str], out, err,
               timeout: float, stop, work: Path):
    """Run one run forked from ``label``'s template.

    Args:
        launcher: the bench's :class:`capshim.bench.runs.Launcher` (its ``mode`` and ``templates``).
        out, err: the run's open stdout and stderr files (their descriptors go to the child).
        timeout: seconds before the child's group is killed; ``stop`` as in ``run_one``.
        work: the private work folder (``template-LABEL/`` holds the template's log).

    Returns:
        ``(returncode, timed_out, stop signal name, child pid, "template")``, or None: launch
        this run plainly (mode ``plain``, a workload no template serves, or a failed template,
        which then gets the note in ``launcher.templates``).
    """
    if launcher.mode != "template":
        return None
    flags = _flags(workload)
    if flags is None:
        return None
    tpl = launcher.templates.get(label)
    if isinstance(tpl, _Failed):
        return None
    try:
        if tpl is None or not tpl.alive():
            if tpl is not None:
                tpl.close()
            tpl = launcher.templates[label] = _start(exec_argv, env, work / f"template-{label}")
            if not launcher.templates.get("_atexit"):
                launcher.templates["_atexit"] = True
                atexit.register(close_all, launcher.templates)
        rc, timed_out, why, pid = tpl.run(flags, env, out.fileno(), err.fileno(), timeout, stop)
    except TemplateError as exc:
        if isinstance(tpl, Template):
            tpl.close()
        launcher.templates[label] = _Failed(str(exc))
        return None
    return rc, timed_out, why, pid, "template"


def fallback_note(launcher, label: str) -> str | None:
    """Why ``label`` fell back to plain launching (None: it did not)."""
    tpl = launcher.templates.get(label)
    return tpl.why if isinstance(tpl, _Failed) else None


def pids(launcher) -> list[int]:
    """The pids of the live templates (not contamination: they sleep on their socket)."""
    return [t.proc.pid for t in launcher.templates.values() if isinstance(t, Template)]


def close_all(live: dict) -> None:
    """End every template in ``live`` (label -> Template); failed labels stay recorded."""
    for label, tpl in list(live.items()):
        if isinstance(tpl, Template):
            tpl.close()
            del live[label]
