"""What AgentScope 1.x and 2.x memory tools share, free of either version: the scope and the tool results."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from portamem import Memory
from portamem.errors import ValidationError
from portamem.filters import for_agent
from portamem.portable.keys import TOOL_NAMESPACE
from portamem.messages import Message, aadd_messages, awindow_messages
from portamem.recall import arecall, format_memories

__all__ = ["Scope", "ToolResult", "NOTHING_FOUND"]

NOTHING_FOUND = "(no relevant memories found)"

#: the text the model reads, and metadata with ids and texts exactly, so callers need not parse the text
ToolResult = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Scope:
    """The store and whose memories a middleware, a memory class or a tool works on."""

    memory: Memory
    user_id: str
    session_id: str = "default"
    tenant_id: str | None = None
    #: the agent's name: what it saves is private to it; it recalls its own memories, then the shared layer
    agent_id: str | None = None

    def __post_init__(self) -> None:
        # refused when the agent is built, not at its first reply
        for name in ("user_id", "session_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                raise ValidationError(f"{name} must be a non-empty string without NUL, got {value!r}")

    async def window(self) -> list[Message]:
        """The messages of the session's working window, oldest first."""
        return await awindow_messages(self.memory, user_id=self.user_id, session_id=self.session_id,
                                      tenant_id=self.tenant_id)

    async def record(self, messages: Iterable[Message]) -> list[Message]:
        """Append the finished turns of ``messages`` to the window (known ones skipped); returns the open rest."""
        return await aadd_messages(self.memory, messages, user_id=self.user_id, session_id=self.session_id,
                                   tenant_id=self.tenant_id)

    async def recall(self, query: str, *, top_k: int, shown: Iterable[str] = (), header: str | None = None) -> str:
        """Memories for ``query`` rendered for the prompt, minus what the window or ``shown`` holds; may be empty."""
        hits = await arecall(self.memory, query, user_id=self.user_id, session_id=self.session_id, top_k=top_k,
                             tenant_id=self.tenant_id, shown=shown, agent_id=self.agent_id)
        return format_memories(hits, header=header)

    async def add(self, thinking: str, content: list[str], keys: list[str] | None = None) -> ToolResult:
        """Save each item of ``content`` as a memory; ``thinking`` (why) is kept in its metadata.

        ``keys`` names the items (``""`` for none): an item saved under a key replaces that key's fact.
        """
        if keys is not None and (not isinstance(keys, list) or len(keys) != len(content)):
            raise ValidationError("keys must be a list with one entry (a key or \"\") per item of content")
        named = keys or [""] * len(content)
        records = await self.memory.asave_memories(
            [{"content": c, "session_id": self.session_id, "agent_id": self.agent_id,
              "metadata": {"thinking": thinking} if thinking else {},
              **({"key": k, "key_namespace": TOOL_NAMESPACE} if k else {})}
             for c, k in zip(content, named)],
            user_id=self.user_id, tenant_id=self.tenant_id,
        )
        lines = "\n".join(f"- {r.memory_id}: {r.content}" for r in records)
        return f"Recorded {len(records)} memory(ies):\n{lines}", {"memory_ids": [r.memory_id for r in records]}

    async def search(self, keywords: list[str], limit: int) -> ToolResult:
        """One hybrid search over the keywords together, so scores stay comparable."""
        query = " ".join(k for k in keywords if k.strip())
        hits = await self.memory.asearch_memory(query, user_id=self.user_id, top_k=limit, tenant_id=self.tenant_id,
                                                filters=for_agent(None, self.agent_id), touch=True)
        memories = [{"memory_id": h.memory_id, "content": h.content, "score": h.score} for h in hits]
        return format_memories(hits, ids=True) or NOTHING_FOUND, {"memories": memories}

    async def forget(self, memory_ids: list[str]) -> ToolResult:
        gone = await self.memory.aforget_memory(memory_ids, user_id=self.user_id, tenant_id=self.tenant_id)
        return f"Forgot {len(memory_ids)} memory(ies).", {"memory_ids": list(memory_ids), "changed": gone}
