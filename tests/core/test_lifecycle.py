"""Lifecycle by kind: what a person states once lasts, recall counts as use, maintenance runs on a
timer, and a new value of an attribute supersedes the old one."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.config import ConfigError
from portamem.embedding.embedders import Embedder
from portamem.recall import recall
from portamem.records import MemoryType, Status

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


def test_identity_stated_once_in_conversation_is_long_term(memory: Memory) -> None:
    written = memory.add_turn("My name is Dana Whitfield.", "Nice to meet you, Dana!", user_id="u1",
                              created_at=T0)
    name = next(r for r in written if "Dana" in r.content and r.type is not MemoryType.EPISODIC)
    assert name.type is MemoryType.SEMANTIC and name.kind == "identity"
    assert name.half_life_days == memory.settings.half_lives["identity"]
    task = memory.add_turn("Right now I'm booking a table at Luigi's.", "On it.", user_id="u1", created_at=T0)
    candidate = next(r for r in task if r.type is MemoryType.WORKING)
    assert candidate.half_life_days == memory.settings.half_lives["task"]  # a passing task stays a candidate
    report = memory.maintain(now=T0 + timedelta(days=30))
    assert name.memory_id not in report.evicted and candidate.memory_id in report.evicted
    assert recall(memory, "What is my name?", user_id="u1")[0].content == "My name is Dana Whitfield."


def test_recall_counts_as_use_and_decay_counts_from_the_last_use(memory: Memory) -> None:
    kept = memory.save_memory("We walked the dog along the canal.", user_id="u1", type="episodic",
                              created_at=T0)
    unused = memory.save_memory("We repainted the fence green.", user_id="u1", type="episodic", created_at=T0)
    seen = recall(memory, "Where did we walk the dog?", user_id="u1")
    assert [h.memory_id for h in seen] == [kept.memory_id]
    assert memory.get_memory(kept.memory_id, user_id="u1").access_count == 0  # written off the search path
    memory.search_memory("Where did we walk the dog?", user_id="u1", now=T0 + timedelta(days=20), touch=True)
    memory.retrieval_log.flush()
    used = memory.get_memory(kept.memory_id, user_id="u1")
    assert used.access_count == 2 and used.last_accessed_at is not None
    assert memory.get_memory(unused.memory_id, user_id="u1").access_count == 0
    # a plain search is not a use
    memory.search_memory("canal", user_id="u1")
    memory.retrieval_log.flush()
    assert memory.get_memory(kept.memory_id, user_id="u1").access_count == 2
    report = memory.maintain(now=T0 + timedelta(days=24))
    assert unused.memory_id in report.evicted and kept.memory_id not in report.evicted


def test_scheduled_maintainer_runs_in_the_background(settings: Settings, embedder: Embedder) -> None:
    with pytest.raises(ConfigError):
        Settings(maintain_interval_s=0)
    with Memory(settings=settings.replace(maintain_interval_s=0.2), embedder=embedder) as mem:
        old = mem.save_memory("Just a passing remark about the bus.", user_id="u1", type="working",
                              half_life_days=0.001, created_at=T0)
        deadline = time.monotonic() + 30
        assert mem.maintainer is not None
        # a run evicts first and counts itself after its audit scan: wait for both
        while mem.get_memory(old.memory_id, user_id="u1").status is not Status.DELETED or mem.maintainer.runs < 1:
            assert time.monotonic() < deadline, "the maintainer never ran"
            time.sleep(0.1)
    assert not mem.maintainer._thread.is_alive()  # close stops it


def test_a_new_value_supersedes_the_old_and_keeps_it_as_history(memory: Memory) -> None:
    old = memory.save_memory("My budget is 5000.", user_id="u1", created_at=T0)
    new = memory.save_memory("My budget is 8000.", user_id="u1", created_at=T0 + timedelta(days=3), wait=True)
    assert new.supersedes == old.memory_id
    active = memory.list_memories(user_id="u1")
    assert [r.memory_id for r in active] == [new.memory_id]
    kept = memory.get_memory(old.memory_id, user_id="u1")
    assert kept.status is Status.SUPERSEDED and kept.superseded_by == new.memory_id
    assert memory.get_memory(new.memory_id, user_id="u1").supersedes == old.memory_id
    assert [h.content for h in memory.search_memory("What is my budget?", user_id="u1")] == ["My budget is 8000."]
    why = memory.explain(old.memory_id, user_id="u1")
    assert "supersede" in [h["action"] for h in why.history] and new.memory_id in why.render()
    # another attribute, or the same value again, supersedes nothing
    memory.save_memory("My deadline is Friday.", user_id="u1", wait=True)
    memory.save_memory("My budget is 8000.", user_id="u1", wait=True)
    assert memory.get_memory(new.memory_id, user_id="u1").status is Status.ACTIVE
    memory.purge_deleted(now=T0 + timedelta(days=400))
    assert memory.get_memory(old.memory_id, user_id="u1").status is Status.SUPERSEDED  # history is not purged


def test_the_last_acknowledged_value_wins_within_one_indexer_batch(memory: Memory) -> None:
    """Two values written back to back meet in one batch of the indexer: arrival decides, not the
    clock the caller put on them."""
    first = memory.save_memory("我的预算是8000元。", user_id="u1", created_at=T0 + timedelta(days=3))
    second = memory.save_memory("我的预算是5000元。", user_id="u1", created_at=T0)
    third = memory.save_memory("我的预算是6000元。", user_id="u1", created_at=T0 + timedelta(days=1))
    memory.flush()
    assert [r.memory_id for r in memory.list_memories(user_id="u1")] == [third.memory_id]
    got = memory.get_memory
    assert got(first.memory_id, user_id="u1").superseded_by == second.memory_id
    assert got(second.memory_id, user_id="u1").superseded_by == third.memory_id
    assert [h.memory_id for h in memory.search_memory("我的预算是多少？", user_id="u1")] == [third.memory_id]


def test_no_longer_having_a_thing_outdates_the_fuller_name_of_it(memory: Memory) -> None:
    golf = memory.save_memory("I drive a 2015 VW Golf, it's costing me a fortune in repairs.", user_id="u1", wait=True)
    sold = memory.save_memory("I sold the Golf!", user_id="u1", wait=True)
    assert memory.get_memory(golf.memory_id, user_id="u1").superseded_by == sold.memory_id
    kia = memory.save_memory("I drive a Kia Niro now.", user_id="u1", wait=True)  # another thing: stands beside it
    assert {r.memory_id for r in memory.list_memories(user_id="u1")} == {sold.memory_id, kia.memory_id}


def test_a_value_given_beside_other_facts_is_outdated_in_part(memory: Memory) -> None:
    """"Tomasz from Brightwell Builders can start on 24 February", then "the start got pushed back to 10
    March": the builder is still known, and a question about the start reads the newer line only."""
    from portamem.recall import recall

    memory.add_turn("Yeah, a guy called Tomasz from Brightwell Builders, a neighbour recommended him. "
                    "He can start on 24 February.", "Great.", user_id="u1", session_id="a", created_at=T0)
    memory.add_turn("Bad news, the start got pushed back to 10 March because the units are delayed.", "Noted.",
                    user_id="u1", session_id="b", created_at=T0 + timedelta(days=20))
    memory.flush()
    rows = {r.content: r for r in memory.list_memories(user_id="u1")}
    older = next(r for text, r in rows.items() if text.startswith("Yeah, a guy called Tomasz"))
    newer = next(r for text, r in rows.items() if text.startswith("Bad news"))
    assert older.status is Status.ACTIVE and older.metadata["outdated"]["by"] == newer.memory_id
    assert newer.metadata["replaced"]["memory_id"] == older.memory_id and newer.metadata["replaced"]["part"]
    assert "outdate" in [h["action"] for h in memory.history(older.memory_id, user_id="u1")]
    at = T0 + timedelta(days=30)
    start = [h.memory_id for h in recall(memory, "When does the kitchen work start?", user_id="u1", now=at)]
    assert newer.memory_id in start and older.memory_id not in start
    builder = [h.memory_id for h in recall(memory, "Who is the builder from Brightwell?", user_id="u1", now=at)]
    assert older.memory_id in builder and newer.memory_id not in builder


