"""Every difference between the SQL backends, in one place: opening, upserts, schema locking.

The rest of the record store is dialect-neutral SQLAlchemy Core. SQLite and PostgreSQL differ in
how a connection is set up (pragmas, math functions), in the upsert construct (each dialect has its
own ``INSERT ... ON CONFLICT``; a bare ``SET df = df + 1`` is ambiguous on PostgreSQL), and in how
concurrent processes creating the schema are kept apart.
"""

from __future__ import annotations

import math
import select
import time
from functools import lru_cache
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from ..errors import BackendNotInstalledError, StoreOpenError, StoreUnreachableError

__all__ = ["SUPPORTED", "open_engine", "add_counts", "dialect_insert", "reset_sequences", "schema_lock", "safe_url",
           "upsert"]

#: dialect -> (the driver to name, the extra that installs it)
SUPPORTED: dict[str, tuple[str, str | None]] = {"sqlite": ("sqlite3", None), "postgresql": ("psycopg", "postgres")}

#: any constant: the advisory lock that serialises schema creation and migration on PostgreSQL
_SCHEMA_LOCK = 7_311_902_341

#: a pooled PostgreSQL connection given back less than this long ago (seconds), whose socket has nothing
#: to read, is taken without a ping (``_ping_when_stale``)
FRESH_S = 1.0


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    # FULL: a committed (acknowledged) write survives power loss, not just a process kill
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    # a deleted row's bytes are overwritten with zeros, not left in a free page or cell that a copy of
    # the file carries: a forgotten memory's text must not outlive its purge (``RecordStore.scrub_log``)
    cur.execute("PRAGMA secure_delete=ON")
    try:
        cur.execute("SELECT ln(1.0)")
    except Exception:  # an SQLite built without its math functions: BM25's idf needs ln
        dbapi_conn.create_function("ln", 1, math.log, deterministic=True)
    cur.close()


def _no_autocheckpoint(dbapi_conn: Any, _record: Any) -> None:
    # a commit of this process never copies the log back into the database: another process does
    # (``RecordStore.checkpoint``, the indexer's worker), off the acknowledged path
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA wal_autocheckpoint=0")
    cur.close()


