"""A save after validation: guard, redact, extract structure, score importance, then commit the rows,
their keyword entries, audit rows and outbox entries in one transaction.

Embedding, the trust review, dedupe and supersession follow in the background indexer
(``portamem.background.indexer``), which reads the outbox this module fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..components import Components
from ..errors import PermissionDeniedError
from ..pipeline import WriteContext
from ..records import MemoryRecord, MemoryType, Source, Status, Trust, importance_band, utcnow
from ..storage.schema import REVIEW
from . import validation as check
from .privacy import redact_record
from .requests import MemoryDraft, as_drafts
from .scope import acts_on

__all__ = ["checked_drafts", "build_record", "drafted", "write", "commit", "stage", "prepare", "screen", "stricter",
           "settled", "hold", "unhold", "write_context"]


def checked_drafts(parts: Components, drafts: Any, user_id: Any,
                   tenant_id: Any) -> tuple[str, str, list[MemoryDraft]]:
    """The validation layer's checks of one save: its user, tenant and drafts."""
    user_id = check.check_id(parts.settings, "user_id", user_id)
    tenant_id = check.check_tenant(parts.settings, tenant_id, parts.tenant_id)
    items = [check.check_draft(parts.settings, d) for d in as_drafts(drafts)]
    for d in items:
        check.check_opaque_ids(parts.hooks, parts.settings, tenant_id, user_id, session_id=d.session_id,
                               agent_id=d.agent_id, key=d.key,
                               key_namespace=None if d.key is None else d.key_namespace)
    return user_id, tenant_id, items


def build_record(
    parts: Components, draft: MemoryDraft, *, user_id: str, tenant_id: str) -> MemoryRecord:
    """The record a draft stands for, before guard and redaction (drafts the write path composes
    itself are checked but not bounded; callers' drafts were bounded at the entry point)."""
    d = check.check_draft(parts.settings, draft, bounded=False)
    mtype = MemoryType(d.type)
    kind = d.kind if d.kind is not None or mtype is not MemoryType.EPISODIC else "episodic"
    importance = 0.5 if d.importance is None else d.importance
    if d.half_life_days is not None:
        half_life = float(d.half_life_days)
    else:
        half_life = parts.settings.half_lives[kind or ("episodic" if mtype is MemoryType.EPISODIC else "fact")]
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
        updated_at=d.created_at or now,  # a memory written as of a past moment was last changed then
        source=Source(d.source),
        trust=Trust(d.trust),  # type: ignore[arg-type]
        metadata=d.metadata,
        key_namespace=None if d.key is None else d.key_namespace,  # type: ignore[arg-type]
        key=d.key,
    )


def drafted(parts: Components, items: Sequence[MemoryDraft], *, user_id: str, tenant_id: str,
             explicit: bool) -> list[MemoryRecord]:
    records = [build_record(parts, d, user_id=user_id, tenant_id=tenant_id) for d in items]
    for draft, record in zip(items, records):
        prepare(parts, draft, record, explicit=explicit)
        hold(record)
    return records


def write(
    parts: Components, items: Sequence[MemoryDraft], *, user_id: str, tenant_id: str, explicit: bool, wait: bool = False
) -> list[MemoryRecord]:
    """The write path: guard, redact, structure, score, then commit + audit; the indexer does the rest.

    With ``wait`` the records come back as the indexer settled them (a duplicate as the older memory
    it was merged into).
    """
    records = drafted(parts, items, user_id=user_id, tenant_id=tenant_id, explicit=explicit)
    if not records:
        return []
    commit(parts, records)
    return settled(parts, records) if wait else records


def commit(parts: Components, records: Sequence[MemoryRecord]) -> None:
    """Insert new records, their keyword entries and audit rows in one transaction (``stage``)."""
    if not records:
        return
    try:
        with parts.store.transaction() as conn:
            stage(parts, conn, records)
    except BaseException:
        parts.outbox.forget([r.memory_id for r in records])
        raise


