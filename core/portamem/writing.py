"""The write path: validate, guard, redact, structure, score, embed, dedupe, then store, index, audit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from . import trust
from .dedupe import is_duplicate
from .pipeline import WriteContext
from .privacy import redact_record
from .validation import check_draft
from .records import TRUST_RANK, MemoryRecord, MemoryType, Source, Status, Trust, importance_band, utcnow

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["MemoryDraft", "build_record", "write", "prepare", "screen", "stricter", "dedupe"]

@dataclass
class MemoryDraft:
    """One memory to save in a batch (``Memory.save_memories``); the same fields as ``save_memory``."""

    content: str
    type: MemoryType | str = MemoryType.SEMANTIC
    importance: float | None = None
    half_life_days: float | None = None
    source: Source | str = Source.USER
    trust: Trust | str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    kind: str | None = None
    summary: str | None = None
    entities: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    #: a key makes the write an upsert of (key_namespace, key): see ``portamem.keys``
    key: str | None = None
    key_namespace: str | tuple[str, ...] | list[str] = ()


def build_record(
    mem: Memory, draft: MemoryDraft, *, user_id: str, tenant_id: str) -> MemoryRecord:
    """The record a draft stands for, before guard and redaction (drafts the write path composes
    itself are checked but not bounded; callers' drafts were bounded at the entry point)."""
    d = check_draft(mem.settings, draft, bounded=False)
    mtype = MemoryType(d.type)
    kind = d.kind if d.kind is not None or mtype is not MemoryType.EPISODIC else "episodic"
    importance = 0.5 if d.importance is None else d.importance
    if d.half_life_days is not None:
        half_life = float(d.half_life_days)
    else:
        half_life = mem.settings.half_lives[kind or ("episodic" if mtype is MemoryType.EPISODIC else "fact")]
    now = utcnow()
    return MemoryRecord(
        content=d.content,
        user_id=user_id,
        tenant_id=tenant_id,
        session_id=d.session_id,
        agent_id=d.agent_id,
        type=mtype,
        kind=kind,
        summary=d.summary,
        entities=list(d.entities or []),
        importance=importance,
        importance_band=importance_band(importance),
        half_life_days=half_life,
        created_at=d.created_at or now,
        updated_at=now,
        source=Source(d.source),
        trust=Trust(d.trust),  # type: ignore[arg-type]
        metadata=d.metadata,
        key_namespace=None if d.key is None else d.key_namespace,  # type: ignore[arg-type]
        key=d.key,
    )


def write(
    mem: Memory, items: Sequence[MemoryDraft], *, user_id: str, tenant_id: str, explicit: bool
) -> list[MemoryRecord]:
    """The write path: guard, redact, structure, score, embed, dedupe, then store + index + audit."""
    records = [build_record(mem, d, user_id=user_id, tenant_id=tenant_id) for d in items]
    for draft, record in zip(items, records):
        prepare(mem, draft, record, explicit=explicit)
    if not records:
        return []
    mem._attach_embeddings(records)
    # keyed records: an upsert of their key, never reviewed or deduped by similarity (portamem.keys)
    keyed = [r for r in records if r.key is not None]
    unkeyed = [r for r in records if r.key is None]
    with mem._lock:
        # one neighbour look-up serves the trust review and the dedupe
        active = [r for r in unkeyed if r.status is Status.ACTIVE]
        near = mem.index.nearest(active, k=trust.NEIGHBOURS) if active else {}
        seen_again = trust.review(mem, unkeyed, near)
        for c in seen_again:
            mem._replaced[id(c.by)] = c.pending
        new, merged = dedupe(mem, [r for r in unkeyed if id(r) not in mem._replaced], near)
        with mem.store.transaction() as conn:
            mem.store.insert(conn, new)
            overwrote = {id(r): mem.store.upsert_keyed(conn, r) for r in keyed}
            trust.apply_confirmations(mem, conn, seen_again)
            for existing, duplicate in merged:
                mem.store.update_fields(
                    conn, [existing.memory_id], reindex=True,
                    frequency=existing.frequency, importance=existing.importance,
                    importance_band=existing.importance_band, type=existing.type.value,
                    kind=existing.kind, half_life_days=existing.half_life_days, trust=existing.trust.value,
                    updated_at=existing.updated_at.timestamp(), metadata=existing.metadata,
                )
            mem.store.audit_many(
                conn,
                [_save_row(r) for r in new]
                + [_save_row(r, key=[r.key_namespace, r.key], overwrote=overwrote[id(r)]) for r in keyed]
                + [{"action": "dedupe", "tenant_id": e.tenant_id, "user_id": e.user_id, "memory_id": e.memory_id,
                    "detail": {"frequency": e.frequency, "session_id": d.session_id, "source": d.source.value}}
                   for e, d in merged],
            )
        # the last write of a key in the batch is its row's content
        last_keyed = list({r.memory_id: r for r in keyed}.values())
        mem._index_records(new + last_keyed + [e for e, _ in merged] + [c.pending for c in seen_again])
    out = [mem._replaced.pop(id(r), r) for r in records]
    return out


def _save_row(r: MemoryRecord, **extra: Any) -> dict[str, Any]:
    detail = {"type": r.type.value, "source": r.source.value, "session_id": r.session_id, "status": r.status.value,
              **({"guard": r.metadata["guard"]} if "guard" in r.metadata else {}), **extra}
    return {"action": "save", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
            "detail": detail}


def write_context(
    mem: Memory, record: MemoryRecord, *, explicit: bool) -> WriteContext:
    return WriteContext(
        tenant_id=record.tenant_id, user_id=record.user_id, settings=mem.settings,
        session_id=record.session_id, agent_id=record.agent_id, source=record.source, explicit=explicit,
    )


def prepare(
    mem: Memory, draft: MemoryDraft, record: MemoryRecord, *, explicit: bool) -> None:
    ctx = write_context(mem, record, explicit=explicit)
    screen(mem, record, ctx)
    if draft.entities is None:
        extraction = mem.hooks.extract(record.content, ctx)
        if extraction is not None:
            record.entities = list(dict.fromkeys(extraction.entities))
            record.triples = [list(t) for t in extraction.triples]
            if record.summary is None:
                record.summary = extraction.summary
            if record.kind is None and extraction.kind in mem.settings.half_lives:
                record.kind = extraction.kind
                if draft.half_life_days is None and record.type is not MemoryType.WORKING:
                    record.half_life_days = mem.settings.half_lives[extraction.kind]
    if draft.importance is None:
        band = mem.hooks.score_importance(record, ctx)
        if band is not None:
            record.importance = band / 100.0
            record.importance_band = band


def screen(mem: Memory, record: MemoryRecord, ctx: WriteContext) -> None:
    """Guard, then redact, in place: a guard verdict holds the record back (never releases one)."""
    # the guard sees the text as written (encoded payloads included), before redaction
    verdict = mem.hooks.guard(record, ctx)
    if verdict.action != "allow":
        held = Status.QUARANTINED if verdict.action == "quarantine" else Status.PENDING
        if _HOLD[held] > _HOLD[record.status]:
            record.status = held
        record.metadata["guard"] = {"action": verdict.action, "reason": verdict.reason, "guard": verdict.guard}
    redact_record(mem.hooks, record, ctx, mem.vault)


#: how far a status holds a record back from search
_HOLD = {Status.ACTIVE: 0, Status.PENDING: 1, Status.QUARANTINED: 2, Status.DELETED: 3}


def stricter(a: Status, b: Status) -> Status:
    return a if _HOLD[a] >= _HOLD[b] else b


def dedupe(
    mem: Memory, records: Sequence[MemoryRecord], near: Mapping[str, list[Any]] | None = None
) -> tuple[list[MemoryRecord], list[tuple[MemoryRecord, MemoryRecord]]]:
    """Split into new records and (existing, duplicate) pairs: cosine >= threshold bumps frequency.

    ``near`` is each record's nearest stored neighbours when the caller already looked them up.
    """
    threshold = mem.settings.dedupe_threshold
    new: list[MemoryRecord] = []
    merged: list[tuple[MemoryRecord, MemoryRecord]] = []
    candidates = [r for r in records if r.status is Status.ACTIVE]
    if not (mem.settings.dedupe and candidates):
        nearest: Mapping[str, list[Any]] = {}
    else:
        nearest = {r.memory_id: near[r.memory_id] for r in candidates if r.memory_id in near} if near is not None \
            else mem.index.nearest(candidates)
    stored = mem.store.get(
        candidates[0].tenant_id, candidates[0].user_id,
        [h.memory_id for hits in nearest.values() for h in hits],
    ) if nearest else {}
    for record in records:
        target: MemoryRecord | None = None
        if record.status is Status.ACTIVE and mem.settings.dedupe:
            target = next(
                (stored[h.memory_id] for h in nearest.get(record.memory_id, [])
                 if h.memory_id in stored and stored[h.memory_id].key is None  # keyed: never a dedupe target
                 and is_duplicate(record.content, stored[h.memory_id].content, h.score, threshold)),
                None,
            )
            if target is None:  # a duplicate earlier in the same batch
                vec = np.asarray(record.embedding, dtype=np.float32)
                target = next(
                    (o for o in new if o.status is Status.ACTIVE and is_duplicate(
                        record.content, o.content,
                        float(np.dot(vec, np.asarray(o.embedding, dtype=np.float32))), threshold)),
                    None,
                )
        if target is None:
            new.append(record)
            continue
        merge_into(mem, target, record)
        if not any(target is o for o in new):
            merged.append((target, record))
        mem._replaced[id(record)] = target
    return new, merged


def merge_into(
    mem: Memory, existing: MemoryRecord, duplicate: MemoryRecord) -> None:
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
        if existing.kind in mem.settings.half_lives:
            existing.half_life_days = mem.settings.half_lives[existing.kind]
