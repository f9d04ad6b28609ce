"""Every warning, note and error capshim prints on stderr, formatted in one place.

The rules (issue 28, "Messages that fit"):

- **Wrapped, never mid-word.** A message is wrapped between words
  (:mod:`textwrap`, no word or path split, no break at a hyphen) to
  :func:`width`: the terminal's width when stderr is a terminal, else
  ``$COLUMNS`` when set to a number, else :data:`PIPE_WIDTH` (80). The first
  line starts with ``capshim: KIND: ``; the lines a long message wraps onto are
  indented by :data:`INDENT` so each message reads as one block. A message's own
  line breaks are kept (each of its lines is wrapped by itself).
- ``$CAPSHIM_MESSAGE_WIDTH`` (:data:`WIDTH_VAR`) overrides the width: a number of
  columns, or ``0`` for one line per message (a log read by a program; the test
  suite's existing assertions read messages that way).
- **A printed command is never split.** A command for pasting
  (:func:`capshim.contracts.pasteable.command`, registered with :func:`keep_whole`)
  is one word to the wrapping: it moves whole to a line of its own, so it runs as
  printed when that line is pasted.
- **Long lists summarised.** :func:`summarise` names the first few items and counts
  the rest per kind (``64 extensions: VK_A, VK_B, VK_C and 61 more``);
  ``capshim --verbose`` (:func:`set_verbose`) lists every item.

Values in messages are written in the profiles' notation by the caller (a CUDA
compute capability "7.5", not 75: :func:`capshim.profiles.model.format_answer`).

Imports only the standard library.
"""

from __future__ import annotations

import collections
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence

__all__ = ["PIPE_WIDTH", "MIN_WIDTH", "INDENT", "WIDTH_VAR", "FIRST", "width", "format_message", "emit", "wrap_out",
           "summarise", "set_verbose", "verbose"]

#: Width off a terminal when ``$COLUMNS`` is not set (what a terminal shows: ``| less`` reads the same).
PIPE_WIDTH = 80
#: The narrowest wrap: a smaller terminal or ``$COLUMNS`` is taken as this.
MIN_WIDTH = 40
#: Indentation of the lines a message wraps onto.
INDENT = "  "
#: Overrides the width of messages: columns, or 0 for no wrapping.
WIDTH_VAR = "CAPSHIM_MESSAGE_WIDTH"
#: How many items of a long list a summarised message names.
FIRST = 3

_verbose = False


def set_verbose(on: bool) -> None:
    """``capshim --verbose``: :func:`summarise` lists every item instead of the first few."""
    global _verbose
    _verbose = bool(on)


def verbose() -> bool:
    """Whether ``--verbose`` was given (:func:`set_verbose`)."""
    return _verbose


