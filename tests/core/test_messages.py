"""Neutral messages folded into window turns, archived as episodes, and recall for a prompt."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from portamem import Memory, MemoryType, Turn
from portamem.errors import ValidationError
from portamem.messages import (
    Message,
    aadd_messages,
    add_messages,
    archive_messages,
    pop_message,
    split_turns,
    turn_messages,
    window_messages,
)
from portamem.recall import format_memories, recall, relative_age

CAT = "My cat is called Tom and he sleeps on the piano."


def _exchange(n: int) -> list[Message]:
    return [Message("user", f"question {n}", id=f"u{n}"), Message("assistant", f"answer {n}", id=f"a{n}")]


def test_a_turn_runs_from_the_user_to_the_final_reply() -> None:
    msgs = [Message("system", "be brief"), Message("user", "look up tea"),
            Message("assistant", "", calls_tools=True), Message("tool", "green"),
            Message("assistant", "You like green tea."), Message("user", "and coffee?")]
    turns, rest = split_turns(msgs)
    assert [len(t) for t in turns] == [5] and [m.text for m in rest] == ["and coffee?"]


def test_unknown_role_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="role"):
        Message("robot", "beep")


def test_messages_come_back_whole_from_the_window(memory: Memory) -> None:
    native = {"blocks": [{"type": "image", "url": "x"}]}
    first = [Message("user", "Hi\nthere", name="alice", id="1", metadata={"k": 1}, framework="fw", native=native),
             Message("assistant", "Hello", id="2")]
    rest = add_messages(memory, first + [Message("user", "open", id="3")], user_id="alice")
    assert rest == [Message("user", "open", id="3")]
    [turn] = memory.context(user_id="alice")
    assert (turn.user, turn.assistant) == ("Hi\nthere", "Hello")
    assert window_messages(memory, user_id="alice") == first


def test_a_whole_transcript_again_adds_only_the_new_turns(memory: Memory) -> None:
    add_messages(memory, _exchange(1), user_id="alice")
    add_messages(memory, _exchange(1) + _exchange(2), user_id="alice")
    assert [t.user for t in memory.context(user_id="alice")] == ["question 1", "question 2"]


async def test_async_twin_writes_the_same(memory: Memory) -> None:
    assert await aadd_messages(memory, _exchange(1), user_id="alice", session_id="s") == []
    assert [m.text for m in window_messages(memory, user_id="alice", session_id="s")] == ["question 1", "answer 1"]


def test_popping_takes_the_newest_message_and_leaves_the_rest_of_its_turn_open(memory: Memory) -> None:
    add_messages(memory, _exchange(1) + _exchange(2), user_id="u")
    last, open_turn = pop_message(memory, [], user_id="u")
    assert last is not None and (last.id, [m.id for m in open_turn]) == ("a2", ["u2"])
    assert [m.id for m in window_messages(memory, user_id="u")] == ["u1", "a1"]
    last, open_turn = pop_message(memory, open_turn, user_id="u")
    assert last is not None and last.id == "u2" and open_turn == []
    assert [m.id for m in window_messages(memory, user_id="u")] == ["u1", "a1"]


def test_popping_an_empty_session_gives_nothing_and_touches_no_other_session(memory: Memory) -> None:
    add_messages(memory, _exchange(1), user_id="u", session_id="other")
    assert pop_message(memory, [], user_id="u") == (None, [])
    assert memory.pop_turn(user_id="u") is None
    popped = memory.pop_turn(user_id="u", session_id="other")
    assert popped is not None and popped.user == "question 1"
    assert memory.context(user_id="u", session_id="other") == []


def test_popping_a_turn_writes_no_episode(memory: Memory) -> None:
    memory.add_turn("hello", "hi", user_id="u")
    before = len(memory.list_memories(user_id="u"))
    assert memory.pop_turn(user_id="u") is not None
    memory.flush()
    assert len(memory.list_memories(user_id="u")) == before


def test_a_turn_without_messages_is_rebuilt_from_its_text() -> None:
    assert [(m.role, m.text) for m in turn_messages(Turn("hi", "hello"))] == [("user", "hi"), ("assistant", "hello")]


def test_messages_a_framework_evicted_become_one_episode(memory: Memory) -> None:
    record = archive_messages(memory, [Message("user", CAT), Message("assistant", "Lovely.")],
                              user_id="alice", session_id="s1")
    assert record is not None and record.type is MemoryType.EPISODIC and record.session_id == "s1"
    assert "Tom" in record.content and record.metadata["turns"][0]["user"] == CAT
    assert archive_messages(memory, [], user_id="alice") is None


def test_recall_leaves_out_what_the_prompt_already_shows(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice")
    memory.save_memory("I moved to Oslo in 2019 for a job at the harbour.", user_id="alice")
    assert CAT in [h.content for h in recall(memory, "my cat", user_id="alice", top_k=2)]
    assert CAT not in [h.content for h in recall(memory, "my cat", user_id="alice", top_k=2, shown=[CAT])]
    memory.add_turn(CAT, "Noted.", user_id="alice", session_id="s1")
    assert CAT not in [h.content for h in recall(memory, "my cat", user_id="alice", session_id="s1", top_k=2)]
    with pytest.raises(ValidationError):
        recall(memory, "my cat", user_id="alice", top_k=0)


def test_format_shows_id_date_age_and_trust_not_the_score(memory: Memory) -> None:
    saved = memory.save_memory(CAT, user_id="alice", created_at=datetime(2025, 3, 1, tzinfo=timezone.utc))
    hits = memory.search_memory("cat", user_id="alice")
    line = format_memories(hits, header=None, now=datetime(2025, 3, 4, 12, tzinfo=timezone.utc))
    assert line.startswith(f"- [id {saved.memory_id}, 2025-03-01 (3 days ago)") and line.endswith(f"] {CAT}")
    assert "trust medium" in line and "score" not in line  # a score means nothing to the model
    assert saved.memory_id not in format_memories(hits, ids=False)
    assert relative_age(saved.created_at, datetime(2025, 5, 20, tzinfo=timezone.utc)) == "2 months ago"
    assert relative_age(saved.created_at, saved.created_at) == "today"
    assert format_memories([]) == ""
