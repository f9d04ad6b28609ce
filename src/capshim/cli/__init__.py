"""The ``capshim`` command line (click): parse options, call the modules, print.

Logic lives in the modules; each command lives in the module of its area
(:data:`capshim.cli.app.COMMANDS` lists them) and is loaded on first use.
Options several commands share are declared once in :mod:`capshim.cli.options`.
Nothing outside this package imports it. Exit codes: :mod:`capshim.errors`.
"""

from capshim.cli.app import main

__all__ = ["main"]
