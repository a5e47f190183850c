"""The conformance driver: the suite's neutral actions as a Google ADK user makes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.runners import Runner
from google.genai import types
from portamem_conformance.driver import AsyncFirstDriver

from portamem import Memory
from portamem.embedding.embedders import Embedder

from .events import text_of
from .memory_service import PortamemMemoryService
from .session_service import PortamemSessionService
from .testing import ScriptedLlm

__all__ = ["ADKDriver"]


@dataclass
class _Handle:
    memory: Memory
    memories: PortamemMemoryService
    sessions: PortamemSessionService
    #: the ADK app: the tenant, as ``PortamemMemoryService`` maps it
    app_name: str
    user_id: str
    session_id: str


class ADKDriver(AsyncFirstDriver):
    """Memories through ``PortamemMemoryService`` (``add_memory``, ``search_memory``, ``delete_memory``),
    turns through a ``Runner`` run of an ``LlmAgent`` on ``PortamemSessionService``, history through
    ``get_session``. The tenant is the ADK app name."""

    name = "adk"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        return _Handle(memory, PortamemMemoryService(memory), PortamemSessionService(memory, assistant_author="assistant"),
                       app_name=tenant_id, user_id=user_id, session_id=session_id)

    def close(self, handle: _Handle) -> None:
        handle.memory.close()

    async def aremember(self, handle: _Handle, text: str) -> str:
        entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=text)]))
        saved = await handle.memories.add_memory(app_name=handle.app_name, user_id=handle.user_id, memories=[entry])
        return str(saved[0].id)

    async def aforget(self, handle: _Handle, ref: str) -> None:
        await handle.memories.delete_memory(app_name=handle.app_name, user_id=handle.user_id, memory_id=ref)

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        service = PortamemMemoryService(handle.memory, top_k=k)
        found = await service.search_memory(app_name=handle.app_name, user_id=handle.user_id, query=query)
        return [text_of(m.content) for m in found.memories]

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        agent = LlmAgent(name="assistant", model=ScriptedLlm(replies=[assistant_text]), instruction="")
        runner = Runner(app_name=handle.app_name, agent=agent, session_service=handle.sessions,
                        memory_service=handle.memories, auto_create_session=True)
        message = types.Content(role="user", parts=[types.Part(text=user_text)])
        async for _ in runner.run_async(user_id=handle.user_id, session_id=handle.session_id, new_message=message):
            pass

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        session = await handle.sessions.get_session(app_name=handle.app_name, user_id=handle.user_id,
                                                    session_id=handle.session_id)
        if session is None:
            return []
        return [("user" if e.author == "user" else "assistant", text_of(e.content))
                for e in session.events if e.content and not e.get_function_calls() and not e.get_function_responses()]
