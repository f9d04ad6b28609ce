"""``capshim man``: man pages generated from the CLI definitions (click-man's page format).

One page per command and subcommand (``capshim.1``, ``capshim-bench.1``,
``capshim-db-list.1``, ...), made from the same click objects ``--help``
shows, so the pages cannot drift from the options. capshim's groups load
their commands lazily (:data:`capshim.cli.app.COMMANDS`), which click-man's
own walker does not see; the walk here goes through ``list_commands`` and
``get_command`` and hands each page to click-man's :class:`ManPage`.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import click

from capshim import __version__
from capshim.contracts import folders, output, pasteable
from capshim.contracts.suggest import did_you_mean
from capshim.errors import EXIT_STORAGE, CapshimError, UsageError

__all__ = ["man_cmd", "pages"]


def _troff(text: str) -> str:
    r"""Help text as man-page body text: a paragraph click keeps as written (after a ``\b`` line) is
    set no-fill (``.nf`` ... ``.fi``) so examples and tables keep their lines; a line troff would read
    as a request (starting with ``.`` or ``'``) is escaped with ``\&``. Blank lines become ``.PP``
    in click-man's page."""
    out, verbatim = [], False
    for ln in inspect.cleandoc(text or "").splitlines():
        if ln.strip() == "\b":
            out.append(".nf")
            verbatim = True
            continue
        if verbatim and not ln.strip():
            out.append(".fi")
            verbatim = False
        out.append(("\\&" + ln) if ln.startswith((".", "'")) else ln)
    return "\n".join(out + ([".fi"] if verbatim else []))


def _page(ctx: click.Context, man_page_class) -> str:
    cmd = ctx.command
    page = man_page_class(ctx.command_path)
    page.version = __version__
    page.short_help = cmd.get_short_help_str(limit=200)
    page.description = _troff(cmd.help or "")
    page.synopsis = " ".join(cmd.collect_usage_pieces(ctx))
    page.options = [rec for p in cmd.get_params(ctx) if isinstance(p, click.Option) and not p.hidden
                    and (rec := p.get_help_record(ctx)) is not None]
    page.options = [(opt, _troff(text)) for opt, text in page.options]
    if isinstance(cmd, click.Group):
        page.commands = [(name, sub.get_short_help_str(limit=200)) for name in cmd.list_commands(ctx)
                         if (sub := cmd.get_command(ctx, name)) is not None and not sub.hidden]
    return str(page)


def pages(cli: click.Command, name: str = "capshim", parent: click.Context | None = None) -> Iterator[tuple[str, str]]:
    """``(command path, man page text)`` for ``cli`` and, recursively, every subcommand it lists; the
    page's file is the path with ``-`` for spaces plus ``.1`` (``capshim db list`` -> ``capshim-db-list.1``).

    Raises:
        UsageError: click-man is not installed (``pip install 'capshim[man]'``).
    """
    try:  # an optional library (the man extra), needed only here
        from click_man.man import ManPage
    except ImportError:
        raise UsageError("capshim man needs click-man: pip install 'capshim[man]' "
                         "(or .venv/bin/pip install click-man)") from None
    ctx = click.Context(cli, info_name=name, parent=parent)
    yield ctx.command_path, _page(ctx, ManPage)
    if isinstance(cli, click.Group):
        for sub_name in cli.list_commands(ctx):
            sub = cli.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                yield from pages(sub, sub_name, ctx)


@click.command("man")
@click.argument("command", nargs=-1)
@click.option("--out", type=click.Path(file_okay=False), metavar="DIR",
              help="Write every page (capshim.1, capshim-bench.1, ...) into DIR (created when missing; "
                   "capshim's own pages there are replaced) instead of printing one.")
@click.pass_context
def man_cmd(ctx, command, out):
    """Man pages made from the CLI definitions (the same text as --help).

    \b
    With no COMMAND, the page of capshim itself; with COMMAND (e.g. bench, db
    list), that command's page, on stdout. With --out DIR, every page.

    \b
    Examples:
      capshim man bench | man -l -
      capshim man --out docs/man && man -l docs/man/capshim-bench.1
    """
    root = ctx.find_root().command
    if out is not None:
        if command:
            raise UsageError("capshim man: give COMMAND or --out DIR, not both")
        folder = Path(out)
        folders.check_out(out)  # not empty, not inside a sealed folder
        if folder.is_symlink():
            raise UsageError(f"--out {out}: is a symbolic link; capshim never writes through a link")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CapshimError(f"--out {out}: cannot create the folder: {exc.strerror or exc}",
                               EXIT_STORAGE) from None
        todo = [(folder / (path.replace(" ", "-") + ".1"), text) for path, text in pages(root)]
        for target, _ in todo:  # every page checked before any is written: all or none
            output.check_file(target, "--out", replace=True)
        written = 0
        for target, text in todo:  # capshim's own pages there are replaced, whole (contracts.output)
            output.write_file(target, (text + "\n").encode("utf-8"), "--out", replace=True)
            written += 1
        read = pasteable.command("man", "-l", folder / "capshim.1")
        click.echo(f"man pages: {written} in {folder}  (read one: {read})", err=True)
        return
    wanted = " ".join(["capshim", *command])
    known = []
    for path, text in pages(root):
        if path == wanted:
            click.echo(text)
            return
        known.append(path.removeprefix("capshim "))
    raise UsageError(f"capshim man {' '.join(command)}: no such command{did_you_mean(' '.join(command), known)}")
