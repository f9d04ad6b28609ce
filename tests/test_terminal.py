"""Terminal output that fits (issue 19): every table capshim prints, at 80, 100 and 200 columns.

Golden files of the commands' real output (report, bench, ablate, tune, db
list/compare/trend) from committed bundles and studies are in
tests/fixtures/golden/terminal/NAME-WIDTH.txt; after an intended change rewrite
them with ``CAPSHIM_UPDATE_GOLDEN=1 pytest tests/test_terminal.py`` and review
the diff. Each output is also checked generically: no line is wider than the
width, and every word and number of the full (``--wide``) table appears whole
in the narrow one (a number split across lines, ``75.`` / ``69``, would be missing).
"""

from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from capshim.cli import bench as cli_bench
from capshim.cli import main
from capshim.cli.app import COMMANDS
from capshim.export import terminal
from capshim.studies import ablate, tune
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "fixtures" / "golden" / "terminal"
EVIDENCE = REPO / "evidence"
WIDTHS = (80, 100, 200)
#: Headers the fitted layout shortens (terminal._SHORT) or replaces (several bundles: one titled
#: layout each); the full table keeps them.
_SHORTENED = {"processes×reps", "bundle"}
#: Bundles stored for the db goldens, in this order (ids 1..4).
DB_BUNDLES = ["lavapipe-default", "lavapipe-default-fresh-clone", "lavapipe-busy-host",
              "lavapipe-default-warmup-round"]


def _tokens(text: str) -> set[str]:
    return set(re.split(r"[\s│┃┏┓┗┛┡┩└┘┌┐├┤┼┬┴━─╇╈┳┻╋]+", text)) - {""}


