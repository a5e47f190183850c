"""create_agent end to end, offline: a fact told in one run is in the model's prompt in a later one."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage  # noqa: E402
from portamem_langchain import PortamemMiddleware, PortamemStore  # noqa: E402
from portamem_langchain.messages import to_neutral  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.messages import window_messages  # noqa: E402

#: every prompt the fake model received (module level: fields on a pydantic model would not do)
PROMPTS: list[list[BaseMessage]] = []


class ScriptedModel(GenericFakeChatModel):
    """Replies from a script; tools are accepted and ignored (the script holds the tool calls)."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        PROMPTS.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


@dataclass
class Ctx:
    user_id: str


def _model(*replies: AIMessage | str) -> ScriptedModel:
    return ScriptedModel(messages=iter(replies))


def _system_text(prompt: list[BaseMessage]) -> str:
    assert isinstance(prompt[0], SystemMessage), prompt
    return prompt[0].text


@pytest.fixture(autouse=True)
def _fresh_prompts() -> None:
    PROMPTS.clear()


def test_fact_saved_by_a_tool_is_recalled_in_a_later_run(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "store"
    save = AIMessage("", tool_calls=[{"name": "save_memory", "args": {"text": "Alice's cat is called Tom."},
                                      "id": "call-1", "type": "tool_call"}])
    with Memory(path, embedder=embedder) as memory:
        agent = create_agent(
            _model(save, "Noted, your cat is Tom."), tools=[], system_prompt="You are helpful.",
            middleware=[PortamemMiddleware(memory, mode="both")], context_schema=Ctx,
        )
        out = agent.invoke({"messages": [{"role": "user", "content": "My cat is Tom, keep that in mind."}]},
                           {"configurable": {"thread_id": "monday"}}, context=Ctx(user_id="alice"))
        assert out["messages"][-1].text == "Noted, your cat is Tom."
        run1 = out["messages"]

    with Memory(path, embedder=embedder) as memory:
        agent = create_agent(
            _model("Your cat is called Tom."), tools=[], system_prompt="You are helpful.",
            middleware=[PortamemMiddleware(memory)], context_schema=Ctx,
        )
        agent.invoke({"messages": [{"role": "user", "content": "What is my cat called?"}]},
                     {"configurable": {"thread_id": "tuesday"}}, context=Ctx(user_id="alice"))
        system = _system_text(PROMPTS[-1])
        assert system.startswith("You are helpful.")
        assert "Alice's cat is called Tom." in system
        # run 1 went to its session's window with every message rebuilt exactly: the tool call too
        stored = window_messages(memory, user_id="alice", session_id="monday")
        assert [to_neutral(m).native for m in run1] == [m.native for m in stored]

    with Memory(path, embedder=embedder) as memory:  # another user learns nothing
        agent = create_agent(_model("I don't know."), tools=[], middleware=[PortamemMiddleware(memory)],
                             context_schema=Ctx)
        agent.invoke({"messages": [{"role": "user", "content": "What is my cat called?"}]},
                     context=Ctx(user_id="bob"))
        assert not any("Tom" in m.text for m in PROMPTS[-1])


def test_fact_told_in_conversation_is_recalled_async(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "store"

    async def run(memory: Memory, reply: str, question: str, thread: str) -> None:
        agent = create_agent(_model(reply), tools=[], middleware=[PortamemMiddleware(memory)])
        await agent.ainvoke({"messages": [{"role": "user", "content": question}]},
                            {"configurable": {"thread_id": thread, "user_id": "alice"}})

    with Memory(path, embedder=embedder) as memory:
        asyncio.run(run(memory, "I will remember that.", "Please remember that I am allergic to peanuts.", "t1"))
        assert len(PROMPTS[-1]) == 1  # nothing known yet: no system message at all
    with Memory(path, embedder=embedder) as memory:
        asyncio.run(run(memory, "No satay, then.", "Can I eat peanuts at the party?", "t2"))
        assert "allergic to peanuts" in _system_text(PROMPTS[-1])


def test_history_mode_continues_a_conversation_without_a_checkpointer(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        memory.add_turn("Let's plan a trip to Lisbon.", "Great, when do you want to go?",
                        user_id="alice", session_id="trip")
        agent = create_agent(_model("In May the weather is mild."), tools=[],
                             middleware=[PortamemMiddleware(memory, user_id="alice", history=True)])
        agent.invoke({"messages": [{"role": "user", "content": "In May. How is the weather then?"}]},
                     {"configurable": {"thread_id": "trip"}})
        texts = [m.text for m in PROMPTS[-1] if not isinstance(m, SystemMessage)]
        assert texts == ["Let's plan a trip to Lisbon.", "Great, when do you want to go?", "In May. How is the weather then?"]
        assert [t.user for t in memory.context(user_id="alice", session_id="trip")] == [
            "Let's plan a trip to Lisbon.", "In May. How is the weather then?"]


def test_tools_reach_the_same_memory_as_the_store(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "store", embedder=embedder) as memory:
        store = PortamemStore(memory)
        store.put(("memories", "alice"), "tea", {"content": "Alice drinks jasmine green tea."})
        search = AIMessage("", tool_calls=[{"name": "search_memory", "args": {"query": "tea"},
                                            "id": "call-1", "type": "tool_call"}])
        agent = create_agent(_model(search, "Jasmine green tea."), tools=[], store=store,
                             middleware=[PortamemMiddleware(memory, user_id="alice", mode="agent")])
        out = agent.invoke({"messages": [{"role": "user", "content": "Which tea do I like?"}]})
        tool_reply = next(m for m in out["messages"] if m.type == "tool")
        assert "Alice drinks jasmine green tea." in tool_reply.text
        assert len(PROMPTS[0]) == 1  # agent mode: recall is the model's call, not injected


def test_an_agent_saves_privately_and_recalls_its_own_before_the_shared_layer(memory: Memory) -> None:
    memory.save_memory("The office wifi password is on the fridge.", user_id="alice")  # shared: no agent
    save = AIMessage("", tool_calls=[{"name": "save_memory", "args": {"text": "The office wifi for visitors is "
                                      "called Guest-5."}, "id": "call-1", "type": "tool_call"}])
    sales = PortamemMiddleware(memory, user_id="alice", mode="both", agent_id="sales")
    create_agent(_model(save, "Noted."), tools=[], middleware=[sales]).invoke(
        {"messages": [{"role": "user", "content": "Please note the visitor network."}]})
    [mine] = [r for r in memory.list_memories(user_id="alice") if r.content == "The office wifi for visitors is called Guest-5."]
    assert mine.agent_id == "sales"

    def system_for(agent_id: str) -> str:
        mw = PortamemMiddleware(memory, user_id="alice", agent_id=agent_id)
        create_agent(_model("Sure."), tools=[], system_prompt="Help.", middleware=[mw]).invoke(
            {"messages": [{"role": "user", "content": "Where is the office wifi?"}]})
        return _system_text(PROMPTS[-1])

    seen = system_for("sales")
    assert "Guest-5" in seen and "fridge" in seen and seen.index("Guest-5") < seen.index("fridge")
    other = system_for("support")
    assert "fridge" in other and "Guest-5" not in other
