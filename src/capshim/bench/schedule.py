"""Which arms the next round of a bench runs, and when the rounds stop (issue 31).

Every workload kind (the built-in llama.cpp workload, llama-bench, torch-sdpa, ncnn, a command
with ``--metric``) goes through this one rule; the runner (:mod:`capshim.bench.runner`) asks it
after every recorded round once the first ``repetitions`` rounds, which run every arm, are done:

- every ratio is an arm against the reference (the host arm, else the baseline), so the
  reference takes part in every comparison;
- a comparison is *wide* while its interval's half-width is above the target (or it has no
  interval yet: fewer than :data:`MINIMUM` processes a side);
- the next round runs the arms of the wide comparisons that are below the cap, and the
  reference; an arm whose comparison is within the target gets no more processes (its interval
  stays honest: it is computed from every process both sides ran, the later references too);
- the rounds stop when no comparison is wide (target reached) or no arm of a wide comparison is
  below the cap (cap reached).

A/A arms are arms like the others; a control workload runs in the rounds its arm runs in. The
runner shuffles each round with the bench's seeded generator and records the round's order and
:attr:`Round.reason` in metadata.json (``schedule``, ``schedule_reasons``).

Optional stopping: the rule looks at the intervals after every round and stops when they look
narrow, and the benches that stop early are those whose spread happened to come out small. The
simulation of the whole procedure (:mod:`capshim.bench.sequential`, table in
docs/statistics.md) shows 95% intervals checked that way hold the truth only 93-94% of the time
on the H200's process values; computed (checked and reported) at :data:`LEVEL` they hold it at
least 95% of the time in every process model. A bench with a precision target therefore
computes its intervals at :data:`LEVEL` (summary.json ``method.ci_level``).
"""

from __future__ import annotations

from dataclasses import dataclass

from capshim.contracts.numbers import MIN_PROCESSES

__all__ = ["MINIMUM", "LEVEL", "CAP", "Round", "first_rounds", "next_round"]

#: Processes per arm before the rule may leave an arm out: below it there is no interval at all.
MINIMUM = MIN_PROCESSES
#: The level a bench with a precision target computes its intervals at (checked against the target
#: and reported): the lowest level at which the simulated precision loop covered the truth at
#: least 95% of the time in every model (docs/statistics.md).
LEVEL = 0.97
#: The most processes per arm for ``--precision`` without ``--max-runs`` (5 x ``-r`` when more): the
#: simulated loop needs about 55 a side on average for +-1 point on the H200's pp512 values, and a cap
#: of 60 stops 12% of those benches short of it (docs/statistics.md).
CAP = 60


@dataclass(frozen=True)
class Round:
    """One round's membership: ``arms`` (in the plan's order; the runner shuffles them) and why.

    Attributes:
        arms: the arms the round runs.
        reason: one line for the progress log and metadata.json, e.g.
            ``"widest: vm-unlocked pp512 +-2.41 > 2"``.
    """

    arms: tuple[str, ...]
    reason: str


def first_rounds(arms: list[str], repetitions: int) -> Round:
    """A round of the first ``repetitions``: every arm, so that no arm has all its processes at the end."""
    return Round(tuple(arms), f"every arm (the first {repetitions} rounds)")


def _describe(arm: str, series: str, width: float | None, target: float) -> str:
    return f"{arm} {series} " + ("has no interval yet" if width is None else f"+-{width:.2f} > {target:g}")


def next_round(comparisons: list[tuple[str, str, float | None]], counts: dict[str, int], arms: list[str],
               reference: str | None, target: float, cap: int) -> Round | None:
    """The next round after a precision check, or None when the rounds stop.

    Args:
        comparisons: ``(arm, series, half-width in points or None)`` of every interval the target
            applies to (:func:`capshim.bench.summarize.comparisons`).
        counts: recorded processes per arm so far.
        arms: the bench's arms, in the plan's order.
        reference: the arm every comparison is against (the host arm, else the baseline), or None
            when it was measured elsewhere (a ``--host`` file).
        target: the half-width asked for, in points.
        cap: processes per arm at most.

    Returns:
        A :class:`Round` of the arms of the wide comparisons below ``cap`` and the reference (when
        below ``cap``), in ``arms`` order; None when no comparison is wide or none of their arms is
        below ``cap`` (the caller's precision record says which). Without any comparison (the
        analysis failed or measured nothing) every arm below ``cap``.
    """
    if not comparisons:  # the analysis has no interval to check yet (it failed, or nothing measured)
        left = tuple(a for a in arms if counts.get(a, 0) < cap)
        return Round(left, "no interval to check yet: every arm") if left else None
    wide = [c for c in comparisons if c[2] is None or c[2] > target]
    wanted = {a for a, _, _ in wide if counts.get(a, 0) < cap}
    if not wanted:
        return None
    if reference is not None and counts.get(reference, 0) < cap:
        wanted.add(reference)
    worst = max(wide, key=lambda c: float("inf") if c[2] is None else c[2])
    more = len({a for a, _, _ in wide}) - 1
    reason = "widest: " + _describe(*worst, target) + (f" (and {more} other arm{'s' * (more > 1)})" if more else "")
    return Round(tuple(a for a in arms if a in wanted), reason)
