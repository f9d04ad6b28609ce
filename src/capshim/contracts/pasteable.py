"""Commands capshim prints for a user to paste: quoted so they run as printed.

Every suggested command ("check it: capshim evidence verify B", "re-run with
...", a report's "made with" line) is built here with :func:`shlex.join`, so a
path holding a space, a quote or a ``$`` comes back, through a POSIX shell (or
:func:`shlex.split`), as the one argument it was; and a message that holds one never wraps inside it
(:func:`capshim.contracts.messages.keep_whole`): pasting its line runs it.
"""

from __future__ import annotations

import os
import shlex

from capshim.contracts import messages

__all__ = ["command", "arg"]


def arg(value: str | os.PathLike) -> str:
    """One argument quoted for a POSIX shell (:func:`shlex.quote`): ``a b`` -> ``'a b'``."""
    return shlex.quote(os.fspath(value))


def command(*argv: str | os.PathLike) -> str:
    """A command line to print for pasting: each argument quoted only when it needs it.

    ``command("capshim", "evidence", "verify", "my bundle")`` -> ``capshim evidence verify 'my bundle'``.
    A placeholder the user fills in (``KEY``, ``FILE``) is passed like any other word.
    """
    return messages.keep_whole(shlex.join(os.fspath(a) for a in argv))
