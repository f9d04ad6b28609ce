"""Names the store's commands share, without importing the database layer (fast ``--help``)."""

#: Help of every ``--db`` option (the group's and each command's).
DB_HELP = ("Database URL: sqlite:///PATH, a file path (SQLite), or postgresql://USER@HOST/DB "
           "(also postgresql://USER@/DB?host=/socket/dir). [default: $CAPSHIM_DB, else "
           "sqlite:///$XDG_DATA_HOME/capshim/results.sqlite (XDG_DATA_HOME defaults to ~/.local/share)]")

#: Filters that ``db list``, ``db trend`` and selections take: name -> what it matches.
FILTERS = {
    "id": "bundle id (exact)",
    "name": "bundle folder name (substring)",
    "device": "device name (substring, e.g. H200, llvmpipe)",
    "host": "host name (substring)",
    "os": "OS string (substring)",
    "model": "model type as llama-bench reports it (substring, e.g. '1B Q4_0')",
    "build": "llama.cpp build number or commit (substring)",
    "profile": "a profile or simulated profile of any arm: name or SHA-256 prefix",
    "arm": "has an arm of this name (exact)",
    "since": "started on or after this date (YYYY-MM-DD or ISO time, UTC)",
    "until": "started on or before this date (YYYY-MM-DD, inclusive, or ISO time, UTC)",
}

#: Default regression threshold, percent (compare) or points of % of host
#: (trend): the target precision of a bench (issue 10 asks for ±2 points).
DEFAULT_THRESHOLD = 2.0

#: The regression rules, one line each, printed under the tables ({t}: the threshold).
COMPARE_RULE = ("B vs A: how many times better B is (median(B)/median(A) when higher is better, "
                "median(A)/median(B) when lower is better); regression: below 1 - {t:g}% with its 95% "
                "interval entirely below 1.00x (improvement: the mirror image)")
TREND_RULE = ("flagged: below --min-pct, or more than {t:g} points below the previous bundle "
              "with its 95% interval entirely below that value")
