"""Options and helpers that several commands share, declared once."""

from __future__ import annotations

import click

from capshim import backends, profiles
from capshim.profiles import khronos, roles
from capshim.bench import request as bench_request
from capshim.bench.workloads.builtin import MODEL_PRESETS
from capshim.contracts import output
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


def device_stock(device: int = 0):
    """``stock(ref, flag)`` for :func:`capshim.profiles.roles.place_all`: the Vulkan device's stock
    answers, or a CapshimError (exit 2) naming ``flag`` and ``ref`` when the device cannot be probed."""
    def stock(ref: str, flag: str) -> dict:
        be = backends.get("vulkan")
        why = be.unavailable()
        if why:
            raise CapshimError(f"{flag} {ref}: a Khronos profile is split per answer against the device, "
                               f"and the Vulkan device cannot be probed here: {why} (capshim profile import "
                               "--direction lower|raise writes one profile without a device)")
        return be.stock_answers(device)
    return stock


def khronos_parts(ref: str, device: int = 0, flag: str = "profile"):
    """A Khronos Vulkan Profiles file (``FILE.json[#NAME]``) read and split per answer against
    device ``device``'s stock answers (:func:`capshim.profiles.khronos.derive`).

    Returns:
        (reading, lower profile or None, raise profile or None).

    Raises:
        CapshimError: (exit 2) the file is not a valid profiles file, or the device cannot be probed.
    """
    try:
        reading = khronos.read(ref)
        lower, higher = khronos.derive(reading, device_stock(device)(ref, flag))
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None
    return reading, lower, higher


unsupported_summary = roles.unsupported_summary


def load_roles(profile_ref: str | None, simulate_ref: str | None, device: int = 0):
    """``--profile`` and ``--simulate``, either of which may be a Khronos file: the one profile loader
    (:func:`capshim.profiles.roles.place_all`, which the bench's ``--arm`` uses too).

    Returns:
        (profile or None, simulate or None, lines for stderr).

    Raises:
        CapshimError: (exit 2) a bad profile; a split file whose other role is already given.
    """
    slots, lines = roles.place_all({"profile": profile_ref, "simulate": simulate_ref},
                                   {"profile": "--profile", "simulate": "--simulate"}, device_stock(device),
                                   profiles.load)
    return slots["profile"], slots["simulate"], lines


def load_placed(profile_refs, simulate_refs, device: int = 0):
    """``--profile`` and ``--simulate``, each given once or several times, with or without device
    targets (``PROFILE@DEVICE``: :mod:`capshim.profiles.targets`): without targets and at most one
    of each, :func:`load_roles`; else :func:`capshim.profiles.roles.place_targeted`, checked
    against the devices of the profiles' API before anything runs.

    Returns:
        (profile or None, simulate or None, lines for stderr, placements or None).

    Raises:
        CapshimError: (exit 2) one line naming the flag and value: a bad profile, a target that
            names no device, a device named twice, a target on an API with one device by nature
            (Metal), devices that cannot be listed (no driver).
    """
    refs = {"profile": list(profile_refs or ()), "simulate": list(simulate_refs or ())}
    if not roles.is_targeted(refs):
        p, s, lines = load_roles((refs["profile"] or [None])[0], (refs["simulate"] or [None])[0], device)
        return p, s, lines, None
    spell = {"profile": "--profile", "simulate": "--simulate"}
    firsts, placed = roles.place_targeted(refs, spell, profiles.load, backends.target_devices)
    backends.for_profiles(firsts["profile"], firsts["simulate"])
    return firsts["profile"], firsts["simulate"], [], placed


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
    return click.option("--timeout", type=FiniteFloat(1), default=bench_request.TIMEOUT_S, show_default=True, metavar="SECONDS",
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


def write_new(out: str | None, text: str, inputs=(), check_only: bool = False) -> None:
    """``text`` to a new file ``out``, or to stdout when ``out`` is None or "-": how the profile
    commands write (capshim never overwrites a profile). The output rule
    (:mod:`capshim.contracts.output`): never an existing file, a link, a FIFO or device, a file
    inside a sealed folder or one of ``inputs`` (the files the command reads); written whole or
    not at all. ``check_only``: only say whether ``out`` may be written.

    Raises:
        UsageError: (exit 2) the rule refuses ``out``, naming it.
        CapshimError: (exit 4) the write failed (a full disk), naming the file; nothing is left.
    """
    if out is None or out == "-":
        if not check_only:
            click.echo(text, nl=not text.endswith("\n"))
        return
    rule = {"replace_flag": None, "inputs": inputs}
    if check_only:
        output.check_file(out, "-o", **rule)
    else:
        output.write_file(out, text.encode("utf-8"), "-o", **rule)
