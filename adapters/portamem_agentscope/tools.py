"""Memory tools an AgentScope 2.x agent calls itself: search, add and forget, allowed without asking the user."""

from __future__ import annotations

from typing import Any

from ._framework import require

require(2)

from agentscope.message import TextBlock  # noqa: E402
from agentscope.permission import PermissionBehavior, PermissionDecision  # noqa: E402
from agentscope.tool import ToolBase, ToolChunk  # noqa: E402

from .scope import Scope, ToolResult  # noqa: E402

__all__ = ["SearchMemoryTool", "AddMemoryTool", "ForgetMemoryTool", "memory_tools"]


def _chunk(result: ToolResult) -> ToolChunk:
    text, metadata = result
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
        return _chunk(await self.scope.search(keywords, limit))


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
            "keys": {"type": "array", "items": {"type": "string"},
                     "description": "optional: a short name per fact (e.g. \"diet\"), \"\" for none; a fact saved "
                                    "under a key replaces the one that key held"},
        },
        "required": ["thinking", "content"],
    }
    is_concurrency_safe = False
    is_read_only = False

    async def call(self, thinking: str, content: list[str], keys: list[str] | None = None) -> ToolChunk:
        return _chunk(await self.scope.add(thinking, content, keys))


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
        return _chunk(await self.scope.forget(memory_ids))


def memory_tools(scope: Scope) -> list[ToolBase]:
    return [SearchMemoryTool(scope), AddMemoryTool(scope), ForgetMemoryTool(scope)]
