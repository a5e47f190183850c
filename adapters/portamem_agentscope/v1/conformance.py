"""The conformance driver for AgentScope 1.x: memories through the long-term memory's tool functions,
turns and history through the short-term ``MemoryBase``, as ``ReActAgent`` calls them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentscope.message import Msg
from portamem_conformance.driver import AsyncFirstDriver

from portamem import Memory
from portamem.embedding.embedders import Embedder

from .memory import PortamemLongTermMemory, PortamemMemory
from .messages import text_of

__all__ = ["AgentScope1Driver"]


@dataclass
class _Handle:
    long_term: PortamemLongTermMemory

    def short_term(self) -> PortamemMemory:
        # a new instance per call reads the window afresh, as a restarted agent would
        s = self.long_term.scope
        return PortamemMemory(s.memory, user_id=s.user_id, session_id=s.session_id, tenant_id=s.tenant_id)


class AgentScope1Driver(AsyncFirstDriver):
    name = "agentscope1"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        return _Handle(PortamemLongTermMemory(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id))

    def close(self, handle: _Handle) -> None:
        handle.long_term.scope.memory.close()

    async def aforget(self, handle: _Handle, ref: str) -> None:
        await handle.long_term.forget_from_memory([ref])

    async def aremember(self, handle: _Handle, text: str) -> str:
        response = await handle.long_term.record_to_memory(thinking="", content=[text])
        return str((response.metadata or {})["memory_ids"][0])

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        response = await handle.long_term.retrieve_from_memory(keywords=[query], limit=k)
        return [m["content"] for m in (response.metadata or {})["memories"]]

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        memory = handle.short_term()
        await memory.add(Msg("user", user_text, "user"))
        await memory.add(Msg("assistant", assistant_text, "assistant"))

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        msgs = await handle.short_term().get_memory()
        return [(m.role, text_of(m)) for m in msgs if m.role in ("user", "assistant")]
