"""The conformance driver: the suite's neutral actions as a CrewAI user makes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crewai import Agent
from crewai.memory.unified_memory import Memory as CrewMemory

from portamem import Memory
from portamem.embedding.embedders import Embedder

from .memory import crew_memory
from .messages import PortamemConversation
from .models import ScriptedLLM

__all__ = ["CrewAIDriver"]


@dataclass
class _Handle:
    memory: Memory
    crew: CrewMemory
    conversation: PortamemConversation

    def agent(self, reply: str) -> Agent:
        return Agent(role="assistant", goal="Help the user.", backstory="A helpful assistant.",
                     llm=ScriptedLLM(replies=[f"Final Answer: {reply}"]))


def _pairs(messages: list[dict[str, object]]) -> list[tuple[str, str]]:
    return [(str(m["role"]), str(m["content"])) for m in messages if m["role"] in ("user", "assistant")]


class CrewAIDriver:
    """Memories through CrewAI's own ``Memory`` (``remember``, ``recall``, ``forget``) on ``PortamemStorage``,
    turns through an ``Agent.kickoff`` on a scripted model recorded by ``PortamemConversation``."""

    name = "crewai"
    supports_async = True

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        return _Handle(memory, crew_memory(memory, user_id=user_id, tenant_id=tenant_id),
                       PortamemConversation(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id))

    def close(self, handle: _Handle) -> None:
        handle.crew.close()
        handle.memory.close()

    def remember(self, handle: _Handle, text: str) -> str:
        record = handle.crew.remember(text)
        assert record is not None  # only a read_only Memory returns None
        return record.id

    def recall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [m.record.content for m in handle.crew.recall(query, limit=k)]

    def forget(self, handle: _Handle, ref: str) -> None:
        handle.crew.forget(record_ids=[ref])

    def write_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        handle.conversation.kickoff(handle.agent(assistant_text), user_text)

    def history(self, handle: _Handle) -> list[tuple[str, str]]:
        return _pairs(handle.conversation.messages())  # type: ignore[arg-type]

    async def aremember(self, handle: _Handle, text: str) -> str:
        record = await handle.crew.aremember(text)
        assert record is not None
        return record.id

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [m.record.content for m in await handle.crew.arecall(query, limit=k)]

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        await handle.conversation.akickoff(handle.agent(assistant_text), user_text)

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        return _pairs(await handle.conversation.amessages())  # type: ignore[arg-type]
