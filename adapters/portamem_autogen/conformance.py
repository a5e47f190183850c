"""The conformance driver: the suite's neutral actions as an AutoGen user makes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from ._framework import require

require()

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_core.memory import MemoryContent, MemoryMimeType  # noqa: E402
from autogen_ext.models.replay import ReplayChatCompletionClient  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem_conformance.driver import AsyncFirstDriver  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402

from .context import PortamemChatCompletionContext  # noqa: E402
from .memory import PROVENANCE_KEY, PortamemMemory  # noqa: E402
from .messages import from_llm_message  # noqa: E402

__all__ = ["AutoGenDriver"]


@dataclass
class _Handle:
    store: Memory
    memory: PortamemMemory
    context: PortamemChatCompletionContext


class AutoGenDriver(AsyncFirstDriver):
    """Memories through ``PortamemMemory`` (``add``/``query``), turns through an ``AssistantAgent`` run whose
    model context is ``PortamemChatCompletionContext`` and whose model is AutoGen's replay client."""

    name = "autogen"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        store = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        scope = {"user_id": user_id, "session_id": session_id, "tenant_id": tenant_id}
        return _Handle(store, PortamemMemory(store, **scope), PortamemChatCompletionContext(store, **scope))

    def close(self, handle: _Handle) -> None:
        asyncio.run(handle.memory.close())  # leaves the store to its owner, which closes it next
        handle.store.close()

    async def aremember(self, handle: _Handle, text: str) -> str:
        await handle.memory.add(MemoryContent(content=text, mime_type=MemoryMimeType.TEXT))
        # Memory.add returns nothing: the id comes back with the memory, as a query gives it
        found = (await handle.memory.query(text, top_k=5)).results
        return str(next(r for r in found if r.content == text).metadata[PROVENANCE_KEY]["memory_id"])  # type: ignore[index]

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [str(r.content) for r in (await handle.memory.query(query, top_k=k)).results]

    async def aforget(self, handle: _Handle, ref: str) -> None:
        await handle.memory.forget(ref)

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        agent = AssistantAgent("assistant", model_client=ReplayChatCompletionClient([assistant_text]),
                               model_context=handle.context, memory=[handle.memory])
        await agent.run(task=user_text)

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        messages = [from_llm_message(m) for m in await handle.context.get_messages()]
        return [(m.role, m.text) for m in messages if m.role in ("user", "assistant") and not m.calls_tools]
