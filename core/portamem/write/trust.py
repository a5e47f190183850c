"""Trust by source: low-trust memories wait for confirmation and weigh less; contradicting high trust waits too.

Three rules, applied to every batch before it is stored (``review``):

1. A memory from a low-trust source (``Source.WEB`` by default) is stored PENDING, unless it only
   repeats what an active memory already says (then it merges into that one as one more sighting).
2. A PENDING low-trust memory becomes ACTIVE when an *independent* near-duplicate arrives: one from
   another session, another source or another agent (``is_independent``), or by ``Memory.confirm_memory``.
   Repeating it in the same session from the same source only counts the repetition. A repeat from a
   more trusted source raises the memory's trust to that source's. Before a repeat activates it, the
   pending memory goes through the guards again, judged as coming from its own source: one that
   carries an instruction (stored before the guard knew its shape, or repeated by a source the guard
   trusts more) is QUARANTINED instead, so repetition never activates an injection.
3. A memory below high trust that contradicts an active high-trust memory of the same user is stored
   PENDING instead of competing with it; only ``Memory.confirm_memory`` or the same statement from a
   high-trust source activates it, not repetition.

Contradiction (``contradiction``) is decided by rule, not by a model: the old memory is among the
new one's nearest neighbours with cosine >= ``CONTRADICTION_COSINE``, the two share most of their
words, and then either one negates what the other asserts ("allergic" / "not allergic", "过敏" / "不过敏"), or they give
different values (numbers or named entities: "account 5521" / "account 7730", "lives in Berlin" /
"lives in Paris"), or their extracted triples hold two values of a single-valued relation. Limits:
a paraphrase with other words ("I can't stand peanuts" against "peanuts are my favourite") is not
caught; two memories about different events with the same frame and other values ("visited Paris
in May" / "visited Berlin in June") are flagged, which only delays the newer one until confirmed.

At retrieval, each final score is multiplied by the trust factor (``Settings.trust_factors``: low
0.6, medium and high 1.0 by default), ties and near-identical twins go to the more trusted memory,
and so does the order of two conflicting results: a low-trust memory never outranks an
otherwise-equal high-trust one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..components import Components
from ..config import DEFAULT_TRUST_FACTORS
from ..language.duplicates import is_duplicate, text_profile
from ..language.entities import normalize_entity
from ..errors import ValidationError
from ..pipeline import GuardVerdict, WriteContext
from ..records import TRUST_RANK, MemoryRecord, Status, Trust, to_iso, utcnow
from ..language.statements import record_cosine, triples_conflict
from .scope import acts_on, may_merge

__all__ = [
    "CONTRADICTION_COSINE",
    "NEIGHBOURS",
    "Confirmation",
    "trust_factors",
    "is_independent",
    "contradiction",
    "review",
    "apply_confirmations",
    "confirm",
]

#: two memories this near (cosine, multilingual-e5 scale) may be about the same thing
CONTRADICTION_COSINE = 0.85
#: share of the non-value words two texts must have in common to be about the same thing
_SAME_FRAME = 0.6
#: nearest stored memories checked for a contradiction or a repeat
NEIGHBOURS = 8


@dataclass
class Confirmation:
    """A stored PENDING memory met again by ``by``; ``confirmed`` when ``by`` is independent of it."""

    pending: MemoryRecord
    by: MemoryRecord
    confirmed: bool
    #: the guard's verdict when the repeat would have activated a memory that carries an instruction
    quarantine: GuardVerdict | None = None


def trust_factors(factors: Mapping[str, float]) -> dict[Trust, float]:
    """``Settings.trust_factors`` (validated there) keyed by ``Trust``, defaults filled in."""
    return {Trust(k): float(v) for k, v in {**DEFAULT_TRUST_FACTORS, **factors}.items()}


def is_independent(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Two sightings count as independent when they came from another session, source or agent."""
    return a.session_id != b.session_id or a.source != b.source or a.agent_id != b.agent_id


