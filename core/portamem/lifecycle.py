"""Maintenance: decay eviction through the policy hooks, purge after grace, consolidation over capacity."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from .dedupe import is_duplicate
from .errors import ValidationError
from .filters import SearchFilters
from .records import MemoryRecord, utcnow

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["MaintenanceReport", "maintain", "consolidate"]


@dataclass
class MaintenanceReport:
    evicted: list[str] = field(default_factory=list)
    purged: int = 0
    #: (kept id, merged ids)
    consolidated: list[tuple[str, list[str]]] = field(default_factory=list)


def maintain(
    mem: Memory, *, now: datetime | None = None, policy: str | None = None, tenant_id: str | None = None
) -> MaintenanceReport:
    """One maintenance run over every user pool of a tenant."""
    now = now or utcnow()
    tenant_id = tenant_id or mem.tenant_id
    report = MaintenanceReport()
    named = mem.hooks.eviction_policies()
    if policy is not None and policy not in named:
        raise ValidationError(f"unknown eviction policy {policy!r}; known: {sorted(named)}")
    for user_id in mem.store.user_ids(tenant_id):
        pool = mem.store.list(tenant_id, user_id, SearchFilters())
        if policy is not None:
            victims = list(named[policy](pool, now, mem.settings))
        else:
            victims = mem.hooks.eviction(pool, now, mem.settings) or []
        known = {r.memory_id for r in pool}
        victims = [v for v in dict.fromkeys(victims) if v in known]
        if victims:
            mem._soft_delete(victims, user_id=user_id, tenant_id=tenant_id, action="evict", actor="maintain", now=now)
            report.evicted.extend(victims)
        if len(pool) - len(victims) > mem.settings.pool_capacity:
            survivors = [r for r in pool if r.memory_id not in set(victims)]
            report.consolidated.extend(consolidate(mem, survivors, now=now))
    report.purged = mem.purge_deleted(older_than=timedelta(days=mem.settings.grace_days), tenant_id=tenant_id, now=now)
    return report


def consolidate(mem: Memory, pool: list[MemoryRecord], *, now: datetime) -> list[tuple[str, list[str]]]:
    """Merge duplicates (``portamem.dedupe.is_duplicate``) into the newest of each group."""
    # a keyed memory is its key's value, never merged away (portamem.keys)
    records = [r for r in pool if r.key is None and r.embedding is not None
               and r.embedding_model == mem.embedder.name]
    records.sort(key=lambda r: r.created_at, reverse=True)
    if len(records) < 2:
        return []
    matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
    taken = np.zeros(len(records), dtype=bool)
    groups: list[tuple[MemoryRecord, list[MemoryRecord]]] = []
    for start in range(0, len(records), 512):
        sims = matrix[start:start + 512] @ matrix.T
        for offset, row in enumerate(sims):
            i = start + offset
            if taken[i]:
                continue
            taken[i] = True
            near = np.flatnonzero((row >= mem.settings.dedupe_threshold) & ~taken)
            dup = np.asarray([j for j in near if is_duplicate(records[i].content, records[j].content,
                                                               float(row[j]), mem.settings.dedupe_threshold)],
                             dtype=int)
            if dup.size:
                taken[dup] = True
                groups.append((records[i], [records[j] for j in dup]))
    out = []
    for keep, merged in groups:
        mem._absorb(keep, merged, now=now)
        out.append((keep.memory_id, [m.memory_id for m in merged]))
    return out
