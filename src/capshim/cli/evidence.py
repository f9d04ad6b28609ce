"""``capshim evidence verify|seal-study|readme``."""

from __future__ import annotations

from pathlib import Path

import click

from capshim import evidence, folder_readme
from capshim.cli.suggest import Choice, SuggestingGroup
from capshim.errors import EXIT_WORKLOAD, CapshimError
from capshim.evidence import study as seal
from capshim.contracts import messages


@click.group("evidence", cls=SuggestingGroup)
def evidence_grp():
    """Evidence bundles and study folders: verify their checksums, seal an older study folder."""


@evidence_grp.command("verify")
@click.argument("bundle", type=click.Path())
def evidence_verify(bundle):
    """Check every file of BUNDLE against its SHA256SUMS: exit 0 when all match, 1 naming each bad file.

    BUNDLE may be a bench's evidence bundle or a study folder (the --out of
    ablate, tune or kernels, marked by its study.json): then the top seal,
    the study's layout and each nested bundle are checked. A README.md at the
    top of a sealed folder is its documentation, outside the seal: named as
    "not sealed", refused only as a link, special file or over 256 KiB.
    """


    if not Path(bundle).is_dir():
        raise CapshimError(f"evidence verify {bundle}: not a folder")
    is_study = seal.is_study(bundle)
    problems = seal.verify(bundle) if is_study else evidence.verify(bundle)
    if problems:
        for p in problems:
            messages.emit(f"{bundle}: {p}", prefix="")
        raise SystemExit(EXIT_WORKLOAD)
    if is_study and not (seal.read_study(bundle) or {}).get("bundles"):
        click.echo(messages.wrap_out(f"ok: {bundle}: every file matches SHA256SUMS (a study without nested bundles)"))
    elif is_study:
        click.echo(messages.wrap_out(f"ok: {bundle}: every file matches SHA256SUMS, and every nested bundle verifies"))
    else:
        click.echo(messages.wrap_out(f"ok: {bundle}: every file matches SHA256SUMS"))
    nested = (seal.read_study(bundle) or {}).get("bundles", []) if is_study else []
    for rel in evidence.unsealed_documentation(Path(bundle), nested):
        click.echo(messages.wrap_out(f"not sealed: {rel} (documentation beside the data; verify checks its kind "
                                     "and size only)"))


@evidence_grp.command("seal-study")
@click.argument("folder", type=click.Path())
@click.option("--kind", type=Choice(["ablate", "tune", "kernels"]), required=True,
              help="The command that wrote FOLDER.")
def evidence_seal_study(folder, kind):
    """Seal FOLDER, the output of an ablate, tune or kernels run made before capshim sealed studies.

    Writes study.json (with sealed_after: true and the date) and a SHA256SUMS
    over the study's top-level files and each nested bundle's SHA256SUMS.
    Refused when FOLDER is already sealed, holds a link or special file, or a
    nested bundle does not verify. The seal proves the files are unchanged
    from now on, not since the run.
    """

    sums = seal.seal(folder, kind, sealed_after=True)
    click.echo(f"sealed: {sums} (check it: capshim evidence verify {folder})")


@evidence_grp.command("readme")
@click.argument("folders", nargs=-1, required=True, type=click.Path())
@click.option("--check", is_flag=True,
              help="Write nothing: exit 1 naming each FOLDER whose README.md is missing, unwritten or stale.")
def evidence_readme(folders, check):
    """Write README.md in each sealed FOLDER (a bundle or a study): its command, machine, date and table.

    The facts come from the sealed metadata.json / study.json and the table
    from `capshim report BUNDLE --format md`; only the part between the
    "by hand" marks (what the folder shows and does not show) is kept from the
    README already there. The README is documentation outside the seal: the
    folder verifies as before, and verify names it as not sealed. Run it from
    the repository root (commands in the README name the folder as given).
    """

    bad = []
    for f in folders:
        if check:
            bad += folder_readme.stale(Path(f))
        else:
            click.echo(f"wrote {folder_readme.write(Path(f))}")
    for line in bad:
        messages.emit(line, prefix="")
    if bad:
        raise SystemExit(EXIT_WORKLOAD)
    if check:
        click.echo(f"ok: {len(folders)} README.md file(s) are what capshim evidence readme writes now")
