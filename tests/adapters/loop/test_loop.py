"""LoopMemory around plain functions: the prompt it builds and what it writes back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from portamem_loop import LoopMemory

from portamem import Memory
from portamem.embedding.embedders import Embedder


class EchoLLM:
    """Records each prompt and answers from a script."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.replies.pop(0)


def test_prompt_holds_memories_then_turns_then_the_message(memory: Memory) -> None:
    loop = LoopMemory(memory, user_id="alice")
    loop.remember("Alice's sister is called Maja.")
    loop.record("Hi!", "Hello Alice.")
    prompt = loop.recall("What is my sister called?")
    memories, rest = prompt.split("\n\n", 1)
    assert memories.splitlines()[0].startswith("Relevant memories")
    assert "Alice's sister is called Maja." in memories
    assert rest == "User: Hi!\nAssistant: Hello Alice.\nUser: What is my sister called?\nAssistant:"


def test_empty_memory_gives_the_bare_message(memory: Memory) -> None:
    assert LoopMemory(memory, user_id="alice").recall("Hello") == "User: Hello\nAssistant:"
    custom = LoopMemory(memory, user_id="alice", template="[{memories}|{history}] {message}")
    assert custom.recall("Hello") == "[|] Hello"


def test_a_fact_told_in_one_run_is_in_the_prompt_of_the_next(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "store"
    with Memory(path, embedder=embedder) as memory:
        llm = EchoLLM("Noted.")
        assert LoopMemory(memory, user_id="alice", session_id="mon").chat(
            llm, "Please remember that my sister is called Maja.") == "Noted."
    with Memory(path, embedder=embedder) as memory:
        llm = EchoLLM("Maja.")
        LoopMemory(memory, user_id="alice", session_id="tue").chat(llm, "What is my sister called?")
        assert "my sister is called Maja" in llm.prompts[0].split("\n\n", 1)[0]
        assert [t.user for t in memory.context(user_id="alice", session_id="tue")] == ["What is my sister called?"]


def test_async_chat_accepts_an_async_llm(memory: Memory) -> None:
    loop = LoopMemory(memory, user_id="alice")
    loop.remember("Alice is training for the Berlin marathon.")
    prompts: list[str] = []

    async def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "Good luck in Berlin!"

    assert asyncio.run(loop.achat(llm, "Which marathon am I training for?")) == "Good luck in Berlin!"
    assert "Berlin marathon" in prompts[0]
    assert [(t.user, t.assistant) for t in loop.turns()] == [("Which marathon am I training for?", "Good luck in Berlin!")]


def test_an_agent_remembers_privately_and_reads_the_shared_layer_first_its_own(memory: Memory) -> None:
    sales = LoopMemory(memory, user_id="u1", agent_id="sales")
    support = LoopMemory(memory, user_id="u1", agent_id="support")
    memory.save_memory("The office wifi password is on the fridge.", user_id="u1")  # shared: no agent
    mine = sales.remember("The office wifi for visitors is called Guest-5.")
    support.remember("The office wifi router is in the server room.")
    assert mine.agent_id == "sales"
    seen = sales.search("Where is the office wifi?")
    assert seen[0].memory_id == mine.memory_id
    assert {h.record.agent_id for h in seen} == {"sales", None}
    prompt = sales.recall("Where is the office wifi?")
    assert "Guest-5" in prompt and "fridge" in prompt and "server room" not in prompt