def contradiction(new: MemoryRecord, old: MemoryRecord, cosine: float | None = None) -> str | None:
    """Why ``new`` contradicts ``old`` (a short phrase), or None. The rule is in the module docstring."""
    if triples_conflict(new, old):
        return "another value of the same relation"
    if (cosine if cosine is not None else record_cosine(new, old)) < CONTRADICTION_COSINE:
        return None
    words_new, numbers_new, neg_new = text_profile(new.content)
    words_old, numbers_old, neg_old = text_profile(old.content)
    entities_new = {normalize_entity(e) for e in new.entities}
    entities_old = {normalize_entity(e) for e in old.entities}
    values_new, values_old = set(numbers_new) | entities_new, set(numbers_old) | entities_old
    frame_new = {w for w in words_new if w not in values_new and normalize_entity(w) not in values_new}
    frame_old = {w for w in words_old if w not in values_old and normalize_entity(w) not in values_old}
    union = frame_new | frame_old
    if not union or len(frame_new & frame_old) / len(union) < _SAME_FRAME:
        return None
    if bool(neg_new) != bool(neg_old):
        return "negates it"
    if values_new and values_old and not values_new & values_old:
        return "gives another value"
    return None


def _conflicts(record: MemoryRecord, near: Sequence[tuple[MemoryRecord, float]]) -> list[tuple[MemoryRecord, str]]:
    return [(old, why) for old, score in near
            if old.trust is Trust.HIGH and old.status is Status.ACTIVE and (why := contradiction(record, old, score))]


def _pending_match(record: MemoryRecord, pending: Sequence[MemoryRecord], threshold: float) -> MemoryRecord | None:
    # a repeat confirms (or re-trusts) only a memory of its own scope: it is not stored itself, so a
    # shared repeat folded into a private pending memory would be gone for every other agent
    for p in pending:
        if "pending" in p.metadata.get("trust", {}) and may_merge(record, p) and is_duplicate(record.content, p.content, record_cosine(record, p),
                                                                      threshold):
            return p
    return None


def _repeats_active(record: MemoryRecord, near: Sequence[tuple[MemoryRecord, float]], threshold: float) -> bool:
    return any(old.status is Status.ACTIVE and (acts_on(record, old) or old.agent_id is None)  # in its view
               and is_duplicate(record.content, old.content, score, threshold) for old, score in near)


def _neighbours(parts: Components, records: Sequence[MemoryRecord],
                hits: Mapping[str, Sequence[Any]]) -> dict[str, list[tuple[MemoryRecord, float]]]:
    """Each record's nearest stored active memories (``MilvusVectorIndex.nearest``) with their cosine."""
    out: dict[str, list[tuple[MemoryRecord, float]]] = {}
    stored: dict[tuple[str, str], dict[str, MemoryRecord]] = {}
    for r in records:
        scope = (r.tenant_id, r.user_id)
        if scope not in stored:
            ids = [h.memory_id for x in records if (x.tenant_id, x.user_id) == scope for h in hits.get(x.memory_id, [])]
            stored[scope] = parts.store.get(*scope, ids)
        out[r.memory_id] = [(stored[scope][h.memory_id], h.score) for h in hits.get(r.memory_id, [])
                            if h.memory_id in stored[scope]]
    return out


def review(parts: Components, records: Sequence[MemoryRecord],
           near: Mapping[str, Sequence[Any]] | None = None) -> list[Confirmation]:
    """Set trust-driven statuses on a batch about to be stored (embeddings attached); see the rules above.

    ``near``: each record's nearest stored neighbours, when already looked up (else looked up here).
    Returns the stored PENDING memories this batch meets again; those records are not stored themselves.
    """
    threshold = parts.settings.dedupe_threshold
    confirmations: list[Confirmation] = []
    pending_by_user: dict[tuple[str, str], list[MemoryRecord]] = {}
    # quarantined records, or ones a guard already held back, are not reviewed
    todo = [r for r in records if r.status is Status.ACTIVE and r.embedding is not None]
    if near is None:
        near = parts.replica.nearest(todo, k=NEIGHBOURS) if todo else {}
    neighbours = _neighbours(parts, todo, near)
    for record in todo:
        scope = (record.tenant_id, record.user_id)
        if scope not in pending_by_user:
            pending_by_user[scope] = [p for p in parts.store.reviewed_pending(*scope)
                                      if p.key is None]  # a keyed memory is never another's sighting
        match = _pending_match(record, pending_by_user[scope], threshold)
        if match is not None:  # a contradiction ends by a person or a high-trust source, not by repetition
            ends = match.metadata["trust"]["pending"] == "low trust" or record.trust is Trust.HIGH
            confirmed = ends and is_independent(match, record)
            held = _guard_again(parts, match) if confirmed else None
            confirmations.append(Confirmation(match, record, confirmed and held is None, held))
            continue
        if TRUST_RANK[record.trust] < TRUST_RANK[Trust.HIGH]:
            found = _conflicts(record, neighbours[record.memory_id])
            if found:
                record.status = Status.PENDING
                record.metadata["trust"] = {
                    "pending": "contradicts high trust",
                    "contradicts": [old.memory_id for old, _ in found],
                    "reason": "; ".join(f"{why}: {old.memory_id}" for old, why in found),
                }
                pending_by_user[scope].append(record)
                continue
        if record.trust is Trust.LOW and not _repeats_active(record, neighbours[record.memory_id], threshold):
            record.status = Status.PENDING
            record.metadata["trust"] = {"pending": "low trust",
                                        "reason": f"low-trust source ({record.source.value}) awaits confirmation"}
            pending_by_user[scope].append(record)
    return confirmations


