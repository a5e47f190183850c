"""portamem_agentscope on AgentScope 2.x: message round trips, the middleware, its tools and agents end to end."""

from __future__ import annotations

import importlib
import json

import pytest

pytest.importorskip("agentscope.middleware", reason="needs AgentScope 2.x")

from agentscope.agent import Agent  # noqa: E402
from agentscope.event import RequireUserConfirmEvent  # noqa: E402
from agentscope.message import (  # noqa: E402
    AssistantMsg,
    Base64Source,
    DataBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from agentscope.state import AgentState  # noqa: E402
from agentscope.tool import Toolkit  # noqa: E402
from portamem_agentscope import PortamemMiddleware, from_msg, restore_context, to_msg  # noqa: E402
from portamem_agentscope.testing import ScriptedChatModel  # noqa: E402

from portamem import Memory, Settings  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, ValidationError  # noqa: E402
from portamem.messages import Message, window_messages  # noqa: E402

CAT = "My cat is called Tom and he sleeps on the piano."


async def _agent(mw: PortamemMiddleware, model: ScriptedChatModel) -> Agent:
    return Agent(name="Friday", system_prompt="You are helpful.", model=model,
                 toolkit=Toolkit(tools=await mw.list_tools()), middlewares=[mw])


def _hints(messages: list[Msg]) -> list[str]:
    return [b.hint for m in messages for b in m.get_content_blocks("hint") if isinstance(b.hint, str)]


# ---------------------------------------------------------------- messages
def test_msg_survives_the_neutral_form() -> None:
    original = AssistantMsg(
        "Friday",
        [
            ThinkingBlock(thinking="look it up"),
            TextBlock(text="Here it is."),
            ToolCallBlock(id="c1", name="search_memory", input=json.dumps({"keywords": ["cat"]})),
            ToolResultBlock(id="c1", name="search_memory", output="Tom"),
            DataBlock(source=Base64Source(data="aGk=", media_type="image/png")),
        ],
        metadata={"trace": {"step": 2}},
    )
    neutral = from_msg(original)
    assert (neutral.role, neutral.text, neutral.name, neutral.id) == ("assistant", "Here it is.", "Friday", original.id)
    assert not neutral.calls_tools and neutral.metadata == {"trace": {"step": 2}} and neutral.created_at is not None
    assert to_msg(Message.from_dict(neutral.to_dict())) == original


def test_an_unanswered_tool_call_keeps_the_turn_open() -> None:
    asking = AssistantMsg("Friday", [ToolCallBlock(id="c9", name="search_memory", input="{}")])
    assert from_msg(asking).calls_tools


def test_a_message_from_another_framework_keeps_role_text_name_and_id() -> None:
    rebuilt = to_msg(Message("user", "Hallo\nWelt", name="alice", id="x-1", framework="langchain", native={}))
    assert rebuilt is not None
    assert (rebuilt.role, rebuilt.get_text_content(), rebuilt.name, rebuilt.id) == ("user", "Hallo\nWelt", "alice", "x-1")
    assert to_msg(Message("tool", "42", framework="langchain")) is None


def test_the_1x_module_refuses_to_load_beside_2x() -> None:
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[agentscope1\]"):
        importlib.import_module("portamem_agentscope.v1")


def test_missing_agentscope_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import PackageNotFoundError

    from portamem_agentscope import _framework

    def missing(name: str) -> str:
        raise PackageNotFoundError(name)

    monkeypatch.setattr(_framework, "version", missing)
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[agentscope\]"):
        _framework.require(2)


def test_unknown_mode_is_a_validation_error(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="mode"):
        PortamemMiddleware(memory, user_id="alice", mode="always")  # type: ignore[arg-type]


@pytest.mark.parametrize("scope", [{"user_id": ""}, {"user_id": "  "}, {"user_id": None}, {"user_id": "a\x00b"},
                                   {"user_id": "alice", "session_id": ""}], ids=["empty", "blank", "none", "nul",
                                                                                 "empty-session"])
def test_a_middleware_without_a_user_is_refused_when_built(memory: Memory, scope: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="user_id|session_id"):
        PortamemMiddleware(memory, **scope)  # type: ignore[arg-type]


# ---------------------------------------------------------------- middleware
async def test_recall_is_injected_after_the_user_message_and_the_exchange_written_back(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice")
    mw = PortamemMiddleware(memory, user_id="alice", session_id="s1", mode="static_control")
    model = ScriptedChatModel(["Your cat is Tom."])
    agent = await _agent(mw, model)
    reply = await agent.reply(UserMsg(name="alice", content="What is the name of my cat?"))
    assert reply.get_text_content() == "Your cat is Tom."
    names = [m.name for m in agent.state.context]
    assert names == ["alice", "memory", "Friday"]
    assert CAT in _hints(model.inputs[-1])[0]
    stored = window_messages(memory, user_id="alice", session_id="s1")
    assert [(m.role, m.text) for m in stored] == [("user", "What is the name of my cat?"),
                                                  ("assistant", "Your cat is Tom.")]
    assert to_msg(stored[-1]) == reply  # the reply Msg comes back whole: blocks, id, timestamps
    assert AgentState.model_validate_json(agent.state.model_dump_json()).context == agent.state.context


async def test_modes_decide_tools_prompt_and_recall(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice")
    static = PortamemMiddleware(memory, user_id="alice", mode="static_control")
    assert await static.list_tools() == []
    assert await static.on_system_prompt(None, "S") == "S"  # type: ignore[arg-type]
    agentic = PortamemMiddleware(memory, user_id="alice", mode="agent_control")
    assert [t.name for t in await agentic.list_tools()] == ["search_memory", "add_memory", "forget_memory"]
    assert "search_memory" in await agentic.on_system_prompt(None, "S")  # type: ignore[arg-type]
    model = ScriptedChatModel(["ok"])
    agent = await _agent(agentic, model)
    await agent.reply(UserMsg(name="alice", content="What is the name of my cat?"))
    assert not any(CAT in h for h in _hints(model.inputs[-1]))


async def test_memory_tools_run_without_asking_the_user(memory: Memory) -> None:
    mw = PortamemMiddleware(memory, user_id="alice")
    model = ScriptedChatModel([
        [ToolCallBlock(id="c1", name="add_memory", input=json.dumps({"thinking": "a pet", "content": [CAT]}))],
        "Saved.",
    ])
    agent = await _agent(mw, model)
    events = [e async for e in agent.reply_stream(UserMsg(name="alice", content="Remember my cat."))]
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    [record] = [r for r in memory.list_memories(user_id="alice") if r.content == CAT]
    assert record.metadata["thinking"] == "a pet"


async def test_tools_report_ids_and_raise_typed_errors(memory: Memory) -> None:
    tools = {t.name: t for t in await PortamemMiddleware(memory, user_id="alice").list_tools()}
    saved = await tools["add_memory"](thinking="", content=[CAT])
    [memory_id] = saved.metadata["memory_ids"]
    found = await tools["search_memory"](keywords=["cat", "name"], limit=3)
    assert found.metadata["memories"][0]["memory_id"] == memory_id and memory_id in found.content[0].text
    await tools["forget_memory"](memory_ids=[memory_id])
    assert (await tools["search_memory"](keywords=["cat"])).metadata["memories"] == []
    with pytest.raises(ValidationError):
        await tools["add_memory"](thinking="", content=["   "])


async def test_add_memory_keys_name_facts_that_a_later_add_replaces(memory: Memory) -> None:
    tools = {t.name: t for t in await PortamemMiddleware(memory, user_id="alice").list_tools()}
    first = await tools["add_memory"](thinking="diet", content=["Alice is vegetarian.", "Alice is vegetarian."],
                                      keys=["diet", ""])
    again = await tools["add_memory"](thinking="diet", content=["Alice is vegan now."], keys=["diet"])
    keyed, unkeyed = first.metadata["memory_ids"]
    assert again.metadata["memory_ids"] == [keyed] and unkeyed != keyed
    assert memory.get_by_key("diet", user_id="alice", key_namespace="memories").content == "Alice is vegan now."
    with pytest.raises(ValidationError):
        await tools["add_memory"](thinking="", content=["a", "b"], keys=["only-one"])


async def test_restore_fills_only_an_empty_context(memory: Memory) -> None:
    state = AgentState()
    assert await restore_context(state, memory, user_id="alice") == 0
    mw = PortamemMiddleware(memory, user_id="alice")
    await (await _agent(mw, ScriptedChatModel(["hi back"]))).reply(UserMsg(name="alice", content="hi"))
    assert await restore_context(state, memory, user_id="alice") == 2
    assert await restore_context(state, memory, user_id="alice") == 0 and len(state.context) == 2


# ---------------------------------------------------------------- agents end to end, offline
async def test_a_fresh_agent_continues_the_conversation_after_reopening(settings: Settings, embedder: Embedder) -> None:
    memory = Memory(settings=settings, embedder=embedder)
    mw = PortamemMiddleware(memory, user_id="alice", session_id="chat")
    await (await _agent(mw, ScriptedChatModel(["What a nice name."]))).reply(
        UserMsg(name="alice", content="I just adopted a cat called Tom."))
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        model = ScriptedChatModel(["Your cat is called Tom."])
        mw = PortamemMiddleware(memory, user_id="alice", session_id="chat")
        await (await _agent(mw, model)).reply(UserMsg(name="alice", content="What is my cat called?"))
        texts = [t for t in (m.get_text_content() for m in model.inputs[-1]) if t]
        assert texts[1:] == ["I just adopted a cat called Tom.", "What a nice name.", "What is my cat called?"]
    finally:
        memory.close()


async def test_a_fact_saved_by_the_agent_is_recalled_in_another_session(settings: Settings, embedder: Embedder) -> None:
    memory = Memory(settings=settings, embedder=embedder)
    mw = PortamemMiddleware(memory, user_id="alice", session_id="monday")
    script = [[ToolCallBlock(id="c1", name="add_memory", input=json.dumps({"thinking": "pet", "content": [CAT]}))],
              "I will remember Tom."]
    await (await _agent(mw, ScriptedChatModel(script))).reply(UserMsg(name="alice", content="My cat? Tom."))
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        model = ScriptedChatModel(["Tom."])
        mw = PortamemMiddleware(memory, user_id="alice", session_id="tuesday")
        await (await _agent(mw, model)).reply(UserMsg(name="alice", content="What is the name of my cat?"))
        assert any(CAT in h for h in _hints(model.inputs[-1]))
        assert not model.saw("My cat? Tom.")  # Monday's window stays in Monday
    finally:
        memory.close()


async def test_an_agent_saves_privately_and_recalls_its_own_before_the_shared_layer(memory: Memory) -> None:
    memory.save_memory("The office wifi password is on the fridge.", user_id="alice")  # shared: no agent
    sales = PortamemMiddleware(memory, user_id="alice", agent_id="sales")
    support = PortamemMiddleware(memory, user_id="alice", agent_id="support")
    model = ScriptedChatModel([
        [ToolCallBlock(id="c1", name="add_memory",
                       input=json.dumps({"thinking": "", "content": ["The office wifi for visitors is Guest-5."]}))],
        "Saved.",
    ])
    agent = await _agent(sales, model)
    [e async for e in agent.reply_stream(UserMsg(name="alice", content="Please note the visitor network."))]
    [mine] = [r for r in memory.list_memories(user_id="alice") if r.content == "The office wifi for visitors is Guest-5."]
    assert mine.agent_id == "sales"
    found = {t.name: t for t in await sales.list_tools()}["search_memory"]
    hits = (await found(keywords=["office wifi"], limit=5)).metadata["memories"]
    assert hits[0]["memory_id"] == mine.memory_id and any("fridge" in h["content"] for h in hits)
    other = {t.name: t for t in await support.list_tools()}["search_memory"]
    texts = [h["content"] for h in (await other(keywords=["office wifi"], limit=5)).metadata["memories"]]
    assert any("fridge" in t for t in texts) and not any("Guest-5" in t for t in texts)
    assert "Guest-5" not in await support.scope.recall("Where is the office wifi?", top_k=5)
