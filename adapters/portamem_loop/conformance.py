"""The conformance driver of portamem_loop (see ``portamem_conformance.MemoryDriver``)."""

from __future__ import annotations

from pathlib import Path

from portamem import Memory, Turn
from portamem.embedding.embedders import Embedder

from .loop import LoopMemory

__all__ = ["LoopDriver"]


def _pairs(turns: list[Turn]) -> list[tuple[str, str]]:
    return [(role, text) for t in turns for role, text in (("user", t.user), ("assistant", t.assistant)) if text]


class LoopDriver:
    """Drives ``LoopMemory``: ``remember``/``search`` for memories, ``record``/``turns`` for the window."""

    name = "loop"
    supports_async = True

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> LoopMemory:
        return LoopMemory(Memory(path, embedder=self.embedder, tenant_id=tenant_id), user_id=user_id, session_id=session_id)

    def close(self, handle: LoopMemory) -> None:
        handle.memory.close()

    def remember(self, handle: LoopMemory, text: str) -> str:
        return handle.remember(text).memory_id

    def recall(self, handle: LoopMemory, query: str, k: int) -> list[str]:
        return [hit.content for hit in handle.search(query, top_k=k)]

    def forget(self, handle: LoopMemory, ref: str) -> None:
        handle.forget(ref)

    def write_turn(self, handle: LoopMemory, user_text: str, assistant_text: str) -> None:
        handle.record(user_text, assistant_text)

    def history(self, handle: LoopMemory) -> list[tuple[str, str]]:
        return _pairs(handle.turns())

    async def aremember(self, handle: LoopMemory, text: str) -> str:
        return (await handle.aremember(text)).memory_id

    async def arecall(self, handle: LoopMemory, query: str, k: int) -> list[str]:
        return [hit.content for hit in await handle.asearch(query, top_k=k)]

    async def awrite_turn(self, handle: LoopMemory, user_text: str, assistant_text: str) -> None:
        await handle.arecord(user_text, assistant_text)

    async def ahistory(self, handle: LoopMemory) -> list[tuple[str, str]]:
        return _pairs(await handle.aturns())
