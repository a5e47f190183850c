"""Supersession: a new value of a single-valued attribute replaces the old one, which is kept as history.

"My budget is 5000" then "my budget is 8000": both statements carry the triple (user, my budget, _)
from the extractor; the relation holds one value at a time (``portamem.statements.single_valued``), so the one that
arrived last (commit order, the outbox's ``pk``, whatever order indexers settle them in) stays ACTIVE
and the other becomes SUPERSEDED with ``superseded_by`` pointing at it. A superseded memory is never
recalled or purged; ``list_memories(filters={"statuses": ["superseded"]})``, ``history`` and
``explain`` show it.

It is decided in the indexer's review (``portamem.background.indexer.settle``), under the store's lock, against
the nearest stored neighbours the review already looks up and the earlier rows of the same batch.

With a merger plugin (``portamem_merge_statements``, e.g. an LLM), the pair also yields one merged
statement ("my budget was 5000, it is 8000 now"). It is stored PENDING: a model's rewrite is not
the user's word, so it waits until the user mentions the attribute or one of its entities again
(a later write that names them), then it becomes ACTIVE in place of the newer statement. If that
later write gives yet another value, the merged statement is retired instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..components import Components
from ..entities import normalize_entity
from ..filters import SearchFilters
from ..pipeline import WriteContext
from ..records import MemoryRecord, Status, utcnow
from ..statements import ATTRIBUTE_PREFIXES, attributes
from ..text import tokenize
from .save import screen

__all__ = ["Supersessions", "supersede", "PENDING_KEY"]

#: metadata key of a merged statement waiting for its entity
PENDING_KEY = "merged_pending"


def _unprefixed(relation: str) -> str:
    for prefix in ATTRIBUTE_PREFIXES:
        relation = relation.removeprefix(prefix)
    return relation


def _topics(record: MemoryRecord) -> list[str]:
    """What a merged statement waits to hear again: its entities and the words naming its attributes."""
    words = [w for (_, rel) in attributes(record) for w in tokenize(_unprefixed(rel))]
    return list(dict.fromkeys([normalize_entity(e) for e in record.entities] + words))


@dataclass
class Supersessions:
    """What one review batch decided: (newer, older) pairs, merged statements created, and merged
    statements activated or retired because a later write named their entity."""

    pairs: list[tuple[MemoryRecord, MemoryRecord]] = field(default_factory=list)
    merged: list[MemoryRecord] = field(default_factory=list)
    activated: list[MemoryRecord] = field(default_factory=list)
    retired: list[MemoryRecord] = field(default_factory=list)

    @property
    def changed(self) -> list[MemoryRecord]:
        """Stored records whose status or links moved (for the index and the commit)."""
        out = {r.memory_id: r for pair in self.pairs for r in pair}
        out.update((r.memory_id, r) for r in [*self.activated, *self.retired])
        return list(out.values())

    def write(self, parts: Components, conn: Any, batch: set[str]) -> None:
        """Commit the decisions in the indexer's transaction; the batch's own rows are written by the
        review already (their status and ``superseded_by``), so only their ``supersedes`` is left."""
        now = utcnow()
        rows: list[dict[str, Any]] = []
        for r in self.changed:
            values: dict[str, Any] = {"supersedes": r.supersedes}
            if r.memory_id not in batch:
                values.update(status=r.status.value, superseded_by=r.superseded_by, metadata=r.metadata,
                              updated_at=now.timestamp())
            parts.store.update_fields(conn, [r.memory_id], reindex=False, **values)
        if self.merged:
            parts.store.insert(conn, self.merged)  # embedded by the indexer's next batch, indexed when active
        for newer, older in self.pairs:
            rows.append({"action": "supersede", "tenant_id": older.tenant_id, "user_id": older.user_id,
                         "memory_id": older.memory_id,
                         "detail": {"superseded_by": newer.memory_id, "content": newer.content[:200]}})
        for m in self.merged:
            rows.append({"action": "merge_pending", "tenant_id": m.tenant_id, "user_id": m.user_id,
                         "memory_id": m.memory_id, "detail": m.metadata[PENDING_KEY]})
        for m in self.activated:
            rows.append({"action": "merge_activated", "tenant_id": m.tenant_id, "user_id": m.user_id,
                         "memory_id": m.memory_id, "detail": {"supersedes": m.supersedes}})
        for m in self.retired:
            rows.append({"action": "merge_retired", "tenant_id": m.tenant_id, "user_id": m.user_id,
                         "memory_id": m.memory_id, "detail": {"superseded_by": m.superseded_by}})
        parts.store.audit_many(conn, rows)


def supersede(parts: Components, records: Sequence[MemoryRecord], near: Mapping[str, list[Any]]) -> Supersessions:
    """Review a batch's surviving rows (status set by trust and dedupe already) for new values.

    ``near`` holds each row's nearest stored neighbours and the earlier rows of its batch and user.
    Rows are changed in place; the caller commits ``Supersessions.write`` with the batch.
    """
    out = Supersessions()
    if not parts.settings.supersede:
        return out
    fresh = [r for r in records if r.status is Status.ACTIVE and r.key is None]
    if not fresh:
        return out
    batch = {r.memory_id: r for r in records}
    by_scope: dict[tuple[str, str], list[MemoryRecord]] = {}
    for r in fresh:
        by_scope.setdefault((r.tenant_id, r.user_id), []).append(r)
    for (tenant_id, user_id), group in by_scope.items():
        _wake_merged(parts, tenant_id, user_id, group, out)
        with_values = [r for r in group if attributes(r)]
        if not with_values:
            continue
        ids = [h.memory_id for r in with_values for h in near.get(r.memory_id, [])]
        stored = {**parts.store.get(tenant_id, user_id, [i for i in ids if i not in batch]),
                  **{i: batch[i] for i in ids if i in batch}}
        # the rows the wake-up changed, as changed (their stored copies are out of date)
        stored.update((m.memory_id, m) for m in out.changed if (m.tenant_id, m.user_id) == (tenant_id, user_id))
        order = parts.store.arrival([r.memory_id for r in with_values] + list(stored))
        for m in out.activated:  # a merged statement stands where the statement it came from arrived
            order[m.memory_id] = order.get(str(m.supersedes), order.get(m.memory_id, 0))
        for record in with_values:
            mine = attributes(record)
            others = [stored[h.memory_id] for h in near.get(record.memory_id, []) if h.memory_id in stored]
            others += [m for m in out.activated if m.user_id == user_id and m not in others]
            for other in others:
                if other is record or other.status is not Status.ACTIVE or other.key is not None \
                        or record.status is not Status.ACTIVE:
                    continue
                theirs = attributes(other)
                if not any(k in theirs and theirs[k] != v for k, v in mine.items()):
                    continue
                newer, older = (record, other) if order.get(record.memory_id, 0) >= order.get(other.memory_id, 0) \
                    else (other, record)
                older.status = Status.SUPERSEDED
                older.superseded_by = newer.memory_id
                newer.supersedes = older.memory_id
                if older in out.activated:  # a later value outdates the merged statement too
                    out.activated.remove(older)
                    out.retired.append(older)
                else:
                    out.pairs.append((newer, older))
                    merged = _merged(parts, older, newer)
                    if merged is not None:
                        out.merged.append(merged)
    return out


def _merged(parts: Components, older: MemoryRecord, newer: MemoryRecord) -> MemoryRecord | None:
    """The merger plugins' one statement for the pair, as a PENDING record, or None (no merger)."""
    ctx = WriteContext(tenant_id=newer.tenant_id, user_id=newer.user_id, settings=parts.settings,
                       session_id=newer.session_id, agent_id=newer.agent_id, source=newer.source)
    text = parts.hooks.merge_statements(older, newer, ctx)
    if not text:
        return None
    merged = MemoryRecord(
        content=text.strip()[: parts.settings.max_content_chars], user_id=newer.user_id, tenant_id=newer.tenant_id,
        session_id=newer.session_id, agent_id=newer.agent_id, type=newer.type, kind=newer.kind,
        entities=list(dict.fromkeys(newer.entities + older.entities + _topics(newer))), triples=[list(t) for t in newer.triples],
        importance=newer.importance, importance_band=newer.importance_band, half_life_days=newer.half_life_days,
        created_at=newer.created_at, source=newer.source, trust=newer.trust, status=Status.PENDING,
    )
    merged.metadata[PENDING_KEY] = {"merges": [older.memory_id, newer.memory_id], "waits_for": _topics(newer),
                                    "reason": "a merged statement waits until its entity is mentioned again"}
    screen(parts, merged, ctx)  # the merged text goes through the guard and redaction like any write
    return merged