def stage(parts: Components, conn: Any, records: Sequence[MemoryRecord]) -> None:
    """Write new records in an open transaction, queued for the indexer: unkeyed ones for review (trust,
    dedupe), keyed ones (an upsert of their key, never reviewed or deduped by similarity:
    ``portamem.portable.keys``) for indexing only. If that transaction fails, the caller ``forget``s them."""
    keyed = [r for r in records if r.key is not None]
    unkeyed = [r for r in records if r.key is None]
    for r in keyed:  # a key's row is overwritten only by a write that may act on it (portamem.write.scope)
        held = parts.store.get_by_key(r.tenant_id, r.user_id, r.key_namespace or "", r.key)  # type: ignore[arg-type]
        if held is not None and held.status is not Status.DELETED and not acts_on(r, held):
            raise PermissionDeniedError(
                f"key {r.key!r} (namespace {r.key_namespace!r}) is held by "
                f"{'the shared layer' if held.agent_id is None else 'agent ' + repr(held.agent_id)}; a write as "
                f"agent {r.agent_id!r} may not overwrite it: use a key or namespace of the agent's own, or "
                "write without agent_id to change the shared memory")
    parts.store.insert(conn, unkeyed, indexed=REVIEW)
    overwrote = {id(r): parts.store.upsert_keyed(conn, r) for r in keyed}
    parts.store.audit_many(
        conn,
        [_save_row(r) for r in unkeyed]
        + [_save_row(r, key=[r.key_namespace, r.key], overwrote=overwrote[id(r)]) for r in keyed],
    )
    # noted before the commit (ids final: an upsert takes its key's id), so none is settled unseen
    parts.outbox.enqueue(records)


def _save_row(r: MemoryRecord, **extra: Any) -> dict[str, Any]:
    detail = {"type": r.type.value, "source": r.source.value, "session_id": r.session_id, "status": r.status.value,
              **({"guard": r.metadata["guard"]} if "guard" in r.metadata else {}), **extra}
    return {"action": "save", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
            "detail": detail}


def settled(parts: Components, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """Wait for the indexer to settle these records; each comes back as stored, a retired duplicate
    as the memory it was merged into (``superseded_by``)."""
    parts.outbox.wait_ids([r.memory_id for r in records], parts.settings.index_wait_s)
    out = []
    for r in records:
        current = r
        for _ in range(8):
            found = parts.store.get(r.tenant_id, r.user_id, [current.memory_id]).get(current.memory_id)
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
    parts: Components, record: MemoryRecord, *, explicit: bool) -> WriteContext:
    return WriteContext(
        tenant_id=record.tenant_id, user_id=record.user_id, settings=parts.settings,
        session_id=record.session_id, agent_id=record.agent_id, source=record.source, explicit=explicit,
    )


def prepare(
    parts: Components, draft: MemoryDraft, record: MemoryRecord, *, explicit: bool) -> None:
    ctx = write_context(parts, record, explicit=explicit)
    screen(parts, record, ctx)
    if draft.entities is None:
        extraction = parts.hooks.extract(record.content, ctx)
        if extraction is not None:
            record.entities = list(dict.fromkeys(extraction.entities))
            record.triples = [list(t) for t in extraction.triples]
            if record.summary is None:
                record.summary = extraction.summary
            if record.kind is None and extraction.kind in parts.settings.half_lives:
                record.kind = extraction.kind
                if draft.half_life_days is None and record.type is not MemoryType.WORKING:
                    record.half_life_days = parts.settings.half_lives[extraction.kind]
    if draft.importance is None:
        band = parts.hooks.score_importance(record, ctx)
        if band is not None:
            record.importance = band / 100.0
            record.importance_band = band


def screen(parts: Components, record: MemoryRecord, ctx: WriteContext) -> None:
    """Guard, then redact, in place: a guard verdict holds the record back (never releases one)."""
    # the guard sees the text as written (encoded payloads included), before redaction
    verdict = parts.hooks.guard(record, ctx)
    if verdict.action != "allow":
        held = Status.QUARANTINED if verdict.action == "quarantine" else Status.PENDING
        if _HOLD[held] > _HOLD[record.status]:
            record.status = held
        record.metadata["guard"] = {"action": verdict.action, "reason": verdict.reason, "guard": verdict.guard}
    redact_record(parts.hooks, record, ctx, parts.vault)


#: how far a status holds a record back from search
_HOLD = {Status.ACTIVE: 0, Status.PENDING: 1, Status.QUARANTINED: 2, Status.DELETED: 3}


def stricter(a: Status, b: Status) -> Status:
    return a if _HOLD[a] >= _HOLD[b] else b


