"""The formation queue's rows (``formation_queue``, schema 8): enqueued with the turn, drained in order.

A row is written in the transaction that writes its turn (``portamem.write.batch``), so a turn
acknowledged is a turn queued, and marked FORMED in the transaction that applies what formation
decided, so a turn is formed once: a crash before that commit leaves it FORMING, and the next
worker (after a restart, or another process's on PostgreSQL, ``storage.claims``) forms it again
from the start. Formed rows are kept until the next maintenance run prunes them (``prune``); a purge takes
out the rows that quote what it purges and an erasure every row of the user (``drop_purged``,
``storage.erasure``), since a row holds the turn's text and the turns before it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import fast
from .schema import FORMED, FORMING, formation_t

__all__ = ["QueuedTurn", "enqueue", "pending", "mark_formed", "backlog", "waiting_upto", "last_pk", "prune",
           "drop_purged"]


#: the queue's hot statements on SQLite (``fast``)
_ENQUEUE = (f"INSERT INTO {formation_t.name} (tenant_id, user_id, session_id, queued_at, turn, memory_ids, state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)")
_PENDING = (f"SELECT pk, tenant_id, user_id, session_id, queued_at, turn, memory_ids FROM {formation_t.name} "
            "WHERE state = ?")
_PENDING_PG = _PENDING.replace("?", "%s")
_FORMED = f"UPDATE {formation_t.name} SET state = ?, formed_at = ?, result = ? WHERE pk = ? AND state = ?"


@dataclass(frozen=True)
class QueuedTurn:
    """One row of the queue: a user turn to form, with the ids of the memories its rule pass wrote."""

    pk: int
    tenant_id: str
    user_id: str
    session_id: str
    queued_at: float
    turn: dict[str, Any]
    memory_ids: list[str]


def enqueue(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Queue turns in the open transaction: each row has ``tenant_id``, ``user_id``, ``session_id``,
    ``turn`` and ``memory_ids``."""
    if not rows:
        return
    now = time.time()
    if conn.dialect.name == "sqlite":  # raw sqlite3 (``fast``), the values SQLAlchemy's JSON stores: on every turn
        fast.executemany(conn, _ENQUEUE, [(r["tenant_id"], r["user_id"], r["session_id"], now, json.dumps(r["turn"]),
                                           json.dumps(r["memory_ids"]), FORMING) for r in rows])
        return
    conn.execute(formation_t.insert(), [{**r, "queued_at": now, "state": FORMING} for r in rows])


def pending(engine: Engine, limit: int, *, after: int = 0, pks: Sequence[int] | None = None) -> list[QueuedTurn]:
    """The oldest turns still to form (``pks``: those of these rows that still are), in queue order."""
    if engine.dialect.name == "sqlite":  # raw sqlite3 (``fast``): polled by the worker for every turn
        keys = list(pks) if pks is not None else []
        where = f" AND pk IN ({fast.marks(len(keys))})" if pks is not None else ""
        with engine.connect() as conn:
            got = fast.driver(conn).execute(f"{_PENDING} AND pk > ?{where} ORDER BY pk LIMIT {int(limit)}",
                                            (FORMING, after, *keys)).fetchall()
        return [QueuedTurn(pk, tenant_id, user_id, session_id, queued_at, dict(json.loads(turn) or {}),
                           [str(m) for m in (json.loads(ids) or [])])
                for pk, tenant_id, user_id, session_id, queued_at, turn, ids in got]
    # PostgreSQL: raw psycopg too (``fast.pg_select``), which decodes the JSON columns itself
    where = " AND pk = ANY(%s::integer[])" if pks is not None else ""
    with engine.connect() as conn, fast.driver(conn).cursor() as cur:
        cur.execute(f"{_PENDING_PG} AND pk > %s{where} ORDER BY pk LIMIT {int(limit)}",
                    (FORMING, after, *([list(pks)] if pks is not None else [])))
        got = cur.fetchall()
    return [QueuedTurn(pk, tenant_id, user_id, session_id, queued_at, dict(turn or {}),
                       [str(m) for m in (ids or [])])
            for pk, tenant_id, user_id, session_id, queued_at, turn, ids in got]


def mark_formed(conn: Connection, pk: int, result: dict[str, Any]) -> bool:
    """Mark one turn formed in the transaction that applied its decisions; False when it already was
    (another worker formed it first: the caller rolls back)."""
    if conn.dialect.name == "sqlite":  # raw sqlite3 (``fast``): once per formed turn
        return bool(fast.driver(conn).execute(_FORMED, (FORMED, time.time(), json.dumps(result), pk, FORMING)).rowcount)
    done = conn.execute(formation_t.update().where(formation_t.c.pk == pk, formation_t.c.state == FORMING)
                        .values(state=FORMED, formed_at=time.time(), result=result))
    return bool(done.rowcount)


def backlog(engine: Engine) -> tuple[int, float | None]:
    """(turns waiting, when the oldest of them was queued)."""
    with engine.connect() as conn:
        n, oldest = conn.execute(sa.select(sa.func.count(), sa.func.min(formation_t.c.queued_at))
                                 .where(formation_t.c.state == FORMING)).one()
    return int(n or 0), oldest


def last_pk(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.max(formation_t.c.pk))).scalar() or 0)


def waiting_upto(engine: Engine, pk: int) -> int:
    """Turns queued at or before ``pk`` that are not formed yet (what ``flush`` waits for)."""
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            return int(fast.driver(conn).execute(f"SELECT count(*) FROM {formation_t.name} WHERE state = ? AND pk <= ?",
                                                 (FORMING, pk)).fetchone()[0] or 0)
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(formation_t.c.state == FORMING,
                                                                  formation_t.c.pk <= pk)).scalar() or 0)


def prune(conn: Connection, older_than: float, *, tenant_id: str) -> int:
    """Drop the tenant's rows formed before ``older_than`` (a timestamp); returns how many."""
    t = formation_t.c
    return int(conn.execute(formation_t.delete().where(t.tenant_id == tenant_id, t.state == FORMED,
                                                       t.formed_at < older_than)).rowcount or 0)


def drop_purged(conn: Connection, tenant_id: str, user_ids: Sequence[str], memory_ids: Sequence[str]) -> int:
    """In a purge's transaction: drop the users' formed rows (a turn, or a turn before it, may be what an
    episode or a statement purged now said) and the rows still queued of the turns that wrote a purged
    memory, and take those turns out of the context the users' other queued rows keep; returns the rows
    dropped."""
    t = formation_t.c
    theirs = (t.tenant_id == tenant_id, t.user_id.in_(sorted(set(user_ids))))
    n = int(conn.execute(formation_t.delete().where(*theirs, t.state == FORMED)).rowcount or 0)
    ids = set(memory_ids)
    rows = conn.execute(sa.select(t.pk, t.session_id, t.turn, t.memory_ids).where(*theirs)).all()
    gone = {r.pk for r in rows if ids.intersection(r.memory_ids or [])}
    if gone:
        conn.execute(formation_t.delete().where(t.pk.in_(sorted(gone))))
    said = {(r.session_id, (r.turn or {}).get("user")) for r in rows if r.pk in gone}
    for r in rows:
        context = (r.turn or {}).get("context", [])
        kept = [c for c in context if (r.session_id, c.get("user")) not in said]
        if r.pk not in gone and len(kept) < len(context):
            conn.execute(formation_t.update().where(t.pk == r.pk).values(turn={**r.turn, "context": kept}))
    return n + len(gone)
