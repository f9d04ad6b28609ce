"""``capshim evidence verify|seal-study``."""

from __future__ import annotations

from pathlib import Path

import click

from capshim import evidence
from capshim.cli.suggest import Choice, SuggestingGroup
from capshim.errors import EXIT_WORKLOAD, CapshimError
from capshim.evidence import study as seal


@click.group("evidence", cls=SuggestingGroup)
def evidence_grp():
    """Evidence bundles and study folders: verify their checksums, seal an older study folder."""


@evidence_grp.command("verify")
@click.argument("bundle", type=click.Path())
def evidence_verify(bundle):
    """Check every file of BUNDLE against its SHA256SUMS: exit 0 when all match, 1 naming each bad file.

    BUNDLE may be a bench's evidence bundle or a study folder (the --out of
    ablate, tune or kernels, marked by its study.json): then the top seal,
    the study's layout and each nested bundle are checked.
    """


    if not Path(bundle).is_dir():
        raise CapshimError(f"evidence verify {bundle}: not a folder")
    is_study = seal.is_study(bundle)
    problems = seal.verify(bundle) if is_study else evidence.verify(bundle)
    if problems:
        for p in problems:
            click.echo(f"{bundle}: {p}", err=True)
        raise SystemExit(EXIT_WORKLOAD)
    if is_study:
        click.echo(f"ok: {bundle}: every file matches SHA256SUMS, and every nested bundle verifies")
    else:
        click.echo(f"ok: {bundle}: every file matches SHA256SUMS")


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
