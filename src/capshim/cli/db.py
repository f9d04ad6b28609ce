"""``capshim db``: the results store's command group (loaded by :mod:`capshim.cli.app` on first use).

The commands themselves are in :mod:`capshim.cli.db_commands`, loaded when a
``db`` command runs (click's lazily loaded subcommands): they import
SQLAlchemy and Alembic (about 0.5 s) and capshim's analysis (scipy, about
1.7 s), which ``capshim db --help`` and shell completion do not need.

``--db URL`` is accepted here (``capshim db --db URL list``) and on each
command (``capshim db list --db URL``); giving two different URLs is exit 2.
"""

from __future__ import annotations

import importlib

import click

from capshim.cli.suggest import SuggestingGroup, with_verbose
from capshim.db.terms import DB_HELP

__all__ = ["db_grp", "COMMANDS", "GROUP_URL"]

#: The commands of the group, in ``--help`` order (each ``db_<name>`` in :mod:`capshim.cli.db_commands`).
COMMANDS = ("add", "list", "show", "compare", "trend", "matrix")
#: Where the group's ``--db`` is kept for the command (``click.Context.meta`` key).
GROUP_URL = "capshim.db.url"


class _LazyGroup(SuggestingGroup):
    """A click group whose commands are imported on first use (see the module docstring)."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in COMMANDS:
            return None
        # the database layer loads only here, when a db command runs (see the module docstring)
        return with_verbose(getattr(importlib.import_module("capshim.cli.db_commands"), f"db_{cmd_name}"))


@click.group("db", cls=_LazyGroup)
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
@click.pass_context
def db_grp(ctx, db_url):
    """The results store: keep every bench, compare builds, days and hosts.

    \b
    capshim db add BUNDLE|STUDY...                 store bundles (verified first)
    capshim db add --arm NAME=FILE.json [--host F]  store llama-bench files
    capshim db list [--device 'NVIDIA H200'] [--since 2026-11-01]
    capshim db show ID|NAME                        a stored bundle's report table
    capshim db compare build=11669 build=11800     arm by arm, test by test
    capshim db trend vm-unlocked --min-pct 98 --fail-on-regression [BUNDLE...]
    capshim db matrix [--format md|html -o FILE]   the fleet's matrix

    SQLite by default (one file, see --db); PostgreSQL for a shared store.
    """
    ctx.meta[GROUP_URL] = db_url