def _check_fits(text: str, width: int, wide: str) -> None:
    """No line wider than ``width``; every token of the full table whole in ``text``."""
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, f"{len(long)} line(s) wider than {width}: {long[:2]}"
    missing = _tokens(wide) - _tokens(text) - _SHORTENED
    assert not missing, f"split or lost at {width} columns: {sorted(missing)[:10]}"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("CAPSHIM_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} changed; see the module docstring"


def _run(args: list[str], width: int | None, **kw) -> str:
    """The output of ``capshim ARGS`` off a terminal, ``$COLUMNS`` = width (None: --wide)."""
    env = {"COLUMNS": str(width)} if width else {"COLUMNS": "80"}
    res = CliRunner().invoke(main, args + ([] if width else ["--wide"]), env=env, **kw)
    assert res.exit_code == 0, res.output
    return res.stdout


def _all_widths(name: str, args: list[str], replace: dict[str, str] | None = None) -> None:
    outs = {w: _run(args, w) for w in (*WIDTHS, None)}
    for old, new in (replace or {}).items():
        outs = {w: t.replace(old, new) for w, t in outs.items()}
    for w in WIDTHS:
        _check_fits(outs[w], w, outs[None])
        _golden(f"{name}-{w}", outs[w])
    assert len(_tokens(outs[None])) > 20


# --- the commands' tables, golden at 80, 100 and 200 columns -------------------------------

@pytest.mark.parametrize("bundle", ["lavapipe-default", "h200-tinyllama-aa"])
def test_report_golden(bundle):
    _all_widths(f"report-{bundle}", ["report", str(EVIDENCE / bundle)])


def test_report_of_two_bundles_fits():
    args = ["report", str(EVIDENCE / "lavapipe-default"), str(EVIDENCE / "lavapipe-busy-host")]
    wide = _run(args, None)
    for w in WIDTHS:
        _check_fits(_run(args, w), w, wide)


def test_bench_table_golden(monkeypatch):
    """The table ``capshim bench`` prints at the end (the run itself replaced by a committed bundle)."""
    bundle = EVIDENCE / "lavapipe-default"
    summary = json.loads((bundle / "summary.json").read_text())
    result = SimpleNamespace(summary=summary, bundle=bundle, interrupted_by=None, interrupted=None,
                             non_shim_arms=[], failed_runs=0)
    monkeypatch.setattr(cli_bench.plan, "make_plan", lambda req, platform: SimpleNamespace(
        title="capshim bench — llvmpipe (LLVM 15.0.6, 256 bits)",
        device={"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "cpu"}, notes=["(the CPU note)"]))
    monkeypatch.setattr(cli_bench.runner, "run", lambda p: result)
    _all_widths("bench", ["bench"])


def test_ablate_golden(monkeypatch):
    res = json.loads((EVIDENCE / "lavapipe-ablate-default" / "ablation.json").read_text())
    monkeypatch.setattr(ablate, "ablate", lambda *a, **k: res)
    _all_widths("ablate", ["ablate"])


@pytest.mark.parametrize("study", ["lavapipe-tune-default", "h200-tune-llama8b"])
def test_tune_golden(monkeypatch, study):
    res = json.loads((EVIDENCE / study / "tune.json").read_text())
    res.setdefault("outcome", "confirmed")
    monkeypatch.setattr(tune, "tune", lambda **k: res)
    _all_widths(f"tune-{study}", ["tune"])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'capshim.db'}"
    res = CliRunner().invoke(main, ["db", "add", *[str(EVIDENCE / b) for b in DB_BUNDLES], "--db", url])
    assert res.exit_code == 0, res.output
    return url


def test_db_list_golden(store):
    _all_widths("db-list", ["db", "list", "--db", store], {store: "STORE"})


def test_db_compare_golden(store):
    _all_widths("db-compare", ["db", "compare", "1", "2", "--allow-mismatch", "--db", store])


def test_db_trend_golden(store):
    _all_widths("db-trend", ["db", "trend", "vm-unlocked", "--db", store])


def test_db_show_fits(store):
    wide = _run(["db", "show", "device=llvmpipe*", "--match", "glob", "--db", store], None)
    for w in WIDTHS:
        _check_fits(_run(["db", "show", "device=llvmpipe*", "--match", "glob", "--db", store], w), w, wide)


# --- the layout's promises -------------------------------------------------------------------

def test_each_row_note_is_said_once_as_a_footnote():
    """The contamination sentence every row repeated is one numbered footnote; rows carry [n]."""
    summary = json.loads((REPO / "tests" / "fixtures" / "golden" / "summary.json").read_text())
    text = terminal.serialize(summary, width=80)
    sentence = "1 of 6 runs contaminated (run 2: load 3.1 > 2 cores)"
    assert text.replace("\n", " ").count(sentence) == 1
    marker = re.search(r"\[(\d+)\] 1 of 6 runs contaminated", text).group(1)
    assert sum(line.count(f"[{marker}]") for line in text.splitlines() if line.startswith("│")) >= 2


def test_the_width_rule(monkeypatch):
    """One rule: --wide is the full table; off a terminal $COLUMNS, else 80; never below 40."""
    assert terminal.width(wide=True) is None
    for value, expected in ((None, 80), ("100", 100), ("abc", 80), ("10", terminal.MIN_WIDTH),
                            ("99999999999", 80)):
        # each value only inside its block: pytest's own progress line reads $COLUMNS after the test
        # (a huge one left set made `pytest -v` fail with MemoryError)
        with monkeypatch.context() as m:
            if value is None:
                m.delenv("COLUMNS", raising=False)
            else:
                m.setenv("COLUMNS", value)
            assert terminal.width() == expected


def test_db_list_follows_the_width_rule_when_piped(store):
    """db list had a fixed 200 columns off a terminal; it takes $COLUMNS or 80 like the others."""
    res = CliRunner().invoke(main, ["db", "list", "--db", store], env={"COLUMNS": None})
    assert res.exit_code == 0 and max(len(line) for line in res.stdout.splitlines()) <= 80


def test_columns_that_do_not_fit_go_to_a_second_table():
    heads = ["arm", "a number", "another number", "text"]
    rows = [["vm-unlocked", "123456.789", "98.25% [97.74–98.69]", "a few words of text"]] * 2
    text = terminal.to_text(terminal.grid(heads, rows, 40, numeric=(1, 2)), 40)
    assert text.count("┏") == 3 and text.count("vm-unlocked") == 6  # three tables, the key in each
    _check_fits(text, 40, terminal.to_text(terminal.grid(heads, rows, None, numeric=(1, 2)), None))


def test_names_longer_than_a_table_can_hold_become_records():
    """A key and one column that cannot sit side by side: ``header: value`` lines, nothing split."""
    name = "an-arm-name-of-thirty-two-chars"
    rows = [[name, "0.98x [0.95–1.00]", "1.2345678901234"]]
    text = terminal.to_text(terminal.grid(["arm", "speedup vs vm-stock (95% CI)", "median"], rows, 40,
                                          numeric=(1, 2)), 40)
    assert "┏" not in text and name in text.split()
    assert "speedup vs vm-stock (95% CI): 0.98x [0.95–1.00]" in " ".join(text.split())
    assert {"0.98x", "[0.95–1.00]", "1.2345678901234"} <= set(text.split())
    assert max(len(line) for line in text.splitlines()) <= 40


def test_a_number_wider_than_the_terminal_is_the_one_thing_folded():
    """A median of 1e308 tok/s (309 digits, wider than any terminal): records, every line within
    the width, no traceback; the summary's other numbers whole."""
    summary = json.loads((REPO / "tests" / "fixtures" / "golden" / "summary.json").read_text())
    summary["arms"]["native"]["tests"]["pp512 ngl=0"].update(median=1e308, min=1e308, max=1.7e308)
    text = terminal.serialize(summary, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "98.09% [95.13–100.35]" in text and "vm-unlocked" in text.split()


def test_cells_are_text_not_markup():
    text = terminal.to_text(terminal.grid(["arm"], [["[bold]x[/bold]"]], 80, notes=["[red]n[/red]"]), 80)
    assert "[bold]x[/bold]" in text and "[red]n[/red]" in text


# --- every --help fits 80 columns --------------------------------------------------------------

def _commands():
    for name in COMMANDS:
        cmd = main.get_command(click.Context(main), name)
        yield [name], cmd
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(click.Context(cmd)):
                yield [name, sub], cmd.get_command(click.Context(cmd), sub)


def test_every_help_page_fits_80_columns():
    wide = []
    for path, _cmd in [([], main), *_commands()]:
        res = CliRunner().invoke(main, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert res.exit_code == 0, (path, res.output)
        wide += [(" ".join(path), line) for line in res.output.splitlines() if len(line) > 80]
    assert not wide, wide


def test_wide_option_on_every_command_that_prints_a_table():
    for path in (["report"], ["bench"], ["ablate"], ["tune"], ["kernels"], ["probe"], ["db", "list"],
                 ["db", "show"], ["db", "compare"], ["db", "trend"], ["db", "matrix"]):
        out = CliRunner().invoke(main, [*path, "--help"], env={"COLUMNS": "80"}).output
        assert "--wide" in out, path


def test_a_cpu_device_table_leads_with_the_path_columns():
    """Issue 19: on a CPU device the path columns are the result (no speed effect is expected), so the
    bench's table puts them right after the row's name, in the first table at 80 columns."""
    s = json.loads((EVIDENCE / "lavapipe-default-warmup-round" / "summary.json").read_text(encoding="utf-8"))
    text = terminal.to_text(terminal.render([s], title="t", limit=80, lead_path=True), 80)
    first = text.split("┗")[0] if "┗" in text else text.split("└")[0]
    names = next(line for line in first.splitlines() if line.startswith("┃") and "fp16" in line)
    assert "tok/s" in names and names.index("fp16") < names.index("tok/s")
    plain = terminal.to_text(terminal.render([s], title="t", limit=80), 80)
    names = next(line for line in plain.splitlines() if line.startswith("┃") and "tok/s" in line)
    assert "fp16" not in names or names.index("fp16") > names.index("tok/s")  # otherwise the figures lead


# --- the fleet's matrix (issue 21): every committed bundle and study, from a fresh store ---------

@pytest.fixture(scope="module")
def fleet_store(tmp_path_factory):
    """A fresh SQLite store holding every committed bundle and study (``db add evidence/...``)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('fleet') / 'capshim.db'}"
    folders = sorted(str(p.parent) for p in EVIDENCE.glob("*/SHA256SUMS"))
    res = CliRunner().invoke(main, ["db", "add", *folders, "--db", url])
    assert res.exit_code == 0, res.output
    return url


def test_db_matrix_golden(fleet_store):
    """``db matrix`` renders the committed bundles: one table per device x host OS x guest OS x build."""
    _all_widths("db-matrix", ["db", "matrix", "--db", fleet_store])
