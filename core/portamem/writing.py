"""The write path: validate, guard, redact, structure, score, then commit and audit in one transaction.

Embedding, trust review, dedupe and indexing follow in the background indexer (``portamem.indexer``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .dedupe import is_duplicate
from .errors import PortamemError, ValidationError
from .pipeline import WriteContext
from .privacy import redact_record
from .validation import check_draft
from .records import TRUST_RANK, MemoryRecord, MemoryType, Source, Status, Trust, importance_band, utcnow
from .storage.schema import REVIEW

if TYPE_CHECKING:
    from .groupcommit import TurnRequest
    from .memory import Memory

__all__ = ["MemoryDraft", "SaveRequest", "SaveResult", "as_drafts", "build_record", "drafted", "write", "commit", "stage",
           "prepare", "screen", "stricter", "dedupe", "settled"]

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


def as_drafts(drafts: Iterable[MemoryDraft | Mapping[str, Any] | str]) -> list[MemoryDraft]:
    """The memories of a save call as drafts: a draft, a mapping of its fields, or a bare text."""
    if isinstance(drafts, (str, bytes, Mapping)) or not isinstance(drafts, Iterable):
        raise ValidationError(f"drafts must be a list of MemoryDraft, mappings or strings, got {type(drafts).__name__}")
    items: list[MemoryDraft] = []
    for d in drafts:
        if isinstance(d, MemoryDraft):
            items.append(d)
        elif isinstance(d, str):
            items.append(MemoryDraft(content=d))
        elif isinstance(d, Mapping):
            try:
                items.append(MemoryDraft(**d))
            except TypeError as exc:
                raise ValidationError(f"bad memory fields: {exc}") from exc
        else:
            raise ValidationError(f"each memory must be a MemoryDraft, mapping or string, got {type(d).__name__}")
    return items


@dataclass(frozen=True)
class SaveRequest:
    """One caller's save in a group commit (``Memory.save_many``): one user's memories, in order."""

    user_id: str
    memories: Sequence[MemoryDraft | Mapping[str, Any] | str]
    tenant_id: str | None = None


@dataclass
class SaveResult:
    """The outcome of one request of ``Memory.save_many``: its committed records (for a turn, the memories
    it wrote), or the typed error that refused it."""

    request: SaveRequest | TurnRequest
    records: list[MemoryRecord] = field(default_factory=list)
    error: PortamemError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def drafted(mem: Memory, items: Sequence[MemoryDraft], *, user_id: str, tenant_id: str,
             explicit: bool) -> list[MemoryRecord]:
    records = [build_record(mem, d, user_id=user_id, tenant_id=tenant_id) for d in items]
    for draft, record in zip(items, records):
        prepare(mem, draft, record, explicit=explicit)
        hold(record)
    return records


def write(
    mem: Memory, items: Sequence[MemoryDraft], *, user_id: str, tenant_id: str, explicit: bool, wait: bool = False
) -> list[MemoryRecord]:
    """The write path: guard, redact, structure, score, then commit + audit; the indexer does the rest.

    With ``wait`` the records come back as the indexer settled them (a duplicate as the older memory
    it was merged into).
    """
    records = drafted(mem, items, user_id=user_id, tenant_id=tenant_id, explicit=explicit)
    if not records:
        return []
    commit(mem, records)
    return settled(mem, records) if wait else records


def commit(mem: Memory, records: Sequence[MemoryRecord]) -> None:
    """Insert new records, their keyword entries and audit rows in one transaction (``stage``)."""
    if not records:
        return
    try:
        with mem.store.transaction() as conn:
            stage(mem, conn, records)
    except BaseException:
        mem.indexer.forget([r.memory_id for r in records])
        raise


def stage(mem: Memory, conn: Any, records: Sequence[MemoryRecord]) -> None:
    """Write new records in an open transaction, queued for the indexer: unkeyed ones for review (trust,
    dedupe), keyed ones (an upsert of their key, never reviewed or deduped by similarity:
    ``portamem.keys``) for indexing only. If that transaction fails, the caller ``forget``s them."""
    keyed = [r for r in records if r.key is not None]
    unkeyed = [r for r in records if r.key is None]
    mem.store.insert(conn, unkeyed, indexed=REVIEW)
    overwrote = {id(r): mem.store.upsert_keyed(conn, r) for r in keyed}
    mem.store.audit_many(
        conn,
        [_save_row(r) for r in unkeyed]
        + [_save_row(r, key=[r.key_namespace, r.key], overwrote=overwrote[id(r)]) for r in keyed],
    )
    # noted before the commit (ids final: an upsert takes its key's id), so none is settled unseen
    mem.indexer.enqueue(records)


def _save_row(r: MemoryRecord, **extra: Any) -> dict[str, Any]:
    detail = {"type": r.type.value, "source": r.source.value, "session_id": r.session_id, "status": r.status.value,
              **({"guard": r.metadata["guard"]} if "guard" in r.metadata else {}), **extra}
    return {"action": "save", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
            "detail": detail}


def settled(mem: Memory, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Wait for the indexer to settle these records; each comes back as stored, a retired duplicate
    as the memory it was merged into (``superseded_by``)."""
    mem.indexer.wait_ids([r.memory_id for r in records], mem.settings.index_wait_s)
    out = []
    for r in records:
        current = r
        for _ in range(8):
            found = mem.store.get(r.tenant_id, r.user_id, [current.memory_id]).get(current.memory_id)
            if found is None:
                break
            current = found
            if current.status is not Status.DELETED or current.superseded_by is None:
                break
            current = MemoryRecord(content=current.content, user_id=r.user_id, tenant_id=r.tenant_id,
                                   memory_id=current.superseded_by)
        out.append(current)
    return out


