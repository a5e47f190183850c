"""Reconciliation: each new statement meets the user's current statements on its slot, and the memory
keeps what the user last said.

A statement (``portamem.language.statements.Statement``) names a slot: the user's city (``lives_in``), the
budget *for the kitchen renovation*, their liking of spicy food. For each new memory's statements the
review finds the user's current memories on the same slots (the nearest stored neighbours it already
looks up, the earlier rows of the batch, and a keyword probe of the slot's words, so a statement said
weeks ago in other words is found too) and decides, as mem0's ADD / UPDATE / NOOP over extracted facts:

- **add**: nothing current on the slot;
- **update**: another value ("my budget is now 15000"), the opposite polarity ("I've gone off spicy
  food" after "I love spicy food"), or a statement naming what it replaced ("I moved from Lyon to
  Paris", "switched from Spotify to Apple Music") outdates the older memory: it becomes SUPERSEDED
  with ``superseded_by`` the newer one, which records what it replaced and when (``REPLACED_KEY``,
  shown on its prompt line). The one that arrived last wins (commit order, the outbox's ``pk``,
  whatever order indexers settle them in);
- **no-op**: the same value again ("I'm still in Paris") is one more sighting of the older memory
  (its frequency counts it) and the newer row is retired into it;
- **held for review**: a statement less trusted than the memory it contradicts waits PENDING
  (``Memory.confirm_memory`` activates it).

An older memory without statements that says more than the value the newer replaces ("Tomasz from
Brightwell Builders can start on 24 February" against "the start got pushed back to 10 March") is
**outdated in part**: it stays active, marked ``OUTDATED_KEY`` with the newer's id, so the builder is
still recalled while the prompt shows the newer line in its place when both bear on a question
(``portamem.read.prompt``).

Every link stays in the scope of the write that made it (``portamem.write.scope``): an agent's private
statement supersedes or outdates only that agent's memories, a shared one the shared layer and the
agents' private memories of the user; a repeat is retired only into a memory of its own scope; and a
less trusted statement waits PENDING rather than outdate a more trusted one, in whole or in part.

A superseded memory is never recalled or purged; ``list_memories(filters={"statuses":
["superseded"]})``, ``history`` and ``explain`` show it.

It is decided in the indexer's review (``portamem.background.indexer.settle``), under the store's lock.

With a merger plugin (``portamem_merge_statements``, e.g. an LLM), an update also yields one merged
statement ("my budget was 5000, it is 8000 now"). It is stored PENDING: a model's rewrite is not
the user's word, so it waits until the user mentions the attribute or one of its entities again
(a later write that names them), then it becomes ACTIVE in place of the newer statement. If that
later write gives yet another value, the merged statement is retired instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..components import Components
from ..language.entities import normalize_entity
from ..filters import SearchFilters
from ..pipeline import WriteContext
from ..records import EARLIER_KEY, OUTDATED_KEY, PENDING_KEY, REPLACED_KEY, MemoryRecord, Status, \
    as_trusted, speaks_for_the_user, to_iso, utcnow
from ..language.statements import ATTRIBUTE_PREFIXES, NAMED, Statement, attributes, content_words, same_slot, same_value, \
    statements_of
from ..language.text import tokenize
from .currency import earlier_pairs, mark_earlier, withdraw
from .save import screen
from .scope import acts_on, derived, may_merge

__all__ = ["Supersessions", "supersede", "reconcile", "PENDING_KEY", "REPLACED_KEY", "OUTDATED_KEY"]

#: ``PENDING_KEY`` (``portamem.records``): metadata key of a merged statement waiting for its entity
#: statements about a thing the user has, likes or uses: a negative one outdates a positive one of the
#: same thing whatever the attribute ("I sold the Golf" after "I drive a Golf")
_OBJECT_ATTRIBUTES = frozenset({"preference", "uses", "has", "does", "diet"})
#: the words that name a named relation in text, for the keyword probe of its slot
_SLOT_WORDS = {"lives_in": "live living moved move home city based", "works_at": "work working job company joined",
               "occupation": "work job profession", "diet": "diet vegetarian vegan meat eat",
               "name": "name called", "allergic_to": "allergic allergy"}
#: the user's current memories on a statement's words that the probe reads
_PROBE_K = 20


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
    #: (older, newer) where the newer only said the older again: the newer is retired into the older
    repeats: list[tuple[MemoryRecord, MemoryRecord]] = field(default_factory=list)
    #: newer rows held PENDING: they contradict a high-trust memory
    held: list[MemoryRecord] = field(default_factory=list)
    #: (newer, older) where the newer outdates a part of the older, which stays active
    parts: list[tuple[MemoryRecord, MemoryRecord]] = field(default_factory=list)
    #: (newer, older) where the newer is about the same thing with another value: the older stays active,
    #: marked earlier (``portamem.write.currency``)
    earlier: list[tuple[MemoryRecord, MemoryRecord]] = field(default_factory=list)
    #: statements whose claim to have ended an older memory was withdrawn: a later one ended it more surely
    withdrawn: list[MemoryRecord] = field(default_factory=list)
    merged: list[MemoryRecord] = field(default_factory=list)
    activated: list[MemoryRecord] = field(default_factory=list)
    retired: list[MemoryRecord] = field(default_factory=list)

    @property
    def changed(self) -> list[MemoryRecord]:
        """Stored records whose status or links moved (for the index and the commit)."""
        out = {r.memory_id: r for pair in [*self.pairs, *self.repeats, *self.parts, *self.earlier] for r in pair}
        out.update((r.memory_id, r) for r in [*self.activated, *self.retired, *self.held, *self.withdrawn])
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
        for older, newer in self.repeats:
            parts.store.update_fields(conn, [older.memory_id], reindex=False, frequency=older.frequency,
                                      updated_at=older.updated_at.timestamp())
            # the trail a duplicate leaves (portamem.write.dedupe): the same statement said again is one
            rows.append({"action": "dedupe", "tenant_id": older.tenant_id, "user_id": older.user_id,
                         "memory_id": older.memory_id,
                         "detail": {"frequency": older.frequency, "session_id": newer.session_id,
                                    "source": newer.source.value, "duplicate": newer.memory_id}})
            rows.append({"action": "merged", "tenant_id": newer.tenant_id, "user_id": newer.user_id,
                         "memory_id": newer.memory_id, "detail": {"into": older.memory_id, "at": now.isoformat()}})
        for m in self.held:
            rows.append({"action": "hold", "tenant_id": m.tenant_id, "user_id": m.user_id, "memory_id": m.memory_id,
                         "detail": m.metadata["trust"]})
        if self.merged:
            parts.store.insert(conn, self.merged)  # embedded by the indexer's next batch, indexed when active
        for newer, older in self.pairs:
            rows.append({"action": "supersede", "tenant_id": older.tenant_id, "user_id": older.user_id,
                         "memory_id": older.memory_id,
                         "detail": {"superseded_by": newer.memory_id, "content": newer.content[:200]}})
        for newer, older in self.parts:
            rows.append({"action": "outdate", "tenant_id": older.tenant_id, "user_id": older.user_id,
                         "memory_id": older.memory_id, "detail": older.metadata[OUTDATED_KEY]})
        for newer, older in self.earlier:
            rows.append({"action": "earlier", "tenant_id": older.tenant_id, "user_id": older.user_id,
                         "memory_id": older.memory_id, "detail": {"by": newer.memory_id,
                                                                  "until": older.metadata[EARLIER_KEY]["until"]}})
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


def _decide(mine: Sequence[Statement], other: MemoryRecord) -> str | None:
    """What a new memory's statements make of an older memory: "update" when one of them outdates
    it (all of its statements, or it states the value a new one says it replaced), "repeat" when
    they say again what it says, None when they are about other things."""
    theirs = statements_of(other)
    if not theirs:  # a memory without statements: a named previous value, or another value of the attribute
        return "update" if any((s.previous and _states(other, s.previous)) or _gives_another(other, s)
                               for s in mine) else None
    outdated, repeated = set(), set()
    for b, old in enumerate(theirs):
        for new in mine:
            if same_slot(new, old):
                if new.polarity == old.polarity and (same_value(new.value, old.value) or new.multi_valued):
                    repeated.add(b)
                elif new.polarity or old.polarity is False or _generic(new) or _same_thing(new.value, old.value):
                    outdated.add(b)  # another value, or "no longer" of this one (or of the slot, unnamed)
            elif new.previous and old.polarity and (same_value(old.value, new.previous)
                                                    or content_words(new.previous) <= content_words(old.value)):
                outdated.add(b)  # "moved from Lyon", "switched from Spotify", "instead of soy milk"
            elif not new.polarity and old.polarity and new.attribute in _OBJECT_ATTRIBUTES \
                    and old.attribute in _OBJECT_ATTRIBUTES and _same_thing(new.value, old.value):
                outdated.add(b)  # "I sold the Golf" after "I drive a Golf"
    if outdated and len(outdated | repeated) == len(theirs):
        return "update"
    if repeated and len(repeated) == len(theirs) and len(mine) == len(repeated):
        return "repeat"
    return None


def _generic(statement: Statement) -> bool:
    """A statement that ends its slot without naming the value ("I quit my job", "我辞职了")."""
    return not statement.polarity and content_words(statement.value) <= {"job", "position", "工作"}


def _same_thing(a: str, b: str) -> bool:
    wa, wb = content_words(a), content_words(b)
    return same_value(a, b) or (bool(wa & wb) and (wa <= wb or wb <= wa))


_A_VALUE = re.compile(r"\d")


def _gives_another(record: MemoryRecord, statement: Statement) -> bool:
    """A memory without statements that names the statement's free attribute (its head and qualifier
    words) beside a number that is not the statement's value: "Budget is 12,000 pounds all in" against
    "the budget is now 15k"."""
    if not statement.polarity or statement.multi_valued or statement.attribute in NAMED:
        return False
    words = content_words(record.content)
    named = content_words(f"{statement.attribute} {statement.qualifier}")
    return bool(named) and named <= words and bool(_A_VALUE.search(record.content)) \
        and not content_words(statement.value) <= words


def _states(record: MemoryRecord, value: str) -> bool:
    words = content_words(value)
    return bool(words) and words <= content_words(record.content)


def _probe(parts: Components, tenant_id: str, user_id: str, statements: Sequence[Statement]) -> list[str]:
    """The user's active memories whose words a statement's slot, value or previous value names."""
    words = []
    for st in statements:
        words += [st.attribute.replace("_", " "), st.qualifier, st.value, st.previous or "",
                  _SLOT_WORDS.get(st.attribute, "")]
    query = " ".join(w for w in words if w)
    if not query.strip():
        return []
    found = parts.store.keyword_search(tenant_id, user_id, query, SearchFilters(), _PROBE_K)
    return [memory_id for memory_id, _ in found]


def reconcile(parts: Components, records: Sequence[MemoryRecord], near: Mapping[str, list[Any]]) -> Supersessions:
    """Review a batch's surviving rows (status set by trust and dedupe already) against the user's
    current statements (the module docstring). ``near`` holds each row's nearest stored neighbours and
    the earlier rows of its batch and user. Rows are changed in place; the caller commits
    ``Supersessions.write`` with the batch."""
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
        stating = [(r, statements_of(r)) for r in group if speaks_for_the_user(r)]
        stating = [(r, st) for r, st in stating if st]
        if not stating:
            _earlier(parts, tenant_id, user_id, group, near, batch, out)
            continue
        probed = {r.memory_id: _probe(parts, tenant_id, user_id, st) for r, st in stating}
        ids = [h.memory_id for r, _ in stating for h in near.get(r.memory_id, [])]
        ids += [i for found in probed.values() for i in found]
        # rows still waiting for their own review (committed, not embedded yet) meet this batch then
        stored = {i: r for i, r in parts.store.get(tenant_id, user_id,
                                                   [i for i in dict.fromkeys(ids) if i not in batch]).items()
                  if not parts.needs_vector(r)}
        stored.update({i: batch[i] for i in ids if i in batch})
        # the rows the wake-up changed, as changed (their stored copies are out of date)
        stored.update((m.memory_id, m) for m in out.changed if (m.tenant_id, m.user_id) == (tenant_id, user_id))
        order = parts.store.arrival([r.memory_id for r, _ in stating] + list(stored))
        for m in out.activated:  # a merged statement stands where the statement it came from arrived
            order[m.memory_id] = order.get(str(m.supersedes), order.get(m.memory_id, 0))
        # in arrival order: each value meets the one before it while that one is still current
        stating.sort(key=lambda pair: order.get(pair[0].memory_id, 0))
        for record, mine in stating:
            seen = [h.memory_id for h in near.get(record.memory_id, [])] + probed[record.memory_id]
            others = [stored[i] for i in dict.fromkeys(seen) if i in stored]
            others += [m for m in out.activated if m.user_id == user_id and m not in others]
            # the nearest in arrival first, the earlier of two as near: a statement outdates the value
            # current just before it, then the value that came next outdates it (8000 -> 5000 -> 6000 is
            # a chain, not two links to 6000)
            mine_at = order.get(record.memory_id, 0)
            others.sort(key=lambda o: (abs(order.get(o.memory_id, 0) - mine_at), order.get(o.memory_id, 0)))
            for other in others:
                if other is record or other.status is not Status.ACTIVE or other.key is not None \
                        or record.status is not Status.ACTIVE:
                    continue
                later = order.get(record.memory_id, 0) >= order.get(other.memory_id, 0)
                newer, older = (record, other) if later else (other, record)
                decision = _decide(mine, other) if later else _decide(statements_of(other), record)
                # a write acts only within its scope: a private value never retires the shared layer's
                # or another agent's, and a repeat merges only within one scope (portamem.write.scope)
                if decision == "repeat" and not may_merge(older, newer) or \
                        decision == "update" and not acts_on(newer, older):
                    continue
                if decision == "repeat" and parts.settings.dedupe:  # a store that keeps every write keeps repeats
                    _repeat(older, newer, out)
                elif decision == "update":
                    # a less trusted newer outdates nothing, not even in part: _update holds it
                    part = _replaced_part(older, statements_of(newer)) \
                        if as_trusted(newer, older) else None
                    if part is not None:
                        _outdate_part(older, newer, part, out)
                    else:
                        _update(parts, older, newer, out)
        _earlier(parts, tenant_id, user_id, group, near, batch, out)
    return out


def _earlier(parts: Components, tenant_id: str, user_id: str, group: Sequence[MemoryRecord],
             near: Mapping[str, list[Any]], batch: Mapping[str, MemoryRecord], out: Supersessions) -> None:
    """What the rules linked to nothing: a new statement about the same thing as an older memory, with
    another value, marks it earlier (``portamem.write.currency``)."""
    ids = list(dict.fromkeys(h.memory_id for r in group for h in near.get(r.memory_id, []) if h.memory_id not in batch))
    stored = parts.store.get(tenant_id, user_id, ids) if ids else {}
    changed = {m.memory_id: m for m in out.changed}
    def get(i: str) -> MemoryRecord | None:
        return changed.get(i) or batch.get(i) or stored.get(i)

    for newer, older, p, part in earlier_pairs(group, near, get):
        before = mark_earlier(newer, older, p, part)
        (out.parts if part else out.earlier).append((newer, older))
        if before is not None:  # the statement that had ended it no longer claims so
            claimed = get(before) or parts.store.get(tenant_id, user_id, [before]).get(before)
            if claimed is not None and withdraw(claimed, older.memory_id):
                out.withdrawn.append(claimed)


#: a record's supersession in a batch's review (the name earlier releases knew it by)
supersede = reconcile


def _repeat(older: MemoryRecord, newer: MemoryRecord, out: Supersessions) -> None:
    """The newer says again what the older says: one more sighting of the older, the newer retired."""
    older.frequency += 1
    older.updated_at = max(older.updated_at, newer.updated_at)
    newer.status = Status.DELETED
    newer.superseded_by = older.memory_id
    newer.deleted_at = utcnow()
    out.repeats.append((older, newer))


#: where a memory's clauses end, for telling the clause a value is in from the rest
_CLAUSES = re.compile(r"[.;!?。；！？]+\s*|,\s*|，|\s+(?:and|but)\s+")
#: what makes a clause a fact of its own: a number, or a capitalised name not at the clause's start
_FACT = re.compile(r"\d|(?<=\s)[A-Z][\w'-]+|[\u4e00-\u9fff]{2,}")


def _replaced_part(older: MemoryRecord, mine: Sequence[Statement]) -> list[str] | None:
    """The clauses of an older memory without statements that the statements replace (about their slot
    or values, or giving a value), when another of its clauses holds a fact of its own: "Yeah, a guy
    called Tomasz from Brightwell Builders ... He can start on 24 February" says who the builder is
    besides the start date that "the start got pushed back to 10 March" replaces. None when the older
    states something or says nothing more: then it is superseded whole."""
    if statements_of(older):
        return None
    topic: set[str] = set()
    for st in mine:
        topic |= content_words(f"{st.attribute.replace('_', ' ')} {st.qualifier} {st.value} {st.previous or ''}")
    clauses = [c.strip() for c in _CLAUSES.split(older.content) if c and c.strip()]
    about = [c for c in clauses if content_words(c) & topic or _A_VALUE.search(c)]
    rest = [c for c in clauses if c not in about]
    return about if about and any(_FACT.search(c) for c in rest) else None


def _outdate_part(older: MemoryRecord, newer: MemoryRecord, part: Sequence[str], out: Supersessions) -> None:
    """The newer replaces ``part`` of the older, which holds other facts too: the older stays active,
    marked; the newer's note names the clauses it replaced ("He can start on 24 February")."""
    older.metadata[OUTDATED_KEY] = {"by": newer.memory_id, "at": to_iso(newer.created_at)}
    newer.metadata[REPLACED_KEY] = {"memory_id": older.memory_id, "at": to_iso(older.created_at),
                                    "value": "; ".join(part)[:200], "part": True}
    out.parts.append((newer, older))


