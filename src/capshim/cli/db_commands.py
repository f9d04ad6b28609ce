"""The ``capshim db`` commands (the group is :data:`capshim.cli.db.db_grp`, which loads this module).

Parse the options, call :mod:`capshim.db.ingest`, :mod:`capshim.db.store` and
:mod:`capshim.db.query`, print. Errors are :class:`capshim.errors.CapshimError`
subclasses (one line, exit 2) raised by those modules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from capshim.cli.db import GROUP_URL
from capshim.cli.suggest import Choice
from capshim.cli.options import wide_option
from capshim.contracts.names import parse_named_files
from capshim.contracts.numbers import FiniteFloat
from capshim.db.ingest import read_external, read_folder
from capshim.db.terms import DB_HELP, DEFAULT_THRESHOLD, FILTERS, MATCHES, SIGNERS_ENV
from capshim.errors import EXIT_USAGE, EXIT_WORKLOAD, CapshimError, UsageError
from capshim.evidence import signing
from capshim.export import matrix as export_matrix
from capshim.export import terminal
from capshim.export.table import fmt_ratio
from capshim.contracts import messages
from capshim.contracts import output as out_rule


def _db_option(f):
    return click.option("--db", "db_url", metavar="URL", help=DB_HELP + " Also accepted before the command: "
                        "capshim db --db URL COMMAND.")(f)


def _url(db_url: str | None) -> str | None:
    """The store's URL: this command's ``--db``, else the group's (None: the default store).

    Raises:
        UsageError: both were given and differ (which one was meant?).
    """
    group = click.get_current_context().meta.get(GROUP_URL)
    if db_url and group and db_url != group:
        raise UsageError(f"--db given twice with different URLs ({group} before the command, {db_url} after "
                         "it): give it once")
    return db_url or group


def _open(db_url: str | None):
    """The results store that ``--db`` (or ``$CAPSHIM_DB``, or the default) names, opened and migrated.

    The store's modules (SQLAlchemy, and Alembic for a migration) are imported here, when a command
    runs: ``capshim db COMMAND --help`` does not need them (tests/test_import_cost.py).

    Raises:
        DbError: see :meth:`capshim.db.store.Store.open`.
    """
    from capshim.db.store import Store

    return Store.open(_url(db_url))


def _store_file(db_url: str | None) -> str | None:
    """The SQLite file of the store this command opens (None: a server): an input of the output rule."""
    from capshim.db.store import sqlite_file

    return sqlite_file(_url(db_url))


def _match_option(f):
    return click.option("--match", type=Choice(list(MATCHES)), default="exact", show_default=True,
                        help="How names and other text values match: "
                             + "; ".join(f"{k}: {v}" for k, v in MATCHES.items()) + ".")(f)


def _filter_options(f):
    f = _match_option(f)
    for key in reversed(["device", "profile", "model", "build", "host", "os", "since", "until", "signed"]):
        flag = "--hostname" if key == "host" else f"--{key}"  # --host names a baseline elsewhere
        f = click.option(flag, key, metavar="DATE" if key in ("since", "until") else
                         "yes|WHO" if key == "signed" else "TEXT",
                         help=f"Only bundles matching: {FILTERS[key]}.")(f)
    return f


def _json_out(obj) -> None:
    click.echo(json.dumps(obj, indent=2, default=str))


def _inputs(folders, external, host_file, baseline, signers=None):
    """``(argument, [BundleRecord])`` for each folder and for the --arm files, in order; the
    CapshimError instead of the list for one that cannot be read or that ``signers`` refuses
    (the next ones are still read)."""
    for f in folders:
        try:
            yield f, read_folder(f, signers)
        except CapshimError as exc:
            yield f, exc
    if external:
        try:
            yield "--arm", [read_external(external, host_file, baseline)]
        except CapshimError as exc:
            yield "--arm", exc


@click.command("add")
@click.argument("bundles", metavar="FOLDER...", nargs=-1, type=click.Path())
@click.option("--arm", "arm_opts", multiple=True, metavar="NAME=FILE[,FILE...]",
              help="Store llama-bench -o json/jsonl files made elsewhere as an arm (as report --arm takes them).")
@click.option("--host", "host_file", type=click.Path(), help="With --arm: the host baseline (a llama-bench file or a bundle).")
@click.option("--baseline", help="With --arm: the baseline arm (default the first).")
@click.option("--signers", type=click.Path(), metavar="FILE", default=None,
              help="Admit only folders signed by a signer of this allowed-signers file (git's "
                   "gpg.ssh.allowedSignersFile format) [default: $CAPSHIM_DB_SIGNERS, else any].")
@_db_option
@click.option("--json", "as_json", is_flag=True,
              help="Print [{source, name, id, added, key}] as JSON ({source, error} for what was not stored).")
def db_add(bundles, arm_opts, host_file, baseline, signers, db_url, as_json):
    """Store evidence bundles and study folders (the --out of ablate, tune and kernels: each nested
    bundle is stored, named STUDY/FOLDER).

    Each FOLDER is verified first (as `capshim evidence verify` does). One
    that does not verify, or is not a bundle or study, is not stored: its
    reason is one line, and the others are still stored; the exit status is
    then 2. Adding the same bundle again is a no-op (the key is the SHA-256
    of its SHA256SUMS's sorted (path, digest) pairs, however the file is
    formatted). `capshim db add evidence/*/` stores every bundle and study
    there and names each folder that is neither.

    Signatures (capshim evidence sign) are checked and stored: one that does
    not hold refuses the folder. With --signers FILE (or $CAPSHIM_DB_SIGNERS:
    the store's policy on a fleet) a folder is stored only when a signer the
    file allows signed it; --arm files, which carry no signature, are then
    refused.
    """
    from capshim.db.store import DbError

    if not bundles and not arm_opts:
        raise UsageError("db add: give bundle or study folders, or --arm NAME=FILE.json")
    if (host_file or baseline) and not arm_opts:
        raise UsageError("--host and --baseline apply to --arm files (a bundle keeps its own)")
    signers = signers or os.environ.get(SIGNERS_ENV) or None
    if signers is not None:
        signing.check_signers_file(signers)  # a bad policy file is one error, not one per folder
        if arm_opts:
            raise UsageError(f"--arm files carry no signature; the store admits only signers of --signers {signers}")
    external = [parse_named_files(a) for a in arm_opts]
    out, failed = [], []
    with _open(db_url) as st:
        for source, records in _inputs(bundles, external, host_file, baseline, signers):
            if isinstance(records, CapshimError):
                failed.append({"source": source, "error": str(records)})
                messages.emit(f"not stored: {records}")
                continue
            for rec in records:
                try:
                    bid, added = st.add(rec)
                except DbError as exc:  # this record's values (the store itself failed on open)
                    failed.append({"source": rec.source, "error": str(exc)})
                    messages.emit(f"not stored: {rec.source}: {exc}")
                    continue
                out.append({"source": rec.source, "name": rec.name, "id": bid, "added": added, "key": rec.key})
                if not as_json:
                    click.echo(f"{'added' if added else 'already stored'}: #{bid} {rec.name} ({rec.key[:12]})")
    if as_json:
        _json_out(out + failed)
    if failed:
        messages.emit(f"db add: {len(failed)} not stored (reasons above); {len(out)} stored or already there")
        raise SystemExit(EXIT_USAGE)


def _signers_cell(signatures: list) -> str:
    """Who signed a stored bundle, for a table: ``PRINCIPAL SHA256:abcdefgh`` (the principal is what the
    adder's --signers file called the key, so the key's short fingerprint stands beside it), else
    ``key SHA256:abcdefgh``; "-" when unsigned."""
    names = [f"{s.get('principal') or 'key'} {str(s.get('key', ''))[:15]}" for s in signatures if isinstance(s, dict)]
    return ", ".join(names) or "-"


@click.command("list")
@_filter_options
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the bundles as JSON.")
@wide_option
def db_list(db_url, as_json, match, wide, **filters):
    """List stored bundles, oldest first (filters combine with AND; text matches exactly unless --match)."""
    with _open(db_url) as st:
        rows = st.select(filters, match)
        where = f"store: {st.given} (schema {st.revision()})"
    if as_json:
        _json_out(rows)
        return
    cells = [[str(r["id"]), r["created_utc"] or "", r["name"], r["device"] or "",
              " ".join(x for x in (r["workload_build"], r["workload_commit"]) if x), r["model"] or "",
              ", ".join(a["name"] + (f" ({a['state']})" if a["state"] not in ("native", "active") else "")
                        for a in r["arms"]), _signers_cell(r["signed_by"])] for r in rows]
    terminal.print_grid(("id", "started (UTC)", "name", "device", "build", "model", "arms", "signed by"), cells, wide,
                        keys=(0, 2), numeric=(0, 1), title=f"{len(rows)} bundle(s)", notes=[where])


@click.command("show")
@click.argument("selection")
@_db_option
@_match_option
@click.option("--json", "as_json", is_flag=True, help="Print the stored summary JSON (one, or a list).")
@wide_option
def db_show(selection, db_url, match, as_json, wide):
    """Show stored bundles as `capshim report` shows them (from their stored summaries).

    SELECTION: an id, a name, or KEY=VALUE filters as for `db compare`; each
    bundle it selects gets its own rows.
    """
    from capshim.db import query

    with _open(db_url) as st:
        rows = query.select(st, query.parse_selection(selection, "selection"), "selection", match)
        summaries = [st.summary(r["id"]) for r in rows]
    if as_json:
        _json_out(summaries[0] if len(summaries) == 1 else summaries)
        return
    terminal.print_table(summaries, [f"#{r['id']} {r['name']}" for r in rows] if len(rows) > 1 else None,
                         title=None if len(rows) > 1 else f"#{rows[0]['id']} {rows[0]['name']}", wide=wide)


def _threshold_option(f):
    return click.option("--threshold", type=FiniteFloat(0), default=DEFAULT_THRESHOLD, show_default=True,
                        help="Regression threshold: percent of the change (compare) or points of % of host "
                             "(trend); a finite number >= 0.")(f)


def _num(v: float) -> str:
    """A median for a cell: 2 decimals from 10 up (tok/s), else 4 significant digits (seconds)."""
    return f"{v:.2f}" if abs(v) >= 10 else f"{v:.4g}"


def _unit_columns(rows: list[dict]) -> tuple[str, bool]:
    """``(header suffix, unit in each cell)``: one unit for every row goes in the header."""
    units = {r["unit"] for r in rows}
    if len(units) == 1:
        (u,) = units
        return (f" ({u})" if u else ""), False
    return "", True


def _side(side: dict) -> str:
    """``(name=x): #3 x``, or ``(device=D): 3 bundles pooled: #1 a, #2 b, #3 c``."""
    named = ", ".join(f"#{i} {n}" for i, n in zip(side["ids"], side["bundles"]))
    pooled = f"{side['pooled']} bundles pooled: " if side["pooled"] > 1 else ""
    return f"({side['selection']}): {pooled}{named}"


def _compare_table(res: dict, limit: int | None) -> list:
    """The table of :func:`capshim.db.query.compare`'s result, laid out for ``limit`` columns
    (:func:`capshim.export.terminal.grid`)."""
    suffix, per_cell = _unit_columns(res["rows"])
    heads = ("arm", "test", f"A{suffix}", f"B{suffix}", "B vs A (95% CI)", "A % of host", "B % of host", "verdict")
    cells, styles = [], []
    for r in res["rows"]:
        ch = r["change"]
        ci = (f" [{ch['ci95'][0]:.3f}–{ch['ci95'][1]:.3f}]" if ch.get("ci95") else
              f" (range {ch['range'][0]:.3f}–{ch['range'][1]:.3f})" if ch.get("range") else "")
        name = r["arm"] if r["arm"] == r["arm_b"] else f"{r['arm']} / {r['arm_b']}"
        unit = f" {r['unit']}" if per_cell and r["unit"] else ""
        test = r["test"] + (f" ({r['better']} is better)" if r["better"] == "lower" else "")
        cells.append([name, test, _num(r["a"]["median"]) + unit, _num(r["b"]["median"]) + unit,
                      f"{ch['value']:.3f}x{ci}", fmt_ratio(r["a"]["pct_of_host"], "%"),
                      fmt_ratio(r["b"]["pct_of_host"], "%"),
                      r["verdict"] + (f" ({r['why']})" if r.get("why") else "")
                      + (" (unlike config)" if r["marked"] else "")])
        styles.append("red" if r["verdict"] == "regression" else None)
    notes = list(res.get("harness") or []) + [res["rule"]] \
        + (["unlike configurations: " + "; ".join(res["mismatches"])] if res["mismatches"] else [])
    return terminal.grid(heads, cells, limit, keys=(0, 1), numeric=range(2, 7), styles=styles, notes=notes,
                         title=f"B {_side(res['b'])}\nvs A {_side(res['a'])}" + (
                             ("\nA and B are the same bundles: each row compares them with themselves"
                              if len(res["a"]["ids"]) > 1 else
                              "\nA and B are the same bundle: each row compares it with itself")
                             if res.get("same_bundles") else ""))


@click.command("compare")
@click.argument("sel_a", metavar="A")
@click.argument("sel_b", metavar="B")
@click.option("--arm", "arms", multiple=True, help="Only this arm (repeatable) [default: every arm in both].")
@click.option("--test", "tests", multiple=True, help="Only this test, e.g. pp512 (repeatable).")
@click.option("--pair", "pairs", multiple=True, metavar="A_ARM=B_ARM",
              help="Compare arm A_ARM of A with arm B_ARM of B (arms named differently).")
@_threshold_option
@click.option("--allow-mismatch", is_flag=True, help="Compare unlike configurations (rows marked).")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any row is a regression.")
@_match_option
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@wide_option
def db_compare(sel_a, sel_b, arms, tests, pairs, threshold, allow_mismatch, fail_on_regression, match, db_url,
               as_json, wide):
    """Compare selection B with selection A (the reference), arm by arm and test by test.

    Each selection is an id, a name, or KEY=VALUE filters (id, name, device,
    host, os, model, build, profile, arm, since, until), e.g. `build=11669` or
    `device='NVIDIA H200',since=2026-11-01`. Names and other text match
    exactly (`run_1` is never `runX1`); --match prefix or --match glob
    ('run*') loosens that. A selection of several bundles pools their samples
    (runs kept apart) and the title says so: how many, which. Configurations that differ (model, batch, threads, offload, flash
    attention, cache types) are refused (exit 2) unless --allow-mismatch.

    \b
    The change is how many times better B is than A, with its 95% interval
    (capshim's own analysis, as `report`'s speedup; below 5 processes the range):
    median(B)/median(A) when higher is better (tok/s), median(A)/median(B) when
    lower is better (seconds of --metric wall), so above 1.00x B is better either
    way. Medians are in each test's unit. The verdict is the one rule of
    every command: improvement or regression only with 5 processes a side,
    neither side mostly contaminated, and the whole 95% interval beyond
    THRESHOLD%; same when the interval lies within THRESHOLD% of 1.00x;
    otherwise unclear, with why ("2 processes a side; need 5"). A bundle
    whose A/A arm leaves +-5% is called out under the table. A test measured
    in different units or directions in A and B is refused (exit 2).
    """
    from capshim.db import query

    pair_map = {}
    for p in pairs:
        a, sep, b = p.partition("=")
        if not sep or not a.strip() or not b.strip():
            raise UsageError(f"--pair {p!r}: expected A_ARM=B_ARM")
        pair_map[a.strip()] = b.strip()
    with _open(db_url) as st:
        res = query.compare(st, query.parse_selection(sel_a, "A"), query.parse_selection(sel_b, "B"),
                            arms=list(arms) or None, tests=list(tests) or None, pairs=pair_map,
                            threshold=threshold, allow_mismatch=allow_mismatch, match=match)
    if as_json:
        _json_out(res)
    else:
        limit = terminal.width(wide)
        terminal.emit(_compare_table(res, limit), limit)
    if fail_on_regression and res["regressions"]:
        click.echo(f"capshim: {res['regressions']} regression(s)", err=True)
        raise SystemExit(EXIT_WORKLOAD)


def _trend_table(res: dict, limit: int | None) -> list:
    """The table of :func:`capshim.db.query.trend`'s result, laid out for ``limit`` columns
    (:func:`capshim.export.terminal.grid`)."""
    suffix, per_cell = _unit_columns(res["points"])
    heads = ("started (UTC)", "bundle", "device", "build", "test", f"median{suffix}", "% of host (95% CI)", "flags")
    cells = []
    for p in res["points"]:
        unit = f" {p['unit']}" if per_cell and p["unit"] else ""
        cells.append([p["created_utc"] or "", p["bundle"], p["device"] or "", p["build"] or "", p["test"],
                      _num(p["median"]) + unit, fmt_ratio({"value": p["pct_of_host"], "ci95": p["ci95"], "range": p.get("range")}, "%"),
                      "; ".join(p["flags"] + p.get("notes", []))])
    cap = [res["rule"]] + [f"skipped: {s}" for s in res["skipped"]]
    if res["min_pct"] is not None:
        cap.insert(0, f"{res['arm']} {'stayed at or above' if res['all_above'] else 'did NOT stay above'} "
                      f"{res['min_pct']:g}% of host in every point shown")
    return terminal.grid(heads, cells, limit, keys=(1, 4), numeric=(0, 5, 6), notes=cap,
                         styles=["red" if p["flags"] else None for p in res["points"]],
                         title=f"{res['arm']}: % of host over time", priority=(5, 6, 7))


@click.command("trend")
@click.argument("arm")
@click.argument("bundles", nargs=-1, type=click.Path())
@click.option("--test", "tests", multiple=True, help="Only this test, e.g. pp512 (repeatable).")
@click.option("--min-pct", type=FiniteFloat(0), metavar="PCT", help="Flag bundles where ARM is below PCT% of host.")
@_threshold_option
@click.option("--chart", type=click.Path(dir_okay=False), help="Write the trend chart (PNG) here.")
@click.option("--force", is_flag=True, help="Replace an existing --chart file (in one step).")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any point is flagged.")
@_filter_options
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the trend as JSON.")
@wide_option
def db_trend(arm, bundles, tests, min_pct, threshold, chart, force, fail_on_regression, db_url, as_json, match,
             wide, **filters):
    """One arm's % of host over time: one row per stored bundle and test, oldest first.

    With BUNDLE folders (bundles or studies): only those (each verified and
    added to the store first, as `db add` does; already stored ones are not
    added again; if one cannot be read, none is added: exit 2).

    The figures are each bundle's own summary (what `capshim report` shows).
    A point is flagged when it is below --min-pct, or more than THRESHOLD
    points below the previous bundle with its 95% interval entirely below
    that value.

    \b
    Did vm-unlocked stay above 98% of host across these bundles?
      capshim db trend vm-unlocked --min-pct 98 --fail-on-regression BUNDLE...
    """
    from capshim.db import query

    rule = {"flag": "--chart", "replace": force, "inputs": bundles, "store": _store_file(db_url)}
    if chart:  # contracts.output: refused before anything is read or stored
        out_rule.check_file(chart, **rule)
    records, failed = [], []
    for b in bundles:  # verify every one before storing any
        try:
            records += read_folder(b)
        except CapshimError as exc:
            failed.append(str(exc))
            messages.emit(f"not stored: {exc}")
    if failed:
        raise UsageError(f"db trend: {len(failed)} of {len(bundles)} folder(s) cannot be read (reasons above); "
                         "nothing was stored")
    with _open(db_url) as st:
        ids = [st.add(rec)[0] for rec in records] or None
        res = query.trend(st, arm, filters, tests=list(tests) or None, min_pct=min_pct, threshold=threshold,
                          bundle_ids=ids, match=match)
    if chart:
        out_rule.write_file(chart, query.trend_png(res), **rule)
    if as_json:
        _json_out(res)
    else:
        limit = terminal.width(wide)
        terminal.emit(_trend_table(res, limit), limit)
        if chart:
            click.echo(f"wrote {chart}", err=True)
    if fail_on_regression and res["regressions"]:
        click.echo(f"capshim: {res['regressions']} flagged point(s)", err=True)
        raise SystemExit(EXIT_WORKLOAD)


@click.command("matrix")
@click.option("--arm", "arms", multiple=True, help="Only this arm (repeatable) [default: every shimmed arm].")
@click.option("--test", "tests", multiple=True, help="Only this test, e.g. pp512 (repeatable).")
@click.option("--threshold", type=FiniteFloat(0), default=DEFAULT_THRESHOLD, show_default=True,
              help="T of the verdicts: points of % of host; a finite number >= 0.")
@click.option("--format", "fmt", type=Choice(["table", "md", "html"]), default="table", show_default=True,
              help="table: the terminal table; md: GitHub Markdown; html: one HTML page.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the matrix (--format, or --json) to FILE instead of stdout.")
@click.option("--force", is_flag=True, help="Replace an existing -o file (in one step).")
@_filter_options
@_db_option
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as JSON (every row, the verdicts' meanings).")
@wide_option
def db_matrix(arms, tests, threshold, fmt, output, force, match, db_url, as_json, wide, **filters):
    """The fleet's compatibility matrix: device x host OS x guest OS x workload build -> verdict.

    One row per stored bundle, shimmed arm (not the baseline, the host arm or
    the A/A arm) and test: the arm's % of host and its speedup over the
    bundle's baseline, each with its 95% interval (below 5 processes the range
    of ratios), whether the bench's A/A arm is clean, the verdict and the
    bundle id (`capshim db show ID`). Figures are each bundle's own summary.

    \b
    Verdicts (T: --threshold, points of % of host; the interval: % of host's
    95% interval; above/below only with 5+ processes a side, neither side
    mostly contaminated):
      host speed   interval within [100-T, 100+T]
      above host   interval entirely above 100+T
      below host   interval entirely below 100-T
      unclear      not resolved, why in the row (2 processes a side; need 5)
      unreliable   the A/A arm excludes 1.00x or leaves +-5%: the harness
                   is unreliable here
      no host      no host baseline; no result: the arm's state is no result

    \b
    Many hosts, one store: each host's CI job runs
      capshim bench ... --db postgresql://USER@HOST/DB
    and anyone renders the store:
      capshim db matrix --db postgresql://... --format html -o m.html
    (docs/results-store.md: the fleet's matrix; docs/ci/fleet.yml).
    """
    from capshim.db import matrix as db_matrix_mod

    if as_json and fmt != "table":
        raise UsageError("--json and --format both say what to write: give one")
    if output == "-":
        output = None
    rule = {"flag": "-o", "replace": force, "store": _store_file(db_url)}
    if output:  # contracts.output: refused before the store is read
        out_rule.check_file(output, **rule)
    with _open(db_url) as st:
        res = db_matrix_mod.matrix(st, filters, match=match, arms=list(arms) or None, tests=list(tests) or None,
                                   threshold=threshold)
    if as_json:
        text = json.dumps(res, indent=2, default=str) + "\n"
    elif fmt == "md":
        text = export_matrix.markdown(res)
    elif fmt == "html":
        text = export_matrix.html(res)
    elif output:  # the table as plain text, at the width rule's width (off a terminal: $COLUMNS or 80)
        limit = terminal.width(wide)
        text = terminal.to_text(export_matrix.terminal_parts(res, limit), limit)
    else:
        limit = terminal.width(wide)
        terminal.emit(export_matrix.terminal_parts(res, limit), limit)
        return
    if not output:
        click.echo(text, nl=False)
        return
    out_rule.write_file(output, text.encode("utf-8"), **rule)  # contracts.output: whole or not at all
    click.echo(f"wrote {output} ({len(res['rows'])} rows)", err=True)
