"""Names the store's commands share, without importing the database layer (fast ``--help``).

The default threshold (percent of a ratio, or points of % of host) is
:data:`capshim.contracts.numbers.DEFAULT_THRESHOLD`, defined once there.
"""

from capshim.contracts.numbers import AA_BAND_PCT, DEFAULT_THRESHOLD, MIN_PROCESSES
from capshim.contracts.verdict import IMPROVEMENT, REGRESSION, RULE, SAME, UNCLEAR, decide, side

#: Help of every ``--db`` option (the group's and each command's).
DB_HELP = ("Database URL: sqlite:///PATH, a file path (SQLite), or postgresql://USER@HOST/DB "
           "(also postgresql://USER@/DB?host=/socket/dir). [default: $CAPSHIM_DB, else "
           "sqlite:///$XDG_DATA_HOME/capshim/results.sqlite (XDG_DATA_HOME defaults to ~/.local/share)]")

#: The environment variable naming the store's allowed-signers file (``db add --signers``'s default):
#: on a fleet, every writer's environment sets it, so the store admits only known signers.
SIGNERS_ENV = "CAPSHIM_DB_SIGNERS"

#: Filters that ``db list``, ``db trend`` and selections take: name -> what it matches. Text is
#: matched whole and case-sensitively unless ``--match`` (:data:`MATCHES`) asks for a prefix or a
#: pattern; ``id`` and ``arm`` are always exact, ``since`` and ``until`` are dates.
FILTERS = {
    "id": "bundle id",
    "name": "bundle folder name (PARENT/NAME for a study's bundle)",
    "device": "device name, e.g. 'NVIDIA H200'",
    "host": "host name",
    "os": "OS string",
    "model": "model type as llama-bench reports it, e.g. 'llama 1B Q4_0'",
    "build": "llama.cpp build number or commit",
    "profile": "a profile or simulated profile of any arm: name or SHA-256",
    "arm": "has an arm of this name",
    "since": "started on or after this date (YYYY-MM-DD or ISO time, UTC)",
    "until": "started on or before this date (YYYY-MM-DD, inclusive, or ISO time, UTC)",
    "signed": "signed: 'yes' for any signature, else by this principal or key (SHA256:...)",
}

#: Keys whose value is text that ``--match`` loosens.
TEXT_FILTERS = ("name", "device", "host", "os", "model", "build", "profile", "signed")

#: How text filters match (``--match``): mode -> what it means.
MATCHES = {
    "exact": "the whole value, case-sensitive (the default)",
    "prefix": "values that start with it, ignoring case",
    "glob": "a shell pattern, ignoring case: * any characters, ? one; nothing else is special",
}


#: The regression rules, one line each, printed under the tables ({t}: the threshold).
COMPARE_RULE = ("B vs A: how many times better B is (median(B)/median(A) when higher is better, "
                "median(A)/median(B) when lower is better). " + RULE)
TREND_RULE = ("flagged: below --min-pct, or a regression from the previous bundle by the one rule (both "
              f"{MIN_PROCESSES}+ processes, neither mostly contaminated, the 95% interval entirely more than "
              "{t:g}% below the previous value); a larger drop the rule calls unclear is noted with why")

#: The verdicts of ``db matrix``, one per shimmed arm and test (:func:`verdict_of` decides): name ->
#: what it means. T is ``--threshold`` (points of % of host, :data:`DEFAULT_THRESHOLD`). The
#: words with a direction follow the one rule (:func:`capshim.contracts.verdict.decide` on % of
#: host against 100): 5 processes a side, neither side mostly contaminated, the 95% interval
#: entirely beyond T (docs/statistics.md).
VERDICTS = {
    "host speed": "the arm's % of host is within T points of the host: its 95% interval lies in [100-T, 100+T]",
    "above host": "faster than the host by more than T points, not noise (interval entirely above 100+T)",
    "below host": "slower than the host by more than T points, not noise (interval entirely below 100-T)",
    "unclear": f"not resolved (why, in the row): fewer than {MIN_PROCESSES} processes a side, a side mostly "
               "contaminated, or the interval crosses 100-T, 100 or 100+T",
    "unreliable": "the bench's A/A arm (stock answers through the app layer) excludes 1.00x or leaves "
                  f"+-{AA_BAND_PCT:g}% in this test: the harness is unreliable here, so no verdict",
    "no host": "the bundle has no host baseline (no % of host)",
    "no result": "the arm ran but is not a shim result (its state, e.g. failed or inert)",
}

#: The matrix's rule, one line, printed under its table ({t}: the threshold).
MATRIX_RULE = ("verdict of each shimmed arm and test, from its % of host by the one rule (both sides "
               f"{MIN_PROCESSES}+ processes, neither mostly contaminated, 95% interval): host speed = within "
               "{t:g} points of the host; below/above host = beyond {t:g} points; unclear = not resolved (why); "
               f"unreliable = the A/A arm excludes 1.00x or leaves +-{AA_BAND_PCT:g}%")

#: The matrix's word for each word of the one rule.
_MATRIX_WORD = {IMPROVEMENT: "above host", REGRESSION: "below host", SAME: "host speed", UNCLEAR: "unclear"}


def verdict_of(pct: dict | None, aa_clean: bool | None, state_ok: bool = True,
               threshold: float = DEFAULT_THRESHOLD, *, processes: tuple[int, int] | None = None,
               runs=None, host_runs=None) -> tuple[str, str | None]:
    """The matrix verdict (a key of :data:`VERDICTS`) of one arm and test, and why when "unclear".

    Args:
        pct: the arm's % of host as summary.json gives it (``{"value", "ci95": [lo, hi] | None,
            "range": [lo, hi] | None, "processes": [n_arm, n_host]}``, percent of the host's speed,
            oriented so above 100 is faster), or None when the bundle has no host baseline.
        aa_clean: whether the bench's A/A arm passes the harness check in this test
            (:func:`capshim.contracts.verdict.harness_check`); None when the bench has no A/A arm.
        state_ok: False when the arm's state is not a shim result (``summary.NOT_SHIM_STATES``).
        threshold: T, points of % of host, finite and >= 0.
        processes: ``(arm, host)`` processes when ``pct`` does not record them (an older summary).
        runs, host_runs: the arm's and the host arm's runs (summary.json), for contamination.
    """
    if not state_ok:
        return "no result", None
    if aa_clean is False:
        return "unreliable", None
    if not pct or pct.get("value") is None:
        return "no host", None
    procs = pct.get("processes") if isinstance(pct.get("processes"), list) else processes
    if not procs:
        return "unclear", "processes not recorded"
    v = decide(pct["value"], pct.get("ci95"), side(procs[1], host_runs, "the host"), side(procs[0], runs, "the arm"),
               threshold, percent=True)
    return _MATRIX_WORD[v.word], v.why or None


def verdict(pct: dict | None, aa_clean: bool | None, state_ok: bool = True,
            threshold: float = DEFAULT_THRESHOLD, **kw) -> str:
    """:func:`verdict_of`'s key only."""
    return verdict_of(pct, aa_clean, state_ok, threshold, **kw)[0]
