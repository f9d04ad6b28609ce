"""Names the store's commands share, without importing the database layer (fast ``--help``)."""

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

#: Default regression threshold, percent (compare) or points of % of host
#: (trend): the target precision of a bench (issue 10 asks for ±2 points).
DEFAULT_THRESHOLD = 2.0

#: The regression rules, one line each, printed under the tables ({t}: the threshold).
COMPARE_RULE = ("B vs A: how many times better B is (median(B)/median(A) when higher is better, "
                "median(A)/median(B) when lower is better); regression: its 95% interval (below 5 processes "
                "its range) entirely more than {t:g}% below 1.00x (improvement: the mirror image)")
TREND_RULE = ("flagged: below --min-pct, or more than {t:g} points below the previous bundle "
              "with its 95% interval (below 5 processes its range) entirely below that value")

#: The verdicts of ``db matrix``, one per shimmed arm and test (:func:`verdict` decides): name ->
#: what it means. T is ``--threshold`` (points of % of host, :data:`DEFAULT_THRESHOLD`); "the
#: interval" is the 95% interval of the arm's % of host, or below 5 processes a side the range of
#: ratios any two processes show (docs/statistics.md).
VERDICTS = {
    "host speed": "the arm's % of host is within T points of the host: its interval lies in [100-T, 100+T] "
                  "or straddles it no lower than 100-T",
    "above host": "faster than the host by more than T points, not noise (interval entirely above 100+T)",
    "below host": "slower than the host by more than T points, not noise (interval entirely below 100-T)",
    "unclear": "the interval reaches below 100-T and above it: not resolved at this precision (more runs)",
    "unreliable": "the bench's A/A arm (stock answers through the app layer) excludes 1.00x in this test: "
                  "the harness's own bias is as large as the effect, so no verdict",
    "no host": "the bundle has no host baseline (no % of host)",
    "no result": "the arm ran but is not a shim result (its state, e.g. failed or inert)",
}

#: The matrix's rule, one line, printed under its table ({t}: the threshold).
MATRIX_RULE = ("verdict of each shimmed arm and test, from its % of host (95% interval; range below 5 "
               "processes) and the bench's A/A arm: host speed = not more than {t:g} points below the host; "
               "below/above host = beyond {t:g} points, not noise; unclear = not resolved; unreliable = "
               "the A/A arm excludes 1.00x")


def verdict(pct: dict | None, aa_clean: bool | None, state_ok: bool = True,
            threshold: float = DEFAULT_THRESHOLD) -> str:
    """The matrix verdict (a key of :data:`VERDICTS`) of one arm and test.

    Args:
        pct: the arm's % of host as summary.json gives it (``{"value", "ci95": [lo, hi] | None,
            "range": [lo, hi] | None}``, percent of the host's speed, oriented so above 100 is
            faster), or None when the bundle has no host baseline.
        aa_clean: whether the bench's A/A arm's interval (or range) holds 1.00x in this test;
            None when the bench has no A/A arm (then it does not decide).
        state_ok: False when the arm's state is not a shim result (``summary.NOT_SHIM_STATES``).
        threshold: T, points of % of host, finite and >= 0.

    With neither an interval nor a range (a single sample) nothing is told apart from noise:
    "unclear" (``db compare`` says "same" then).
    """
    if not state_ok:
        return "no result"
    if aa_clean is False:
        return "unreliable"
    if not pct or pct.get("value") is None:
        return "no host"
    b = pct.get("ci95") or pct.get("range")  # as capshim.summary.bounds (kept light: no import for --help)
    if not b:
        return "unclear"
    lo, hi = b
    if hi < 100 - threshold:
        return "below host"
    if lo > 100 + threshold:
        return "above host"
    if lo >= 100 - threshold:
        return "host speed"
    return "unclear"
