"""portamem_autogen on AutoGen 0.7: message round trips, the Memory contract with its MIME types, the model
context, and AutoGen's own AssistantAgent loop on its replay client (no provider, no network)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("autogen_agentchat")
pytest.importorskip("autogen_ext.models.replay")

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core import FunctionCall, Image  # noqa: E402
from autogen_core.memory import ListMemory, MemoryContent, MemoryMimeType  # noqa: E402
from autogen_core.model_context import UnboundedChatCompletionContext  # noqa: E402
from autogen_core.models import (  # noqa: E402
    AssistantMessage,
    CreateResult,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402
from portamem_autogen import (  # noqa: E402
    PortamemChatCompletionContext,
    PortamemMemory,
    RecalledMemories,
    from_llm_message,
    to_llm_message,
)

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, UnsupportedContentError, ValidationError  # noqa: E402
from portamem.messages import Message, window_messages  # noqa: E402

PEANUTS = "I am allergic to peanuts, so no satay for me."
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAC0lEQVR4nGNgQAYAAA4AAamRc7EAAAAASUVORK5CYII="

MESSAGES = [
    SystemMessage(content="Answer in one line."),
    UserMessage(content=["What is in this picture?", Image.from_base64(PIXEL)], source="alice"),
    AssistantMessage(content=[FunctionCall(id="c1", name="search_memory", arguments='{"query": "cat"}')],
                     thought="look it up", source="Friday"),
    FunctionExecutionResultMessage(content=[FunctionExecutionResult(content="Tom sleeps on the piano.",
                                                                    name="search_memory", call_id="c1", is_error=False)]),
    AssistantMessage(content="A cat called Tom.", source="Friday"),
]


def _dump(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


def _scope(**kw: Any) -> dict[str, Any]:
    return {"user_id": "alice", "session_id": "chat", **kw}


def _agent(model: ReplayChatCompletionClient, memory: PortamemMemory, context: Any) -> AssistantAgent:
    return AssistantAgent("Friday", model_client=model, memory=[memory], model_context=context,
                          system_message="You are helpful.")


# ---------------------------------------------------------------- messages
def test_every_message_kind_survives_the_neutral_form() -> None:
    neutral = [from_llm_message(m) for m in MESSAGES]
    assert [(n.role, n.text, n.name, n.calls_tools) for n in neutral] == [
        ("system", "Answer in one line.", None, False), ("user", "What is in this picture?", "alice", False),
        ("assistant", "", "Friday", True), ("tool", "Tom sleeps on the piano.", None, False),
        ("assistant", "A cat called Tom.", "Friday", False)]
    assert neutral[2].metadata == {"thought": "look it up"} and all(n.created_at for n in neutral)
    back = [to_llm_message(Message.from_dict(n.to_dict())) for n in neutral]
    assert _dump(back) == _dump(MESSAGES) and [type(m) for m in back] == [type(m) for m in MESSAGES]


def test_another_frameworks_messages_keep_role_text_and_name() -> None:
    rebuilt = to_llm_message(Message("user", "東京はどうですか？", name="alice", framework="langchain", native={}))
    assert isinstance(rebuilt, UserMessage) and (rebuilt.content, rebuilt.source) == ("東京はどうですか？", "alice")
    assert to_llm_message(Message("tool", "42", framework="langchain")) is None
    with pytest.raises(ValidationError):
        from_llm_message("hello")  # type: ignore[arg-type]


def test_the_adapter_names_its_extra_when_autogen_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from portamem_autogen._framework import require

    monkeypatch.setitem(sys.modules, "autogen_core.memory", None)
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[autogen\]"):
        require()


# ---------------------------------------------------------------- Memory: MIME types
@pytest.mark.parametrize(("mime", "content"), [
    (MemoryMimeType.TEXT, PEANUTS),
    (MemoryMimeType.MARKDOWN, "**Allergy**: peanuts, so no *satay*."),
    (MemoryMimeType.JSON, {"allergy": "peanuts", "severity": 3, "note": "花生过敏"}),
    ("text/plain", "我对花生过敏，不能吃沙爹。"),
], ids=["text", "markdown", "json", "plain-string-chinese"])
async def test_content_comes_back_with_its_type_and_metadata(memory: Memory, mime: Any, content: Any) -> None:
    mem = PortamemMemory(memory, user_id="alice")
    await mem.add(MemoryContent(content=content, mime_type=mime, metadata={"topic": "health", "n": [1, 2]}))
    (hit, *_) = (await mem.query("peanuts 花生 allergy", top_k=1)).results
    assert hit.content == content and hit.mime_type == (mime.value if isinstance(mime, MemoryMimeType) else mime)
    provenance = hit.metadata.pop("portamem")
    assert hit.metadata == {"topic": "health", "n": [1, 2]}
    assert provenance["memory_id"] and provenance["score"] > 0 and provenance["created_at"]


@pytest.mark.parametrize("content", [
    MemoryContent(content=Image.from_base64(PIXEL), mime_type=MemoryMimeType.IMAGE),
    MemoryContent(content=b"\x00\x01", mime_type=MemoryMimeType.BINARY),
    MemoryContent(content="a picture", mime_type="image/png"),
], ids=["image", "binary", "image-mime-on-text"])
async def test_images_and_binary_are_refused_with_a_typed_error(memory: Memory, content: MemoryContent) -> None:
    mem = PortamemMemory(memory, user_id="alice")
    with pytest.raises(UnsupportedContentError) as raised:
        await mem.add(content)
    assert raised.value.mime_type == content.serialize_mime_type(content.mime_type)
    assert memory.list_memories(user_id="alice") == []


@pytest.mark.parametrize("content", [
    MemoryContent(content="", mime_type=MemoryMimeType.TEXT),
    MemoryContent(content={"a": 1}, mime_type=MemoryMimeType.TEXT),
    MemoryContent(content="{not json", mime_type=MemoryMimeType.JSON),
], ids=["blank", "dict-as-text", "bad-json"])
async def test_bad_text_content_is_a_validation_error(memory: Memory, content: MemoryContent) -> None:
    with pytest.raises(ValidationError):
        await PortamemMemory(memory, user_id="alice").add(content)
    assert memory.list_memories(user_id="alice") == []


async def test_clear_forgets_the_users_memories_and_nobody_elses(memory: Memory) -> None:
    mine, theirs = PortamemMemory(memory, user_id="alice"), PortamemMemory(memory, user_id="bob")
    await mine.add(MemoryContent(content=PEANUTS, mime_type=MemoryMimeType.TEXT))
    await theirs.add(MemoryContent(content=PEANUTS, mime_type=MemoryMimeType.TEXT))
    await mine.clear()
    assert (await mine.query("peanuts")).results == []
    assert [r.content for r in (await theirs.query("peanuts")).results] == [PEANUTS]


async def test_the_memory_dumps_and_loads_as_an_autogen_component(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        await PortamemMemory(memory, user_id="alice").add(MemoryContent(content=PEANUTS, mime_type="text/plain"))
        config = PortamemMemory(memory, user_id="alice", top_k=2).dump_component()
    loaded = PortamemMemory.load_component(config)
    try:
        assert [r.content for r in (await loaded.query("Can I eat peanuts?")).results] == [PEANUTS]
    finally:
        await loaded.close()
    assert loaded.memory._closed  # it opened the store, so it closes it


# ---------------------------------------------------------------- the model context
async def test_the_context_keeps_whole_turns_and_every_message_exactly(memory: Memory) -> None:
    context = PortamemChatCompletionContext(memory, **_scope())
    for message in MESSAGES[:4]:
        await context.add_message(message)
    assert memory.context(**_scope()) == []  # the turn is not finished yet
    await context.add_message(MESSAGES[4])
    assert _dump(await context.get_messages()) == _dump(MESSAGES)
    fresh = PortamemChatCompletionContext(memory, **_scope())  # another process, the same conversation
    assert _dump(await fresh.get_messages()) == _dump(MESSAGES)
    await fresh.clear()
    assert await context.get_messages() == [] and memory.context(**_scope()) == []


async def test_recalled_memories_are_shown_for_the_turn_and_not_kept(memory: Memory) -> None:
    context = PortamemChatCompletionContext(memory, **_scope())
    await context.add_message(MESSAGES[1])
    note = RecalledMemories(content="- [2026-12-01] " + PEANUTS)
    await context.add_message(note)
    await context.add_message(MESSAGES[2])
    assert _dump(await context.get_messages()) == _dump([MESSAGES[1], note, MESSAGES[2]])
    state = await context.save_state()
    restored = PortamemChatCompletionContext(memory, **_scope())
    await restored.load_state(state)
    assert _dump(await restored.get_messages()) == _dump([MESSAGES[1], note, MESSAGES[2]])
    for message in MESSAGES[3:]:
        await restored.add_message(message)
    kept = window_messages(memory, **_scope())
    assert PEANUTS not in [m.text for m in kept] and len(kept) == 4
    with pytest.raises(ValidationError):
        await restored.load_state({"open_turn": ["not a message"]})


# ---------------------------------------------------------------- AssistantAgent, end to end
async def test_an_agent_recalls_before_the_model_call_and_its_turns_outlive_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        mem = PortamemMemory(memory, user_id="alice")
        await mem.add(MemoryContent(content=PEANUTS, mime_type=MemoryMimeType.TEXT))
        model = ReplayChatCompletionClient(["Then skip the satay."])
        result = await _agent(model, mem, PortamemChatCompletionContext(memory, **_scope())).run(
            task="Can I eat peanuts?")
        assert result.messages[-1].to_text() == "Then skip the satay."
        assert [m.type for m in result.messages] == ["TextMessage", "MemoryQueryEvent", "TextMessage"]
        assert [c.content for c in result.messages[1].content] == [PEANUTS]  # type: ignore[union-attr]
        stored = [(t.user, t.assistant) for t in memory.context(**_scope())]
        assert stored == [("Can I eat peanuts?", "Then skip the satay.")]
    with Memory(tmp_path / "store", embedder=embedder) as memory:  # a restarted agent continues
        context = PortamemChatCompletionContext(memory, **_scope())
        model = ReplayChatCompletionClient(["You told me about peanuts."])
        await _agent(model, PortamemMemory(memory, user_id="alice"), context).run(task="What did I ask before?")
        texts = [from_llm_message(m).text for m in await context.get_messages()]
        assert texts == ["Can I eat peanuts?", "Then skip the satay.", "What did I ask before?",
                         "You told me about peanuts."]


async def test_the_model_sees_the_recall_as_a_system_message(memory: Memory) -> None:
    seen: list[list[Any]] = []

    class Recording(ReplayChatCompletionClient):
        async def create(self, messages: Any, *args: Any, **kwargs: Any) -> CreateResult:
            seen.append(list(messages))
            return await super().create(messages, *args, **kwargs)

    mem = PortamemMemory(memory, user_id="alice")
    await mem.add(MemoryContent(content=PEANUTS, mime_type=MemoryMimeType.TEXT))
    await _agent(Recording(["No."]), mem, UnboundedChatCompletionContext()).run(task="Can I eat peanuts?")
    (shown,) = seen
    assert [type(m).__name__ for m in shown] == ["SystemMessage", "UserMessage", "RecalledMemories"]
    assert isinstance(shown[2], SystemMessage) and PEANUTS in shown[2].content


async def test_a_tool_call_turn_is_stored_whole_once_the_reply_comes(memory: Memory) -> None:
    async def lookup(query: str) -> str:
        """Look something up."""
        return "Tom sleeps on the piano."

    call = CreateResult(finish_reason="function_calls", usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
                        cached=False, content=[FunctionCall(id="c1", name="lookup", arguments='{"query": "cat"}')])
    model = ReplayChatCompletionClient([call, "Your cat Tom sleeps on the piano."],
                                       model_info={"function_calling": True, "vision": False, "json_output": False,
                                                   "family": "unknown", "structured_output": False})
    context = PortamemChatCompletionContext(memory, **_scope())
    agent = AssistantAgent("Friday", model_client=model, tools=[lookup], reflect_on_tool_use=True,
                           model_context=context, memory=[PortamemMemory(memory, user_id="alice")])
    await agent.run(task="Where does my cat sleep?")
    kept = window_messages(memory, **_scope())
    assert [(m.role, m.calls_tools) for m in kept] == [("user", False), ("assistant", True), ("tool", False),
                                                       ("assistant", False)]
    assert kept[2].text == "Tom sleeps on the piano." and len(memory.context(**_scope())) == 1


async def test_autogens_own_list_memory_beside_the_portamem_context(memory: Memory) -> None:
    listed = ListMemory(memory_contents=[MemoryContent(content="The user prefers short answers.",
                                                       mime_type=MemoryMimeType.TEXT)])
    context = PortamemChatCompletionContext(memory, **_scope())
    agent = AssistantAgent("Friday", model_client=ReplayChatCompletionClient(["Hi."]), memory=[listed],
                           model_context=context)
    await agent.run(task="Hello")
    kept = window_messages(memory, **_scope())
    # another Memory's system message is the agent's context, so it is kept with the turn, as AutoGen keeps it
    assert [m.role for m in kept] == ["user", "system", "assistant"]
