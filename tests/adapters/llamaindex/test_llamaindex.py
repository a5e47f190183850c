"""portamem_llamaindex: message round trips, the BaseMemory, the memory block, the retriever, tools and agents."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.memory import Memory as LlamaMemory  # noqa: E402
from llama_index.core.workflow import Context  # noqa: E402
from portamem_llamaindex import (  # noqa: E402
    PortamemMemory,
    PortamemMemoryBlock,
    PortamemRetriever,
    PortamemToolSpec,
    from_chat_message,
    to_chat_message,
)

from portamem import Memory, MemoryType, Settings  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, ValidationError  # noqa: E402
from portamem.messages import Message  # noqa: E402

CAT = "My cat is called Tom and he sleeps on the piano."


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [m.content or "" for m in messages]


# ---------------------------------------------------------------- messages
def test_chat_message_survives_the_neutral_form() -> None:
    original = ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[
            TextBlock(text="Let me look."),
            ImageBlock(url="https://example.org/cat.png"),
            ToolCallBlock(tool_call_id="c1", tool_name="search_memory", tool_kwargs={"query": "cat"}),
        ],
        additional_kwargs={"name": "helper", "id": "m-1", "trace": {"step": 2}},
    )
    neutral = from_chat_message(original)
    assert (neutral.role, neutral.text, neutral.name, neutral.id) == ("assistant", "Let me look.", "helper", "m-1")
    assert neutral.calls_tools and neutral.created_at is not None
    assert to_chat_message(Message.from_dict(neutral.to_dict())) == original


def test_a_message_from_another_framework_keeps_role_text_and_name() -> None:
    foreign = Message("user", "Hallo\nWelt", name="alice", id="x-1", framework="agentscope", native={"any": 1})
    rebuilt = to_chat_message(foreign)
    assert rebuilt.role == MessageRole.USER and rebuilt.content == "Hallo\nWelt"
    assert rebuilt.additional_kwargs == {"name": "alice"}


def test_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n.startswith("portamem_llamaindex")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "llama_index.core", None)
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[llamaindex\]"):
        importlib.import_module("portamem_llamaindex")


# ---------------------------------------------------------------- BaseMemory
def test_a_turn_is_stored_when_the_final_reply_arrives(memory: Memory) -> None:
    chat = PortamemMemory(memory, user_id="alice", session_id="s1")
    chat.put(ChatMessage(role="user", content="Find my tea note"))
    assert memory.context(user_id="alice", session_id="s1") == [] and len(chat.pending) == 1
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="t", tool_kwargs={})])
    result = ChatMessage(role="tool", content="green tea", additional_kwargs={"tool_call_id": "c1"})
    chat.put_messages([call, result, ChatMessage(role="assistant", content="You like green tea.")])
    assert chat.pending == []
    [turn] = memory.context(user_id="alice", session_id="s1")
    assert (turn.user, turn.assistant) == ("Find my tea note", "You like green tea.")
    assert chat.get_all() == [ChatMessage(role="user", content="Find my tea note"), call, result,
                              ChatMessage(role="assistant", content="You like green tea.")]


def test_get_puts_recalled_memories_before_the_history(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice")
    chat = PortamemMemory(memory, user_id="alice")
    chat.put(ChatMessage(role="user", content="What is the name of my cat?"))
    first, *history = chat.get()
    assert first.role == MessageRole.SYSTEM and CAT in (first.content or "")
    assert _texts(history) == ["What is the name of my cat?"] == _texts(chat.get_all())
    assert PortamemMemory(memory, user_id="alice", show_recall=False).get("cat?") == []


def test_recall_leaves_out_what_the_window_already_shows(memory: Memory) -> None:
    chat = PortamemMemory(memory, user_id="alice")
    chat.put_messages([ChatMessage(role="user", content=f"Remember that {CAT}"),
                       ChatMessage(role="assistant", content="Noted.")])
    assert any(CAT in r.content for r in memory.list_memories(user_id="alice"))  # captured as a memory
    chat.put(ChatMessage(role="user", content="What is the name of my cat?"))
    assert [m.role for m in chat.get()] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.USER]


def test_set_and_reset_replace_the_session(memory: Memory) -> None:
    chat = PortamemMemory(memory, user_id="alice", session_id="s1")
    chat.put_messages([ChatMessage(role="user", content="one"), ChatMessage(role="assistant", content="1")])
    chat.set([ChatMessage(role="user", content="two"), ChatMessage(role="assistant", content="2")])
    assert _texts(chat.get_all()) == ["two", "2"]
    chat.put(ChatMessage(role="user", content="three"))
    chat.reset()
    assert chat.get_all() == [] and chat.pending == []


async def test_async_twins_match_sync(memory: Memory) -> None:
    chat = PortamemMemory(memory, user_id="alice")
    await chat.aput_messages([ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="hey")])
    assert _texts(await chat.aget_all()) == ["hi", "hey"] == _texts(chat.get_all())


def test_without_memory_or_path_it_says_what_is_missing() -> None:
    with pytest.raises(ValidationError, match="neither a Memory nor a path"):
        PortamemMemory(user_id="alice").get_all()


async def test_workflow_context_round_trip_reopens_the_store(settings: Settings, embedder: Embedder) -> None:
    memory = Memory(settings=settings, embedder=embedder)
    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM())
    ctx = Context(agent)
    await agent.run(user_msg="hi there", memory=PortamemMemory(memory, user_id="alice", session_id="ctx"), ctx=ctx)
    data = ctx.to_dict()
    before = PortamemMemory(memory, user_id="alice", session_id="ctx").get_all()
    memory.close()
    restored = await Context.from_dict(agent, data).store.get("memory")
    try:
        assert isinstance(restored, PortamemMemory)
        assert (restored.path, restored.session_id) == (settings.path, "ctx")
        assert restored.get_all() == before and _texts(before) == ["hi there", "hi there"]
    finally:
        restored.memory.close()


# ---------------------------------------------------------------- memory block
async def test_block_archives_flushed_turns_and_recalls_them(memory: Memory) -> None:
    block = PortamemMemoryBlock(memory, user_id="alice")
    li_memory = LlamaMemory.from_defaults(session_id="li-1", token_limit=120, chat_history_token_ratio=0.5,
                                          token_flush_size=40, memory_blocks=[block])
    await li_memory.aput_messages([ChatMessage(role="user", content=CAT),
                                   ChatMessage(role="assistant", content="What a lovely cat.")])
    for i in range(6):
        await li_memory.aput_messages([ChatMessage(role="user", content=f"Tell me fact number {i} about trains."),
                                       ChatMessage(role="assistant", content=f"Train fact {i}: they run on rails.")])
    episodes = memory.list_memories(user_id="alice", filters={"type": "episodic"})
    assert episodes and all(e.session_id == "li-1" and e.type is MemoryType.EPISODIC for e in episodes)
    assert any("Tom" in e.content for e in episodes)
    assert all("session_id" not in m.additional_kwargs for m in await li_memory.aget_all())
    messages = await li_memory.aget(input="What is the name of my cat?")
    assert messages[0].role == MessageRole.SYSTEM
    assert "<portamem>" in (messages[0].content or "") and "Tom" in (messages[0].content or "")


async def test_block_returns_nothing_without_a_user_message(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice")
    block = PortamemMemoryBlock(memory, user_id="alice")
    assert await block.aget([ChatMessage(role="assistant", content="hello")]) == ""
    assert CAT in await block.aget([ChatMessage(role="user", content="my cat?")])


# ---------------------------------------------------------------- retriever and tools
async def test_retriever_returns_scored_nodes_keyed_by_memory_id(memory: Memory) -> None:
    saved = memory.save_memory(CAT, user_id="alice")
    memory.save_memory("I moved to Oslo in 2019 for a job at the harbour.", user_id="alice")
    memory.save_memory(CAT, user_id="bob")
    retriever = PortamemRetriever(memory, user_id="alice", similarity_top_k=1)
    [hit] = retriever.retrieve("What is the name of my cat?")
    assert (hit.node.node_id, hit.node.get_content(), hit.node.metadata["type"]) == (saved.memory_id, CAT, "semantic")
    assert hit.score is not None and hit.score > 0
    assert [n.node.node_id for n in await retriever.aretrieve("What is the name of my cat?")] == [saved.memory_id]


async def test_tools_save_search_and_forget(memory: Memory) -> None:
    tools = {t.metadata.name: t for t in PortamemToolSpec(memory, user_id="alice").to_tool_list()}
    assert set(tools) == {"save_memory", "search_memory", "forget_memory"}
    node = tools["save_memory"].call(content=CAT).raw_output
    found = (await tools["search_memory"].acall(query="cat name")).content
    assert node.node_id in found and CAT in found
    await tools["forget_memory"].acall(memory_id=node.node_id)
    assert tools["search_memory"].call(query="cat name").content == "(no relevant memories found)"
    with pytest.raises(ValidationError):
        tools["save_memory"].call(content="  ")


async def test_a_tool_fact_saved_under_a_key_replaces_that_keys_fact(memory: Memory) -> None:
    tools = {t.metadata.name: t for t in PortamemToolSpec(memory, user_id="alice").to_tool_list()}
    first = tools["save_memory"].call(content="Alice is vegetarian.", key="diet").raw_output
    again = (await tools["save_memory"].acall(content="Alice is vegetarian.", key="diet")).raw_output
    other = tools["save_memory"].call(content="Alice is vegetarian.", key="lunch").raw_output
    assert again.node_id == first.node_id != other.node_id
    tools["save_memory"].call(content="Alice is vegan now.", key="diet")
    assert memory.get_by_key("diet", user_id="alice", key_namespace=("memories",)).content == "Alice is vegan now."
    assert len(memory.list_keyed(user_id="alice")) == 2


# ---------------------------------------------------------------- agents end to end, offline
class ScriptedLLM:
    """A MockFunctionCallingLLM script that records every model input."""

    def __init__(self) -> None:
        self.inputs: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.inputs.append(list(messages))
        last = messages[-1]
        tools = {t.metadata.name for t in kwargs.get("tools") or []}
        if last.role == MessageRole.TOOL:
            return ChatMessage(role="assistant", content="Noted, I will remember that.")
        if "save_memory" in tools and "remember" in (last.content or "").lower():
            return ChatMessage(role="assistant", blocks=[ToolCallBlock(
                tool_call_id="c1", tool_name="save_memory", tool_kwargs={"content": CAT})])
        return ChatMessage(role="assistant", content="Let me think about that.")

    def saw(self, text: str) -> bool:
        return any(text in (m.content or "") for m in self.inputs[-1])


async def test_agent_recalls_a_turn_of_an_earlier_run_after_reopening(settings: Settings, embedder: Embedder) -> None:
    llm = ScriptedLLM()
    memory = Memory(settings=settings, embedder=embedder)
    agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=llm))
    await agent.run(user_msg="I just adopted a cat called Tom.", memory=PortamemMemory(memory, user_id="alice"))
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=llm))
        await agent.run(user_msg="What is my cat called?", memory=PortamemMemory(memory, user_id="alice"))
        assert llm.saw("I just adopted a cat called Tom.")
    finally:
        memory.close()


async def test_agent_uses_a_fact_it_saved_in_another_session(settings: Settings, embedder: Embedder) -> None:
    llm = ScriptedLLM()
    memory = Memory(settings=settings, embedder=embedder)
    tools = PortamemToolSpec(memory, user_id="alice").to_tool_list()
    agent = FunctionAgent(tools=tools, llm=MockFunctionCallingLLM(response_generator=llm))
    await agent.run(user_msg="Please remember my cat's name, it is Tom.",
                    memory=PortamemMemory(memory, user_id="alice", session_id="monday"))
    assert [r.content for r in memory.list_memories(user_id="alice") if r.content == CAT] == [CAT]
    memory.close()

    memory = Memory(settings=settings, embedder=embedder)
    try:
        agent = FunctionAgent(tools=[], llm=MockFunctionCallingLLM(response_generator=llm))
        await agent.run(user_msg="What is the name of my cat?",
                        memory=PortamemMemory(memory, user_id="alice", session_id="tuesday"))
        note = next(m for m in llm.inputs[-1] if m.role == MessageRole.SYSTEM)
        assert CAT in (note.content or "")
        users = [m.content for m in llm.inputs[-1] if m.role == MessageRole.USER]
        assert users == ["What is the name of my cat?"]  # another session's window stays out
    finally:
        memory.close()


async def test_an_agent_saves_privately_and_recalls_its_own_before_the_shared_layer(memory: Memory) -> None:
    memory.save_memory("The office wifi password is on the fridge.", user_id="alice")  # shared: no agent
    sales = {t.metadata.name: t for t in PortamemToolSpec(memory, user_id="alice", agent_id="sales").to_tool_list()}
    mine = sales["save_memory"].call(content="The office wifi for visitors is called Guest-5.").raw_output
    assert memory.get_memory(mine.node_id, user_id="alice").agent_id == "sales"
    nodes = await PortamemRetriever(memory, user_id="alice", agent_id="sales").aretrieve("Where is the office wifi?")
    assert nodes[0].node.node_id == mine.node_id and any("fridge" in n.node.get_content() for n in nodes)
    support = PortamemMemory(memory, user_id="alice", agent_id="support")
    [note] = [m.content for m in support.get("Where is the office wifi?") if m.role == MessageRole.SYSTEM]
    assert "fridge" in note and "Guest-5" not in note
    found = PortamemToolSpec(memory, user_id="alice", agent_id="support").search_memory("office wifi")
    assert "fridge" in found and "Guest-5" not in found
