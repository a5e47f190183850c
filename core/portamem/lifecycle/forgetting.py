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

__all__ = ["soft_delete", "restore", "purge"]


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
    """Hard-delete the tenant's soft-deleted records deleted at or before ``cutoff`` (a timestamp);
    superseded memories are history, never purged."""
    victims = [
        r for r in parts.store.list(tenant_id, None, SearchFilters(statuses=(Status.DELETED,)))
        if r.deleted_at is not None and r.deleted_at.timestamp() <= cutoff
    ]
    if not victims:
        return 0
    with parts.store.transaction() as conn:
        n = parts.store.purge(conn, [r.memory_id for r in victims], tenant_id=tenant_id)
        parts.store.audit_many(
            conn,
            [{"action": "purge", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id}
             for r in victims],
        )
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
