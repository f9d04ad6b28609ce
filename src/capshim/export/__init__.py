"""Exporters: the typed summary (:func:`capshim.bench.analysis.analyze`) turned into files.

Evidence is a pipeline: the runner measures (records), the analysis turns
records into a summary of typed values and intervals (no formatted strings),
each exporter here serialises a summary, and the bundle
(:mod:`capshim.evidence`) stores files and checksums (summary.json itself is
the bundle's strict JSON, :func:`capshim.evidence.strict_json`). The bench
hands the exporters to the bundle as finalize steps
(:func:`capshim.bench.summarize.steps`); nothing here imports storage. One small
module per format, each with ``serialize(summary, ...)`` (after hyperfine's exporters):

- :mod:`~capshim.export.table`: the table model shared by Markdown, HTML and the terminal;
- :mod:`~capshim.export.markdown`: ``report.md``;
- :mod:`~capshim.export.terminal`: every table a command prints, fitted to one width rule;
- :mod:`~capshim.export.csv`: one row per arm and series (``capshim report --format csv``), and
  the per-sample ``results.csv`` of a bundle;
- :mod:`~capshim.export.chart`: ``chart.png``.
"""
