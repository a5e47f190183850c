"""The derivation property (``portamem.write.scope``), over every derivation at once: memories of random
trust, source, agent scope, session and half-life are written, reviewed (supersession, partial
outdating, dedupe), maintained (abstraction of habits, consolidation, tiers), moved between tiers by
hand, compressed from a window into an episode and preloaded by a recall. Whatever is derived (an
abstract memory, an episode, a supersession, outdating or merge link, a preloaded line) carries at
most the lowest trust, at most the narrowest scope and at most the shortest half-life of what it came
from, and no write changes a memory outside its own scope.

Runs on the backend ``PORTAMEM_TEST_BACKEND`` names (SQLite + milvus-lite by default; the tox envs
pg-lite and pg-milvus run it on PostgreSQL + milvus-lite and PostgreSQL + a Milvus server).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings as hsettings, strategies as st

from portamem import Memory
from portamem.embedding.embedders import Embedder
from portamem.messages import Message, add_messages
from portamem.records import DEFAULT_TRUST, OUTDATED_KEY, TRUST_RANK, MemoryRecord, MemoryType, Source, Status, Tier, Trust
from portamem.recall import recall
from portamem.write.scope import acts_on, may_merge, within

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
AGENTS = [None, "sales", "support"]
#: near one another, so a few of them in one scope form a habit ("window", "seat")
BOOKINGS = ["Booked window seat 14A on the Munich flight.", "Booked a window seat, 22F, on the London flight.",
            "Booked window seat 9A on the Paris flight.", "Booked window seat 3A on the Vienna flight.",
            "Booked window seat 17F on the Oslo flight.", "Booked window seat 12A on the Madrid flight."]
#: an older and a newer statement that supersede, outdate in part or repeat one another
CHANGES = [("My budget is 1200 euros.", "My budget is 2500 euros now."),
           ("Tomasz from Brightwell Builders can start on 24 February.", "The start got pushed back to 10 March."),
           ("我的预算是8000元。", "我的预算现在是9000元。"),
           ("Dana takes the 8:15 train to work.", "Dana takes the 8:15 train to work."),
           ("I live in Leeds.", "I moved from Leeds to York.")]
OTHERS = ["My Avios number is 4417-2208.", "I'm vegetarian.", "I always take an aisle seat on trains."]
ALL = {"statuses": [s.value for s in Status], "tiers": [t.value for t in Tier]}

attrs = st.fixed_dictionaries({
    "trust": st.sampled_from(list(Trust)), "source": st.sampled_from([Source.USER, Source.USER, *Source]),
    "half_life": st.sampled_from([3.0, 30.0, 90.0, 400.0]), "session": st.sampled_from(["s1", "s2", "s3"]),
})
scoped = st.tuples(st.sampled_from(AGENTS), attrs)
changes = st.lists(st.tuples(st.sampled_from(CHANGES), scoped, scoped), min_size=2, max_size=3).map(
    lambda drawn: [(text, agent, a) for pair, *ends in drawn for text, (agent, a) in zip(pair, ends)])
others = st.tuples(changes, st.lists(st.tuples(st.sampled_from(OTHERS), st.sampled_from(AGENTS), attrs),
                                     max_size=2)).map(lambda drawn: drawn[0] + drawn[1])
habit = st.tuples(st.sampled_from(AGENTS), st.lists(attrs, min_size=3, max_size=4))


@pytest.fixture
def store(tmp_path: Path, backend, embedder: Embedder) -> Iterator[Memory]:  # type: ignore[no-untyped-def]
    # one store for every example of the test (each in a tenant of its own): opening one costs seconds
    mem = Memory(settings=backend.settings(tmp_path / "store", pool_capacity=6, preload=True), embedder=embedder)
    yield mem
    mem.close()


def _state(mem: Memory, tenant: str, user: str) -> dict[str, MemoryRecord]:
    return {r.memory_id: r for r in mem.list_memories(user_id=user, tenant_id=tenant, filters=ALL)}


def _view(r: MemoryRecord) -> tuple[Any, ...]:
    """What a write may change on another memory (its links, status, counters, trust)."""
    return (r.status, r.superseded_by, r.supersedes, r.trust, r.frequency, r.metadata.get(OUTDATED_KEY),
            r.agent_id, r.half_life_days)


def _check_links(state: dict[str, MemoryRecord]) -> None:
    """Every supersession, outdating and merge link joins memories the newer one may act on."""
    for r in state.values():
        newer = state.get(r.superseded_by or "")
        if newer is not None and r.status is Status.SUPERSEDED:
            assert acts_on(newer, r), f"{newer.agent_id!r} superseded {r.agent_id!r}"
            assert TRUST_RANK[newer.trust] >= TRUST_RANK[r.trust], "a less trusted value retired a more trusted one"
        if newer is not None and r.status is Status.DELETED:  # merged into it (dedupe, repeat, consolidation)
            assert may_merge(newer, r), f"{r.agent_id!r} merged into {newer.agent_id!r}"
        link = r.metadata.get(OUTDATED_KEY)
        if isinstance(link, dict) and link.get("by") in state:
            by = state[link["by"]]
            assert acts_on(by, r) and TRUST_RANK[by.trust] >= TRUST_RANK[r.trust]


# a store's writes and maintenance take seconds per example: few examples, derandomized (the same ones on
# every run and backend), and no shrinking (minutes here): a failure prints the example it found
@hsettings(max_examples=10, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(habit=habit, others=others, preload_agent=st.sampled_from(AGENTS),
       trusts=st.sampled_from([None, ("high",), ("high", "medium")]),
       tier=st.sampled_from([Tier.WARM, Tier.COLD]), moved=st.integers(min_value=0, max_value=3))
def test_everything_derived_keeps_its_sources_limits(store: Memory, habit: tuple[str | None, list[dict[str, Any]]],
                                                     others: list[tuple[str, str | None, dict[str, Any]]],
                                                     preload_agent: str | None, trusts: tuple[str, ...] | None,
                                                     tier: Tier, moved: int) -> None:
    mem, tenant, user = store, uuid.uuid4().hex[:12], "u"
    agent, members = habit
    writes = [(text, agent, a) for text, a in zip(BOOKINGS, members)] + others
    # writes: each settled before the next; what changed besides it is in its scope
    for i, (text, writer_agent, a) in enumerate(writes):
        before = _state(mem, tenant, user)
        saved = mem.save_memory(text, user_id=user, tenant_id=tenant, agent_id=writer_agent, trust=a["trust"],
                                source=a["source"], half_life_days=a["half_life"], session_id=a["session"],
                                created_at=T0 + timedelta(hours=i), wait=True)
        writer = MemoryRecord(content=text, user_id=user, tenant_id=tenant, agent_id=writer_agent, trust=a["trust"])
        after = _state(mem, tenant, user)
        for mid, old in before.items():
            if mid in after and _view(after[mid]) != _view(old):
                assert acts_on(writer, old), f"a write of {writer_agent!r} changed {old.agent_id!r}'s {old.content!r}"
                if after[mid].frequency != old.frequency:  # one more sighting: a merge into it
                    assert may_merge(writer, old)
        assert saved.tenant_id == tenant
    # a person confirms what waits (low trust, contradictions): confirmed, it may form habits
    for r in _state(mem, tenant, user).values():
        if r.status is Status.PENDING and "merged_pending" not in r.metadata:
            mem.confirm_memory(r.memory_id, user_id=user, tenant_id=tenant)
    mem.flush()
    _check_links(_state(mem, tenant, user))

    # maintenance: habits, consolidation over capacity (pool_capacity 6), tiers
    before = _state(mem, tenant, user)
    mem.maintain(now=T0 + timedelta(days=2), tenant_id=tenant)
    after = _state(mem, tenant, user)
    for mid, r in after.items():
        if "abstract" in r.metadata:
            sources = [s for s in (after.get(i) for i in r.metadata["abstract"]["derived_from"]) if s is not None]
            assert sources and within(r, sources) == [], (r.content, within(r, sources))
            assert all(TRUST_RANK[r.trust] <= TRUST_RANK[s.trust] for s in sources)
        elif mid in before:
            old = before[mid]
            assert (r.trust, r.agent_id, r.tenant_id, r.user_id) == (old.trust, old.agent_id, old.tenant_id, old.user_id)
            assert r.half_life_days <= old.half_life_days or old.type is MemoryType.WORKING
    _check_links(after)
    event(f"habits: {sum('abstract' in r.metadata for r in after.values())}")
    event(f"superseded: {sum(r.status is Status.SUPERSEDED for r in after.values())}")
    event(f"outdated in part: {sum(OUTDATED_KEY in r.metadata for r in after.values())}")
    event(f"merged: {sum(r.status is Status.DELETED and r.superseded_by is not None for r in after.values())}")

    # tier moves by hand: only the moved memories change, and only their tier
    # (a keyed memory, an abstract one included, stays out of the cold archive: its key is looked up)
    active = sorted(m for m, r in after.items() if r.status is Status.ACTIVE and r.key is None)[:moved]
    if active:
        mem.set_tier(active, tier.value, user_id=user, tenant_id=tenant)
        moved_state = _state(mem, tenant, user)
        for mid, r in moved_state.items():
            assert _view(r) == _view(after[mid]), "a tier move changed a memory's links, trust or scope"
            assert r.tier is (tier if mid in active else after[mid].tier)

    # a window compressed into an episode and a tool memory: derived from the turns (the user's words at
    # medium trust, the tool's result at high), in that session, of no agent
    add_messages(mem, [
        Message("user", "We land in Oslo at 14:05 on flight SK-4410, then the Hexa meeting is at 10 on Friday.",
                created_at=T0 + timedelta(days=3)),
        Message("assistant", "Noted: SK-4410 lands at 14:05, Hexa on Friday at 10."),
        Message("user", "Will it rain in Oslo on Friday?", created_at=T0 + timedelta(days=3, minutes=1)),
        Message("assistant", "", calls_tools=True),
        Message("tool", "Forecast for Oslo, Friday: rain 6 mm, 9 C.", name="weather"),
        Message("assistant", "Yes, about 6 mm of rain is expected."),
    ], user_id=user, tenant_id=tenant, session_id="w")
    mem.end_idle_sessions(user_id=user, tenant_id=tenant, now=T0 + timedelta(days=4))
    mem.flush()
    derived = [r for r in _state(mem, tenant, user).values() if r.type is MemoryType.EPISODIC and r.session_id == "w"]
    event(f"episodes and tool memories: {len(derived)}")
    for e in derived:
        assert e.agent_id is None and e.session_id == "w" and e.source in (Source.USER, Source.TOOL)
        assert TRUST_RANK[e.trust] <= TRUST_RANK[DEFAULT_TRUST[e.source]]
        assert e.source is Source.TOOL or TRUST_RANK[e.trust] <= TRUST_RANK[Trust.MEDIUM]

    # preload through recall, then its reuse by the next turn: only the caller's scope and trust, active lines
    for query in ("Can you help me plan my business trip to Madrid next week?", "What time should I leave?"):
        hits = recall(mem, query, user_id=user, tenant_id=tenant, agent_id=preload_agent, session_id="p",
                      now=T0 + timedelta(days=4), filters=None if trusts is None else {"trusts": list(trusts)})
        assert trusts is None or all(h.record.trust.value in trusts for h in hits)
        event(f"preloaded: {sum('preload' in h.found_by for h in hits) > 0}")
        for h in hits:
            assert h.record.tenant_id == tenant and h.record.status is Status.ACTIVE
            if preload_agent is not None:
                assert h.record.agent_id in (preload_agent, None), (preload_agent, h.record.agent_id, h.found_by)
    _check_links(_state(mem, tenant, user))
