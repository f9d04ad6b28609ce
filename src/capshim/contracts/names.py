"""Names: arms, controls, studies and labels, and the files they become.

One rule for every name capshim writes into a file name or a table row: 1-64
characters, ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a
letter or digit; nothing else (no newline, no ``/``, no ``+``). The whole
string must match (``re.fullmatch``): a trailing newline is refused.

A control's files are named ``ARM+CONTROL-N`` and ``+`` never occurs in a
name, so a control's files can never collide with an arm's (``a.c-N`` is arm
``a.c``; arm ``a``'s control ``c`` is ``a+c-N``).
"""

from __future__ import annotations

import re

from capshim.errors import UsageError

MAX_LEN = 64
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CONTROL_SEP = "+"
_BAD = re.compile(r"[^A-Za-z0-9._-]+")
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Characters a terminal acts on or a reader cannot see: C0, DEL, C1, line separators, bidi overrides."""


def escape(text: str) -> str:
    """Text from outside that is not a name (a device name, an OS string, a profile label) made
    safe to print: each :data:`CONTROL_RE` character written as ``\\xNN``/``\\uNNNN``."""
    return CONTROL_RE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def is_name(value: object) -> bool:
    """Whether ``value`` is a valid name (a str matching :data:`NAME_RE` whole)."""
    return isinstance(value, str) and NAME_RE.fullmatch(value) is not None


def check(value: object, what: str) -> str:
    """Return ``value`` when it is a valid name.

    Args:
        value: the name given.
        what: how to name it in the error, e.g. ``"--arm name"``, ``"control"``.

    Raises:
        UsageError: (exit 2) naming ``what``, the value (escaped) and the rule.
    """
    if not is_name(value):
        raise UsageError(f"{what} {value!r} is not a valid name: 1-{MAX_LEN} characters of letters, digits, "
                         "'.', '_' and '-', starting with a letter or digit")
    return value  # type: ignore[return-value]


def label_for(text: str, taken: set[str] | frozenset[str] = frozenset(), fallback: str = "item") -> str:
    """A valid name made from ``text`` (for example a file's stem), unique among ``taken``.

    Characters outside the rule become ``-``, leading ``.``/``_``/``-`` are
    dropped, the result is cut to fit, and ``-2``, ``-3`` ... are added while
    the name is taken. ``fallback`` is used when nothing of ``text`` is left.
    """
    base = _BAD.sub("-", text).lstrip("._-")[:MAX_LEN] or fallback
    label, n = base, 1
    while label in taken:
        n += 1
        suffix = f"-{n}"
        label = base[:MAX_LEN - len(suffix)] + suffix
    return label


def run_label(arm: str, control: str | None = None) -> str:
    """The label of ``arm``'s runs (``arm``) or of its ``control``'s (``arm+control``) in a bundle."""
    return f"{arm}{CONTROL_SEP}{control}" if control else arm


def is_run_label(text: object) -> bool:
    """Whether ``text`` is a :func:`run_label`: a valid name, or two joined by ``+``."""
    if not isinstance(text, str):
        return False
    arm, sep, control = text.partition(CONTROL_SEP)
    return is_name(arm) and (not sep or is_name(control))


def run_stem(arm: str, n: int, control: str | None = None) -> str:
    """The file stem of run ``n`` of ``arm`` (or of ``arm``'s ``control``) in ``raw/`` and ``status/``.

    ``arm-N`` for an arm's run, ``arm+control-N`` for a control's: distinct for
    any two valid names.
    """
    return f"{run_label(arm, control)}-{n}"


def parse_named_files(value: str, flag: str = "--arm") -> tuple[str, list[str]]:
    """Parse ``NAME=FILE[,FILE...]`` (``report --arm``, ``db add --arm``): a valid name and its files.

    Raises:
        UsageError: (exit 2) naming ``flag`` and the value: no ``=``, no file, or a name
            that is not valid (:func:`check`; a newline in it would make a phantom row).
    """
    name, sep, files = value.partition("=")
    paths = [f.strip() for f in files.split(",") if f.strip()]
    if not sep or not name or not paths:
        raise UsageError(f"{flag} {value!r}: expected NAME=FILE.json[,FILE.json...]")
    return check(name.strip(), f"{flag} name"), paths


#: What a stand-in device's name carries wherever capshim names it (titles, reports, the store, the
#: matrix): a stand-in answers a real device's name (the CUDA stand-in says "NVIDIA H200") but is
#: not that device, and is never grouped with it.
STANDIN_SUFFIX = " (capshim stand-in)"


def device_label(device: dict | None) -> str | None:
    """The name a device is shown and stored under: its ``name``, with :data:`STANDIN_SUFFIX` when
    the probe found a capshim stand-in library answering for it (``device["standin"]`` set, by
    :func:`capshim.backends.cuda.probe`); None for None. A real device (a GPU, lavapipe: a real
    CPU device) is its name alone."""
    if not device:
        return None
    name = str(device.get("name") or "")
    if device.get("standin") and not name.endswith(STANDIN_SUFFIX):
        return name + STANDIN_SUFFIX
    return name