def _number(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() and len(text) < 6 else None


def width(stream=None) -> int | None:
    """The width messages on ``stream`` (default stderr) are wrapped to; None: not wrapped.

    ``$CAPSHIM_MESSAGE_WIDTH`` first (``0``: None); then the terminal's width when ``stream`` is a
    terminal (:func:`shutil.get_terminal_size` reads ``$COLUMNS`` first); then ``$COLUMNS``; then
    :data:`PIPE_WIDTH`. Never below :data:`MIN_WIDTH`.
    """
    forced = _number(os.environ.get(WIDTH_VAR))
    if forced is not None:
        return None if forced == 0 else max(MIN_WIDTH, forced)
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if tty:
        try:
            cols = _number(os.environ.get("COLUMNS")) or os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            cols = shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
        return max(MIN_WIDTH, cols)
    return max(MIN_WIDTH, _number(os.environ.get("COLUMNS")) or PIPE_WIDTH)


_WHOLE: collections.deque = collections.deque(maxlen=256)
_HELD = "\ue000"  # a private-use character: never in a message capshim writes


def keep_whole(command: str) -> str:
    """Register ``command`` (a line for pasting) so :func:`format_message` never wraps inside it; return it.

    The last 256 commands are remembered (a process prints a few).
    """
    if " " in command and _HELD not in command and command not in _WHOLE:
        _WHOLE.append(command)
    return command


def format_message(text: str, kind: str | None = None, limit: int | None | str = "auto",
                   prefix: str = "capshim: ") -> str:
    """One message as it is printed: ``capshim: KIND: text``, wrapped between words.

    Args:
        text: the message; its own line breaks are kept (each line wrapped by itself; a line that
            starts with spaces keeps them and its wrapped lines are indented under it).
        kind: ``"warning"``, ``"note"``, ``"error"`` or None (no kind word: capshim's errors read
            ``capshim: <what is wrong>``).
        limit: the width (None: not wrapped; ``"auto"``: :func:`width` of stderr).
        prefix: what the first line starts with.

    Returns:
        The lines joined with ``\\n``, without a final newline. A word longer than the width (a
        path) stays whole on a line of its own.
    """
    if limit == "auto":
        limit = width()
    whole = [c for c in _WHOLE if c in str(text)] if limit is not None else []
    if whole:  # a printed command is one word to textwrap: its spaces held as U+E000 while wrapping
        for c in sorted(whole, key=len, reverse=True):
            text = str(text).replace(c, c.replace(" ", _HELD))
        return format_message(text, kind, limit, prefix).replace(_HELD, " ")
    head = prefix + (f"{kind}: " if kind else "")
    out = []
    for n, line in enumerate(str(text).split("\n")):
        first = head if n == 0 else ""
        if limit is None:
            out.append(first + line)
            continue
        lead = line[:len(line) - len(line.lstrip(" "))]
        body = line[len(lead):]
        wrapped = textwrap.wrap(body, width=int(limit), initial_indent=first + lead,
                                subsequent_indent=lead + INDENT, break_long_words=False,
                                break_on_hyphens=False)
        out += wrapped or [first + lead]
    return "\n".join(out)


#: The standard error streams a write failed on, kept so they are not finalised (and flushed
#: again) before the interpreter exits.
_dropped: list = []


def emit(text: str, kind: str | None = None, file=None, prefix: str = "capshim: ") -> None:
    """Print :func:`format_message` of ``text`` on ``file`` (default stderr), wrapped to that
    stream's :func:`width`, and flush it (``prefix``: see :func:`format_message`).

    A message is a note to the person: it never stops capshim nor changes its exit code. With
    stderr closed (``2>&-``: ``sys.stderr`` is None) nothing is written (never to stdout); a write
    that fails (``2>/dev/full``: ENOSPC, EIO, a closed pipe) is dropped, and ``sys.stderr`` is
    replaced by a stream to :data:`os.devnull` so the text still buffered in the failed one is not
    flushed again (the file descriptor 2 is left as it is: the command ``capshim run`` starts gets
    the caller's stderr, whatever it is).
    """
    stream = file if file is not None else sys.stderr
    if stream is None:
        return
    try:
        print(format_message(text, kind, width(stream), prefix), file=stream, flush=True)
    except (OSError, ValueError):  # full, failing or closed: the message is dropped
        _drop(stream)


def _drop(stream) -> None:
    """Stop writing to a standard stream whose write failed: ``sys.stderr``/``sys.stdout`` that is
    ``stream`` becomes a stream to :data:`os.devnull` (the failed one is kept in :data:`_dropped`)."""
    for name in ("stderr", "stdout"):
        if getattr(sys, name) is stream:
            _dropped.append(stream)
            try:
                setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (lives to exit)
            except OSError:
                setattr(sys, name, None)


def wrap_out(text: str) -> str:
    """A line of a command's own output on stdout (no ``capshim:`` prefix), wrapped as messages are
    (:func:`format_message`) to stdout's :func:`width`: ``  same on newer devices: ...`` keeps its
    indent and its wrapped lines sit under it. The caller prints it (a failed write stays its error)."""
    return format_message(text, None, width(sys.stdout), prefix="")


def summarise(items: Sequence[str], noun: str = "", *, kind_of: Callable[[str], str] | None = None,
              first: int = FIRST, all_items: bool | None = None, sep: str = ", ", about: str = "") -> str:
    """A long list as a few words: the first ``first`` items named, the rest counted.

    Args:
        items: the list (in the order to name them).
        noun: what an item is (``"extension"``), for the count: ``64 extensions: ...``; "" for
            no count in front.
        kind_of: the kind of each item (``"capability"``, ``"extension"``): the count is then per
            kind, ``14 capabilities and 64 extensions: ...``.
        first: how many items to name.
        all_items: name every item (default: ``--verbose``, :func:`verbose`).
        sep: between items.
        about: words said of them all, after the count: ``64 extensions (ABOUT): ...``.

    Returns:
        ``"3 extensions: A, B, C"`` (all named when they fit ``first``), or ``"64 extensions: A, B, C
        and 61 more (capshim --verbose lists each)"``; "" for no items.
    """
    items = [str(i) for i in items]
    if not items:
        return ""
    counts: dict[str, int] = {}
    for i in items:
        k = kind_of(i) if kind_of else noun
        counts[k] = counts.get(k, 0) + 1
    head = " and ".join(f"{c} {_plural(k, c)}" for k, c in counts.items() if k)
    head += f" ({about})" if about else ""
    full = _verbose if all_items is None else all_items
    shown = items if full or len(items) <= first else items[:first]
    tail = "" if len(shown) == len(items) else f" and {len(items) - len(shown)} more (capshim --verbose lists each)"
    return (f"{head}: " if head else "") + sep.join(shown) + tail


def _plural(noun: str, count: int) -> str:
    if count == 1 or not noun:
        return noun
    if noun.endswith("y") and not noun.endswith(("ay", "ey", "oy")):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "ch")) else "s")
