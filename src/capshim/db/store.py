"""The results store: open (and migrate) a database, add bundles, select them.

Backends: SQLite (one file, the default) and PostgreSQL (a store a team or a
fleet shares), through SQLAlchemy Core; the schema is versioned by Alembic and
moved forward to the newest revision whenever a store is opened.

Concurrency: every transaction on SQLite is ``BEGIN IMMEDIATE`` (writers queue
on the database lock, waiting up to :data:`SQLITE_BUSY_TIMEOUT_S`); on
PostgreSQL the migration holds an advisory transaction lock and a bundle added
by two writers at once is stored once (the second hits the unique key and is
a no-op).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import os
import stat
from dataclasses import asdict
from pathlib import Path

import sqlalchemy as sa

from capshim import __version__, jsonread
from capshim import summary as summary_contract
from capshim.contracts import bounded
from capshim.contracts import folders
from capshim.contracts.suggest import did_you_mean
from capshim.db import schema as S
from capshim.db.ingest import BundleRecord, read_bundle, signed_by
from capshim.db.terms import FILTERS, MATCHES
from capshim.errors import CapshimError

__all__ = ["Store", "DbError", "add_bundle", "default_url", "resolve_url", "SQLITE_BUSY_TIMEOUT_S", "FILTERS"]

#: Seconds a SQLite writer waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT_S = 120
#: Seconds a PostgreSQL server may take to accept the connection (libpq's ``connect_timeout``;
#: its default is to wait forever), unless the URL gives ``?connect_timeout=``.
PG_CONNECT_TIMEOUT_S = 30
#: An arbitrary constant naming capshim's migration lock (pg_advisory_xact_lock key).
_PG_LOCK_KEY = 0x6361707368696D  # "capshim"


def _stored_revisions(conn) -> list[str]:
    """The rows of Alembic's ``alembic_version`` table (``[]`` when it does not exist), read with plain SQL.

    Alembic keeps the revision there (alembic.runtime.migration.MigrationContext, table
    ``alembic_version``, column ``version_num``); reading it directly spares ``db list`` and the
    other reading commands the import of Alembic when the store is at :data:`capshim.db.schema.HEAD`.
    """
    if not sa.inspect(conn).has_table("alembic_version"):
        return []
    return [r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version"))]


class DbError(CapshimError):
    """The store cannot be opened, read or written, or a selection is bad; names the URL or filter (exit 2)."""


#: The largest bundle id a selector may name (SQL BIGINT); a longer number selects nothing.
MAX_ID = 2 ** 63 - 1


def _stored_json(text: str):
    """A JSON column of the store, read through the one bounded reader (depth, size, digits).

    Raises:
        DbError: (exit 2) the column is not JSON capshim wrote (a store edited by hand).
    """
    try:
        return jsonread.loads(text, "a JSON column of the store")
    except jsonread.JsonShapeError as exc:
        raise DbError(f"{exc} (the store was edited outside capshim?)") from None


def default_url() -> str:
    """The store used without ``--db``: ``$CAPSHIM_DB``, else ``sqlite:///$XDG_DATA_HOME/capshim/results.sqlite``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share`` (XDG Base Directory
    Specification: results are user data, not a cache that may be deleted).
    """
    env = os.environ.get("CAPSHIM_DB")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'capshim' / 'results.sqlite'}"


def resolve_url(url: str | None) -> str:
    """Turn ``--db`` (or ``$CAPSHIM_DB``) into the SQLAlchemy URL capshim opens.

    Accepts a plain file path or ``sqlite:///PATH`` (a SQLite file, no query
    options: capshim sets SQLite's own), and ``postgresql://...`` or
    ``postgres://...`` (the psycopg 3 driver; libpq options such as
    ``?host=/socket/dir`` pass to it, which refuses the ones it does not know).
    None gives :func:`default_url`.

    Raises:
        UsageError (exit 2): longer than :data:`capshim.contracts.bounded.MAX_ARG_CHARS`.
        DbError (exit 2), naming ``--db`` or ``CAPSHIM_DB`` and the value: not a URL; another
            database or driver (capshim keeps results only in SQLite or PostgreSQL); a SQLite
            query option (``?timeout=...``, ``?uri=true``: capshim could not honour it) or an
            in-memory SQLite database (nothing would be kept); a SQLite path that is a URI name,
            a folder or a special file.
    """
    given = url
    url = url or default_url()
    flag = _flag(given)
    bounded.text(url, flag)
    if "://" not in url:
        _check_sqlite_path(url, url, flag)
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    try:
        u = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise DbError(f"{flag} {_safe(url)}: not a database URL; give a file path, sqlite:///PATH or "
                      "postgresql://USER@HOST/DB") from None
    backend, driver = u.get_backend_name(), u.drivername.partition("+")[2]
    if (backend, driver) not in (("sqlite", ""), ("sqlite", "pysqlite"), ("postgresql", "psycopg")):
        raise DbError(f"{flag} {_safe(url)}: capshim keeps results in SQLite (a file path or sqlite:///PATH) "
                      f"or PostgreSQL (postgresql://..., through psycopg 3), not {u.drivername}")
    if backend == "sqlite":
        if u.query:
            raise DbError(f"{flag} {_safe(url)}: SQLite URL options ({', '.join(sorted(u.query))}) are not "
                          "supported (capshim sets the lock timeout and the rest itself); give sqlite:///PATH")
        if not u.database or u.database == ":memory:":
            raise DbError(f"{flag} {_safe(url)}: an in-memory database keeps nothing after the command; "
                          "give a file: sqlite:///PATH")
        _check_sqlite_path(u.database, url, flag)
    return url


def sqlite_file(url: str | None) -> str | None:
    """The file of the store ``url`` names (:func:`resolve_url`) when it is SQLite, else None (a server).

    A command that writes a file passes it to the output rule, so no output lands over the store.

    Raises:
        DbError: :func:`resolve_url`'s.
    """
    u = sa.engine.make_url(resolve_url(url))
    return u.database if u.get_backend_name() == "sqlite" else None


def _flag(given: str | None) -> str:
    """How the user named the store, for messages: ``--db``, or ``CAPSHIM_DB`` when it came from there."""
    return "CAPSHIM_DB" if not given and os.environ.get("CAPSHIM_DB") else "--db"


def _check_sqlite_path(path: str, url: str, flag: str) -> None:
    """Refuse a SQLite file name that is a URI (``file:...``, a ``?`` query) or that exists as
    something other than a regular file (``/dev/null``: SQLite would create ``/dev/null-journal``).

    Raises:
        DbError: naming ``flag`` (``--db`` or ``CAPSHIM_DB``), the value and why (exit 2).
    """
    if path.startswith("file:") or "?" in path:
        raise DbError(f"{flag} {url}: SQLite URI-style names (file:..., ?mode=...) are not supported; "
                      "give a plain file path")
    sealed = folders.sealed_above(Path(path).expanduser())
    if sealed is not None:  # the output rule (contracts.output): SQLite writes the file and its journal
        raise DbError(f"{flag} {url}: inside the sealed folder {sealed} (it has a {folders.SEAL_FILE}); "
                      "keep the results store somewhere else")
    try:
        mode = os.stat(Path(path).expanduser()).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DbError(f"{flag} {url}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a device, FIFO or other special file"
        raise DbError(f"{flag} {url}: is {kind}; the results store must be a regular SQLite file "
                      "(or a postgresql:// URL)")


def _matches(col, value: str, match: str):
    """The condition ``col`` matches ``value`` (see :meth:`Store.select`)."""
    if match == "exact":
        return col == value
    esc = "".join("\\" + c if c in "\\%_" else c for c in value)  # LIKE's own wildcards are plain text
    if match == "prefix":
        return col.ilike(esc + "%", escape="\\")
    return col.ilike(esc.replace("*", "%").replace("?", "_"), escape="\\")


def _signed_by_matches(signatures: list, wanted: str, match: str) -> bool:
    """Whether a bundle's ``signed_by`` has a signature ``wanted`` names: ``yes`` any, else a principal or
    ``SHA256:`` key (principal by ``match``, like the text filters; a key exactly)."""
    if wanted == "yes":
        return bool(signatures)
    for sig in signatures:
        if not isinstance(sig, dict):
            continue
        if sig.get("key") == wanted:
            return True
        who = sig.get("principal")
        if isinstance(who, str) and (who == wanted if match == "exact" else
                                     who.lower().startswith(wanted.lower()) if match == "prefix" else
                                     fnmatch.fnmatch(who.lower(), wanted.lower())):
            return True
    return False


def _int(v) -> int | None:
    """``v`` when it is an integer that fits a database INTEGER column (32 bits), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -2**31 <= v < 2**31 else None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _safe(url: str) -> str:
    try:
        u = sa.engine.make_url(url)
        return url if u.password is None else u.render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for messages
        return url


