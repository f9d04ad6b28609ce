"""Alembic environment of the capshim results store.

The store (:func:`capshim.db.store.Store.migrate`) passes an open connection
inside a transaction that it holds a lock for (``BEGIN IMMEDIATE`` on SQLite,
an advisory lock on PostgreSQL), so concurrent first uses migrate once.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
context.run_migrations()
