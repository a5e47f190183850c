"""The LangChain adapter's translations: messages, chat history, retriever, run scope."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("langchain.agents")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from portamem_langchain import (  # noqa: E402
    PortamemChatMessageHistory,
    PortamemMiddleware,
    PortamemRetriever,
)

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402

RICH = [
    HumanMessage(content=[{"type": "text", "text": "What's in this picture?"},
                          {"type": "image", "url": "https://example.org/cat.png"}],
                 name="alice", id="m1", additional_kwargs={"client": {"lang": "en"}}),
    AIMessage("", id="m2", tool_calls=[{"name": "vision", "args": {"q": "cat"}, "id": "c1", "type": "tool_call"}],
              response_metadata={"model_name": "fake", "created": 1764680000}),
    ToolMessage("a grey cat", tool_call_id="c1", id="m3", name="vision", artifact=None),
    AIMessage(content=[{"type": "text", "text": "A grey cat on a sofa."}], id="m4", name="bot",
              usage_metadata={"input_tokens": 5, "output_tokens": 6, "total_tokens": 11}),
]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def memory(path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(path, embedder=embedder) as mem:
        yield mem


# ---------------------------------------------------------------------- messages and history
def test_messages_survive_a_reopen_exactly(path: Path, embedder: Embedder) -> None:
    with Memory(path, embedder=embedder) as memory:
        PortamemChatMessageHistory(memory, user_id="alice", session_id="s").add_messages(RICH)
        assert [t.user for t in memory.context(user_id="alice", session_id="s")] == ["What's in this picture?"]
    with Memory(path, embedder=embedder) as memory:
        assert PortamemChatMessageHistory(memory, user_id="alice", session_id="s").messages == RICH


def test_turn_waits_for_its_reply(memory: Memory) -> None:
    history = PortamemChatMessageHistory(memory, user_id="alice")
    history.add_user_message("Hi there")
    assert memory.context(user_id="alice") == []
    assert [m.text for m in history.messages] == ["Hi there"]
    history.add_ai_message("Hello!")
    assert [(t.user, t.assistant) for t in memory.context(user_id="alice")] == [("Hi there", "Hello!")]
    history.clear()
    assert history.messages == [] and memory.context(user_id="alice") == []


def test_turns_written_elsewhere_read_as_plain_messages(memory: Memory) -> None:
    memory.add_turn("Hello", "Hi, how can I help?", user_id="alice")
    messages = asyncio.run(PortamemChatMessageHistory(memory, user_id="alice").aget_messages())
    assert [(type(m), m.text) for m in messages] == [(HumanMessage, "Hello"), (AIMessage, "Hi, how can I help?")]


def test_resending_a_transcript_stores_each_turn_once(memory: Memory) -> None:
    history = PortamemChatMessageHistory(memory, user_id="alice")
    first = [HumanMessage("one", id="h1"), AIMessage("1", id="a1")]
    history.add_messages(first)
    history.add_messages([*first, HumanMessage("two", id="h2"), AIMessage("2", id="a2")])
    assert [m.text for m in history.messages] == ["one", "1", "two", "2"]


# ---------------------------------------------------------------------- retriever
def test_retriever_documents_carry_id_score_and_provenance(memory: Memory) -> None:
    saved = [memory.save_memory(t, user_id="alice") for t in ("Alice plays chess on Sundays.", "Alice owns a red bike.")]
    retriever = PortamemRetriever(memory=memory, user_id="alice", k=5)
    docs = retriever.invoke("chess")
    assert docs[0].page_content == "Alice plays chess on Sundays." and docs[0].id == saved[0].memory_id
    assert docs[0].metadata["score"] >= docs[-1].metadata["score"] and docs[0].metadata["found_by"]
    assert len(retriever.invoke("chess", k=1)) == 1
    with pytest.raises(ValidationError):
        retriever.invoke("chess", limit=1)


# ---------------------------------------------------------------------- middleware
def test_middleware_scope_comes_from_context_then_config_then_defaults(memory: Memory) -> None:
    mw = PortamemMiddleware(memory, user_id="fallback", session_id="s0")
    assert mw.scope(SimpleNamespace(user_id="alice", session_id="s1"), {}).user_id == "alice"
    assert mw.scope({"user_id": "bob"}, {"configurable": {"thread_id": "t9"}}).session_id == "t9"
    got = mw.scope(None, {"configurable": {"user_id": "carol", "tenant_id": "acme"}})
    assert (got.user_id, got.session_id, got.tenant_id) == ("carol", "s0", "acme")
    assert mw.scope(None, {}).user_id == "fallback"
    with pytest.raises(ValidationError):
        PortamemMiddleware(memory).scope(None, {})
    with pytest.raises(ValidationError):
        PortamemMiddleware(memory, mode="sometimes")  # type: ignore[arg-type]


def test_memories_are_added_to_a_block_system_message(memory: Memory) -> None:
    from langchain.agents.middleware import ModelRequest

    memory.save_memory("Alice is vegetarian.", user_id="alice")
    mw = PortamemMiddleware(memory, user_id="alice")
    base = SystemMessage(content=[{"type": "text", "text": "Be brief."}])
    request = ModelRequest(model=None, messages=[HumanMessage("Suggest a vegetarian dinner")], system_message=base,
                           tools=[], runtime=None, state={"messages": []})  # type: ignore[arg-type]
    seen = []
    mw.wrap_model_call(request, lambda r: seen.append(r) or AIMessage("ok"))
    blocks = seen[0].system_message.content
    assert blocks[0] == {"type": "text", "text": "Be brief."} and "Alice is vegetarian." in blocks[1]["text"]
    assert request.system_message is base  # the original request is untouched


def test_missing_framework_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain'] = None\n"
        "from portamem.errors import FrameworkNotInstalledError\n"
        "import portamem_langchain\n"
        "try:\n    portamem_langchain.PortamemMiddleware\n"
        "except FrameworkNotInstalledError as e:\n    print(e.extra, '|', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("langchain | ") and "pip install 'portamem[langchain]'" in out