def test_another_users_value_supersedes_nothing(memory: Memory) -> None:
    mine = memory.save_memory("My budget is 5000.", user_id="u1")
    memory.save_memory("My budget is 9000.", user_id="u2")
    memory.flush()
    assert memory.get_memory(mine.memory_id, user_id="u1").status is Status.ACTIVE


def test_a_merged_statement_waits_until_the_attribute_is_named_again(memory: Memory) -> None:
    from portamem_plugins.summarize import LLMMerger

    answers = iter(["not json", '{"statement": "My budget was 5000 and is 8000 now."}'])
    memory.plugins.register(LLMMerger(lambda prompt: next(answers)), name="llm_merge")
    old = memory.save_memory("My budget is 5000.", user_id="u1", wait=True)
    new = memory.save_memory("My budget is 8000.", user_id="u1", wait=True)
    memory.flush()  # the merged statement is embedded in the next batch
    merged = memory.list_memories(user_id="u1", filters={"statuses": ["pending"]})
    assert [m.content for m in merged] == ["My budget was 5000 and is 8000 now."]
    assert [r.memory_id for r in memory.list_memories(user_id="u1")] == [new.memory_id]
    memory.save_memory("The kitchen tiles arrive on Monday.", user_id="u1", wait=True)  # another topic
    assert memory.get_memory(merged[0].memory_id, user_id="u1").status is Status.PENDING
    memory.save_memory("Can we stay within the budget for the tiles?", user_id="u1", wait=True)
    now = memory.get_memory(merged[0].memory_id, user_id="u1")
    assert now.status is Status.ACTIVE and now.supersedes == new.memory_id
    assert memory.get_memory(new.memory_id, user_id="u1").superseded_by == now.memory_id
    assert memory.get_memory(old.memory_id, user_id="u1").superseded_by == new.memory_id
    found = [h.memory_id for h in memory.search_memory("What is my budget?", user_id="u1")]
    assert now.memory_id in found and new.memory_id not in found and old.memory_id not in found


def test_a_candidate_of_an_ended_session_outlives_the_maintainer(memory: Memory) -> None:
    """What the triggers kept from a conversation (working memory, waiting to be said twice) becomes
    long-term memory when its session has ended, instead of decaying with the task half-life."""
    # what the user is about to do is a candidate (a plain statement is long-term at once)
    memory.add_turn("I'll give her Harringtons dry food", "Good choice.", user_id="u1",
                    session_id="monday", created_at=T0)
    memory.flush()
    kept = [r for r in memory.list_memories(user_id="u1") if "Harringtons" in r.content and r.type is MemoryType.WORKING]
    assert kept, "the trigger keeps the sentence as a working-memory candidate"
    memory.maintain(now=T0 + timedelta(days=30))  # the session ended long ago; a day's half-life would evict it
    after = memory.get_memory(kept[0].memory_id, user_id="u1")
    assert after.status is Status.ACTIVE and after.type is MemoryType.SEMANTIC
    assert "promote" in [e["action"] for e in memory.history(kept[0].memory_id, user_id="u1")]
