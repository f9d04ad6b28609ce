"""``capshim report``: tables and charts from bundles or from llama-bench files made elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import click

from capshim.contracts.pasteable import command as pasteable
from capshim import evidence, jsonread, report, summary
from capshim.cli.suggest import Choice
from capshim.cli.options import json_option, wide_option
from capshim.contracts import messages, names
from capshim.contracts import output as output_rule
from capshim.errors import UsageError
from capshim.evidence import study
from capshim.export import csv as csv_export
from capshim.export import mechanism


@click.command("report")
@click.argument("bundles", nargs=-1, type=click.Path())
@click.option("--arm", "arm_opts", multiple=True, metavar="NAME=FILE[,FILE...]",
              help="An arm from llama-bench -o json/jsonl files made elsewhere (one run per file; "
                   "a .stderr beside a file gives the attested path). Repeatable; the first is the baseline.")
@click.option("--host", "host_file", type=click.Path(), help="Host baseline: a llama-bench JSON file or a bundle.")
@click.option("--baseline", help="The arm speedups are relative to (with --arm; default the first).")
@click.option("--format", "fmt", type=Choice(["md", "html", "csv"]),
              help="Print or write Markdown, HTML, or CSV (one row per arm and test, numbers unformatted).")
@click.option("--allow-mismatch", is_flag=True,
              help="Compare files measured with different models or settings (rows marked) instead of exit 2.")
@click.option("--output", "-o", type=click.Path(), help="Write the report to this file (and a chart beside it).")
@click.option("--chart", type=click.Path(), help="Write the chart PNG to this path.")
@click.option("--force", is_flag=True, help="Replace an existing --output or --chart file (in one step).")
@json_option("the summary JSON (one summary, or a list)")
@click.option("--title", help="Report title.")
@wide_option
def report_cmd(bundles, arm_opts, host_file, baseline, fmt, allow_mismatch, output, chart, force, as_json, title,
               wide):
    """Show the seed-style table of bundles (merged), or of llama-bench files made elsewhere.

    \b
    capshim report BUNDLE [BUNDLE...] [--format md|html|csv] [--output PATH]
    capshim report --arm stock=stock.json --arm shim=pp.json,tg.json \\
        --host host.json
    """


    if bundles and arm_opts:
        raise UsageError("give bundle folders or --arm files, not both")
    if not bundles and not arm_opts:
        raise UsageError("give one or more bundle folders, or --arm NAME=FILE.json")
    if baseline and not arm_opts:
        raise UsageError("--baseline applies to --arm files (a bundle keeps its own baseline)")

    if host_file and Path(host_file).is_dir():  # a bundle read as input must verify
        evidence.require_verified(host_file, "--host")
    for b in bundles:
        if Path(b).is_dir() and study.is_study(b):  # a study is not one bundle: name its nested ones
            nested = ", ".join(str(Path(b) / n) for n in sorted(e.name for e in Path(b).iterdir()
                                                                 if (e / "summary.json").is_file())[:3])
            raise UsageError(f"report {b}: a study folder ({study.STUDY_FILE}), not one bundle: "
                             f"{pasteable('capshim', 'evidence', 'verify', b)} checks it whole; report its nested bundles (e.g. {nested})")
        if Path(b).is_dir():
            evidence.require_verified(b, "report")
    if arm_opts:
        summaries = [report.report_from_files([names.parse_named_files(a) for a in arm_opts], host_file, baseline,
                                              allow_mismatch=allow_mismatch)]
        labels = None
    else:
        if host_file:
            raise UsageError("--host applies to --arm files (a bundle keeps its own host baseline)")
        summaries = [summary.load(b) for b in bundles]
        labels = [Path(b).resolve().name for b in bundles]
    if as_json:
        click.echo(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=2))
        return
    if output and not fmt:
        fmt = "html" if output.lower().endswith((".html", ".htm")) else "md"
    if output == "-":
        output = None
    chart_flag = "--chart"
    if output and not chart and not Path(output).name.lower().endswith(".png"):  # a chart beside the file
        chart, chart_flag = str(Path(output).with_suffix(".png")), "the chart beside --output,"
    inputs = [*bundles, host_file, *(f for a in arm_opts for f in names.parse_named_files(a)[1])]
    rule = {"replace": force, "inputs": inputs}
    for flag, target in (("--output", output), (chart_flag, chart)):
        if target:  # every refusal before anything is written (contracts.output)
            output_rule.check_file(target, flag, **rule)
    if output and chart and Path(output).absolute() == Path(chart).absolute():
        raise UsageError(f"--chart {chart}: the same file as --output; give another name")
    chart_ref = None
    if chart:  # written whole or not at all; a full disk is exit 4 naming the file
        report.draw_chart(summaries, chart, labels, title=title, flag=chart_flag, **rule)
        chart_ref = (Path(chart).name if output and Path(chart).parent.resolve() == Path(output).parent.resolve()
                     else str(chart))
    if fmt == "md":
        text = report.render_markdown(summaries, labels, title=title)
        if chart_ref:
            text += f"\n![chart]({chart_ref})\n"
    elif fmt == "html":
        text = report.render_html(summaries, labels, title=title, chart=chart_ref)
    elif fmt == "csv":

        text = "".join(csv_export.serialize(s) if i == 0 else csv_export.serialize(s).split("\n", 1)[1]
                       for i, s in enumerate(summaries))
    else:
        metas = []
        if not arm_opts:
            metas = [jsonread.load_metadata(b) if (Path(b) / "metadata.json").is_file() else {} for b in bundles]
            if title is None and len(metas) == 1 and isinstance(metas[0].get("title"), str):
                title = metas[0]["title"]
        if metas and all(names.is_cpu_device(m.get("device")) for m in metas):
            # made on a CPU device: the bench's own rule and view (the mechanism, no speedup or % of host
            # column), so the same bundle reads the same in capshim bench and capshim report
            for s, label, m in zip(summaries, labels, metas):
                said = mechanism.cpu_notes(s, m.get("device"))
                for note in said:  # the bench says them before the runs, on stderr
                    messages.emit(note, "note")
                mechanism.print_cpu(s, title if len(summaries) == 1 else label, wide=wide, skip_notes=said)
            return
        report.print_table(summaries, labels, title=title, wide=wide)
        return
    if output:
        output_rule.write_file(output, text.encode("utf-8"), "--output", **rule)
        click.echo(f"wrote {output}" + (f" and {chart}" if chart else ""), err=True)
    else:
        click.echo(text, nl=False)
