"""The conformance driver of portamem_langchain (see ``portamem_conformance.MemoryDriver``).

Memories go in through LangGraph's store API and come back through the retriever; turns go
through the chat message history, as LangChain code would use them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from ._framework import require

require()

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402

from .history import PortamemChatMessageHistory  # noqa: E402
from .messages import to_neutral  # noqa: E402
from .retriever import PortamemRetriever  # noqa: E402
from .store import PortamemStore  # noqa: E402

__all__ = ["LangChainDriver", "LangChainHandle"]


@dataclass
class LangChainHandle:
    memory: Memory
    store: PortamemStore
    retriever: PortamemRetriever
    history: PortamemChatMessageHistory
    namespace: tuple[str, ...]


class LangChainDriver:
    """remember/forget: ``BaseStore.put``/``delete``; recall: ``BaseRetriever.invoke``; turns: ``BaseChatMessageHistory``."""

    name = "langchain"
    supports_async = True

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder

    def open(
        self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default"
    ) -> LangChainHandle:
        memory = Memory(path, embedder=self.embedder, tenant_id=tenant_id)
        return LangChainHandle(
            memory=memory,
            store=PortamemStore(memory),
            retriever=PortamemRetriever(memory=memory, user_id=user_id),
            history=PortamemChatMessageHistory(memory, user_id=user_id, session_id=session_id),
            namespace=("memories", user_id),
        )

    def close(self, handle: LangChainHandle) -> None:
        handle.memory.close()

    def remember(self, handle: LangChainHandle, text: str) -> str:
        key = uuid.uuid4().hex
        handle.store.put(handle.namespace, key, {"content": text})
        return key

    def recall(self, handle: LangChainHandle, query: str, k: int) -> list[str]:
        return [d.page_content for d in handle.retriever.invoke(query, k=k)]

    def forget(self, handle: LangChainHandle, ref: str) -> None:
        handle.store.delete(handle.namespace, ref)

    def write_turn(self, handle: LangChainHandle, user_text: str, assistant_text: str) -> None:
        handle.history.add_messages([HumanMessage(user_text), AIMessage(assistant_text)])

    def history(self, handle: LangChainHandle) -> list[tuple[str, str]]:
        return [(to_neutral(m).role, m.text) for m in handle.history.messages]

    async def aremember(self, handle: LangChainHandle, text: str) -> str:
        key = uuid.uuid4().hex
        await handle.store.aput(handle.namespace, key, {"content": text})
        return key

    async def arecall(self, handle: LangChainHandle, query: str, k: int) -> list[str]:
        return [d.page_content for d in await handle.retriever.ainvoke(query, k=k)]

    async def awrite_turn(self, handle: LangChainHandle, user_text: str, assistant_text: str) -> None:
        await handle.history.aadd_messages([HumanMessage(user_text), AIMessage(assistant_text)])

    async def ahistory(self, handle: LangChainHandle) -> list[tuple[str, str]]:
        return [(to_neutral(m).role, m.text) for m in await handle.history.aget_messages()]
