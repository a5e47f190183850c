"""Memory tools an AgentScope 2.x agent calls itself: search, add and forget, allowed without asking the user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._framework import require

require(2)

from agentscope.message import TextBlock  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import ToolBase, ToolChunk  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.recall import format_memories  # noqa: E402

__all__ = ["Scope", "SearchMemoryTool", "AddMemoryTool", "ForgetMemoryTool", "memory_tools", "NOTHING_FOUND"]

NOTHING_FOUND = "(no relevant memories found)"


@dataclass(frozen=True)
class Scope:
    """The store and whose memories a middleware and its tools work on."""

    memory: Memory
    user_id: str
    session_id: str = "default"
    tenant_id: str | None = None


def _chunk(text: str, **metadata: Any) -> ToolChunk:
    # metadata carries ids and texts exactly, so callers need not parse the text the model reads
    return ToolChunk(content=[TextBlock(text=text)], metadata=metadata)


class _MemoryTool(ToolBase):
    """A memory tool is part of the agent's own abilities: asking the user before each call defeats it."""

    is_external_tool = False
    is_state_injected = False
    is_mcp = False
    mcp_name = None

    def __init__(self, scope: Scope) -> None:
        super().__init__()
        self.scope = scope

    async def check_permissions(self, *_args: Any, **_kwargs: Any) -> PermissionDecision:
        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="auto-allowed: portamem memory tool")


class SearchMemoryTool(_MemoryTool):
    name = "search_memory"
    description = (
        "Search long-term memory about the user with short keywords (a name, a place, a date, a topic). "
        "Each line shows a memory's id, date, trust and score."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "keywords": {"type": "array", "items": {"type": "string"}, "description": "short search phrases"},
            "limit": {"type": "integer", "description": "the most memories to return", "default": 5},
        },
        "required": ["keywords"],
    }
    is_concurrency_safe = True
    is_read_only = True

    async def call(self, keywords: list[str], limit: int = 5) -> ToolChunk:
        query = " ".join(k for k in keywords if k.strip())
        s = self.scope
        hits = await s.memory.asearch_memory(query, user_id=s.user_id, top_k=limit, tenant_id=s.tenant_id)
        return _chunk(
            format_memories(hits, ids=True) or NOTHING_FOUND,
            memories=[{"memory_id": h.memory_id, "content": h.content, "score": h.score} for h in hits],
        )


class AddMemoryTool(_MemoryTool):
    name = "add_memory"
    description = (
        "Record durable facts about the user for later conversations. Each item of `content` is one "
        "complete, standalone sentence (who, what, when, where, why); `thinking` says why it is worth keeping "
        "and is kept with the memory, not as one."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "thinking": {"type": "string", "description": "why this is worth remembering"},
            "content": {"type": "array", "items": {"type": "string"}, "description": "the facts, one per item"},
        },
        "required": ["thinking", "content"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def call(self, thinking: str, content: list[str]) -> ToolChunk:
        s = self.scope
        records = await s.memory.asave_memories(
            [{"content": c, "session_id": s.session_id, "metadata": {"thinking": thinking} if thinking else {}}
             for c in content],
            user_id=s.user_id, tenant_id=s.tenant_id,
        )
        lines = "\n".join(f"- {r.memory_id}: {r.content}" for r in records)
        return _chunk(f"Recorded {len(records)} memory(ies):\n{lines}", memory_ids=[r.memory_id for r in records])


class ForgetMemoryTool(_MemoryTool):
    name = "forget_memory"
    description = "Forget memories that are wrong or that the user wants gone, by the ids search_memory shows."
    input_schema = {
        "type": "object",
        "properties": {"memory_ids": {"type": "array", "items": {"type": "string"}}},
        "required": ["memory_ids"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def call(self, memory_ids: list[str]) -> ToolChunk:
        s = self.scope
        gone = await s.memory.aforget_memory(memory_ids, user_id=s.user_id, tenant_id=s.tenant_id)
        return _chunk(f"Forgot {len(memory_ids)} memory(ies).", memory_ids=list(memory_ids), changed=gone)


def memory_tools(scope: Scope) -> list[ToolBase]:
    return [SearchMemoryTool(scope), AddMemoryTool(scope), ForgetMemoryTool(scope)]
