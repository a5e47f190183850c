"""LangMem as a client of ``PortamemStore``: its own memory tools inside ``create_agent``, a fake chat model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langmem")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langmem import create_manage_memory_tool, create_search_memory_tool  # noqa: E402
from portamem_langchain import PortamemStore  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402

#: LangMem's documented namespace: each LangGraph user is a portamem user
NAMESPACE = ("memories", "{langgraph_user_id}")
FACT = "Alice is allergic to peanuts."


class ToolCallingFake(GenericFakeChatModel):
    """Replies from a script of tool calls and answers; the tools it is bound to are in the script."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> ToolCallingFake:
        return self


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{n}", "type": "tool_call"}])


def _agent(memory: Memory, *replies: AIMessage | str) -> Any:
    tools = [create_manage_memory_tool(namespace=NAMESPACE), create_search_memory_tool(namespace=NAMESPACE)]
    return create_agent(ToolCallingFake(messages=iter(replies)), tools=tools, store=PortamemStore(memory))


def _tool_texts(out: dict[str, Any]) -> list[str]:
    return [m.text for m in out["messages"] if m.type == "tool"]


def test_manage_memory_twice_with_one_fact_then_read_back_after_reopen(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "store"
    config = {"configurable": {"langgraph_user_id": "alice"}}
    with Memory(path, embedder=embedder) as memory:
        agent = _agent(memory, _call("manage_memory", {"content": FACT, "action": "create"}, 1),
                       _call("manage_memory", {"content": FACT, "action": "create"}, 2), "Noted, twice.")
        out = agent.invoke({"messages": [{"role": "user", "content": "I'm allergic to peanuts. Remember it!"}]}, config)
        ids = [re.fullmatch(r"created memory (\S+)", t).group(1) for t in _tool_texts(out)]  # type: ignore[union-attr]
        assert len(set(ids)) == 2
    with Memory(path, embedder=embedder) as memory:
        store = PortamemStore(memory)
        for memory_id in ids:  # the second id the model was told is as readable as the first
            item = store.get(("memories", "alice"), memory_id)
            assert item is not None and item.value == {"content": FACT}
        assert store.get(("memories", "bob"), ids[0]) is None
        agent = _agent(memory, _call("search_memory", {"query": "peanut allergy"}, 3), "You are allergic to peanuts.")
        out = agent.invoke({"messages": [{"role": "user", "content": "What am I allergic to?"}]}, config)
        found = json.loads(_tool_texts(out)[0])
        assert {m["key"] for m in found} == set(ids) and all(m["value"]["content"] == FACT for m in found)
        assert all(m["namespace"] == ["memories", "alice"] and m["score"] is not None for m in found)


def test_update_and_delete_through_langmem(tmp_path: Path, embedder: Embedder) -> None:
    config = {"configurable": {"langgraph_user_id": "bob"}}
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        out = _agent(memory, _call("manage_memory", {"content": "Bob lives in Lima."}, 1), "ok").invoke(
            {"messages": [{"role": "user", "content": "I live in Lima."}]}, config)
        memory_id = _tool_texts(out)[0].split()[-1]
        first = PortamemStore(memory).get(("memories", "bob"), memory_id)
        _agent(memory, _call("manage_memory", {"content": "Bob lives in Quito.", "action": "update", "id": memory_id},
                             2), "ok").invoke({"messages": [{"role": "user", "content": "I moved to Quito."}]}, config)
        item = PortamemStore(memory).get(("memories", "bob"), memory_id)
        assert first is not None and item is not None and item.value == {"content": "Bob lives in Quito."}
        assert item.created_at == first.created_at and item.updated_at > first.updated_at
        assert [r.content for r in memory.list_memories(user_id="bob")] == ["Bob lives in Quito."]
        _agent(memory, _call("manage_memory", {"action": "delete", "id": memory_id}, 3), "ok").invoke(
            {"messages": [{"role": "user", "content": "Forget where I live."}]}, config)
        assert PortamemStore(memory).get(("memories", "bob"), memory_id) is None
        assert memory.search_memory("Quito", user_id="bob") == []
