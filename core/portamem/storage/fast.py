"""The record store's hot statements on SQLite as raw ``sqlite3`` calls, inside SQLAlchemy's connection.

Building, caching and executing an SQLAlchemy Core statement costs 15-90 us of Python, and decoding
its rows as much again; a save, its indexing and a search ran several dozen of them, about 3-6 ms
of CPU per request. Here the SQL text is built once and the rows are read by position: about 2 us
a statement. The calls go to the same DBAPI connection (so the same transaction) as the
SQLAlchemy statements around them, and store and read values exactly as SQLAlchemy's types do
(JSON as ``json.dumps`` text, vectors as little-endian float32 blobs). PostgreSQL keeps the Core
statements (``portamem.storage.sql``): its driver and types differ, and it is shared by processes
whose throughput is not this one's GIL.

PostgreSQL's hottest reads take the same road with its driver (``pg_select``): the whole memory
rows that a search, the indexer and the formation worker read by id, and the outbox's rows, a dozen
statements a turn and its recall. Through Core each cost 300-650 us of CPU (building the select of
35 columns, its cache key, the result's processing), as raw text 150-250 us, and one statement text
per shape (ids as one array, not an IN list per length) is one the driver prepares once per connection.
psycopg decodes JSON and bytea itself, as SQLAlchemy's types on it do (``record_of(parsed=True)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection

from ..records import MemoryRecord, MemoryType, Source, Status, Tier, Trust
from .schema import audit_t, entities_t, memories

__all__ = ["COLUMNS", "SELECT", "driver", "record_of", "select", "insert_memories", "insert_entities",
           "insert_audit", "executemany", "pg_select", "pg_insert_audit"]

#: the memories table's columns, in its order (``SELECT`` reads them so)
COLUMNS: tuple[str, ...] = tuple(c.name for c in memories.c)
SELECT = "SELECT " + ", ".join(f'"{c}"' for c in COLUMNS) + " FROM memories"
_AT = {name: i for i, name in enumerate(COLUMNS)}
_JSON = frozenset(c.name for c in memories.c if c.type.__class__.__name__ == "JSON")
_WRITTEN = tuple(c for c in COLUMNS if c != "pk")
_INSERT = (f'INSERT INTO memories ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in _WRITTEN)}) '
           f'VALUES ({", ".join("?" for _ in _WRITTEN)}) RETURNING pk')
_ENTITIES = f"INSERT INTO {entities_t.name} (pk, tenant_id, user_id, entity) VALUES (?, ?, ?, ?)"
_AUDIT = (f"INSERT INTO {audit_t.name} (ts, tenant_id, user_id, memory_id, action, actor, detail) "
          "VALUES (?, ?, ?, ?, ?, ?, ?)")
#: placeholders per statement at most (SQLite's limit is 32766; ids are chunked below it)
CHUNK = 500


def driver(conn: Connection) -> Any:
    """The sqlite3 connection under an SQLAlchemy one (its transaction, if one is open)."""
    return conn.connection.dbapi_connection


def _dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=timezone.utc)


def _parsed(value: Any) -> Any:
    return value


def record_of(row: Sequence[Any], *, vectors: bool = True, parsed: bool = False) -> MemoryRecord:
    """A record from a row read by ``SELECT`` (``portamem.storage.schema.row_record`` by position).
    ``parsed``: the JSON columns come decoded (PostgreSQL's driver), not as text (SQLite's)."""
    a = _AT
    loads = _parsed if parsed else json.loads
    blob = row[a["embedding"]] if vectors else None
    metadata = row[a["metadata"]]
    return MemoryRecord(
        memory_id=row[a["memory_id"]],
        tenant_id=row[a["tenant_id"]],
        user_id=row[a["user_id"]],
        session_id=row[a["session_id"]],
        agent_id=row[a["agent_id"]],
        type=MemoryType(row[a["type"]]),
        kind=row[a["kind"]],
        content=row[a["content"]],
        summary=row[a["summary"]],
        entities=list(loads(row[a["entities"]]) or []),
        triples=[list(t) for t in (loads(row[a["triples"]]) or [])],
        embedding=None if blob is None else np.frombuffer(blob, dtype="<f4").tolist(),
        embedding_model=row[a["embedding_model"]],
        embedding_version=row[a["embedding_version"]],
        importance=row[a["importance"]],
        importance_band=row[a["importance_band"]],
        half_life_days=row[a["half_life_days"]],
        created_at=_dt(row[a["created_at"]]),  # type: ignore[arg-type]
        updated_at=_dt(row[a["updated_at"]]),  # type: ignore[arg-type]
        last_accessed_at=_dt(row[a["last_accessed_at"]]),
        access_count=row[a["access_count"]],
        frequency=row[a["frequency"]],
        source=Source(row[a["source"]]),
        trust=Trust(row[a["trust"]]),
        status=Status(row[a["status"]]),
        supersedes=row[a["supersedes"]],
        superseded_by=row[a["superseded_by"]],
        deleted_at=_dt(row[a["deleted_at"]]),
        metadata=dict((loads(metadata) if metadata is not None else None) or {}),
        key_namespace=row[a["key_namespace"]],
        key=row[a["key"]],
        tier=Tier(row[a["tier"]]),
        tiered_at=_dt(row[a["tiered_at"]]),
    )


def field(row: Sequence[Any], name: str) -> Any:
    return row[_AT[name]]


def marks(n: int) -> str:
    return ", ".join("?" * n)


def select(conn: Connection, where: str, params: Sequence[Any] = (), tail: str = "") -> list[tuple[Any, ...]]:
    """Whole memory rows ``WHERE where`` (``?`` placeholders) as tuples in ``COLUMNS`` order."""
    return driver(conn).execute(f"{SELECT} WHERE {where} {tail}", tuple(params)).fetchall()


def select_ids(conn: Connection, ids: Sequence[str], where: str = "", params: Sequence[Any] = ()
               ) -> list[tuple[Any, ...]]:
    """The rows of these memory ids (and ``where``), in chunks."""
    out: list[tuple[Any, ...]] = []
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        out.extend(select(conn, f"memory_id IN ({marks(len(chunk))}){' AND ' + where if where else ''}",
                          [*chunk, *params]))
    return out


def _value(name: str, value: Any) -> Any:
    return json.dumps(value) if name in _JSON else value


def insert_memories(conn: Connection, rows: Iterable[dict[str, Any]]) -> list[int]:
    """Insert rows (``schema.record_row`` plus ``indexed``); their primary keys, in order."""
    db = driver(conn)
    return [db.execute(_INSERT, tuple(_value(c, row.get(c)) for c in _WRITTEN)).fetchone()[0] for row in rows]


def insert_entities(conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    driver(conn).executemany(_ENTITIES, [(r["pk"], r["tenant_id"], r["user_id"], r["entity"]) for r in rows])


def insert_audit(conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    driver(conn).executemany(_AUDIT, [(r["ts"], r["tenant_id"], r.get("user_id"), r.get("memory_id"), r["action"],
                                       r["actor"], json.dumps(r.get("detail") or {})) for r in rows])


def executemany(conn: Connection, sql: str, params: Iterable[Sequence[Any]]) -> None:
    driver(conn).executemany(sql, params)


# ---------------------------------------------------------------------- PostgreSQL (psycopg)
#: ``SELECT`` on PostgreSQL; ``PG_SELECT_NO_VECTOR`` reads NULL for the embedding (a blob per row is most of it)
PG_SELECT = SELECT
PG_SELECT_NO_VECTOR = "SELECT " + ", ".join("NULL" if c == "embedding" else f'"{c}"' for c in COLUMNS) + " FROM memories"
_PG_AUDIT = _AUDIT.replace("?", "%s")


def pg_select(conn: Connection, where: str, params: Sequence[Any] = (), tail: str = "", *,
              vectors: bool = True) -> list[tuple[Any, ...]]:
    """Whole memory rows ``WHERE where`` (``%s`` placeholders) as tuples in ``COLUMNS`` order, on the
    psycopg connection (and transaction) under ``conn``; ``vectors=False``: the embedding read as NULL."""
    with driver(conn).cursor() as cur:
        cur.execute(f"{PG_SELECT if vectors else PG_SELECT_NO_VECTOR} WHERE {where} {tail}", tuple(params))
        return cur.fetchall()


def pg_insert_audit(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """``insert_audit`` on PostgreSQL: the detail as the JSON text SQLAlchemy's JSON type writes."""
    with driver(conn).cursor() as cur:
        cur.executemany(_PG_AUDIT, [(r["ts"], r["tenant_id"], r.get("user_id"), r.get("memory_id"), r["action"],
                                     r["actor"], json.dumps(r.get("detail") or {})) for r in rows])
