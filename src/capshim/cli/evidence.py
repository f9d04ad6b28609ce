"""``capshim evidence verify|seal-study|readme``."""

from __future__ import annotations

from pathlib import Path

import click

from capshim.contracts import folders as folders_rule
from capshim.contracts.pasteable import command as pasteable
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
@click.option("--signers", type=click.Path(), default=None,
              help="An allowed-signers file (git's gpg.ssh.allowedSignersFile format): exit 1 unless an "
                   "allowed signer signed every file as it is now.")
def evidence_verify(bundle, signers):
    """Check every file of BUNDLE against its SHA256SUMS, and its signatures: exit 0, or 1 naming each problem.

    BUNDLE may be a bench's evidence bundle or a study folder (the --out of
    ablate, tune, kernels or cuda-clients, marked by its study.json): then the
    top seal, the study's layout and each nested bundle are checked. A
    README.md at the top of a sealed folder is its documentation, outside the
    seal: named as "not sealed", refused only as a link, special file or over
    256 KiB.

    The first line says "sealed, not signed", "signed by KEY (not checked
    against a signer list)" or, with --signers, "signed by PRINCIPAL (KEY)".
    Every signature (attestations.intoto.jsonl, written by capshim evidence
    sign) must check and cover every file as it is now; with --signers, at
    least one must be by a signer the file allows.
    """

    from capshim.evidence import signing
    from capshim.evidence.files import ATTESTATION_FILE

    if not Path(bundle).is_dir():
        raise CapshimError(f"evidence verify {bundle}: not a folder")
    is_study = seal.is_study(bundle)
    problems = seal.verify(bundle) if is_study else evidence.verify(bundle)
    if problems:
        for p in problems:
            messages.emit(f"{bundle}: {p}", prefix="")
        raise SystemExit(EXIT_WORKLOAD)
    try:
        checks = signing.check(bundle, signers)
    except signing.SigningError as exc:
        raise CapshimError(f"{bundle}: {exc}", exc.exit_code) from None
    bad = [c for c in checks if c.problem]
    for c in bad:
        messages.emit(f"{bundle}: {ATTESTATION_FILE} line {c.line}: {c.problem}", prefix="")
    if bad:
        raise SystemExit(EXIT_WORKLOAD)
    allowed = [c for c in checks if c.principal]
    if signers is not None and not checks:
        messages.emit(f"{bundle}: sealed, not signed (--signers {signers} asks for a signature by an allowed "
                      f"signer: {pasteable('capshim', 'evidence', 'sign', bundle, '--key', 'KEY')})", prefix="")
        raise SystemExit(EXIT_WORKLOAD)
    if signers is not None and not allowed:
        keys = ", ".join(c.who() for c in checks)
        messages.emit(f"{bundle}: signed by {keys}, which --signers {signers} does not allow", prefix="")
        raise SystemExit(EXIT_WORKLOAD)
    nested_bundles = is_study and (seal.read_study(bundle) or {}).get("bundles")
    what = "every file matches SHA256SUMS" + (", and every nested bundle verifies" if nested_bundles else
                                              " (a study without nested bundles)" if is_study else "")
    if not checks:
        click.echo(messages.wrap_out(f"sealed, not signed: {bundle}: {what}"))
    for c in checks:
        when = f" on {c.signed_utc}" if c.signed_utc else ""
        if signers is None:
            click.echo(messages.wrap_out(f"signed by {c.who()}{when} (not checked against a signer list): "
                                         f"{bundle}: {what}"))
        elif c.principal:
            click.echo(messages.wrap_out(f"signed by {c.who()}{when}, allowed by {signers}: {bundle}: {what}"))
        else:
            click.echo(messages.wrap_out(f"also signed by {c.who()}{when}, not in {signers}"))
    nested = (seal.read_study(bundle) or {}).get("bundles", []) if is_study else []
    for rel in evidence.unsealed_documentation(Path(bundle), nested):
        click.echo(messages.wrap_out(f"not sealed: {rel} (documentation beside the data; verify checks its kind "
                                     "and size only)"))


@evidence_grp.command("sign")
@click.argument("bundle", type=click.Path())
@click.option("--key", required=True, type=click.Path(),
              help="An OpenSSH private key file, or a .pub whose private key ssh-agent holds.")
def evidence_sign(bundle, key):
    """Sign BUNDLE (a sealed bundle or study) with an SSH key: one more line in its attestations.intoto.jsonl.

    The line is a DSSE envelope of an in-toto Statement: every sealed file by
    SHA-256 (SHA256SUMS included) and what the bench or study was (command,
    arms, capshim version, host, device, times). No sealed file changes; a
    bundle can carry several signatures. Refused (exit 1) when BUNDLE does not
    verify or this key already signed it. Check it: capshim evidence verify
    BUNDLE --signers ALLOWED_SIGNERS.
    """

    from capshim.evidence import signing
    from capshim.evidence.files import ATTESTATION_FILE

    c = signing.sign(bundle, key)
    click.echo(messages.wrap_out(f"signed: {Path(bundle) / ATTESTATION_FILE} line {c.line} by {c.who()} "
                                 f"(check it: {pasteable('capshim', 'evidence', 'verify', bundle, '--signers', 'FILE')})"))


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

    folders_rule.refuse_inside_sealed(folder, "evidence seal-study")  # the output rule: a sealed folder stays as sealed
    sums = seal.seal(folder, kind, sealed_after=True)
    click.echo(f"sealed: {sums} (check it: {pasteable('capshim', 'evidence', 'verify', folder)})")


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
