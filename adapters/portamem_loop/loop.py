"""``LoopMemory``: recall before the model call, record after it, for a loop written by hand."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from portamem import Memory, MemoryRecord, SearchHit, Turn
from portamem.recall import arecall, format_memories, recall

__all__ = ["LoopMemory", "DEFAULT_TEMPLATE", "LLM", "AsyncLLM"]

LLM = Callable[[str], str]
AsyncLLM = Callable[[str], "str | Awaitable[str]"]

#: ``{memories}`` and ``{history}`` are empty strings when there is nothing to show
DEFAULT_TEMPLATE = "{memories}{history}User: {message}\nAssistant:"


class LoopMemory:
    """One user's (and session's) view of a ``Memory``, shaped for a prompt-in, text-out loop."""

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        session_id: str = "default",
        tenant_id: str | None = None,
        top_k: int | None = None,
        template: str = DEFAULT_TEMPLATE,
        agent_id: str | None = None,
    ) -> None:
        """``agent_id`` names the agent: what it remembers is private to it, and it recalls its own
        memories first, then the user's shared layer (memories written without an agent)."""
        self.memory = memory
        self.agent_id = agent_id
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.top_k = top_k
        self.template = template

    # ------------------------------------------------------------------ the two calls
    def recall(self, user_msg: str) -> str:
        """The prompt for ``user_msg``: the memories it recalls, the recent turns, then the message.

        A memory the recent turns already show is left out, so the model does not read it twice.
        """
        hits = recall(self.memory, user_msg, user_id=self.user_id, session_id=self.session_id,
                      top_k=self.top_k, tenant_id=self.tenant_id, agent_id=self.agent_id)
        return self._prompt(user_msg, hits, self.turns())

    def record(self, user_msg: str, reply: str) -> list[MemoryRecord]:
        """Append the exchange to the working window; returns the memories it caused to be written."""
        return self.memory.add_turn(
            user_msg, reply, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id
        )

    def chat(self, llm: LLM, user_msg: str) -> str:
        """``recall``, call ``llm`` with the prompt, ``record`` the reply and return it."""
        reply = llm(self.recall(user_msg))
        self.record(user_msg, reply)
        return reply

    # ------------------------------------------------------------------ explicit memory
    def remember(self, text: str) -> MemoryRecord:
        """Save ``text`` as a long-term memory of this user, as if they had said "remember ...". """
        return self.memory.save_memory(
            text, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id, agent_id=self.agent_id
        )

    def forget(self, memory_id: str) -> list[str]:
        return self.memory.forget_memory([memory_id], user_id=self.user_id, tenant_id=self.tenant_id)

    def search(self, query: str, *, top_k: int | None = None) -> list[SearchHit]:
        """This user's best memories for ``query`` (``top_k`` defaults to the one given at construction)."""
        return self.memory.search_memory(
            query, user_id=self.user_id, top_k=top_k or self.top_k, tenant_id=self.tenant_id,
            filters=None if self.agent_id is None else {"agent_id": self.agent_id},
        )

    def turns(self) -> list[Turn]:
        """The session's working window, oldest first."""
        return self.memory.context(user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id)

    # ------------------------------------------------------------------ async twins
    async def arecall(self, user_msg: str) -> str:
        """Async twin of :meth:`recall`."""
        hits = await arecall(self.memory, user_msg, user_id=self.user_id, session_id=self.session_id,
                             top_k=self.top_k, tenant_id=self.tenant_id, agent_id=self.agent_id)
        return self._prompt(user_msg, hits, await self.aturns())

    async def arecord(self, user_msg: str, reply: str) -> list[MemoryRecord]:
        """Async twin of :meth:`record`."""
        return await self.memory.aadd_turn(
            user_msg, reply, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id
        )

    async def achat(self, llm: AsyncLLM, user_msg: str) -> str:
        """Async twin of :meth:`chat`; ``llm`` may be a plain or an async function."""
        reply = llm(await self.arecall(user_msg))
        if inspect.isawaitable(reply):
            reply = await reply
        await self.arecord(user_msg, reply)
        return reply

    async def aremember(self, text: str) -> MemoryRecord:
        """Async twin of :meth:`remember`."""
        return await self.memory.asave_memory(
            text, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id, agent_id=self.agent_id
        )

    async def asearch(self, query: str, *, top_k: int | None = None) -> list[SearchHit]:
        """Async twin of :meth:`search`."""
        return await self.memory.asearch_memory(
            query, user_id=self.user_id, top_k=top_k or self.top_k, tenant_id=self.tenant_id,
            filters=None if self.agent_id is None else {"agent_id": self.agent_id},
        )

    async def aturns(self) -> list[Turn]:
        """Async twin of :meth:`turns`."""
        return await self.memory.acontext(user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id)

    # ------------------------------------------------------------------ prompt
    def _prompt(self, user_msg: str, hits: list[SearchHit], turns: list[Turn]) -> str:
        memories = format_memories(hits)
        lines = [f"{who}: {text}" for t in turns for who, text in (("User", t.user), ("Assistant", t.assistant)) if text]
        return self.template.format(
            memories=memories + "\n\n" if memories else "",
            history="\n".join(lines) + "\n" if lines else "",
            message=user_msg,
        )
