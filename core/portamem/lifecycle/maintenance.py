"""Maintenance: decay eviction through the policy hooks, purge after grace, consolidation over capacity,
abstraction of repeated memories, and the scheduled maintainer that runs it (and the audit scan) in
the background.

May import: everything below lifecycle (the data model, ``portamem.components``, storage, the write,
background and read paths).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from collections.abc import Sequence
from typing import Callable

import numpy as np

from ..background.upkeep import index_now, reindex
from ..components import Components
from ..language.duplicates import is_duplicate
from ..errors import ValidationError
from ..filters import SearchFilters
from ..read.usage import RetrievalLog
from ..records import MemoryRecord, MemoryType, Tier, utcnow
from ..storage import formation as formation_queue
from ..write.batch import close_sessions
from ..write.scope import may_merge
from .abstraction import abstract
from .forgetting import purge, soft_delete
from .tiers import move, plan

__all__ = ["MaintenanceReport", "Maintainer", "maintain", "consolidate", "absorb", "promote_candidates", "retier"]

log = logging.getLogger(__name__)

#: rebuild an embedded (milvus-lite) vector index when at least this many rows, and half of it, left
#: the hot tier in one maintenance run
REBUILD_MIN = 1000


@dataclass
class MaintenanceReport:
    evicted: list[str] = field(default_factory=list)
    purged: int = 0
    #: (kept id, merged ids)
    consolidated: list[tuple[str, list[str]]] = field(default_factory=list)
    #: memories the audit scan flagged for review (scheduled runs only)
    audit_findings: int = 0
    #: abstract memories written or updated (``portamem.lifecycle.abstraction``)
    abstracted: list[str] = field(default_factory=list)
    #: memories moved between storage tiers, by the tier they moved to (``portamem.lifecycle.tiers``)
    tiered: dict[str, list[str]] = field(default_factory=dict)
    #: formed turns the formation queue let go of (``portamem.storage.formation.prune``)
    formed_pruned: int = 0


def maintain(
    parts: Components, log: RetrievalLog, *, now: datetime | None = None, policy: str | None = None,
    tenant_id: str | None = None,
) -> MaintenanceReport:
    """One maintenance run over every user pool of a tenant."""
    now = now or utcnow()
    tenant_id = tenant_id or parts.tenant_id
    report = MaintenanceReport()
    # only an embedded index is rebuilt (below): a server's count is a query of every row
    rebuildable = parts.settings.tiers and getattr(parts.index, "lite", False)
    indexed_before = parts.index.count() if rebuildable else 0
    log.flush()  # decay counts from the last use: the buffered uses first
    named = parts.hooks.eviction_policies()
    if policy is not None and policy not in named:
        raise ValidationError(f"unknown eviction policy {policy!r}; known: {sorted(named)}")
    for user_id in parts.store.user_ids(tenant_id):
        close_sessions(parts, tenant_id, user_id, now=now, idle_s=parts.settings.session_idle_s)
        promote_candidates(parts, tenant_id, user_id, now=now)
        pool = parts.store.list(tenant_id, user_id, SearchFilters())
        if policy is not None:
            victims = list(named[policy](pool, now, parts.settings))
        else:
            victims = parts.hooks.eviction(pool, now, parts.settings) or []
        known = {r.memory_id for r in pool}
        victims = [v for v in dict.fromkeys(victims) if v in known]
        if victims:
            soft_delete(parts, victims, user_id=user_id, tenant_id=tenant_id, action="evict", actor="maintain",
                        now=now)
            report.evicted.extend(victims)
        survivors = [r for r in pool if r.memory_id not in set(victims)]
        if len(survivors) > parts.settings.pool_capacity:
            report.consolidated.extend(consolidate(parts, survivors, now=now))
            merged = {m for _, ms in report.consolidated for m in ms}
            survivors = [r for r in survivors if r.memory_id not in merged]
        report.abstracted.extend(abstract(parts, survivors, user_id=user_id, tenant_id=tenant_id, now=now))
        if parts.settings.tiers:
            for target, moved in retier(parts, tenant_id, user_id, now=now).items():
                report.tiered.setdefault(target.value, []).extend(moved)
    report.purged = purge(parts, tenant_id, (now - timedelta(days=parts.settings.grace_days)).timestamp())
    with parts.store.transaction() as conn:  # the turns formed by now are done with: their texts go
        report.formed_pruned = formation_queue.prune(conn, now.timestamp(), tenant_id=tenant_id)
    left = sum(len(ids) for tier, ids in report.tiered.items() if tier != Tier.HOT.value)
    if rebuildable and left >= max(REBUILD_MIN, indexed_before // 2):
        # milvus-lite keeps deleted rows in its segments (memory, and every open reads them) until a
        # compaction it rarely runs: an index that lost half its rows to the lower tiers is rebuilt
        logging.getLogger(__name__).info("rebuilding the vector index: %d of %d rows left the hot tier", left,
                                         indexed_before)
        reindex(parts)
    return report


def retier(parts: Components, tenant_id: str, user_id: str, *, now: datetime) -> dict[Tier, list[str]]:
    """Make the tier moves ``portamem.lifecycle.tiers.plan`` finds among the user's memories."""
    planned = plan(parts.store.list(tenant_id, user_id, SearchFilters()), now, parts.settings)
    out: dict[Tier, list[str]] = {}
    for target in Tier:
        chosen = {m.memory_id: m.reason for m in planned if m.target is target}
        if chosen:
            made = move(parts, tenant_id, user_id, list(chosen), target, now=now, actor="maintain", reason=chosen)
            out[target] = [m.memory_id for m in made]
    return out


