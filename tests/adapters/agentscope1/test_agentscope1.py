"""portamem_agentscope.v1 on AgentScope 1.x: message round trips, both memory classes and ReActAgent end to end."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

pytest.importorskip("agentscope.memory", reason="needs AgentScope 1.x")

from agentscope.agent import ReActAgent  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import ImageBlock, Msg, TextBlock, ToolUseBlock, URLSource  # noqa: E402
from portamem_agentscope.v1 import PortamemLongTermMemory, PortamemMemory, from_msg, to_msg  # noqa: E402
from portamem_agentscope.v1.testing import ScriptedChatModel  # noqa: E402

from portamem import Memory, Settings  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, ValidationError  # noqa: E402
from portamem.messages import Message, window_messages  # noqa: E402

CAT = "My cat is called Tom and he sleeps on the piano."


def _agent(model: ScriptedChatModel, **kwargs: Any) -> ReActAgent:
    agent = ReActAgent(name="Friday", sys_prompt="You are helpful.", model=model, formatter=OpenAIChatFormatter(),
                       **kwargs)
    agent.set_console_output_enabled(False)
    return agent


# ---------------------------------------------------------------- messages
def test_msg_survives_the_neutral_form() -> None:
    original = Msg(
        "Friday",
        [TextBlock(type="text", text="Let me look."),
         ImageBlock(type="image", source=URLSource(type="url", url="https://example.org/cat.png")),
         ToolUseBlock(type="tool_use", id="c1", name="retrieve_from_memory", input={"keywords": ["cat"]})],
        "assistant",
        metadata={"trace": 2},
        invocation_id="inv-7",
    )
    neutral = from_msg(original)
    assert (neutral.role, neutral.text, neutral.name, neutral.id) == ("assistant", "Let me look.", "Friday", original.id)
    assert neutral.calls_tools and neutral.created_at is not None
    rebuilt = to_msg(Message.from_dict(neutral.to_dict()))
    assert rebuilt is not None
    assert (rebuilt.to_dict(), rebuilt.invocation_id) == (original.to_dict(), "inv-7")


def test_a_message_from_another_framework_keeps_role_text_name_and_id() -> None:
    rebuilt = to_msg(Message("user", "Hallo\nWelt", name="alice", id="x-1", framework="agentscope", native={}))
    assert rebuilt is not None
    assert (rebuilt.role, rebuilt.get_text_content(), rebuilt.name, rebuilt.id) == ("user", "Hallo\nWelt", "alice", "x-1")
    assert to_msg(Message("tool", "42", framework="langchain")) is None


def test_the_2x_middleware_refuses_to_load_beside_1x() -> None:
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[agentscope\]"):
        importlib.import_module("portamem_agentscope.middleware")


# ---------------------------------------------------------------- short-term memory
async def test_finished_turns_reach_the_window_without_hints(memory: Memory) -> None:
    short = PortamemMemory(memory, user_id="alice", session_id="s1")
    await short.add(Msg("alice", "What is my cat called?", "user"))
    await short.add(Msg("user", "<system-hint>be brief</system-hint>", "user"), marks="hint")
    assert window_messages(memory, user_id="alice", session_id="s1") == []  # no reply yet
    await short.add(Msg("Friday", "Tom.", "assistant"))
    stored = window_messages(memory, user_id="alice", session_id="s1")
    assert [(m.role, m.text) for m in stored] == [("user", "What is my cat called?"), ("assistant", "Tom.")]
    assert await short.delete_by_mark("hint") == 1 and await short.size() == 2

    again = PortamemMemory(memory, user_id="alice", session_id="s1")
    assert [m.get_text_content() for m in await again.get_memory()] == ["What is my cat called?", "Tom."]
    await again.add(Msg("alice", "Thanks", "user"))
    assert len(window_messages(memory, user_id="alice", session_id="s1")) == 2  # known turns are not written twice
    await again.clear()
    assert await PortamemMemory(memory, user_id="alice", session_id="s1").size() == 0


async def test_a_conversation_another_framework_began_goes_on_without_being_written_twice(memory: Memory) -> None:
    memory.add_turn("I live in Lyon.", "Lovely city!", user_id="alice", session_id="s1")  # plain text: no message ids
    short = PortamemMemory(memory, user_id="alice", session_id="s1")
    await short.add(Msg("alice", "And my cat is called Tom.", "user"))
    await short.add(Msg("Friday", "Noted.", "assistant"))
    assert [m.text for m in window_messages(memory, user_id="alice", session_id="s1")] == [
        "I live in Lyon.", "Lovely city!", "And my cat is called Tom.", "Noted."]


async def test_state_dict_round_trip(memory: Memory) -> None:
    short = PortamemMemory(memory, user_id="alice")
    await short.add([Msg("alice", "hi", "user"), Msg("Friday", "hello", "assistant")])
    restored = PortamemMemory(memory, user_id="alice")
    restored.load_state_dict(short.state_dict())
    assert [m.to_dict() for m in await restored.get_memory()] == [m.to_dict() for m in await short.get_memory()]


# ---------------------------------------------------------------- long-term memory
async def test_record_skips_what_it_stored_and_retrieve_finds_facts(memory: Memory) -> None:
    ltm = PortamemLongTermMemory(memory, user_id="alice", session_id="s1")
    chat = [Msg("alice", "I adopted a cat.", "user"), Msg("Friday", "Lovely!", "assistant")]
    await ltm.record(chat)
    await ltm.record([*chat, Msg("alice", "His name is Tom.", "user"), Msg("Friday", "Hi Tom!", "assistant")])
    assert len(memory.context(user_id="alice", session_id="s1")) == 2
    await ltm.record_to_memory(thinking="a pet", content=[CAT])
    assert CAT in await ltm.retrieve(Msg("alice", "What is the name of my cat?", "user"))
    assert await ltm.retrieve(None) == ""


async def test_tool_functions_report_ids_and_raise_typed_errors(memory: Memory) -> None:
    ltm = PortamemLongTermMemory(memory, user_id="alice")
    [memory_id] = (await ltm.record_to_memory(thinking="", content=[CAT])).metadata["memory_ids"]
    found = await ltm.retrieve_from_memory(keywords=["cat", "name"])
    assert found.metadata["memories"][0]["memory_id"] == memory_id and memory_id in found.content[0]["text"]
    await ltm.forget_from_memory([memory_id])
    assert (await ltm.retrieve_from_memory(keywords=["cat"])).metadata["memories"] == []
    with pytest.raises(ValidationError):
        await ltm.record_to_memory(thinking="", content=[""])


# ---------------------------------------------------------------- ReActAgent end to end, offline
async def test_agent_records_a_fact_and_recalls_it_in_a_later_run(settings: Settings, embedder: Embedder) -> None:
    memory = Memory(settings=settings, embedder=embedder)
    model = ScriptedChatModel([
        [ToolUseBlock(type="tool_use", id="c1", name="record_to_memory", input={"thinking": "pet", "content": [CAT]})],
        "I will remember Tom.",
    ])
    agent = _agent(model, memory=PortamemMemory(memory, user_id="alice", session_id="monday"),
                   long_term_memory=PortamemLongTermMemory(memory, user_id="alice", session_id="monday"),
                   long_term_memory_mode="both")
    assert {"record_to_memory", "retrieve_from_memory"} <= {s["function"]["name"] for s in agent.toolkit.get_json_schemas()}
    await agent(Msg("alice", "My cat is Tom, keep that in mind.", "user"))
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        model = ScriptedChatModel(["Your cat is Tom."])
        agent = _agent(model, memory=PortamemMemory(memory, user_id="alice", session_id="tuesday"),
                       long_term_memory=PortamemLongTermMemory(memory, user_id="alice", session_id="tuesday"),
                       long_term_memory_mode="static_control")
        reply = await agent(Msg("alice", "What is the name of my cat?", "user"))
        assert reply.get_text_content() == "Your cat is Tom."
        # the user's own later words ("My cat is Tom") supersede the recorded sentence's value: either names Tom
        assert model.saw("<long_term_memory>") and model.saw("Tom")
        users = [str(p["content"]) for p in model.prompts[-1] if p["role"] == "user"]
        assert len(users) == 2 and "What is the name of my cat?" in users[0]  # Monday's window stays in Monday
    finally:
        memory.close()


async def test_agent_continues_the_session_after_reopening(settings: Settings, embedder: Embedder) -> None:
    memory = Memory(settings=settings, embedder=embedder)
    await _agent(ScriptedChatModel(["What a nice name."]), memory=PortamemMemory(memory, user_id="alice"))(
        Msg("alice", "I just adopted a cat called Tom.", "user"))
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        model = ScriptedChatModel(["Tom."])
        await _agent(model, memory=PortamemMemory(memory, user_id="alice"))(Msg("alice", "My cat's name?", "user"))
        said = [str(p.get("content")) for p in model.prompts[-1]]
        assert "I just adopted a cat called Tom." in said[1] and "What a nice name." in said[2]
    finally:
        memory.close()


async def test_an_agent_saves_privately_and_recalls_its_own_before_the_shared_layer(memory: Memory) -> None:
    memory.save_memory("The office wifi password is on the fridge.", user_id="alice")  # shared: no agent
    sales = PortamemLongTermMemory(memory, user_id="alice", agent_id="sales")
    support = PortamemLongTermMemory(memory, user_id="alice", agent_id="support")
    saved = await sales.record_to_memory(thinking="", content=["The office wifi for visitors is called Guest-5."])
    [mine] = saved.metadata["memory_ids"]
    hits = (await sales.retrieve_from_memory(keywords=["office wifi"])).metadata["memories"]
    assert hits[0]["memory_id"] == mine and any("fridge" in h["content"] for h in hits)
    prompt = await support.retrieve(Msg("alice", "Where is the office wifi?", "user"))
    assert "fridge" in prompt and "Guest-5" not in prompt
