"""Group commit of window turns with saves (``Memory.save_many``): one transaction, the same outcome as one by one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import ValidationError
from portamem.write.requests import SaveRequest, TurnRequest


def _counting(memory: Memory) -> list[int]:
    """Transactions opened by the calling thread (the background indexer opens its own)."""
    commits: list[int] = []
    real = memory.store.transaction
    caller = threading.get_ident()

    def counting():  # noqa: ANN202
        if threading.get_ident() == caller:
            commits.append(1)
        return real()

    memory.store.transaction = counting  # type: ignore[method-assign]
    return commits


def _window(mem: Memory, user: str, session: str = "chat") -> list[tuple[str, str]]:
    return [(t.user, t.assistant) for t in mem.context(user_id=user, session_id=session)]


def test_turns_and_saves_of_many_users_commit_in_one_transaction(memory: Memory) -> None:
    commits = _counting(memory)
    results = memory.save_many([
        TurnRequest("ana", "Remember that my locker code is 4471.", "Noted.", session_id="chat"),
        SaveRequest("ben", ["Ben's train leaves at 8:05."]),
        TurnRequest("ben", "明天我要去杭州出差。", "好的，祝你顺利。", session_id="chat"),
        TurnRequest("", "no user", "x"),
        TurnRequest("chen", "", ""),
        TurnRequest("dan", "What time is it?", "Noon.", session_id="chat"),
    ])
    assert len(commits) == 1
    assert [r.ok for r in results] == [True, True, True, False, False, True]
    assert all(isinstance(r.error, ValidationError) for r in results if not r.ok)
    assert _window(memory, "ana") == [("Remember that my locker code is 4471.", "Noted.")]
    assert _window(memory, "ben") == [("明天我要去杭州出差。", "好的，祝你顺利。")]
    # the stressed fact was captured into long-term memory by the same commit
    assert [r.content for r in results[0].records] == ["Remember that my locker code is 4471."]
    assert [r.content for r in memory.list_memories(user_id="ana")] == ["Remember that my locker code is 4471."]
    assert memory.list_memories(user_id="chen") == []


def test_a_sessions_turns_in_one_list_apply_in_order_as_add_turn_does(
        tmp_path: Path, embedder: Embedder) -> None:
    turns = [(f"We board flight LH{400 + i} at gate B{i}.", f"Noted flight {i}.") for i in range(7)]
    settings = Settings(path=str(tmp_path / "one"), window_turns=3)
    with Memory(settings=settings, embedder=embedder) as one_by_one:
        for user, assistant in turns:
            one_by_one.add_turn(user, assistant, user_id="u", session_id="chat")
        expected_window = _window(one_by_one, "u")
        expected = sorted((r.type.value, r.content) for r in one_by_one.list_memories(user_id="u"))
    with Memory(settings=settings.replace(path=str(tmp_path / "many")), embedder=embedder) as grouped:
        commits = _counting(grouped)
        results = grouped.save_many([TurnRequest("u", user, assistant, session_id="chat") for user, assistant in turns]
                                    + [TurnRequest("v", "Hello there.", "Hi.", session_id="chat")])
        assert all(r.ok for r in results)
        # a second turn of one session starts the next transaction; another user's rides along
        assert len(commits) == len(turns)
        assert _window(grouped, "u") == expected_window == [(u, a) for u, a in turns[-3:]]
        assert sorted((r.type.value, r.content) for r in grouped.list_memories(user_id="u")) == expected
        # each statement is kept as it is said, and what leaves the window is compressed as add_turn does it
        assert sum(t == "semantic" for t, _ in expected) == len(turns)
        episodes = [r for res in results for r in res.records if r.type.value == "episodic"]
        assert len(episodes) == sum(t == "episodic" for t, _ in expected)


def test_a_turn_the_guard_refuses_fails_alone(memory: Memory) -> None:
    results = memory.save_many([
        TurnRequest("ana", "x" * (memory.settings.max_content_chars + 1), "ok"),
        TurnRequest("ben", "I like green tea.", "Noted."),
    ])
    assert not results[0].ok and results[1].ok
    assert _window(memory, "ana", "default") == []
    assert _window(memory, "ben", "default") == [("I like green tea.", "Noted.")]
    with pytest.raises(ValidationError):
        memory.save_many([object()])  # type: ignore[list-item]