def _wake_merged(parts: Components, tenant_id: str, user_id: str, group: Sequence[MemoryRecord],
                 out: Supersessions) -> None:
    """Activate the user's merged statements whose entity or attribute a row of the batch names:
    the merged statement takes the place of the statement it was merged from."""
    probes = list(dict.fromkeys(w for r in group for w in
                                [normalize_entity(e) for e in r.entities] + tokenize(r.content)))
    found = parts.store.entity_search(tenant_id, user_id, probes, SearchFilters(statuses=(Status.PENDING,)), 20)
    waiting = [m for m in parts.store.get(tenant_id, user_id, [i for i, _ in found]).values()
               if PENDING_KEY in m.metadata and m.status is Status.PENDING and m.embedding is not None]
    if not waiting:
        return
    current = parts.store.get(tenant_id, user_id, [m.metadata[PENDING_KEY]["merges"][1] for m in waiting])
    for merged in waiting:
        newer = current.get(merged.metadata[PENDING_KEY]["merges"][1])
        if newer is None or newer.status is not Status.ACTIVE:  # already outdated: never activated
            merged.status, merged.superseded_by = Status.SUPERSEDED, newer.superseded_by if newer else None
            out.retired.append(merged)
            continue
        merged.status = Status.ACTIVE
        merged.metadata = {k: v for k, v in merged.metadata.items() if k != PENDING_KEY}
        merged.supersedes = newer.memory_id
        newer.status, newer.superseded_by = Status.SUPERSEDED, merged.memory_id
        out.activated.append(merged)
        out.pairs.append((merged, newer))
