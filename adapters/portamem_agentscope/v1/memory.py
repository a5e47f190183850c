"""AgentScope 1.x memory classes backed by portamem: short-term ``MemoryBase`` and ``LongTermMemoryBase``."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.memory import InMemoryMemory, LongTermMemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from portamem import Memory

from ..scope import Scope, ToolResult
from .messages import conversation, text_of, to_msgs

__all__ = ["PortamemMemory", "PortamemLongTermMemory"]


class PortamemMemory(InMemoryMemory):
    """Short-term memory whose finished turns live in portamem's working window for ``session_id``.

    A new instance starts from the window, so a restarted agent continues the conversation. Marks,
    hints and compression behave as in ``InMemoryMemory``; deleting a message removes it from this
    agent's view, while the stored turn ages out of the window into episodic memory as usual.
    """

    def __init__(self, memory: Memory, *, user_id: str, session_id: str = "default",
                 tenant_id: str | None = None) -> None:
        super().__init__()
        self.scope = Scope(memory, user_id, session_id, tenant_id)
        self._loaded = False
        #: ids of the messages read from the window: never recorded again (another framework's turns carry
        #: no message ids, so the window could not tell them from new ones)
        self._from_window: set[str] = set()

    async def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        stored = to_msgs(await self.scope.window())
        self._from_window |= {m.id for m in stored}
        known = {m.id for m, _ in self.content}
        self.content[:0] = [(m, []) for m in stored if m.id not in known]

    async def add(self, memories: Msg | list[Msg] | None, marks: str | list[str] | None = None,
                  allow_duplicates: bool = False, **kwargs: Any) -> None:
        await self._load()
        await super().add(memories, marks, allow_duplicates=allow_duplicates, **kwargs)
        # the window skips what it holds already and keeps an unfinished turn out until its reply
        await self.scope.record(conversation([(m, marks) for m, marks in self.content if m.id not in self._from_window]))

    async def get_memory(self, mark: str | None = None, exclude_mark: str | None = None,
                         prepend_summary: bool = True, **kwargs: Any) -> list[Msg]:
        await self._load()
        return await super().get_memory(mark, exclude_mark, prepend_summary, **kwargs)

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        await self._load()
        return await super().delete(msg_ids, **kwargs)

    async def delete_by_mark(self, mark: str | list[str], **kwargs: Any) -> int:
        await self._load()
        return await super().delete_by_mark(mark, **kwargs)

    async def update_messages_mark(self, new_mark: str | None, old_mark: str | None = None,
                                   msg_ids: list[str] | None = None) -> int:
        await self._load()
        return await super().update_messages_mark(new_mark, old_mark, msg_ids)

    async def size(self) -> int:
        await self._load()
        return await super().size()

    async def clear(self) -> None:
        """Clear this view and the session's stored window (without writing episodic memory)."""
        await super().clear()
        self._loaded = True
        s = self.scope
        await asyncio.to_thread(s.memory.clear_context, user_id=s.user_id, session_id=s.session_id,
                                tenant_id=s.tenant_id)

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        super().load_state_dict(state_dict, strict=strict)
        self._loaded = False  # the window may hold turns newer than the saved state; _load skips known ids


def _response(result: ToolResult) -> ToolResponse:
    text, metadata = result
    return ToolResponse(content=[TextBlock(type="text", text=text)], metadata=metadata)


class PortamemLongTermMemory(LongTermMemoryBase):
    """Long-term memory for ``ReActAgent(long_term_memory=..., long_term_memory_mode=...)``.

    Static control: ``retrieve`` recalls memories for the incoming message and ``record`` hands the
    conversation to portamem's write path (working window, captured facts, episodic compression).
    Agent control: ``record_to_memory`` and ``retrieve_from_memory`` are the agent's tools;
    ``forget_from_memory`` can be registered as a third.
    """

    def __init__(self, memory: Memory, *, user_id: str, session_id: str = "default",
                 tenant_id: str | None = None, top_k: int = 5, agent_id: str | None = None) -> None:
        """``agent_id`` names the agent (e.g. ``ReActAgent.name``): what it saves is private to it, and it
        recalls its own memories first, then the user's shared layer (memories saved without an agent)."""
        super().__init__()
        self.scope = Scope(memory, user_id, session_id, tenant_id, agent_id)
        self.top_k = top_k

    async def record(self, msgs: list[Msg | None], **kwargs: Any) -> None:
        """Store the finished turns of ``msgs`` (ReActAgent passes its whole short-term memory; known ones are skipped)."""
        await self.scope.record(conversation([(m, []) for m in msgs if m is not None]))

    async def retrieve(self, msg: Msg | list[Msg] | None, limit: int = 5, **kwargs: Any) -> str:
        """Memories for the incoming message(s), one line each; empty when nothing is relevant."""
        msgs = [m for m in (msg if isinstance(msg, list) else [msg]) if m is not None]
        query = "\n".join(t for t in map(text_of, msgs) if t.strip())
        if not query:
            return ""
        return await self.scope.recall(query, top_k=limit or self.top_k, shown=[query])

    async def record_to_memory(self, thinking: str, content: list[str], **kwargs: Any) -> ToolResponse:
        """Record durable facts about the user for later conversations: who, when, where, what, why.

        Args:
            thinking (`str`):
                Why this information is worth remembering; kept with the memory, not as one.
            content (`list[str]`):
                The facts, each a complete, standalone sentence.
        """
        return _response(await self.scope.add(thinking, content))

    async def retrieve_from_memory(self, keywords: list[str], limit: int = 5, **kwargs: Any) -> ToolResponse:
        """Search long-term memory about the user; each line shows a memory's id, date, trust and score.

        Args:
            keywords (`list[str]`):
                Short search phrases: a name, a place, a date, a topic.
            limit (`int`, defaults to `5`):
                The most memories to return.
        """
        return _response(await self.scope.search(keywords, limit))

    async def forget_from_memory(self, memory_ids: list[str], **kwargs: Any) -> ToolResponse:
        """Forget memories that are wrong or that the user wants gone.

        Args:
            memory_ids (`list[str]`):
                The ids retrieve_from_memory shows.
        """
        return _response(await self.scope.forget(memory_ids))
