"""The results store: every bench kept, compared across builds, days and hosts.

``capshim db add|list|show|compare|trend|matrix`` (the group :mod:`capshim.cli.db`,
the commands :mod:`capshim.cli.db_commands`). SQLite by default (one file:
``$CAPSHIM_DB``, else ``$XDG_DATA_HOME/capshim/results.sqlite``,
``~/.local/share/...`` when ``XDG_DATA_HOME`` is unset), PostgreSQL with
``--db postgresql://...``.

Modules: :mod:`~capshim.db.ingest` reads a bundle or a study (the only code
that knows their layout), :mod:`~capshim.db.schema` the tables,
:mod:`~capshim.db.store` the database (SQLAlchemy Core, Alembic migrations;
:func:`~capshim.db.store.add_bundle` for ``capshim bench --db``),
:mod:`~capshim.db.query` compare and trend (through
:func:`capshim.bench.analysis.analyze`), :mod:`~capshim.db.matrix` the fleet's
compatibility matrix (``db matrix``; its tables are :mod:`capshim.export.matrix`'s),
:mod:`~capshim.db.terms` the names and rules the commands share (the matrix's verdict). This package imports nothing itself: the database layer is
heavy (SQLAlchemy, scipy) and a caller imports only the module it needs.
"""
