"""The results store: every bench kept, compared across builds, days and hosts.

``capshim db add|list|compare|trend`` (see :mod:`capshim.db.cli`). SQLite by
default (one file: ``$CAPSHIM_DB``, else
``$XDG_DATA_HOME/capshim/results.sqlite``, ``~/.local/share/...`` when
``XDG_DATA_HOME`` is unset), PostgreSQL with ``--db postgresql://...``.

Modules: :mod:`~capshim.db.ingest` reads a bundle (the only code that knows
its layout), :mod:`~capshim.db.schema` the tables, :mod:`~capshim.db.store`
the database (SQLAlchemy Core, Alembic migrations), :mod:`~capshim.db.query`
compare and trend (through :func:`capshim.bench.analysis.analyze`).
"""

from __future__ import annotations

__all__ = ["add_bundle"]


def add_bundle(url: str | None, bundle) -> tuple[int, bool]:
    """Verify and store one bundle folder in the store at ``url`` (None: the default store).

    Returns:
        ``(bundle id, added)``; ``added`` False when it was already stored.

    Raises:
        IngestError: the bundle does not verify or cannot be read.
        DbError: the store cannot be opened or written.
    """
    from capshim.db.ingest import read_bundle
    from capshim.db.store import Store

    rec = read_bundle(bundle)
    with Store.open(url) as st:
        return st.add(rec)
