"""portamem as an AgentScope 2.x middleware, shaped like AgentScope's own ``Mem0Middleware``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Literal

from ._framework import require

require(2)

from agentscope.event import ReplyStartEvent  # noqa: E402
from agentscope.message import AssistantMsg, HintBlock, Msg  # noqa: E402
from agentscope.middleware import MiddlewareBase  # noqa: E402
from agentscope.tool import ToolBase  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402

from .messages import from_msg, text_of, to_msgs  # noqa: E402
from .scope import Scope  # noqa: E402
from .tools import memory_tools  # noqa: E402

if TYPE_CHECKING:
    from agentscope.agent import Agent
    from agentscope.state import AgentState

__all__ = ["PortamemMiddleware", "restore_context", "Mode"]

Mode = Literal["static_control", "agent_control", "both"]

DEFAULT_MEMORY_HEADER = "## Relevant memories from past conversations"
DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory`, `add_memory` and `forget_memory` tools. Search when the conversation depends "
    "on what you know about the user; add durable facts the user shares; forget what the user corrects."
)


def _user_msgs(inputs: Any) -> list[Msg]:
    """The user messages of a reply's input; none for resumption events (a confirmation, a tool result)."""
    items = inputs if isinstance(inputs, list) else [inputs]
    return [m for m in items if isinstance(m, Msg) and m.role == "user"]


async def restore_context(state: AgentState, memory: Memory, *, user_id: str, session_id: str = "default",
                          tenant_id: str | None = None) -> int:
    """Fill an empty ``AgentState.context`` with the session's working window; returns the messages added.

    A fresh agent thus continues the conversation an earlier process had, without persisting its state.
    """
    if state.context:
        return 0
    restored = to_msgs(await Scope(memory, user_id, session_id, tenant_id).window())
    state.context.extend(restored)
    return len(restored)


class PortamemMiddleware(MiddlewareBase):
    """Long-term memory for an AgentScope 2.x ``Agent``::

        mw = PortamemMiddleware(Memory("./mem"), user_id="alice")
        agent = Agent(..., toolkit=Toolkit(tools=await mw.list_tools()), middlewares=[mw])

    ``mode`` as in ``Mem0Middleware``: ``static_control`` recalls memories for each user message and puts
    them in the context as an ``AssistantMsg(name="memory")`` hint; ``agent_control`` gives the agent
    search/add/forget tools; ``both`` does both. Independently, ``keep_window`` writes every finished
    exchange to the session's working window and restores it into a fresh agent's empty context.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        session_id: str = "default",
        tenant_id: str | None = None,
        mode: Mode = "both",
        top_k: int = 5,
        keep_window: bool = True,
        memory_header: str = DEFAULT_MEMORY_HEADER,
        tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS,
        agent_id: str | None = None,
    ) -> None:
        """``agent_id`` names the agent (e.g. the ``Agent``'s name): what it saves is private to it, and it
        recalls its own memories first, then the user's shared layer (memories saved without an agent)."""
        if mode not in ("static_control", "agent_control", "both"):
            raise ValidationError(f"mode must be 'static_control', 'agent_control' or 'both', got {mode!r}")
        self.scope = Scope(memory, user_id, session_id, tenant_id, agent_id)
        self.mode: Mode = mode
        self.top_k = top_k
        self.keep_window = keep_window
        self.memory_header = memory_header
        self.tool_instructions = tool_instructions

    @property
    def memory(self) -> Memory:
        return self.scope.memory

    async def _note(self, agent: Agent, query: str) -> Msg | None:
        text = await self.scope.recall(query, top_k=self.top_k, shown=[text_of(m) for m in agent.state.context],
                                       header=self.memory_header)
        # user messages may not carry hints; formatters turn an assistant hint into a user message
        return AssistantMsg(name="memory", content=[HintBlock(hint=text)]) if text else None

    async def on_reply(
        self, agent: Agent, input_kwargs: dict[str, Any], next_handler: Callable[..., AsyncGenerator[Any, None]]
    ) -> AsyncGenerator[Any, None]:
        s = self.scope
        asked = _user_msgs(input_kwargs.get("inputs"))
        if self.keep_window:
            await restore_context(agent.state, s.memory, user_id=s.user_id, session_id=s.session_id,
                                  tenant_id=s.tenant_id)
        query = "\n".join(t for t in (text_of(m) for m in asked) if t.strip())
        note = await self._note(agent, query) if query and self.mode != "agent_control" else None
        final: Msg | None = None
        try:
            async for item in next_handler(**input_kwargs):
                if note is not None and isinstance(item, ReplyStartEvent):
                    agent.state.context.append(note)  # the user message is in the context by now
                    note = None
                if isinstance(item, Msg) and item.role == "assistant":
                    final = item
                yield item
        finally:
            if self.keep_window and asked and final is not None:
                await s.record([*map(from_msg, asked), from_msg(final)])

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        if self.mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self.tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """The memory tools in agent-control modes; pass them on: ``Toolkit(tools=await mw.list_tools())``."""
        return [] if self.mode == "static_control" else memory_tools(self.scope)
