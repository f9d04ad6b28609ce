"""Man pages made from the CLI definitions (``capshim man``) and shell completion (click's), the
small things of issue 19: neither existed in the docs, and the pages must never drift from --help."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from capshim.cli import app
from capshim.cli.man import pages
from capshim.cli.suggest import option_names
from capshim.errors import UsageError
from tests.conftest import REPO, run_capshim


def _walk(cmd: click.Command, path: str, parent=None):
    ctx = click.Context(cmd, info_name=path.rsplit(" ", 1)[-1], parent=parent)
    yield ctx.command_path, cmd
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            yield from _walk(cmd.get_command(ctx, name), name, ctx)


def test_every_command_has_a_page_with_every_option():
    got = dict(pages(app.main))
    commands = dict(_walk(app.main, "capshim"))
    assert set(got) == set(commands) and {"capshim", "capshim bench", "capshim db list", "capshim man"} <= set(got)
    assert set(app.COMMANDS) <= {p.split()[1] for p in got if p != "capshim"}
    for path, cmd in commands.items():
        text = got[path]
        assert text.startswith(f'.TH "{path.upper()}" "1" ') and '"0.' in text.splitlines()[0]
        for opt in option_names(cmd):
            if opt.startswith("--") and opt != "--help":
                assert opt.replace("-", "\\-") in text, (path, opt)
    assert "\\fBbench\\fP" in got["capshim"]  # the top page lists the lazily loaded commands


def test_examples_keep_their_lines_and_pages_are_valid_troff(tmp_path):
    text = dict(pages(app.main))["capshim bench"]
    assert ".nf\nExamples:\n  capshim bench\n" in text and "\b" not in text
    if shutil.which("groff") is None:
        pytest.fail("groff is not installed: the troff check needs it (./setup.sh --dev installs groff-base)")
    r = CliRunner().invoke(app.main, ["man", "--out", str(tmp_path / "man")])
    assert r.exit_code == 0, r.output
    files = sorted(tmp_path.joinpath("man").glob("*.1"))
    assert len(files) == len(dict(pages(app.main))) and (tmp_path / "man" / "capshim-db-list.1").is_file()
    for f in files:
        g = subprocess.run(["groff", "-man", "-Tutf8", "-z", "-ww", str(f)], capture_output=True, text=True)
        assert g.returncode == 0 and g.stderr == "", (f.name, g.stderr)


def test_man_prints_one_page_and_suggests_for_a_misspelt_command():
    r = run_capshim("man", "db", "list", timeout=120)
    assert r.returncode == 0 and r.stdout.startswith('.TH "CAPSHIM DB LIST"') and "\\-\\-device" in r.stdout
    r = run_capshim("man", "db", "lst", timeout=120)
    assert r.returncode == 2 and "no such command (did you mean 'db list'?)" in r.stderr
    r = run_capshim("man", "bench", "--out", "x", timeout=120)
    assert r.returncode == 2 and "not both" in r.stderr


def test_without_click_man_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "click_man.man", None)
    with pytest.raises(UsageError, match=r"pip install 'capshim\[man\]'"):
        next(pages(app.main))


def test_shell_completion_completes_lazy_commands_and_choices():
    def complete(words: str, cword: int) -> str:  # as the installed `capshim` script runs (its name decides the variable)
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COMP_WORDS": words, "COMP_CWORD": str(cword),
               "_CAPSHIM_COMPLETE": "bash_complete"}
        r = subprocess.run([sys.executable, "-c", "from capshim.cli import main; main(prog_name='capshim')"],
                           env=env, capture_output=True, text=True, timeout=120)
        return r.stdout

    assert complete("capshim be", 1).split() == ["plain,bench"]
    assert "plain,list" in complete("capshim db l", 2).split()
    assert complete("capshim report --format ", 3).split() == ["plain,md", "plain,html", "plain,csv"]


def test_completion_and_man_pages_are_documented():
    readme = (REPO / "README.md").read_text()
    assert "_CAPSHIM_COMPLETE=bash_source capshim" in readme and "capshim man" in readme
    cli_doc = (REPO / "docs" / "cli.md").read_text()
    for needle in ("_CAPSHIM_COMPLETE=bash_source", "_CAPSHIM_COMPLETE=zsh_source", "capshim man --out"):
        assert needle in cli_doc