def _guard_again(parts: Components, pending: MemoryRecord) -> GuardVerdict | None:
    """The guards' verdict on a pending memory a repeat would activate, as from its own source; None: clean."""
    ctx = WriteContext(tenant_id=pending.tenant_id, user_id=pending.user_id, settings=parts.settings,
                       session_id=pending.session_id, agent_id=pending.agent_id, source=pending.source, explicit=False)
    verdict = parts.hooks.guard(pending, ctx)
    return None if verdict.action == "allow" else verdict


def apply_confirmations(parts: Components, conn: Any, confirmations: Sequence[Confirmation]) -> None:
    """Write what ``review`` decided for stored memories: one more sighting, and activation if confirmed."""
    for c in confirmations:
        p = c.pending
        p.frequency += 1
        p.updated_at = c.by.updated_at
        if c.quarantine is not None:  # the repeat would have activated an instruction: it never enters memory
            p.status = Status.QUARANTINED
            p.metadata["guard"] = {"action": "quarantine", "reason": c.quarantine.reason, "guard": c.quarantine.guard,
                                   "on": "repeat"}
            parts.store.update_fields(conn, [p.memory_id], reindex=True, status=p.status.value, frequency=p.frequency,
                                      updated_at=p.updated_at.timestamp(), metadata=p.metadata)
            parts.store.audit(conn, "quarantine", tenant_id=p.tenant_id, user_id=p.user_id, memory_id=p.memory_id,
                              detail={"by_session": c.by.session_id, "by_source": c.by.source.value,
                                      "guard": p.metadata["guard"]})
            continue
        if TRUST_RANK[c.by.trust] > TRUST_RANK[p.trust]:  # a more trusted source vouches for it
            p.trust = c.by.trust
        if c.confirmed:
            p.status = Status.ACTIVE
            p.metadata.setdefault("trust", {})["confirmed_by"] = {
                "memory": c.by.memory_id, "session_id": c.by.session_id, "source": c.by.source.value}
        parts.store.update_fields(conn, [p.memory_id], reindex=True, status=p.status.value, frequency=p.frequency,
                                  trust=p.trust.value, updated_at=p.updated_at.timestamp(), metadata=p.metadata)
        parts.store.audit(conn, "confirm" if c.confirmed else "repeat", tenant_id=p.tenant_id, user_id=p.user_id,
                          memory_id=p.memory_id, detail={"by_session": c.by.session_id, "by_source": c.by.source.value,
                                                         "frequency": p.frequency})


def confirm(parts: Components, record: MemoryRecord) -> MemoryRecord:
    """Activate a PENDING memory after review (``Memory.confirm_memory``); an active one is returned as is.
    The caller brings the index in line (the record is queued for it)."""
    if record.status is Status.ACTIVE:
        return record
    if record.status is not Status.PENDING:
        raise ValidationError(
            f"memory {record.memory_id} is {record.status.value}; only pending memories can be confirmed "
            "(a quarantined one never enters long-term memory: save a reviewed text instead)")
    record.status = Status.ACTIVE
    record.updated_at = utcnow()
    record.metadata.setdefault("trust", {})["confirmed_by"] = {"api": to_iso(record.updated_at)}
    parts.attach_embeddings([record])
    with parts.store.transaction() as conn:
        parts.store.update_fields(conn, [record.memory_id], reindex=True, status=record.status.value,
                                  updated_at=record.updated_at.timestamp(), metadata=record.metadata)
        parts.store.audit(conn, "confirm", tenant_id=record.tenant_id, user_id=record.user_id,
                          memory_id=record.memory_id, detail={"by": "api", "frequency": record.frequency})
    return record
