"""Round trips of the four operations, the working window, and async twins, on the real stores."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portamem import Memory, MemoryType, NotFoundError, Status
from portamem.records import utcnow


def test_save_then_search_returns_content_unchanged(memory: Memory) -> None:
    text = "Mein Lieblingsessen ist Käsespätzle — and my order is ORD-77120 ✓"
    saved = memory.save_memory(text, user_id="u1", type="semantic")
    hits = memory.search_memory("ORD-77120", user_id="u1")
    assert hits[0].memory_id == saved.memory_id
    assert hits[0].content == text
    memory.flush()  # the stored vector is the background indexer's
    got = memory.get_memory(saved.memory_id, user_id="u1")
    assert got.content == text and got.embedding_model == memory.embedder.name
    assert len(got.embedding) == memory.embedder.dim


def test_search_hit_carries_breakdown_and_provenance(memory: Memory) -> None:
    memory.save_memory("The delivery to Rotterdam is booked under order ORD-5531.", user_id="u1")
    hit = memory.search_memory("order ORD-5531", user_id="u1")[0]
    assert {"vector", "keyword", "recency", "importance"} <= set(hit.breakdown.components)
    assert "entity" in hit.found_by and "vector" in hit.found_by
    expected = sum(hit.breakdown.weights.get(k, 0) * v for k, v in hit.breakdown.components.items())
    assert hit.score == pytest.approx(expected)


def test_forget_removes_from_search_and_restore_brings_back(memory: Memory) -> None:
    keep = memory.save_memory("I keep bees on the roof of my flat.", user_id="u1")
    gone = memory.save_memory("My locker code is 4471 at the gym on Elm Street.", user_id="u1")
    assert memory.forget_memory([gone.memory_id], user_id="u1") == [gone.memory_id]
    ids = [h.memory_id for h in memory.search_memory("gym locker code", user_id="u1")]
    assert gone.memory_id not in ids and keep.memory_id not in ids  # the bees are unrelated: below min_score
    assert [h.memory_id for h in memory.search_memory("bees on the roof", user_id="u1")] == [keep.memory_id]
    assert memory.get_memory(gone.memory_id, user_id="u1").status is Status.DELETED
    memory.restore_memory(gone.memory_id, user_id="u1")
    assert memory.search_memory("gym locker code", user_id="u1")[0].memory_id == gone.memory_id


def test_purge_only_after_grace(memory: Memory) -> None:
    rec = memory.save_memory("Temporary parking spot B12 for today.", user_id="u1")
    memory.forget_memory(rec.memory_id, user_id="u1")
    assert memory.purge_deleted() == 0  # still within the grace period
    assert memory.purge_deleted(now=utcnow() + timedelta(days=8)) == 1
    with pytest.raises(NotFoundError):
        memory.get_memory(rec.memory_id, user_id="u1")


def test_refresh_raises_importance_and_counts_access(memory: Memory) -> None:
    rec = memory.save_memory("I run the Berlin marathon every September.", user_id="u1", importance=0.4)
    out = memory.refresh_memory(rec.memory_id, 0.25, user_id="u1")
    assert out.importance == pytest.approx(0.65) and out.importance_band == 65
    assert out.access_count == 1 and out.last_accessed_at is not None
    again = memory.refresh_memory(rec.memory_id, 0.9, user_id="u1")
    assert again.importance == 1.0  # clamped
    stored = memory.get_memory(rec.memory_id, user_id="u1")
    assert stored.importance == 1.0 and stored.access_count == 2
    actions = [h["action"] for h in memory.history(rec.memory_id, user_id="u1")]
    assert actions == ["save", "refresh", "refresh"]


def test_window_counts_turns_not_messages(tmp_path, embedder, backend) -> None:
    mem = Memory(settings=backend.settings(tmp_path / "w", window_turns=2, auto_capture=False), embedder=embedder)
    try:
        # the first turn holds something worth keeping (a number): small talk would leave no episode
        assert mem.add_turn("first note: gate 12 opens at noon.", "first answer", user_id="u", session_id="s") == []
        assert mem.add_turn("second note", "second answer", user_id="u", session_id="s") == []
        # a third turn (four messages already in the window) pushes out exactly one turn
        out = mem.add_turn("third note", "third answer", user_id="u", session_id="s")
        assert len(out) == 1 and out[0].type is MemoryType.EPISODIC
        assert "gate 12 opens at noon" in out[0].content
        window = mem.context(user_id="u", session_id="s")
        assert [t.user for t in window] == ["second note", "third note"]
        assert mem.context(user_id="u", session_id="other") == []
    finally:
        mem.close()


def test_window_survives_reopen(settings, embedder) -> None:
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.add_turn("hello there", "hi!", user_id="u", session_id="s")
    with Memory(settings=settings, embedder=embedder) as mem:
        assert [(t.user, t.assistant) for t in mem.context(user_id="u", session_id="s")] == [("hello there", "hi!")]


def test_dedupe_bumps_frequency_instead_of_adding(memory: Memory) -> None:
    a = memory.save_memory("I am allergic to shellfish.", user_id="u1", wait=True)
    b = memory.save_memory("I am allergic to shellfish!", user_id="u1", wait=True)
    assert b.memory_id == a.memory_id and b.frequency == 2
    assert len(memory.list_memories(user_id="u1")) == 1
    other_user = memory.save_memory("I am allergic to shellfish.", user_id="u2", wait=True)
    assert other_user.memory_id != a.memory_id  # dedupe never crosses users


def test_a_duplicate_acknowledged_before_indexing_is_merged_into_the_older(memory: Memory) -> None:
    first = memory.save_memory("My locker code at the gym is 4417.", user_id="u1")
    again = memory.save_memories(["My locker code at the gym is 4417!", "My locker code at the gym is 4417."],
                                 user_id="u1")
    assert again[0].memory_id != first.memory_id and again[0].frequency == 1  # acknowledged as written
    memory.flush()
    assert [r.memory_id for r in memory.list_memories(user_id="u1")] == [first.memory_id]
    assert memory.get_memory(first.memory_id, user_id="u1").frequency == 3
    for r in again:  # retired, pointing at the memory they were merged into, and audited
        retired = memory.get_memory(r.memory_id, user_id="u1")
        assert retired.status is Status.DELETED and retired.superseded_by == first.memory_id
        assert [e["action"] for e in memory.history(r.memory_id, user_id="u1")] == ["save", "merged"]
    assert [e["action"] for e in memory.history(first.memory_id, user_id="u1")] == ["save", "dedupe", "dedupe"]
    assert memory.stats().pending == 0


def test_batch_save_is_one_transaction(memory: Memory) -> None:
    recs = memory.save_memories(
        ["I have two cats named Miso and Tofu.", {"content": "My sister lives in Porto.", "type": "semantic"}],
        user_id="u1",
    )
    assert len(recs) == 2 and len(memory.list_memories(user_id="u1")) == 2


async def test_async_twins(memory: Memory) -> None:
    rec = await memory.asave_memory("My dentist appointment is on 14 March 2027.", user_id="u1")
    hits = await memory.asearch_memory("when is the dentist?", user_id="u1")
    assert hits[0].memory_id == rec.memory_id
    await memory.arefresh_memory(rec.memory_id, 0.1, user_id="u1")
    assert await memory.aforget_memory([rec.memory_id], user_id="u1") == [rec.memory_id]
    await memory.aadd_turn("hi", "hello", user_id="u1")
    assert len(await memory.acontext(user_id="u1")) == 1


def test_a_captured_statement_and_its_episode_are_recalled_once(tmp_path, embedder, backend) -> None:
    settings = backend.settings(tmp_path / "c", window_turns=1)
    with Memory(settings=settings, embedder=embedder) as mem:
        captured = mem.add_turn("Please remember that my locker is number 4417.", "Will do.", user_id="u")
        assert [r.type for r in captured] == [MemoryType.SEMANTIC]
        # the turn leaves the window with nothing the captured statement does not hold: no episode repeats it
        assert mem.add_turn("thanks", "any time", user_id="u") == []
        mem.add_turn("I'll pick up the parcel at gate 7 on Monday.", "OK.", user_id="u")
        episode = mem.add_turn("My locker is number 4417, and the parcel is for Mia.", "Noted.", user_id="u")
        mem.flush()  # the review retires the repeat of the locker into the first statement
        assert sorted(r.type.value for r in episode) == ["episodic", "semantic"]
        hits = mem.search_memory("what is my locker number?", user_id="u")
        assert len([h for h in hits if "4417" in h.content]) == 1


def test_update_memory_rewrites_in_place_and_keeps_history(memory: Memory) -> None:
    rec = memory.save_memory("My gym is on Elm Street.", user_id="u1", metadata={"k": 1})
    memory.refresh_memory(rec.memory_id, 0.0, user_id="u1")
    out = memory.update_memory(rec.memory_id, user_id="u1", content="My gym moved to Oak Avenue.")
    assert out.memory_id == rec.memory_id and out.access_count == 1 and out.metadata == {"k": 1}
    assert memory.search_memory("Oak Avenue gym", user_id="u1")[0].memory_id == rec.memory_id
    # the old text's words and entities went with it: nothing stored mentions Elm Street any more
    assert memory.search_memory("Elm Street", user_id="u1", filters={"min_importance": 0.0}) == []
    assert len(memory.list_memories(user_id="u1")) == 1
    trail = memory.history(rec.memory_id, user_id="u1")
    assert trail[-1]["action"] == "update" and trail[-1]["detail"]["previous_content"] == "My gym is on Elm Street."
    again = memory.update_memory(rec.memory_id, user_id="u1", metadata={"k": 2})
    assert again.content == out.content and again.metadata == {"k": 2} and again.embedding == out.embedding
    with pytest.raises(NotFoundError):
        memory.update_memory(rec.memory_id, user_id="u2", content="hijack")
    from portamem import ValidationError

    with pytest.raises(ValidationError):
        memory.update_memory(rec.memory_id, user_id="u1")
    with pytest.raises(ValidationError):
        memory.update_memory(rec.memory_id, user_id="u1", content="")
    assert memory.get_memory(rec.memory_id, user_id="u1").content == out.content
