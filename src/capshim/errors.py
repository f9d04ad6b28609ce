"""Errors with the exit codes of docs/contracts.md ("Exit codes").

Exit codes: 0 success; 1 the workload failed; 2 bad usage or an invalid
profile; 3 ``--strict`` and a shim stayed inert (or an answer beyond the device, or
above a Metal host capture: ``profile check --host``); 4 capshim could not write its
own files (a full disk, an I/O error: nothing partial is left behind); 5 a
bench wrote and sealed its bundle but a finalize step (report, chart, host
baseline) failed, recorded in the bundle, or the sealed bundle does not verify.
A stop by signal N is 128+N (:func:`capshim.contracts.signals.exit_code`).

These names are the one spelling of the numbers: no command writes an exit code
as a digit (tests/test_layers.py checks ``capshim.cli``).
"""

EXIT_OK = 0
#: The workload failed: a run crashed, timed out or could not start; a check or comparison failed.
EXIT_WORKLOAD = 1
#: Bad usage, an invalid profile, an input of the wrong shape.
EXIT_USAGE = 2
#: ``--strict`` and a shim stayed inert or invalid (or an arm off the probed device, an answer
#: beyond the device or a Metal host capture).
EXIT_INERT = 3
#: capshim could not write its own files.
EXIT_STORAGE = 4
#: A sealed bundle whose finalize step failed (recorded in it), or whose seal does not verify.
EXIT_FINALIZE = 5


class CapshimError(Exception):
    """An error the command line reports as one line and an exit code.

    Attributes:
        exit_code: the process exit code to use (see the module constants).
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(CapshimError):
    """Bad usage: a flag, file or value the user gave is wrong (exit 2)."""


class BuildError(CapshimError):
    """A native shim could not be built (exit 2): names the compiler command."""
