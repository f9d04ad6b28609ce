"""Bounded TOML reading: every TOML text capshim reads goes through :func:`loads`.

``tomllib`` (the standard library's TOML 1.0 parser) decodes the text; the
limits keep what comes out small enough that no later step can be slow or
deep, whatever the file holds:

- ``max_bytes``: the text's size in UTF-8 bytes, checked before parsing;
- ``max_depth``: nesting of tables and arrays below the document (the
  document itself is level 0; ``[capabilities]`` is 1, an array in it 2);
  tomllib parses nested arrays and inline tables recursively, so a deeper
  text stops with a RecursionError inside tomllib, reported the same way;
- ``max_items``: items in one array. jsonschema's ``uniqueItems`` compares
  every pair of an array whose items do not sort (mixed types, tables):
  20,000 items took minutes. Arrays are bounded before any validator sees
  them, so validation stays linear in the file's size;
- ``max_keys``: keys in one table.

One iterative pass checks depth, array lengths and table sizes, so the
checks themselves are linear and never recurse. Each refusal is a
:class:`TomlError` (exit 2) naming the source and the dotted key.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from capshim.errors import UsageError

__all__ = ["Limits", "TomlError", "dotted", "loads"]


@dataclass(frozen=True)
class Limits:
    """What one TOML text may hold.

    Attributes:
        max_bytes: the largest text, in UTF-8 bytes.
        max_depth: the deepest nesting of tables and arrays (the document is 0).
        max_items: the most items in one array.
        max_keys: the most keys in one table (the document included).
    """

    max_bytes: int
    max_depth: int
    max_items: int
    max_keys: int


class TomlError(UsageError):
    """A TOML text capshim refuses (exit 2): not TOML, or beyond its :class:`Limits`.

    Attributes:
        source: the file (or ``builtin:NAME``) the text came from.
        key: the key at fault as :func:`dotted` writes it
            (``capabilities.subgroupSupportedOperations``, ``a[3]`` for an
            array's item), or None for the whole text.
        reason: why, without the source or key.
    """

    def __init__(self, source: str, key: str | None, reason: str):
        self.source, self.key, self.reason = source, key, reason
        where = f"key '{key}': " if key is not None else ""
        super().__init__(f"{source}: {where}{reason}")


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def dotted(path) -> str:
    """A key path as TOML writes it: ``capabilities.shaderFloat16``, array items as ``[3]``, and a
    key that is not a bare key quoted (``"capabilities.x"`` is one key with a dot in it; control
    and other unprintable characters escaped, so the result is safe to print)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = part if _BARE.fullmatch(part) else json.dumps(part, ensure_ascii=not part.isprintable())
        out += f".{name}" if out else name
    return out


def _check(data: dict, source: str, limits: Limits) -> None:
    """Refuse a decoded document beyond ``limits``: one iterative pass, each value visited once."""
    stack: list[tuple[Any, tuple, int]] = [(data, (), 0)]
    while stack:
        value, path, depth = stack.pop()
        if not isinstance(value, (dict, list)):
            continue
        key = dotted(path) or None
        if depth > limits.max_depth:
            raise TomlError(source, key, f"tables or arrays nested deeper than {limits.max_depth} levels")
        if isinstance(value, dict):
            if len(value) > limits.max_keys:
                raise TomlError(source, key, f"a table of {len(value)} keys (at most {limits.max_keys})")
            stack.extend((v, path + (k,), depth + 1) for k, v in value.items())
        else:
            if len(value) > limits.max_items:
                raise TomlError(source, key, f"an array of {len(value)} items (at most {limits.max_items})")
            stack.extend((v, path + (i,), depth + 1) for i, v in enumerate(value))


def loads(text: str, source: str, limits: Limits) -> dict[str, Any]:
    """Parse TOML ``text`` within ``limits``.

    Args:
        text: the TOML text (already decoded from UTF-8).
        source: the file or name to blame in messages.
        limits: what the text may hold.

    Returns:
        The document as tomllib returns it (dict, list, str, int, float,
        bool, datetime values).

    Raises:
        TomlError: larger than ``limits.max_bytes``, not valid TOML (including
            an integer of more than 4300 digits, which Python refuses to
            convert, and a leading byte-order mark, which tomllib refuses), nested deeper than ``limits.max_depth``, an array longer
            than ``limits.max_items`` or a table with more than
            ``limits.max_keys`` keys; the message names ``source`` and the key.
    """
    size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > limits.max_bytes else len(text)
    if size > limits.max_bytes:
        raise TomlError(source, None, f"larger than {limits.max_bytes} bytes")
    if text.startswith("\ufeff"):
        raise TomlError(source, None, "not valid TOML: it starts with a byte-order mark (U+FEFF); "
                                      "save it as UTF-8 without one")
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise TomlError(source, None, f"not valid TOML here: arrays or tables nested too deep "
                                      f"(at most {limits.max_depth} levels)") from None
    except ValueError as exc:  # TOMLDecodeError, or an integer of more than 4300 digits
        raise TomlError(source, None, f"not valid TOML: {exc}") from None
    _check(data, source, limits)
    return data
