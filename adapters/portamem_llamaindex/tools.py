"""Memory tools a LlamaIndex agent calls itself: save, search and forget, each sync and async."""

from __future__ import annotations

from typing import Optional

from llama_index.core.schema import TextNode
from llama_index.core.tools.tool_spec.base import BaseToolSpec

from portamem import Memory, MemoryRecord
from portamem.filters import for_agent
from portamem.portable.keys import TOOL_NAMESPACE
from portamem.recall import format_memories

__all__ = ["PortamemToolSpec"]

NOTHING_FOUND = "(no relevant memories found)"


def _saved(record: MemoryRecord) -> TextNode:
    # a node: the model reads the confirmation, the caller gets the memory id as node_id
    return TextNode(id_=record.memory_id, text=f"Saved memory {record.memory_id}: {record.content}")


class PortamemToolSpec(BaseToolSpec):
    """``FunctionAgent(tools=PortamemToolSpec(mem, user_id="alice").to_tool_list(), ...)``."""

    spec_functions = [
        ("save_memory", "asave_memory"),
        ("search_memory", "asearch_memory"),
        ("forget_memory", "aforget_memory"),
    ]

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        session_id: Optional[str] = None,
        tenant_id: Optional[str] = None,
        agent_id: Optional[str] = None,
    ) -> None:
        """``agent_id`` names the agent (e.g. the agent's ``name``): what it saves is private to it, and it
        finds its own memories first, then the user's shared layer (memories saved without an agent)."""
        self.memory = memory
        self.agent_id = agent_id
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id

    def save_memory(self, content: str, key: Optional[str] = None) -> TextNode:
        """Record one durable fact about the user (who, what, when, where, why) for later conversations.

        Args:
            content: the fact as one complete, standalone sentence.
            key: optional short name of the fact (e.g. "diet"); saving under a key again replaces its fact.
        """
        return _saved(self.memory.save_memory(content, **self._where(key)))

    async def asave_memory(self, content: str, key: Optional[str] = None) -> TextNode:
        return _saved(await self.memory.asave_memory(content, **self._where(key)))

    def _where(self, key: Optional[str]) -> dict[str, object]:
        where: dict[str, object] = {"user_id": self.user_id, "session_id": self.session_id,
                                    "tenant_id": self.tenant_id, "agent_id": self.agent_id}
        if key is not None:  # a keyed fact is one upsert of its key, never merged into another memory
            where.update(key=key, key_namespace=TOOL_NAMESPACE)
        return where

    def search_memory(self, query: str, limit: int = 5) -> str:
        """Search long-term memory about the user; each line shows a memory's id, date, trust and score.

        Args:
            query: what to look for, e.g. a name, a place or a short phrase.
            limit: the most memories to return.
        """
        hits = self.memory.search_memory(query, user_id=self.user_id, top_k=limit, tenant_id=self.tenant_id,
                                         filters=for_agent(None, self.agent_id), touch=True)
        return format_memories(hits, ids=True) or NOTHING_FOUND

    async def asearch_memory(self, query: str, limit: int = 5) -> str:
        hits = await self.memory.asearch_memory(query, user_id=self.user_id, top_k=limit, tenant_id=self.tenant_id,
                                                filters=for_agent(None, self.agent_id), touch=True)
        return format_memories(hits, ids=True) or NOTHING_FOUND

    def forget_memory(self, memory_id: str) -> str:
        """Forget a memory that is wrong or that the user wants gone.

        Args:
            memory_id: the id shown by search_memory.
        """
        self.memory.forget_memory([memory_id], user_id=self.user_id, tenant_id=self.tenant_id)
        return f"Forgot memory {memory_id}."

    async def aforget_memory(self, memory_id: str) -> str:
        await self.memory.aforget_memory([memory_id], user_id=self.user_id, tenant_id=self.tenant_id)
        return f"Forgot memory {memory_id}."
