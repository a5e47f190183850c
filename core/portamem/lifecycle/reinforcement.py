"""Reinforcement (``Memory.refresh_memory``): a memory someone vouches for again weighs more and
counts as used now, which restarts its decay (``portamem_plugins.eviction``)."""

from __future__ import annotations

from ..background.upkeep import index_now
from ..components import Components
from ..records import MemoryRecord, Status, importance_band, utcnow

__all__ = ["refresh"]


def refresh(parts: Components, record: MemoryRecord, delta: float) -> MemoryRecord:
    """importance += delta (clamped to 0..1), one more access now; committed, audited and indexed."""
    before = record.importance
    now = utcnow()
    record.importance = min(1.0, max(0.0, before + float(delta)))
    record.importance_band = importance_band(record.importance)
    record.last_accessed_at = now
    record.access_count += 1
    record.updated_at = now
    with parts.store.transaction() as conn:
        parts.store.update_fields(
            conn, [record.memory_id], reindex=record.status is Status.ACTIVE,
            importance=record.importance, importance_band=record.importance_band,
            last_accessed_at=now.timestamp(), access_count=record.access_count, updated_at=now.timestamp(),
        )
        parts.store.audit(
            conn, "refresh", tenant_id=record.tenant_id, user_id=record.user_id, memory_id=record.memory_id,
            detail={"importance_before": before, "importance_after": record.importance},
        )
    if record.status is Status.ACTIVE:
        index_now(parts, [record])
    return record