def _readable(dbapi_conn: Any) -> bool:
    """Whether the server sent anything to an idle connection (a shutdown's or a terminated backend's
    message, or the socket closed): then it may be gone. True where that cannot be told without waiting."""
    try:
        poller = select.poll()
        poller.register(dbapi_conn.fileno(), select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except Exception:  # no poll (Windows), or a closed connection
        return True


def _ping_when_stale(engine: Engine) -> None:
    """``pool_pre_ping`` where it can find something: a connection is pinged when it is taken from the pool
    unless it was given back within ``FRESH_S`` and the server has sent it nothing since (what a restart,
    ``pg_terminate_backend`` or an idle timeout sends before closing it). Under load every connection is
    given back and taken again within milliseconds, and a ping of each was a third of the statements a
    turn and its recall sent; a dead connection found by its ping is replaced, as pre-ping replaces it."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _given_back(_dbapi_conn: Any, record: Any) -> None:
        if record is not None:
            record.info["portamem_returned"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _taken(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("portamem_returned")
        if returned is not None and time.monotonic() - returned < FRESH_S and not _readable(dbapi_conn):
            return
        try:
            dialect.do_ping(dbapi_conn)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_conn, None):
                # as a failed pre-ping: every older pooled connection is dropped, and this one replaced
                raise sa.exc.InvalidatePoolError(str(exc)) from exc
            raise


def open_engine(url: str, *, autocheckpoint: bool = True) -> Engine:
    """An engine for ``url``, connected once, or a typed error naming the extra or the URL tried.
    ``autocheckpoint=False``: SQLite's commits never checkpoint its write-ahead log (someone else must)."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreOpenError(f"not a database URL: {url!r} ({exc})") from exc
    dialect = parsed.get_backend_name()
    if dialect not in SUPPORTED:
        raise StoreOpenError(
            f"{dialect}: unsupported record store; use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        )
    driver, extra = SUPPORTED[dialect]
    hint = f"pip install 'portamem[{extra}]'" if extra else "a Python built with sqlite3"
    if dialect == "sqlite" and parsed.database and parsed.database != ":memory:":
        try:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreOpenError(f"cannot open record store {url}: {exc}") from exc
    try:
        kwargs: dict[str, Any] = {"future": True}
        if dialect == "postgresql":
            # a pooled connection may have been closed by the server or a restart: pinged when it may have
            # been (``_ping_when_stale``)
            kwargs.update(connect_args={"connect_timeout": 10})
        engine = sa.create_engine(url, **kwargs)
        if dialect == "postgresql":
            _ping_when_stale(engine)
    except sa.exc.NoSuchModuleError as exc:
        raise BackendNotInstalledError(
            f"{safe_url(url)}: no SQLAlchemy driver {parsed.drivername!r}; use {dialect}+{driver}:// "
            f"({hint})", extra or "",
        ) from exc
    except ImportError as exc:
        raise BackendNotInstalledError(
            f"{safe_url(url)}: the driver module {exc.name or parsed.drivername!r} is not installed; "
            f"use {dialect}+{driver}:// and install it with: {hint}", extra or "",
        ) from exc
    if dialect == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        if not autocheckpoint:
            event.listen(engine, "connect", _no_autocheckpoint)
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        engine.dispose()
        if dialect == "sqlite":
            raise StoreOpenError(f"cannot open record store {url}: {exc.orig}") from exc
        raise StoreUnreachableError(f"cannot reach the record store at {safe_url(url)}: {exc.orig}",
                                    safe_url(url)) from exc
    except sa.exc.SQLAlchemyError as exc:
        engine.dispose()
        raise StoreOpenError(f"cannot open record store {safe_url(url)}: {exc}") from exc
    return engine


def schema_lock(conn: Connection) -> None:
    """Hold off other processes creating or migrating the schema until this transaction ends.

    SQLite's write lock does that already; on PostgreSQL two processes creating the same table at
    once fail with a duplicate-key error in the catalogue.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK})


def dialect_insert(conn: Connection, table: sa.Table) -> Any:
    """The dialect's INSERT construct: the one that offers ``on_conflict_do_update``."""
    return _insert(conn.dialect.name, table)


def _insert(dialect: str, table: sa.Table) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def upsert(conn: Connection, table: sa.Table, keys: Sequence[str], row: Mapping[str, Any]) -> None:
    """Insert ``row`` or overwrite its non-key columns where the keys exist (one statement, race-free)."""
    stmt = dialect_insert(conn, table).values(**row)
    conn.execute(stmt.on_conflict_do_update(
        index_elements=list(keys), set_={c: stmt.excluded[c] for c in row if c not in keys}
    ))


def add_counts(conn: Connection, table: sa.Table, keys: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """Add each row's counters to the stored ones (inserting rows that are missing).

    Rows are applied in key order, so concurrent transactions lock counter rows in one order and
    cannot deadlock each other.
    """
    if not rows:
        return
    ordered = sorted(rows, key=lambda r: tuple(r[k] for k in keys))
    counters = tuple(c for c in ordered[0] if c not in keys)
    if conn.dialect.name == "sqlite":  # the same upsert as raw sqlite3 (``storage.fast``)
        columns = (*keys, *counters)
        sql = (f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
               f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
               + ", ".join(f"{c} = {table.name}.{c} + excluded.{c}" for c in counters))
        conn.connection.dbapi_connection.executemany(sql, [tuple(r[c] for c in columns) for r in ordered])
        return
    conn.execute(_add_counts_stmt(conn.dialect.name, table, tuple(keys), counters), ordered)


@lru_cache(maxsize=64)
def _add_counts_stmt(dialect: str, table: sa.Table, keys: tuple[str, ...], counters: tuple[str, ...]) -> Any:
    """The counter upsert of one table, built once per dialect: building it cost more than a keyword
    update of one saved record runs for."""
    stmt = _insert(dialect, table)
    return stmt.on_conflict_do_update(index_elements=list(keys),
                                      set_={c: table.c[c] + stmt.excluded[c] for c in counters})


def reset_sequences(conn: Connection, tables: Sequence[sa.Table]) -> None:
    """After rows were inserted with their own keys, let new rows continue after the largest.

    SQLite's integer keys do so by themselves; a PostgreSQL serial column's sequence does not move.
    """
    if conn.dialect.name != "postgresql":
        return
    for table in tables:
        conn.execute(sa.text(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', 'pk'), COALESCE(MAX(pk), 1), MAX(pk) IS NOT NULL) "
            f"FROM {table.name}"
        ))