def promote_candidates(parts: Components, tenant_id: str, user_id: str, *, now: datetime) -> list[str]:
    """The working-memory candidates of the user's ended sessions become long-term memory of their kind
    (``promote_to``): the session that could have said them a second time is over, and decay would
    otherwise evict them with the task half-life (1 day) before the user asks. Their episodes hold
    the same turns only in part."""
    open_sessions = set(parts.store.session_ids(tenant_id, user_id))
    rows = parts.store.list(tenant_id, user_id, SearchFilters(types=(MemoryType.WORKING,)))
    ready = [r for r in rows if isinstance(r.metadata.get("promote_to"), str) and r.session_id not in open_sessions]
    if not ready:
        return []
    for r in ready:
        r.type = MemoryType(r.metadata.pop("promote_to"))
        r.half_life_days = parts.settings.half_lives[r.kind if r.kind in parts.settings.half_lives else "fact"]
        r.updated_at = now
    with parts.store.transaction() as conn:
        parts.store.update_each(conn, [{"memory_id": r.memory_id, "type": r.type.value, "metadata": r.metadata,
                                        "half_life_days": r.half_life_days, "updated_at": now.timestamp(),
                                        "indexed": 0} for r in ready])
        parts.store.audit_many(conn, [{"action": "promote", "tenant_id": tenant_id, "user_id": user_id,
                                       "memory_id": r.memory_id, "actor": "maintain",
                                       "detail": {"session_ended": r.session_id, "type": r.type.value}}
                                      for r in ready])
    index_now(parts, ready)
    return [r.memory_id for r in ready]


def consolidate(parts: Components, pool: list[MemoryRecord], *, now: datetime) -> list[tuple[str, list[str]]]:
    """Merge duplicates (``portamem.language.duplicates.is_duplicate``) into the newest of each group."""
    # a keyed memory is its key's value, never merged away (portamem.portable.keys)
    records = [r for r in pool if r.key is None and r.embedding is not None
               and r.embedding_model == parts.embedder.name]
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
            near = np.flatnonzero((row >= parts.settings.dedupe_threshold) & ~taken)
            # a merge stays in one scope and one trust (portamem.write.scope): a shared memory is never
            # retired into an agent's private copy, nor a web sighting folded into what the user said
            dup = np.asarray([j for j in near if may_merge(records[i], records[j])
                              and records[i].trust is records[j].trust
                              and is_duplicate(records[i].content, records[j].content,
                                               float(row[j]), parts.settings.dedupe_threshold)],
                             dtype=int)
            if dup.size:
                taken[dup] = True
                groups.append((records[i], [records[j] for j in dup]))
    out = []
    for keep, merged in groups:
        absorb(parts, keep, merged, now=now)
        out.append((keep.memory_id, [m.memory_id for m in merged]))
    return out


def absorb(parts: Components, keep: MemoryRecord, merged: Sequence[MemoryRecord], *, now: datetime) -> None:
    """Consolidate: ``keep`` takes the others' frequency, accesses and top importance; they are retired."""
    keep.frequency += sum(m.frequency for m in merged)
    keep.access_count += sum(m.access_count for m in merged)
    top = max([keep, *merged], key=lambda r: r.importance)
    keep.importance, keep.importance_band = top.importance, top.importance_band
    keep.updated_at = now
    with parts.store.transaction() as conn:
        parts.store.update_fields(
            conn, [keep.memory_id], reindex=True, frequency=keep.frequency, access_count=keep.access_count,
            importance=keep.importance, importance_band=keep.importance_band, updated_at=now.timestamp(),
        )
        parts.store.audit(conn, "consolidate", tenant_id=keep.tenant_id, user_id=keep.user_id,
                          memory_id=keep.memory_id, actor="maintain", detail={"merged": [m.memory_id for m in merged]})
    index_now(parts, [keep])
    soft_delete(parts, [m.memory_id for m in merged], user_id=keep.user_id, tenant_id=keep.tenant_id,
                action="consolidate", actor="maintain", now=now, superseded_by=keep.memory_id)


class Maintainer:
    """Runs ``maintain`` and ``scan`` (``Memory.maintain`` and ``Memory.audit_scan``) every ``interval_s``
    seconds in a daemon thread (``Settings.maintain_interval_s``; a server process gets it by setting
    that too).

    A failing run is logged and the next one still comes; ``stop`` waits for a run in progress.
    """

    def __init__(self, maintain: Callable[[], MaintenanceReport], scan: Callable[[], Sequence[object]],
                 interval_s: float) -> None:
        if interval_s <= 0:
            raise ValidationError(f"maintain_interval_s must be positive, got {interval_s!r}")
        self._maintain = maintain
        self._scan = scan
        self.interval_s = float(interval_s)
        self.runs = 0
        self.last: MaintenanceReport | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="portamem-maintainer", daemon=True)

    def start(self) -> Maintainer:
        self._thread.start()
        return self

    def run_once(self) -> MaintenanceReport:
        report = self._maintain()
        report.audit_findings = len(self._scan())
        self.runs += 1
        self.last = report
        log.info("maintenance: %d evicted, %d purged, %d consolidated, %d to review", len(report.evicted),
                 report.purged, len(report.consolidated), report.audit_findings)
        return report

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_once()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("scheduled maintenance failed; trying again in %g s", self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
