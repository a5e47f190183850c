"""Dedupe in the indexer's review: a new memory that repeats a stored one (or an earlier one of its
batch) is merged into it instead of being kept twice (``portamem.language.duplicates.is_duplicate``).

Keyed memories are never deduped: a key's row is replaced by key, not merged by likeness. A merge
stays in one scope (``portamem.write.scope.may_merge``): an agent's private repeat of a shared memory,
or a shared repeat of a private one, is kept as its own row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..components import Components
from ..language.duplicates import is_duplicate
from ..records import TRUST_RANK, MemoryRecord, MemoryType, Status, utcnow
from .scope import may_merge

__all__ = ["dedupe", "merge_into"]


def dedupe(
    parts: Components, records: Sequence[MemoryRecord], near: Mapping[str, list[Any]] | None = None,
    batch: Mapping[str, MemoryRecord] | None = None,
) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """(older, duplicate) pairs among one user's new records: cosine >= threshold and the same words
    (``is_duplicate``) against a stored neighbour or an earlier record of the batch. Each older record
    absorbs its duplicate (``merge_into``); keyed memories are never deduped.

    ``near`` is each record's nearest stored neighbours when the caller already looked them up;
    ``batch`` the records being settled, by id, which stand for their stored copies among them.
    """
    threshold = parts.settings.dedupe_threshold
    merged: list[tuple[MemoryRecord, MemoryRecord]] = []
    candidates = [r for r in records if r.status is Status.ACTIVE and not _keyed(r)]
    if not (parts.settings.dedupe and candidates):
        return merged
    nearest = {r.memory_id: near[r.memory_id] for r in candidates if r.memory_id in near} if near is not None \
        else parts.replica.nearest(candidates)
    stored = parts.store.get(
        candidates[0].tenant_id, candidates[0].user_id,
        [h.memory_id for hits in nearest.values() for h in hits],
    ) if nearest else {}
    stored.update({m: r for m, r in (batch or {}).items() if m in stored})
    kept: list[MemoryRecord] = []
    for record in candidates:
        target = next(
            (stored[h.memory_id] for h in nearest.get(record.memory_id, [])
             if h.memory_id in stored and stored[h.memory_id].status is Status.ACTIVE
             and stored[h.memory_id] is not record and not _keyed(stored[h.memory_id])
             and may_merge(stored[h.memory_id], record)  # never across tenants, users or agent scopes
             and is_duplicate(record.content, stored[h.memory_id].content, h.score, threshold)),
            None,
        )
        if target is None:  # a duplicate earlier in the same batch
            vec = np.asarray(record.embedding, dtype=np.float32)
            target = next(
                (o for o in kept if may_merge(o, record) and is_duplicate(
                    record.content, o.content,
                    float(np.dot(vec, np.asarray(o.embedding, dtype=np.float32))), threshold)),
                None,
            )
        if target is None:
            kept.append(record)
            continue
        target = next((t for t, _ in merged if t.memory_id == target.memory_id), target)
        merge_into(parts, target, record)
        merged.append((target, record))
    return merged


def _keyed(record: MemoryRecord) -> bool:
    """A memory written under an external key is replaced by key, never merged by likeness."""
    return record.key is not None


def merge_into(
    parts: Components, existing: MemoryRecord, duplicate: MemoryRecord) -> None:
    existing.frequency += 1
    existing.updated_at = utcnow()
    if duplicate.importance > existing.importance:
        existing.importance, existing.importance_band = duplicate.importance, duplicate.importance_band
    if TRUST_RANK[duplicate.trust] > TRUST_RANK[existing.trust]:  # a more trusted source vouches for it
        existing.trust = duplicate.trust
    promote = existing.metadata.pop("promote_to", None)
    # a working-memory candidate seen a second time becomes long-term memory
    if existing.type is MemoryType.WORKING and (promote or duplicate.type is not MemoryType.WORKING):
        existing.type = MemoryType(promote or duplicate.type.value)
        if existing.kind in parts.settings.half_lives:
            existing.half_life_days = parts.settings.half_lives[existing.kind]
