"""Options and helpers that several commands share, declared once.

The profiles and the backends are imported in the functions that read them: commands such as
``db list`` import this module for an option and must stay instant (tests/test_import_cost.py).
"""

from __future__ import annotations

import click

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
    from capshim import profiles

    if ref is None:
        return None
    try:
        return profiles.load(ref)
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None


def khronos_parts(ref: str, device: int = 0, flag: str = "profile"):
    """A Khronos Vulkan Profiles file (``FILE.json[#NAME]``) read and split per answer against
    device ``device``'s stock answers (:func:`capshim.profiles.khronos.derive`).

    Returns:
        (reading, lower profile or None, raise profile or None).

    Raises:
        CapshimError: (exit 2) the file is not a valid profiles file, or the device cannot be probed.
    """
    from capshim import backends, profiles
    from capshim.profiles import khronos

    try:
        reading = khronos.read(ref)
        be = backends.get("vulkan")
        why = be.unavailable()
        if why:
            raise CapshimError(f"{flag} {ref}: a Khronos profile is split per answer against the device, "
                               f"and the Vulkan device cannot be probed here: {why} (capshim profile import "
                               "--direction lower|raise writes one profile without a device)")
        lower, higher = khronos.derive(reading, be.stock_answers(device))
    except profiles.ProfileError as exc:
        raise CapshimError(f"{flag}: {exc}") from None
    return reading, lower, higher


def unsupported_summary(reading, shown: int = 3) -> list[str]:
    """Lines for stderr: what a Khronos profile states that the layer does not answer (counted, the
    first ``shown`` named; ``capshim profile show`` lists them all)."""
    lines = [f"{reading.source}: {note}" for note in reading.notes]
    if reading.unsupported:
        names = "; ".join(u.split(":", 1)[0] for u in reading.unsupported[:shown])
        more = f" (+{len(reading.unsupported) - shown} more)" if len(reading.unsupported) > shown else ""
        lines.append(f"{reading.source}: {len(reading.unsupported)} capabilities not answered by capshim "
                     f"(formats, queue families, video, structs without a capshim key): {names}{more}; "
                     f"'capshim profile show {reading.source}' lists each")
    return lines


def load_roles(profile_ref: str | None, simulate_ref: str | None, device: int = 0):
    """``--profile`` and ``--simulate``, either of which may be a Khronos file.

    A Khronos file is split per answer (:func:`khronos_parts`); when it has both parts, its
    lower part takes the device role (``--simulate``) and its raise part the application role
    (``--profile``): one capshim profile has one direction. The lines for stderr say where each went.

    Returns:
        (profile or None, simulate or None, lines for stderr).

    Raises:
        CapshimError: (exit 2) a bad profile; a split file whose other role is already given.
    """
    from capshim.profiles import khronos

    slots = {"--profile": None, "--simulate": None}
    lines = []
    for flag, ref in (("--profile", profile_ref), ("--simulate", simulate_ref)):
        if ref is None or not khronos.is_khronos_ref(ref):
            slots[flag] = slots[flag] or load_profile(ref, flag)
            continue
        reading, lower, higher = khronos_parts(ref, device, flag)
        parts = [p for p in (lower, higher) if p is not None]
        other = "--simulate" if flag == "--profile" else "--profile"
        if len(parts) == 2:
            if (other == "--profile" and profile_ref) or (other == "--simulate" and simulate_ref):
                raise CapshimError(f"{flag} {ref}: is weaker than the device in {len(lower.capabilities)} answers "
                                   f"and stronger in {len(higher.capabilities) + len(higher.extensions)}: it needs "
                                   f"both roles, and {other} is given too (drop {other}, or write one direction "
                                   "with capshim profile import --direction)")
            slots["--simulate"], slots["--profile"] = lower, higher
            lines.append(f"{ref}: {len(lower.capabilities)} answers at or below the device (lower, device role "
                         f"as --simulate), {len(higher.capabilities)} answers and {len(higher.extensions)} "
                         "extensions above it (raise, app role as --profile): one capshim profile has one direction")
        elif parts:
            slots[flag] = parts[0]
            lines.append(f"{ref}: every answer {'at or below' if parts[0].direction == 'lower' else 'above'} the "
                         f"device: one {parts[0].direction} profile")
        else:
            lines.append(f"{ref}: no answer the layer can give on this device")
        lines += unsupported_summary(reading)
    return slots["--profile"], slots["--simulate"], lines


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


def write_new(out: str | None, text: str) -> None:
    """``text`` to a new file ``out`` (an existing one is refused, exit 2), or to stdout when ``out``
    is None or "-": how the profile commands write (capshim never overwrites a profile).

    Raises:
        CapshimError: (exit 2) ``out`` exists or cannot be written, naming it.
    """
    if out is None or out == "-":
        click.echo(text, nl=not text.endswith("\n"))
        return
    try:
        with open(out, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise CapshimError(f"-o {out}: exists; capshim does not overwrite a profile (remove it first)") from None
    except OSError as exc:
        raise CapshimError(f"-o {out}: cannot write: {exc.strerror}") from None
