"""The conformance driver: the suite's neutral actions as a LlamaIndex user makes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.tools import FunctionTool

from portamem import Memory
from portamem.embedding.embedders import Embedder

from .memory import PortamemMemory
from .messages import text_of
from .retriever import PortamemRetriever
from .tools import PortamemToolSpec

__all__ = ["LlamaIndexDriver"]


@dataclass
class _Handle:
    memory: Memory
    chat: PortamemMemory
    tools: dict[str, FunctionTool]
    user_id: str
    tenant_id: str

    def retriever(self, k: int) -> PortamemRetriever:
        return PortamemRetriever(self.memory, user_id=self.user_id, tenant_id=self.tenant_id, similarity_top_k=k)


def _exchange(user_text: str, assistant_text: str) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.USER, content=user_text),
            ChatMessage(role=MessageRole.ASSISTANT, content=assistant_text)]


def _pairs(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role.value, text_of(m)) for m in messages if m.role.value in ("user", "assistant")]


class LlamaIndexDriver:
    """Memories through the tool spec, recall through the retriever, turns through ``PortamemMemory``."""

    name = "llamaindex"
    supports_async = True

    def __init__(self, embedder: Optional[Embedder] = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        spec = PortamemToolSpec(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id)
        return _Handle(
            memory=memory,
            chat=PortamemMemory(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id),
            tools={t.metadata.name: t for t in spec.to_tool_list() if t.metadata.name},
            user_id=user_id,
            tenant_id=tenant_id,
        )

    def close(self, handle: _Handle) -> None:
        handle.memory.close()

    def remember(self, handle: _Handle, text: str) -> str:
        return str(handle.tools["save_memory"].call(content=text).raw_output.node_id)

    def recall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [n.node.get_content() for n in handle.retriever(k).retrieve(query)]

    def forget(self, handle: _Handle, ref: str) -> None:
        handle.tools["forget_memory"].call(memory_id=ref)

    def write_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        handle.chat.put_messages(_exchange(user_text, assistant_text))

    def history(self, handle: _Handle) -> list[tuple[str, str]]:
        return _pairs(handle.chat.get_all())

    async def aremember(self, handle: _Handle, text: str) -> str:
        return str((await handle.tools["save_memory"].acall(content=text)).raw_output.node_id)

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [n.node.get_content() for n in await handle.retriever(k).aretrieve(query)]

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        await handle.chat.aput_messages(_exchange(user_text, assistant_text))

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        return _pairs(await handle.chat.aget_all())


