"""The ``capshim`` command group: one line and an exit code for every CapshimError, exit 4 when
capshim cannot write its own output, and the commands loaded from their modules on first use."""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click

from capshim import __version__
from capshim.cli.suggest import SuggestingGroup
from capshim.contracts import messages, signals
from capshim.errors import EXIT_STORAGE, CapshimError


def _output_failed(exc: OSError) -> int:
    """One line on stderr (if it still takes writes) for a failed write to stdout/stderr.

    A full disk or an I/O error (ENOSPC, EIO, ...) is exit 4, capshim could not
    write its own output; a closed pipe (``capshim profiles | head -0``) is the
    quiet exit 1 click gives EPIPE. Both standard streams are then pointed at
    ``/dev/null`` so the interpreter's final flush cannot fail again.
    """

    code = 1 if exc.errno == errno.EPIPE else EXIT_STORAGE
    if code == EXIT_STORAGE:
        try:
            sys.stderr.write(f"capshim: cannot write the output: {exc.strerror or exc}\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
    for stream in (sys.stdout, sys.stderr):
        _to_devnull(stream)
    return code


def _to_devnull(stream) -> None:
    """Point a standard stream's file descriptor at ``/dev/null``: what it still buffers can be flushed."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _stopped(exc: KeyboardInterrupt):
    """A stop signal ended the command: one line, exit 128+N (:func:`capshim.contracts.signals.exit_code`)."""
    name = getattr(exc, "signal_name", "SIGINT")
    try:
        messages.emit(f"stopped ({name})")
        sys.stderr.flush()
    except OSError:
        _to_devnull(sys.stderr)
    sys.exit(signals.exit_code(name))


#: Every command: name -> "module:attribute". A command's module is imported only when the
#: command runs or its help is shown, so ``capshim run`` does not load the bench's statistics.
COMMANDS = {
    "profiles": "capshim.cli.profiles:profiles_cmd",
    "profile": "capshim.cli.profiles:profile_grp",
    "build": "capshim.cli.shims:build_cmd",
    "run": "capshim.cli.shims:run_cmd",
    "probe": "capshim.cli.shims:probe_cmd",
    "verify": "capshim.cli.shims:verify_cmd",
    "report": "capshim.cli.report:report_cmd",
    "evidence": "capshim.cli.evidence:evidence_grp",
    "bench": "capshim.cli.bench:bench_cmd",
    "ablate": "capshim.cli.studies:ablate_cmd",
    "tune": "capshim.cli.studies:tune_cmd",
    "kernels": "capshim.cli.studies:kernels_cmd",
    "db": "capshim.cli.db:db_grp",
    "launchagent": "capshim.cli.macos:launchagent_grp",
    "host": "capshim.cli.macos:host_cmd",
    "man": "capshim.cli.man:man_cmd",
}


class _Group(SuggestingGroup):
    """A click group that turns CapshimError into one line and its exit code.

    Its commands are loaded from :data:`COMMANDS` on first use (click's lazy
    subcommand pattern).

    Its ``main`` (the ``capshim`` entry point) holds :func:`capshim.contracts.signals.ends_on_signal`
    around every command (a stop signal ends it within seconds, exit 128+N, one line), and turns a
    failed write to
    stdout or stderr (``capshim profiles > /dev/full``, a closed pipe) into one
    line and an exit code instead of a traceback (:func:`_output_failed`).
    """

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx, name):
        if name in COMMANDS and name not in self.commands:
            module, attr = COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def main(self, *args, **kwargs):
        try:
            try:
                with signals.ends_on_signal():  # every command: a stop signal ends it within seconds
                    return super().main(*args, **kwargs)
            finally:  # buffered output fails here, not in the interpreter's exit flush
                for stream in (sys.stdout, sys.stderr):
                    if stream is not None:
                        stream.flush()
        except OSError as exc:
            sys.exit(_output_failed(exc))

    def make_context(self, *args, **kwargs):
        try:  # a signal while the options are parsed: the same exit as in a command, not click's "Aborted!"
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt as exc:
            _stopped(exc)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # a stop signal (signals.ends_on_signal): 128+N, no traceback
            _stopped(exc)
        except CapshimError as exc:
            try:
                messages.emit(str(exc))  # wrapped to the terminal, never mid-word
                sys.stderr.flush()  # a buffered stderr (no PYTHONUNBUFFERED) fails here, not at exit (4)
            except OSError:  # stderr is full or closed: the exit code still says what failed
                _to_devnull(sys.stderr)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="capshim")
def main():
    """Change, for one process only, the GPU capability answers it sees, and
    measure what that does.

    \b
    Profiles:  capshim profiles | capshim profile show NAME
               capshim profile check FILE
    Shims:     capshim build | capshim run --profile P [--simulate P] -- CMD
    Answers:   capshim probe --api vulkan --compare --simulate vulkan-paravirt
    """
