"""Memory tools an Agents SDK model calls itself: save, search and forget, as ``function_tool``s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ._framework import require

require()

from agents import FunctionTool, function_tool  # noqa: E402

from portamem import Memory, SearchHit  # noqa: E402
from portamem.filters import for_agent  # noqa: E402
from portamem.portable.keys import TOOL_NAMESPACE  # noqa: E402
from portamem.recall import format_memories  # noqa: E402

__all__ = ["PortamemTools", "ToolResult", "NOTHING_FOUND"]

NOTHING_FOUND = "(no relevant memories found)"


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer: the model reads ``text`` (the SDK sends ``str()`` of a tool's value), code reads the rest."""

    text: str
    memory_ids: list[str] = field(default_factory=list)
    hits: list[SearchHit] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


class PortamemTools:
    """``Agent(tools=PortamemTools(memory, user_id="alice").tools(), ...)``.

    A failing call (an empty fact, an unknown id) reaches the model as the SDK's error message by
    default, so it can try again; ``failure_error_function=None`` raises it instead (the SDK's own option).
    """

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """``agent_id`` names the agent (e.g. the ``Agent``'s name): what it saves is private to it, and it
        finds its own memories first, then the user's shared layer (memories saved without an agent)."""
        self.memory = memory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.agent_id = agent_id

    def tools(self, **function_tool_options: Any) -> list[FunctionTool]:
        """``save_memory``, ``search_memory`` and ``forget_memory``; options go to ``function_tool``."""
        return [function_tool(f, **function_tool_options)
                for f in (self.save_memory, self.search_memory, self.forget_memory)]

    async def save_memory(self, content: str, key: Optional[str] = None) -> ToolResult:
        """Record one durable fact about the user (who, what, when, where, why) for later conversations.

        Args:
            content: the fact as one complete, standalone sentence.
            key: optional short name of the fact (e.g. "diet"); saving under a key again replaces its fact.
        """
        where: dict[str, Any] = {"user_id": self.user_id, "session_id": self.session_id,
                                 "tenant_id": self.tenant_id, "agent_id": self.agent_id}
        if key is not None:  # a keyed fact is one upsert of its key, never merged into another memory
            where.update(key=key, key_namespace=TOOL_NAMESPACE)
        record = await self.memory.asave_memory(content, **where)
        return ToolResult(f"Saved memory {record.memory_id}: {record.content}", [record.memory_id])

    async def search_memory(self, query: str, limit: int = 5) -> ToolResult:
        """Search long-term memory about the user; each line shows a memory's id, date, trust and score.

        Args:
            query: what to look for, e.g. a name, a place or a short phrase.
            limit: the most memories to return.
        """
        hits = await self.memory.asearch_memory(query, user_id=self.user_id, top_k=limit, tenant_id=self.tenant_id,
                                                filters=for_agent(None, self.agent_id), touch=True)
        return ToolResult(format_memories(hits, ids=True) or NOTHING_FOUND, [h.memory_id for h in hits], hits)

    async def forget_memory(self, memory_id: str) -> ToolResult:
        """Forget a memory that is wrong or that the user wants gone.

        Args:
            memory_id: the id shown by search_memory.
        """
        await self.memory.aforget_memory([memory_id], user_id=self.user_id, tenant_id=self.tenant_id)
        return ToolResult(f"Forgot memory {memory_id}.", [memory_id])
