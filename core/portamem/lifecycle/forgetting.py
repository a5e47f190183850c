"""Forgetting and its undoing: a soft delete (forget, eviction, consolidation) leaves search at once and
stays restorable until the grace period ends; purge then removes it for good.

May import: the data model, ``portamem.components``, storage and the background path's upkeep.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..background.upkeep import index_now
from ..components import Components
from ..filters import SearchFilters
from ..records import MemoryRecord, Status, utcnow
from ..storage import formation as formation_queue
from ..storage.erasure import cold_deleted, prune_cache, scrub_audit

__all__ = ["soft_delete", "restore", "purge", "holders"]


def holders(parts: Components, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[str]:
    """The rows that hold what each id's save said now: the id itself, or, for a save the review merged
    into an older duplicate (or a consolidation merged into another memory: deleted, with
    ``superseded_by``), the memory it was merged into, followed to the end. A value superseded by a newer
    statement is not merged (its status is superseded) and stays its own: forgetting the old budget
    leaves the new one."""
    out: list[str] = []
    for memory_id in memory_ids:
        seen = {memory_id}
        row = parts.store.get(tenant_id, user_id, [memory_id], vectors=False).get(memory_id)
        while row is not None and row.status is Status.DELETED and row.superseded_by \
                and row.superseded_by not in seen:
            into = row.superseded_by
            seen.add(into)
            row = parts.store.get(tenant_id, user_id, [into], vectors=False).get(into)
            if row is None and not parts.store.cold_records(tenant_id, user_id, [into], vectors=False):
                break  # purged since: the id's own row is all there is
            memory_id = into
        out.append(memory_id)
    return list(dict.fromkeys(out))


def soft_delete(
    parts: Components, ids: Sequence[str], *, user_id: str, tenant_id: str, action: str, actor: str,
    now: datetime | None = None, superseded_by: str | None = None,
) -> list[str]:
    """Mark the records deleted (those not deleted yet), audit each as ``action`` by ``actor``, and take
    them out of the index; returns the ids that changed."""
    found = parts.store.get(tenant_id, user_id, ids)
    now = now or utcnow()
    changed = [m for m, r in found.items() if r.status is not Status.DELETED]
    extra = {} if superseded_by is None else {"superseded_by": superseded_by}
    with parts.store.transaction() as conn:
        parts.store.update_fields(
            conn, changed, reindex=True, status=Status.DELETED.value,
            deleted_at=now.timestamp(), updated_at=now.timestamp(), **extra,
        )
        parts.store.audit_many(
            conn,
            [{"action": action, "actor": actor, "tenant_id": tenant_id, "user_id": user_id, "memory_id": m,
              "detail": {"previous_status": found[m].status.value, **extra}} for m in changed],
        )
    index_now(parts, [], deleted=changed)
    return changed


def purge(parts: Components, tenant_id: str, cutoff: float) -> int:
    """Hard-delete the tenant's soft-deleted records deleted at or before ``cutoff`` (a timestamp), in
    every tier (a forgotten record cannot be archived, but an older store's archive may hold some);
    superseded memories are history, never purged. The texts the audit log quotes of them are emptied
    (``portamem.storage.erasure.scrub_audit``): a purged memory is gone, its trail stays; so are the turns
    the formation queue keeps that may say it (``portamem.storage.formation.drop_purged``)."""
    victims = [
        (r.memory_id, r.user_id) for r in parts.store.list(tenant_id, None, SearchFilters(statuses=(Status.DELETED,)))
        if r.deleted_at is not None and r.deleted_at.timestamp() <= cutoff
    ]
    with parts.store.engine.connect() as conn:
        victims += cold_deleted(conn, tenant_id, cutoff)
    if not victims:
        return 0
    ids = [m for m, _ in victims]
    with parts.store.transaction() as conn:
        n = parts.store.purge(conn, ids, tenant_id=tenant_id)
        scrub_audit(conn, tenant_id, sorted({u for _, u in victims}), ids)
        formation_queue.drop_purged(conn, tenant_id, [u for _, u in victims], ids)
        prune_cache(parts.store, conn, tenant_id, [u for _, u in victims])
        parts.store.audit_many(
            conn,
            [{"action": "purge", "tenant_id": tenant_id, "user_id": u, "memory_id": m} for m, u in victims],
        )
    parts.store.scrub_log()  # the log's copies of the purged pages go too
    parts.outbox.forget(ids)
    return n


def restore(parts: Components, record: MemoryRecord) -> MemoryRecord:
    """Undo a soft delete (forget, eviction) of a record not yet purged; anything else is left as is."""
    if record.status is not Status.DELETED:
        return record
    record.status = Status.ACTIVE
    record.deleted_at = None
    record.updated_at = utcnow()
    with parts.store.transaction() as conn:
        parts.store.update_fields(conn, [record.memory_id], reindex=True, status="active", deleted_at=None,
                                  updated_at=record.updated_at.timestamp())
        parts.store.audit(conn, "restore", tenant_id=record.tenant_id, user_id=record.user_id,
                          memory_id=record.memory_id)
    parts.attach_embeddings([record])
    index_now(parts, [record])
    return record