class Store:
    """An open results store.

    Use ``with Store.open(url) as st: st.add(record)``.

    Attributes:
        url: the SQLAlchemy URL (password hidden in messages).
        engine: the SQLAlchemy engine.
        given: the store as the user named it (``--db`` or ``$CAPSHIM_DB``), for messages.
        flag: ``--db`` or ``CAPSHIM_DB``: where it came from, for messages.
    """

    def __init__(self, engine: sa.Engine, url: str, given: str | None = None, flag: str = "--db"):
        self.engine = engine
        self.url = url
        self.given = given or url  # as the user wrote it, for messages
        self.flag = flag  # --db or CAPSHIM_DB, for messages

    @classmethod
    def open(cls, url: str | None = None, *, migrate: bool = True) -> "Store":
        """Connect to ``url`` (see :func:`resolve_url`) and migrate it to the newest schema.

        A SQLite file's folder is created when missing.

        Raises:
            DbError: bad URL, unreachable server, unwritable file; names the URL.
        """
        full = resolve_url(url)
        u = sa.engine.make_url(full)
        if u.get_backend_name() == "sqlite":
            try:
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DbError(f"{_flag(url)} {_safe(full)}: cannot create folder: {exc.strerror or exc}") from None
            engine = sa.create_engine(u, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
                                     json_deserializer=_stored_json)

            @sa.event.listens_for(engine, "connect")
            def _connect(dbapi_conn, _rec):
                dbapi_conn.isolation_level = None  # let SQLAlchemy's "begin" below open transactions
                dbapi_conn.execute("PRAGMA foreign_keys=ON")

            @sa.event.listens_for(engine, "begin")
            def _begin(conn):
                conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            try:
                # a server that never answers: libpq waits forever unless the URL sets its own limit
                limit = {} if "connect_timeout" in u.query else {"connect_timeout": PG_CONNECT_TIMEOUT_S}
                engine = sa.create_engine(u, pool_pre_ping=True, json_deserializer=_stored_json, connect_args=limit)
            except Exception as exc:  # noqa: BLE001 - a missing driver, a bad option
                raise DbError(f"{_flag(url)} {_safe(full)}: {exc}") from None
        st = cls(engine, full, url or default_url(), _flag(url))
        if migrate:
            st.migrate()
        return st

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()

    def _fail(self, exc: Exception):
        msg = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return DbError(f"{self.flag} {_safe(self.given)}: {msg}")

    # --- schema ----------------------------------------------------------------------
    def migrate(self, revision: str = "head") -> str:
        """Bring the schema forward to ``revision`` (default the newest; a no-op when it is there).

        Returns:
            The revision now in force (:data:`capshim.db.schema.HEAD` for ``"head"``).

        Raises:
            DbError: the database cannot be reached or migrated, or it is at a revision this
                capshim does not know (a newer capshim wrote it: nothing is changed, exit 2).
        """
        if revision == "head":  # a store already at the newest schema is read without Alembic (0.2-0.5 s)
            try:
                with self.engine.connect() as conn:
                    if _stored_revisions(conn) == [S.HEAD]:
                        return S.HEAD
            except sa.exc.SQLAlchemyError as exc:
                raise self._fail(exc) from None
        # Alembic is imported only when the schema may change (a new store, an older one)
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory
        from alembic.util import CommandError as AlembicError

        cfg = Config()
        cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
        known = {r.revision for r in ScriptDirectory.from_config(cfg).walk_revisions()}
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    self._require_create(conn)
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
                current = MigrationContext.configure(conn).get_current_revision()
                tables = set(sa.inspect(conn).get_table_names())
                if current is None and tables:  # another program's database: never add capshim's tables to it
                    raise DbError(f"{self.flag} {_safe(self.given)}: holds tables ({', '.join(sorted(tables)[:5])}) "
                                  "but is not a capshim store (no schema revision): give a new file or another "
                                  "--db")
                if current is not None and current not in known:
                    raise DbError(f"{self.flag} {_safe(self.given)}: the store is at schema revision {current!r}, which "
                                  f"this capshim ({__version__}, newest revision {S.HEAD}) does not know: a newer "
                                  "capshim wrote it; upgrade capshim, or give another --db")
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, revision)
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None
        except AlembicError as exc:  # e.g. several rows in alembic_version: not a store capshim wrote
            raise DbError(f"{self.flag} {_safe(self.given)}: cannot read the store's schema revision: {exc}") from None
        return self.revision()

    def _require_create(self, conn) -> None:
        """On PostgreSQL, refuse before any change when this role may not create in the schema.

        Raises:
            DbError: (exit 2) names the role and the revisions: a writer (the store's owner) must
                move the store forward first; a read-only role never attempts it.
        """
        role, ok = conn.execute(sa.text("SELECT current_user, has_schema_privilege(current_schema(), 'CREATE')")).one()
        if not ok:
            current = ", ".join(_stored_revisions(conn)) or "none"
            raise DbError(f"{self.flag} {_safe(self.given)}: role {role} may not change the schema, and the store "
                          f"is at revision {current}, this capshim needs {S.HEAD}: the store's owner "
                          "must run a capshim command on it first (e.g. capshim db list)")

    def revision(self) -> str | None:
        """The schema revision stored in the database (Alembic's ``alembic_version``), or None.

        Raises:
            DbError: the table holds several revisions (not a store capshim wrote), or the store
                cannot be read.
        """
        try:
            with self.engine.connect() as conn:
                found = _stored_revisions(conn)
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None
        if len(found) > 1:
            raise DbError(f"{self.flag} {_safe(self.given)}: cannot read the store's schema revision: "
                          f"alembic_version holds {len(found)} revisions ({', '.join(found[:5])})")
        return found[0] if found else None

    # --- writing ---------------------------------------------------------------------
    def add(self, rec: BundleRecord) -> tuple[int, bool]:
        """Store one record; the same key twice is a no-op.

        Returns:
            ``(bundle id, added)``; ``added`` is False when the key was already stored (its
            ``signed_by`` is then replaced when the record carries signatures: signed since).

        Raises:
            DbError: the database refused the write (a read-only role: "permission denied").
        """
        try:
            with self.engine.begin() as conn:
                row = conn.execute(sa.select(S.bundles.c.id).where(S.bundles.c.key == rec.key)).first()
                if row:
                    if rec.signed_by:  # signed since it was stored: who signed is kept
                        conn.execute(S.bundles.update().where(S.bundles.c.id == row.id)
                                     .values(signed_by=rec.signed_by))
                    return row.id, False
                bid = self._insert(conn, rec)
            return bid, True
        except sa.exc.IntegrityError:
            # Another writer stored the same bundle between our check and insert.
            with self.engine.begin() as conn:
                row = conn.execute(sa.select(S.bundles.c.id).where(S.bundles.c.key == rec.key)).first()
            if row:
                return row.id, False
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None

    @staticmethod
    def _insert(conn, rec: BundleRecord) -> int:
        cols = {k: v for k, v in asdict(rec).items() if k in S.bundles.c and k != "id"}
        if not cols.get("signed_by"):
            cols.pop("signed_by", None)  # unsigned: NULL, read as [] (and an older schema takes it)
        cols["added_utc"] = _now()
        bid = conn.execute(S.bundles.insert().values(**cols).returning(S.bundles.c.id)).scalar_one()
        arm_rows, run_rows, res_rows = [], [], []
        for pos, a in enumerate(rec.arms):
            arm_rows.append({"bundle_id": bid, "position": pos, "name": a.name, "state": a.state,
                             "profile_name": a.profile_name, "profile_sha256": a.profile_sha256,
                             "simulate_name": a.simulate_name, "simulate_sha256": a.simulate_sha256,
                             "spec": a.spec})
            for r in a.runs:  # the summary contract says only that a run is an object: keep typed columns typed
                run_rows.append({"bundle_id": bid, "arm": a.name, "run": _int(r.get("run")),
                                 "exit_code": _int(r.get("exit_code")),
                                 "signal": None if r.get("signal") is None else str(r.get("signal")),
                                 "timed_out": bool(r.get("timed_out")),
                                 "extra": {k: v for k, v in r.items()
                                           if k not in ("run", "exit_code", "signal", "timed_out")}})
            for test, v in a.results.items():
                res_rows.append({"bundle_id": bid, "arm": a.name, "test": test, **v})
        for table, rows in ((S.arms, arm_rows), (S.runs, run_rows), (S.results, res_rows),
                            (S.samples, [{"bundle_id": bid, **s} for s in rec.samples])):
            if rows:
                conn.execute(table.insert(), rows)
        return bid

    # --- reading ---------------------------------------------------------------------
    def select(self, filters: dict | None = None, match: str = "exact") -> list[dict]:
        """Bundles matching all ``filters`` (see :data:`FILTERS`), oldest first.

        Args:
            filters: ``{key: value}``; None or "" values are ignored.
            match: how text keys match (:data:`capshim.db.terms.MATCHES`): ``exact`` (whole value,
                case-sensitive), ``prefix`` or ``glob`` (``*`` and ``?``; both ignore case; ``%``,
                ``_`` and ``\\`` are plain characters, never SQL LIKE wildcards). ``id`` and ``arm``
                are always exact.

        Returns:
            ``[{"id", "key", "kind", "name", "source", "created_utc",
            "added_utc", "host", "os", "device", "driver", "workload_build",
            "workload_commit", "model", "baseline", "host_name", "config",
            "arms": [{"name", "state", "profile_name", "simulate_name", ...}],
            "signed_by": [{"key", "key_type", "principal", "signed_utc"}]}]``. The ``signed``
            filter keeps bundles with a signature (``yes``) or one by this principal or key.

        Raises:
            DbError: an unknown filter or match, or a bad value (names it).
        """
        if match not in MATCHES:
            raise DbError(f"--match {match!r}: expected one of {', '.join(MATCHES)}")
        b = S.bundles.c
        q = sa.select(S.bundles).order_by(b.created_utc.is_(None), b.created_utc, b.id)  # unknown times last
        for key, value in (filters or {}).items():
            if value is None or value == "":
                continue
            value = bounded.text(str(value), f"--{key} / {key}=" if key in FILTERS else "filter")
            if key not in FILTERS:
                raise DbError(f"filter {key!r}: unknown{did_you_mean(key, FILTERS)}; use one of {', '.join(FILTERS)}")
            if key == "id":
                if not value.isdigit() or int(value) > MAX_ID:
                    raise DbError(f"filter id={value!r}: expected a bundle id (a number up to {MAX_ID})")
                q = q.where(b.id == int(value))
            elif key in ("name", "device", "host", "os", "model"):
                q = q.where(_matches(getattr(b, key), value, match))
            elif key == "build":
                q = q.where(sa.or_(_matches(b.workload_build, value, match),
                                   _matches(b.workload_commit, value, match)))
            elif key == "signed":
                continue  # a JSON column: filtered below, after the query
            elif key in ("profile", "arm"):
                a = S.arms.c
                cond = (a.name == value if key == "arm" else
                        sa.or_(*(_matches(c, value, match) for c in (a.profile_name, a.simulate_name,
                                                                       a.profile_sha256, a.simulate_sha256))))
                q = q.where(b.id.in_(sa.select(a.bundle_id).where(cond)))
            else:
                q = q.where(self._date_cond(key, value))
        try:
            with self.engine.begin() as conn:
                rows = [dict(r._mapping) for r in conn.execute(q)]
                ids = [r["id"] for r in rows]
                arms: dict[int, list] = {i: [] for i in ids}
                if ids:
                    for a in conn.execute(sa.select(S.arms).where(S.arms.c.bundle_id.in_(ids))
                                          .order_by(S.arms.c.bundle_id, S.arms.c.position)):
                        arms[a.bundle_id].append({k: v for k, v in a._mapping.items()
                                                  if k not in ("id", "bundle_id", "position")})
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None
        for r in rows:
            r.pop("metadata", None)
            r.pop("summary", None)
            r.pop("settings", None)
            r["arms"] = arms[r["id"]]
            r["signed_by"] = r.get("signed_by") if isinstance(r.get("signed_by"), list) else []
        wanted = (filters or {}).get("signed")
        if wanted not in (None, ""):
            rows = [r for r in rows if _signed_by_matches(r["signed_by"], str(wanted), match)]
        return rows

    @staticmethod
    def _date_cond(key: str, value: str):
        try:
            if len(value) == 10:
                d = _dt.date.fromisoformat(value)
                if key == "until":
                    d += _dt.timedelta(days=1)
                bound = d.strftime("%Y-%m-%dT00:00:00Z")
            else:
                when = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                if when.tzinfo is not None:  # an offset (+05:30): the stored times are UTC
                    when = when.astimezone(_dt.timezone.utc)
                bound = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise DbError(f"--{key} / {key}={value!r}: expected a date YYYY-MM-DD or an ISO time") from None
        c = S.bundles.c.created_utc
        if key == "since":
            return c >= bound
        return c < bound if len(value) == 10 else c <= bound

    def samples(self, bundle_ids: list[int]) -> list[dict]:
        """Samples of these bundles: ``[{"bundle_id", "role", "arm", "run", "sample", "test", "tok_s"}]``."""
        c = S.samples.c
        q = (sa.select(c.bundle_id, c.role, c.arm, c.run, c.sample, c.test, c.tok_s)
             .where(c.bundle_id.in_(bundle_ids)).order_by(c.bundle_id, c.id))
        try:
            with self.engine.begin() as conn:
                return [dict(r._mapping) for r in conn.execute(q)]
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None

    def results(self, bundle_ids: list[int]) -> list[dict]:
        """The stored summary figures (table ``results``) of these bundles, one dict per arm and test."""
        q = sa.select(S.results).where(S.results.c.bundle_id.in_(bundle_ids)).order_by(S.results.c.id)
        try:
            with self.engine.begin() as conn:
                return [dict(r._mapping) for r in conn.execute(q)]
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None

    def metrics(self, bundle_ids: list[int]) -> dict[int, dict]:
        """Each bundle's metrics: its stored summary's ``metrics`` (``{test: {"unit", "better",
        "spec", ...}}``, :meth:`capshim.bench.metrics.Metric.to_dict`), {} when it names none (a
        llama-bench bundle written before summaries named them). Reads only that part of each summary."""
        q = sa.select(S.bundles.c.id, S.bundles.c.summary["metrics"]).where(S.bundles.c.id.in_(bundle_ids))
        try:
            with self.engine.begin() as conn:
                return {bid: (m if isinstance(m, dict) else {}) for bid, m in conn.execute(q)}
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None

    def summary(self, bundle_id: int) -> dict:
        """The stored ``summary.json`` of one bundle, checked by the summary contract
        (:func:`capshim.summary.validate`, what ``report`` reads).

        Raises:
            DbError: no such bundle, or the store cannot be read.
            SummaryShapeError: the stored summary is not a capshim summary (a row written by
                an older capshim, or by hand); names the bundle and the JSON path (exit 2).
        """
        try:
            with self.engine.begin() as conn:
                v = conn.execute(sa.select(S.bundles.c.summary).where(S.bundles.c.id == bundle_id)).scalar()
        except sa.exc.SQLAlchemyError as exc:
            raise self._fail(exc) from None
        if v is None:
            raise DbError(f"bundle id {bundle_id}: not in the store")
        return summary_contract.validate(v, f"{self.flag} {_safe(self.given)}: bundle #{bundle_id}'s stored summary")


def add_bundle(url: str | None, bundle) -> tuple[int, bool]:
    """Verify and store one bundle folder in the store at ``url`` (None: the default store).

    ``capshim bench --db`` calls it for the bundle it has just sealed.

    Returns:
        ``(bundle id, added)``; ``added`` False when it was already stored.

    Raises:
        IngestError: the bundle does not verify or cannot be read.
        DbError: the store cannot be opened or written.
    """
    rec = read_bundle(bundle)
    rec.signed_by = signed_by(bundle)  # bench --sign signed it before this
    with Store.open(url) as st:
        return st.add(rec)
