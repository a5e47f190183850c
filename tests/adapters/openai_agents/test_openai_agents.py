"""portamem_openai_agents on the Agents SDK: item round trips, the session, recall in the instructions, the tools,
and the SDK's own Runner loop with a scripted model (no provider, no network)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession  # noqa: E402
from agents.exceptions import UserError  # noqa: E402
from agents.memory import Session  # noqa: E402
from portamem_openai_agents import PortamemInstructions, PortamemSession, PortamemTools, from_item, to_item  # noqa: E402
from portamem_openai_agents.testing import ScriptedModel, ToolCall  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, ValidationError  # noqa: E402
from portamem.messages import Message, window_messages  # noqa: E402

PEANUTS = "I am allergic to peanuts, so no satay for me."
OFFLINE = RunConfig(tracing_disabled=True)

#: one item of each kind a run writes, as the SDK hands them to a session
ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Answer in one line."},
    {"role": "user", "content": [{"type": "input_text", "text": "What is in this picture?"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,aGk=", "detail": "auto"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search_memory",
     "arguments": "{\"query\": \"cat\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "Tom sleeps on the piano."},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "A cat called Tom.", "annotations": []}]},
]


def _session(memory: Memory, **kw: Any) -> PortamemSession:
    return PortamemSession(memory, user_id="alice", **{"session_id": "chat", **kw})


async def _run(agent: Agent[Any], text: str, session: Session) -> str:
    return str((await Runner.run(agent, text, session=session, run_config=OFFLINE)).final_output)


# ---------------------------------------------------------------- items
def test_every_item_kind_survives_the_neutral_form() -> None:
    neutral = [from_item(i) for i in ITEMS]
    assert [(m.role, m.text, m.calls_tools) for m in neutral] == [
        ("system", "Answer in one line.", False), ("user", "What is in this picture?", False),
        ("assistant", "", True), ("assistant", "", True), ("tool", "Tom sleeps on the piano.", False),
        ("assistant", "A cat called Tom.", False)]
    assert all(m.created_at is not None and m.id is None for m in neutral)
    assert [to_item(Message.from_dict(m.to_dict())) for m in neutral] == ITEMS


def test_another_frameworks_messages_become_plain_items_and_its_tool_traffic_none() -> None:
    said = Message("user", "東京はどうですか？", name="alice", id="x-1", framework="langchain", native={"type": "human"})
    assert to_item(said) == {"role": "user", "content": "東京はどうですか？"}
    assert to_item(Message("tool", "42", framework="langchain")) is None
    assert to_item(Message("assistant", "", calls_tools=True, framework="langchain")) is None


@pytest.mark.parametrize("item", [["user", "hi"], {"role": "robot", "content": "beep"}, {"content": "no role"}],
                         ids=["not-a-dict", "unknown-role", "neither-role-nor-type"])
def test_a_bad_item_is_refused_and_nothing_is_written(memory: Memory, item: Any) -> None:
    session = _session(memory)

    async def scenario() -> None:
        with pytest.raises(ValidationError):
            await session.add_items([{"role": "user", "content": "hello"}, item,
                                     {"role": "assistant", "content": "hi"}])
        assert await session.get_items() == []

    asyncio.run(scenario())
    assert memory.context(user_id="alice", session_id="chat") == []


def test_the_adapter_names_its_extra_when_the_sdk_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from portamem_openai_agents._framework import require

    monkeypatch.setitem(sys.modules, "agents", None)
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[openai-agents\]"):
        require()


# ---------------------------------------------------------------- the session
async def test_a_session_is_an_sdk_session_and_keeps_every_item(memory: Memory) -> None:
    session = _session(memory)
    assert isinstance(session, Session)
    await session.add_items(ITEMS[:4])
    assert memory.context(user_id="alice", session_id="chat") == []  # the turn is not finished yet
    await session.add_items(ITEMS[4:])
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:] and await session.get_items(limit=0) == []
    turns = memory.context(user_id="alice", session_id="chat")
    assert [(t.user, t.assistant) for t in turns] == [("What is in this picture?", "A cat called Tom.")]
    with pytest.raises(ValidationError):
        await session.get_items(limit=-1)


async def test_popping_rewinds_item_by_item_across_the_stored_turn(memory: Memory) -> None:
    session = _session(memory)
    await session.add_items(ITEMS)
    assert await session.pop_item() == ITEMS[-1]
    assert memory.context(user_id="alice", session_id="chat") == []  # the turn left the window
    assert await session.get_items() == ITEMS[:-1]  # its other items wait as the turn in progress
    await session.add_items([ITEMS[-1]])
    assert await session.get_items() == ITEMS and len(memory.context(user_id="alice", session_id="chat")) == 1
    for expected in reversed(ITEMS):
        assert await session.pop_item() == expected
    assert await session.pop_item() is None and await session.get_items() == []


async def test_popping_keeps_another_frameworks_tool_traffic(memory: Memory) -> None:
    from portamem.messages import add_messages

    written = [Message("user", "look up my cat", framework="other"),
               Message("assistant", "", calls_tools=True, framework="other"),
               Message("tool", "Tom", framework="other"), Message("assistant", "Tom.", framework="other")]
    add_messages(memory, written, user_id="alice", session_id="chat")
    session = _session(memory)
    assert await session.pop_item() == {"role": "assistant", "content": "Tom."}
    assert await session.pop_item() == {"role": "user", "content": "look up my cat"}
    await session.add_items([{"role": "user", "content": "again"}, {"role": "assistant", "content": "Tom!"}])
    assert [m.text for m in window_messages(memory, user_id="alice", session_id="chat")] == ["", "Tom", "again", "Tom!"]


async def test_clearing_drops_the_window_and_the_open_turn(memory: Memory) -> None:
    session = _session(memory)
    await session.add_items(ITEMS + [{"role": "user", "content": "and now?"}])
    await session.clear_session()
    assert await session.get_items() == [] and memory.context(user_id="alice", session_id="chat") == []


async def test_turns_written_elsewhere_are_items_of_the_session(memory: Memory) -> None:
    memory.add_turn("Hello! Can you help me plan a trip?", "Of course.", user_id="alice", session_id="chat")
    assert await _session(memory).get_items() == [{"role": "user", "content": "Hello! Can you help me plan a trip?"},
                                                   {"role": "assistant", "content": "Of course."}]


# ---------------------------------------------------------------- the Runner loop
async def test_a_run_with_a_tool_call_is_stored_whole_and_continues_after_reopening(
    tmp_path: Path, embedder: Embedder
) -> None:
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        model = ScriptedModel([ToolCall("save_memory", {"content": PEANUTS, "key": None}), "Noted."])
        agent = Agent(name="Friday", instructions="You are helpful.", model=model,
                      tools=PortamemTools(memory, user_id="alice").tools())
        session = _session(memory)
        assert await _run(agent, "Please remember: " + PEANUTS, session) == "Noted."
        first = await session.get_items()
        assert [i.get("type", "message") for i in first] == ["message", "function_call", "function_call_output",
                                                             "message"]
        saved = first[2]["output"]  # what the model read: "Saved memory <id>: <text>"
        memory_id = saved.removeprefix("Saved memory ").split(":")[0]
        assert memory.get_memory(memory_id, user_id="alice").content == PEANUTS and saved.endswith(PEANUTS)
    with Memory(tmp_path / "store", embedder=embedder) as memory:  # another process, same conversation
        session = _session(memory)
        assert await session.get_items() == first
        model = ScriptedModel(["Still noted."])
        await _run(Agent(name="Friday", model=model), "Thanks!", session)
        assert model.calls[0].input == [*first, {"role": "user", "content": "Thanks!"}]
        assert len(memory.context(user_id="alice", session_id="chat")) == 2


async def test_instructions_recall_for_the_newest_user_message(memory: Memory) -> None:
    memory.save_memory(PEANUTS, user_id="alice")

    def base(context: Any, agent: Agent[Any]) -> str:
        return f"You are {agent.name}."

    model = ScriptedModel(["You cannot."])
    agent = Agent(name="Friday", model=model, instructions=PortamemInstructions(memory, user_id="alice",
                                                                                instructions=base))
    await _run(agent, "Can I eat peanuts?", _session(memory, session_id="other"))
    shown = model.calls[0].instructions or ""
    assert shown.startswith("You are Friday.\n\n") and PEANUTS in shown
    await _run(agent, "What is the capital of Peru?", SQLiteSession("peru"))
    assert model.calls[1].instructions == "You are Friday."


async def test_instructions_leave_out_what_the_input_already_shows(memory: Memory) -> None:
    memory.save_memory(PEANUTS, user_id="alice")
    model = ScriptedModel(["Right."])
    agent = Agent(name="Friday", model=model, instructions=PortamemInstructions(memory, user_id="alice"))
    await Runner.run(agent, [{"role": "user", "content": PEANUTS}, {"role": "assistant", "content": "Noted."},
                             {"role": "user", "content": "Can I eat peanuts?"}], run_config=OFFLINE)
    assert PEANUTS not in (model.calls[0].instructions or "")


async def test_tool_errors_reach_the_model_by_default_and_the_caller_when_asked(memory: Memory) -> None:
    model = ScriptedModel([ToolCall("save_memory", {"content": "   ", "key": None}), "Sorry."])
    tools = PortamemTools(memory, user_id="alice")
    agent = Agent(name="Friday", model=model, tools=tools.tools())
    assert await _run(agent, "remember nothing", _session(memory)) == "Sorry."
    assert "error" in model.calls[1].input[-1]["output"].lower()
    before = len(memory.list_memories(user_id="alice"))
    strict = Agent(name="Friday", model=ScriptedModel([ToolCall("save_memory", {"content": "", "key": None})]),
                   tools=tools.tools(failure_error_function=None))
    with pytest.raises(UserError) as raised:  # the runner wraps what a tool raises, the cause unchanged
        await _run(strict, "remember nothing", _session(memory, session_id="strict"))
    assert isinstance(raised.value.__cause__, ValidationError)
    assert len(memory.list_memories(user_id="alice")) == before


async def test_search_and_forget_through_the_model(memory: Memory) -> None:
    saved = memory.save_memory(PEANUTS, user_id="alice")
    model = ScriptedModel([ToolCall("search_memory", {"query": "peanuts", "limit": 3}),
                           ToolCall("forget_memory", {"memory_id": saved.memory_id}), "Forgotten."])
    agent = Agent(name="Friday", model=model, tools=PortamemTools(memory, user_id="alice").tools())
    await _run(agent, "Forget my peanut allergy.", _session(memory))
    assert saved.memory_id in model.calls[1].input[-1]["output"]
    assert PEANUTS not in [h.content for h in memory.search_memory("peanuts", user_id="alice")]
