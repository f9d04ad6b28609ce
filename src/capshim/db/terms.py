"""Names the store's commands share, without importing the database layer (fast ``--help``)."""

#: Help of every ``--db`` option (the group's and each command's).
DB_HELP = ("Database URL: sqlite:///PATH, a file path (SQLite), or postgresql://USER@HOST/DB "
           "(also postgresql://USER@/DB?host=/socket/dir). [default: $CAPSHIM_DB, else "
           "sqlite:///$XDG_DATA_HOME/capshim/results.sqlite (XDG_DATA_HOME defaults to ~/.local/share)]")

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
}

#: Keys whose value is text that ``--match`` loosens.
TEXT_FILTERS = ("name", "device", "host", "os", "model", "build", "profile")

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
