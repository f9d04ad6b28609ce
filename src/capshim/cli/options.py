"""Options and helpers that several commands share, declared once."""

from __future__ import annotations

import click

from capshim import profiles
from capshim.bench import request as bench_request
from capshim.bench.workloads.builtin import MODEL_PRESETS
from capshim.contracts.numbers import FiniteFloat
from capshim.errors import CapshimError
from capshim.studies.defaults import help_text as study_default


def load_profile(ref: str | None, flag: str):
    """The profile ``ref`` (a built-in name or a file) given with ``flag``, or None when not given.

    Raises:
        CapshimError: (exit 2) naming ``flag`` and what is wrong with the profile.
    """
    if ref is None:
        return None
    try:
        return profiles.load(ref)
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None


def builtin_workload_options(f):
    """The built-in workload's options shared by ablate and tune (model, warm-up, test sizes); their
    defaults are the studies' table (capshim.studies.defaults), the same for both."""
    for opt in reversed([
        click.option("--model", metavar="PATH|PRESET",
                     help=f"Built-in workload model: a GGUF file or a preset ({', '.join(MODEL_PRESETS)}) "
                          "[default: tiny]."),
        click.option("--warmup", type=click.IntRange(0, 100), default=None,
                     help=f"Unrecorded warm-up rounds (one process per arm) {study_default('ablate', 'warmup')}."),
        click.option("--n-prompt", "-p", type=click.IntRange(1), default=None,
                     help=f"Prompt tokens {study_default('ablate', 'n_prompt')}."),
        click.option("--n-gen", "-n", type=click.IntRange(1), default=None,
                     help=f"Generated tokens {study_default('ablate', 'n_gen')}."),
    ]):
        f = opt(f)
    return f


def timeout_option(f):
    """``--timeout S``: seconds one run may take (finite, at least 1)."""
    return click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True,
                        help="Seconds one run may take.")(f)


def out_option(kind: str, what: str = "Output folder"):
    """``--out DIR`` for a command that writes a folder (contracts.folders: new or empty, unique by default)."""
    return click.option("--out", type=click.Path(file_okay=False),
                        help=f"{what}, new or empty [default: ./capshim-{kind}-DATE-TIME, -2, -3 ... "
                             "when taken].")


def json_option(what: str = "JSON instead of the table"):
    """``--json``: print ``what`` on stdout for a program to read."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what}.")


def wide_option(f):
    """``--wide``: the full table, however wide (capshim.export.terminal.width says the rule)."""
    return click.option("--wide", is_flag=True,
                        help="Print the full table, however wide, instead of fitting it to the terminal "
                             "($COLUMNS, or 80 columns when not a terminal).")(f)