def _update(parts: Components, older: MemoryRecord, newer: MemoryRecord, out: Supersessions) -> None:
    """The newer outdates the older, unless it is less trusted than the older: then it waits (a link
    carries the lower trust of its two ends, so a less trusted value never retires a more trusted one)."""
    if not as_trusted(newer, older):
        newer.status = Status.PENDING
        newer.metadata["trust"] = {"pending": "contradicts high trust", "contradicts": [older.memory_id],
                                   "reason": f"another value of a statement of {older.memory_id}"}
        out.held.append(newer)
        return
    older.status = Status.SUPERSEDED
    older.superseded_by = newer.memory_id
    newer.supersedes = older.memory_id
    was = [s.value for s in statements_of(older)]
    newer.metadata[REPLACED_KEY] = {"memory_id": older.memory_id, "at": to_iso(older.created_at),
                                    "value": "; ".join(was) if was else older.content[:200]}
    if older in out.activated:  # a later value outdates the merged statement too
        out.activated.remove(older)
        out.retired.append(older)
    else:
        out.pairs.append((newer, older))
        # a merged statement takes the newer's place: only where both are of one scope
        merged = _merged(parts, older, newer) if may_merge(older, newer) else None
        if merged is not None:
            out.merged.append(merged)


def _merged(parts: Components, older: MemoryRecord, newer: MemoryRecord) -> MemoryRecord | None:
    """The merger plugins' one statement for the pair, as a PENDING record, or None (no merger)."""
    ctx = WriteContext(tenant_id=newer.tenant_id, user_id=newer.user_id, settings=parts.settings,
                       session_id=newer.session_id, agent_id=newer.agent_id, source=newer.source)
    text = parts.hooks.merge_statements(older, newer, ctx)
    if not text:
        return None
    limits = derived([older, newer])  # a model's rewrite of two statements keeps the weaker's limits
    merged = MemoryRecord(
        content=text.strip()[: parts.settings.max_content_chars], user_id=newer.user_id, tenant_id=newer.tenant_id,
        session_id=newer.session_id, agent_id=newer.agent_id, type=newer.type, kind=newer.kind,
        entities=list(dict.fromkeys(newer.entities + older.entities + _topics(newer))), triples=[list(t) for t in newer.triples],
        importance=newer.importance, importance_band=newer.importance_band, half_life_days=limits.half_life_days,
        created_at=newer.created_at, source=limits.source, trust=limits.trust, status=Status.PENDING,
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
               if PENDING_KEY in m.metadata and m.status is Status.PENDING and m.embedding is not None
               and any(acts_on(r, m) for r in group)]  # only a write of its scope wakes it
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
