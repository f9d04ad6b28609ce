"""Numbers from outside: options, profile values, JSON from files and workloads.

- Floats must be finite (``nan`` and ``inf`` are refused: every comparison
  with NaN is false, so a NaN threshold turns any change into "same").
- Where the layer takes an integer, an integer is required: ``24576.0`` and
  ``true`` are refused, as the C parser refuses them.
- Integers have at most :data:`MAX_DIGITS` digits: a 401-digit count is not a
  measurement, and converting it to a float overflows.
"""

from __future__ import annotations

import math

import click

from capshim.errors import UsageError

MAX_DIGITS = 20
"""Digits an integer from outside may have (2**64 has 20)."""

MIN_PROCESSES = 5
"""Processes a side needs for a 95% interval and for any verdict with a direction
(:mod:`capshim.bench.stats`, :mod:`capshim.contracts.verdict`). The coverage simulation
(capshim.bench.coverage, docs/statistics.md) holds 95% from 3 processes under its process
models; 5 leaves room for what it does not model (drift within a bench) and is pyperf's minimum."""

DEFAULT_THRESHOLD = 2.0
"""The change (percent of a ratio, or points of % of host) below which no verdict names a
direction, and the half-width of the band a "same" interval must lie in: the target precision
of a bench (issue 10 asks for +-2 points)."""

AA_BAND_PCT = 5.0
"""An A/A arm (stock answers through the app layer) or a control workload whose interval or
range leaves 1.00x +- this many percent (or excludes 1.00x) means the harness is unreliable here."""


class FiniteFloat(click.FloatRange):
    """A click number type that is never NaN or infinite (seconds, percentages, ratios).

    click's own ``FloatRange`` accepts ``nan`` (every comparison with NaN is
    false) and ``inf`` when there is no upper bound.
    """

    name = "finite float"

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


def finite(value: object, where: str) -> float:
    """``value`` as a finite float: an int (not bool) or float, finite, integers of at most MAX_DIGITS digits.

    Raises:
        UsageError: naming ``where`` and the value.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}: {_show(value)} is not a number")
    if isinstance(value, int) and abs(value) >= 10 ** MAX_DIGITS:
        raise UsageError(f"{where}: an integer of more than {MAX_DIGITS} digits is not a measurement")
    out = float(value)
    if not math.isfinite(out):
        raise UsageError(f"{where}: {_show(value)} is not a finite number")
    return out


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer as the layer takes one: an int, not a bool, not a float
    (``24576.0`` is not; JSON Schema's "integer" type and TOML readers' floats would let it through)."""
    return isinstance(value, int) and not isinstance(value, bool)


def integer(value: object, where: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int: an int (not bool, not a float such as ``24576.0``) within ``[lo, hi]``.

    Raises:
        UsageError: naming ``where``, the value and the range.
    """
    if not is_integer(value):
        raise UsageError(f"{where}: {_show(value)} is not an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise UsageError(f"{where}: {_show(value)} is outside [{lo}, {hi}]")
    return value


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