def hold(record: MemoryRecord) -> None:
    """A low-trust memory is PENDING from its commit on; the indexer's review may let it through as a
    repeat of an active memory (``unhold`` first, then the review decides)."""
    if record.status is Status.ACTIVE and record.trust is Trust.LOW and record.key is None:
        record.status = Status.PENDING
        record.metadata["trust"] = {"pending": "low trust",
                                    "reason": f"low-trust source ({record.source.value}) awaits confirmation"}


def unhold(record: MemoryRecord) -> None:
    trust_meta = record.metadata.get("trust")
    if (record.status is Status.PENDING and "guard" not in record.metadata and isinstance(trust_meta, dict)
            and trust_meta.get("pending") == "low trust" and "confirmed_by" not in trust_meta):
        record.status = Status.ACTIVE
        del record.metadata["trust"]


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
    mem: Memory, records: Sequence[MemoryRecord], near: Mapping[str, list[Any]] | None = None,
    batch: Mapping[str, MemoryRecord] | None = None,
) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """(older, duplicate) pairs among one user's new records: cosine >= threshold and the same words
    (``is_duplicate``) against a stored neighbour or an earlier record of the batch. Each older record
    absorbs its duplicate (``merge_into``); keyed memories are never deduped.

    ``near`` is each record's nearest stored neighbours when the caller already looked them up;
    ``batch`` the records being settled, by id, which stand for their stored copies among them.
    """
    threshold = mem.settings.dedupe_threshold
    merged: list[tuple[MemoryRecord, MemoryRecord]] = []
    candidates = [r for r in records if r.status is Status.ACTIVE and not _keyed(r)]
    if not (mem.settings.dedupe and candidates):
        return merged
    nearest = {r.memory_id: near[r.memory_id] for r in candidates if r.memory_id in near} if near is not None \
        else mem.vectors.nearest(candidates)
    stored = mem.store.get(
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
             and is_duplicate(record.content, stored[h.memory_id].content, h.score, threshold)),
            None,
        )
        if target is None:  # a duplicate earlier in the same batch
            vec = np.asarray(record.embedding, dtype=np.float32)
            target = next(
                (o for o in kept if is_duplicate(
                    record.content, o.content,
                    float(np.dot(vec, np.asarray(o.embedding, dtype=np.float32))), threshold)),
                None,
            )
        if target is None:
            kept.append(record)
            continue
        target = next((t for t, _ in merged if t.memory_id == target.memory_id), target)
        merge_into(mem, target, record)
        merged.append((target, record))
    return merged


def _keyed(record: MemoryRecord) -> bool:
    """A memory written under an external key is replaced by key, never merged by likeness."""
    return record.key is not None


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
