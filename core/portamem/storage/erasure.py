"""Erasing a user's rows from the record store: every table that holds rows of a user, found from the
schema itself, so a table added later is erased by construction; and scrubbing the texts the audit
log quotes of memories that are purged.

May import: the data model only (the storage package's own modules beside).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import json
import zlib
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..records import from_iso
from .keywords import keyword_md
from .schema import audit_t, cold_t, md, memories
from .termcache import TermCache

if TYPE_CHECKING:
    from .sql import RecordStore

__all__ = ["user_tables", "erase_rows", "user_memory_ids", "cold_deleted", "scrub_audit", "prune_cache",
           "AUDIT_TEXT_KEYS"]

#: keys of an audit row's detail that quote a memory's text (an update's previous text, a
#: supersession's newer text, a reconciler's reason or why its decision was refused): emptied once the
#: memory they quote is purged
AUDIT_TEXT_KEYS = ("content", "previous_content", "reason", "refused")


def user_tables() -> list[sa.Table]:
    """Every table of the store that holds rows of a user (a ``tenant_id`` and a ``user_id`` column),
    but the audit log, children before their parents (foreign keys first)."""
    tables = [*reversed(md.sorted_tables), *keyword_md.sorted_tables]
    return [t for t in tables if t is not audit_t and {"tenant_id", "user_id"} <= set(t.c.keys())]


def erase_rows(store: RecordStore, conn: Connection, tenant_id: str, user_id: str) -> dict[str, int]:
    """Delete every row of one user from every table (``user_tables``) and their audit rows, in the
    caller's transaction; returns the rows deleted per table. The keyword cache forgets the user at the
    commit (``storage.termcache``)."""
    counts: dict[str, int] = {}
    for table in user_tables():
        result = conn.execute(table.delete().where(table.c.tenant_id == tenant_id, table.c.user_id == user_id))
        counts[table.name] = int(result.rowcount or 0)
    # an audit row of one of the user's memories written without its user (none should be): by id too
    result = conn.execute(audit_t.delete().where(audit_t.c.tenant_id == tenant_id, audit_t.c.user_id == user_id))
    counts[audit_t.name] = int(result.rowcount or 0)
    if store.keywords.cache is not None:
        store.keywords.cache.apply([("erase", tenant_id, user_id)])  # now (the write lock is held) and at the commit
        TermCache.note(conn, ("erase", tenant_id, user_id))
    return counts


def user_memory_ids(conn: Connection, tenant_id: str, user_id: str) -> list[str]:
    """The ids of every memory of the user, in the record store's tables (any status) and the archive."""
    out: list[str] = []
    for c in (memories.c, cold_t.c):
        out += [r[0] for r in conn.execute(sa.select(c.memory_id).where(c.tenant_id == tenant_id,
                                                                        c.user_id == user_id))]
    return out


def scrub_audit(conn: Connection, tenant_id: str, user_ids: Sequence[str], memory_ids: Sequence[str]) -> int:
    """Empty the texts (``AUDIT_TEXT_KEYS``) audit rows quote of purged memories: the rows of those
    memories, a supersession row of an older memory that quotes the newer one purged, and a formation
    row whose decision targeted one. The rows stay (what happened, when, by whom); returns how many
    changed."""
    ids = set(memory_ids)
    if not ids:
        return 0
    a = audit_t.c
    rows: list[Any] = []
    chunked = sorted(ids)
    for start in range(0, len(chunked), 500):
        rows += conn.execute(sa.select(a.pk, a.memory_id, a.detail).where(
            a.tenant_id == tenant_id, a.memory_id.in_(chunked[start:start + 500]))).all()
    rows += conn.execute(sa.select(a.pk, a.memory_id, a.detail).where(
        a.tenant_id == tenant_id, a.user_id.in_(sorted(set(user_ids))), a.action.in_(("supersede", "form")))).all()
    changed: dict[int, dict[str, Any]] = {}
    for pk, memory_id, detail in rows:
        if not isinstance(detail, dict) or not any(k in detail for k in AUDIT_TEXT_KEYS):
            continue
        if memory_id in ids or detail.get("superseded_by") in ids or detail.get("target") in ids:
            changed[pk] = {k: (None if k in AUDIT_TEXT_KEYS else v) for k, v in detail.items()}
    for pk, detail in changed.items():
        conn.execute(audit_t.update().where(a.pk == pk).values(detail=detail))
    return len(changed)


def cold_deleted(conn: Connection, tenant_id: str, cutoff: float) -> list[tuple[str, str]]:
    """(memory id, user id) of the tenant's archived records that are forgotten, deleted at or before
    ``cutoff``: none since an archived row cannot be forgotten without leaving the archive first, but a
    store written before that held some, and purge reaches every tier."""
    out: list[tuple[str, str]] = []
    c = cold_t.c
    for memory_id, user_id, document in conn.execute(sa.select(c.memory_id, c.user_id, c.document)
                                                      .where(c.tenant_id == tenant_id)):
        doc = json.loads(zlib.decompress(document))
        if doc.get("status") != "deleted":
            continue
        at = doc.get("deleted_at")
        when = from_iso(at) if at is not None else None
        if when is None or when.timestamp() <= cutoff:
            out.append((memory_id, user_id))
    return out


def prune_cache(store: RecordStore, conn: Connection, tenant_id: str, user_ids: Sequence[str]) -> None:
    """After a purge in ``conn``'s transaction: the keyword cache drops the users' terms no record holds
    at the commit (``TermCache``: a search's empty answer keeps the word it asked for)."""
    if store.keywords.cache is not None:
        for user_id in sorted(set(user_ids)):
            TermCache.note(conn, ("prune", tenant_id, user_id))
