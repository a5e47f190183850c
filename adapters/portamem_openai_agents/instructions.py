"""Recall for every run: the agent's instructions, followed by the memories the newest user message recalls."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Union

from ._framework import require

require()

from agents import Agent, RunContextWrapper  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.recall import DEFAULT_HEADER, arecall, format_memories  # noqa: E402

from .items import text_of  # noqa: E402

__all__ = ["PortamemInstructions", "Instructions"]

#: what the SDK takes as ``Agent.instructions``
Instructions = Union[str, Callable[[RunContextWrapper[Any], Agent[Any]], Union[str, Awaitable[str]]]]


def _last_user_text(items: list[Any]) -> str:
    return next((t for t in (text_of(i) for i in reversed(items) if isinstance(i, dict) and i.get("role") == "user")
                 if t.strip()), "")


class PortamemInstructions:
    """``Agent(instructions=PortamemInstructions(memory, user_id="alice", instructions="You are helpful."))``.

    The SDK calls an agent's instructions before each model call with the run's context, whose
    ``turn_input`` holds the run's input (after a session's history): the memories recalled for its
    newest user message follow the instructions, minus what that input already shows. The
    instructions themselves may be a string or the SDK's own ``(context, agent)`` function.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        instructions: Instructions = "",
        session_id: str | None = None,
        tenant_id: str | None = None,
        agent_id: str | None = None,
        top_k: int | None = None,
        header: str | None = DEFAULT_HEADER,
    ) -> None:
        """``agent_id`` names the agent (e.g. the ``Agent``'s name): it recalls its own memories first, then
        the user's shared layer (memories saved without an agent). ``top_k`` None takes ``Settings``'."""
        self.memory = memory
        self.user_id = user_id
        self.instructions = instructions
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.agent_id = agent_id
        self.top_k = top_k
        self.header = header

    async def __call__(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        base = self.instructions
        if callable(base):
            base = base(context, agent)
            if inspect.isawaitable(base):
                base = await base
        turn_input = list(context.turn_input)
        query = _last_user_text(turn_input)
        note = ""
        if query:
            hits = await arecall(self.memory, query, user_id=self.user_id, session_id=self.session_id,
                                 top_k=self.top_k, tenant_id=self.tenant_id, agent_id=self.agent_id,
                                 shown=[text_of(i) for i in turn_input if isinstance(i, dict)])
            note = format_memories(hits, header=self.header)
        return "\n\n".join(p for p in (str(base or ""), note) if p)
