"""``PortamemMiddleware``: long-term memory for ``langchain.agents.create_agent``.

Before each model call it recalls the user's memories for the newest user message and adds them
to the system message of that call only (nothing accumulates in the agent state); after the run it
writes the exchange to the session's working window. With ``mode="agent"`` or ``"both"`` it also
gives the model ``search_memory`` and ``save_memory`` tools.

Who the user is, per run: ``context.user_id`` (``create_agent(context_schema=...)``), else
``config["configurable"]["user_id"]``, else the ``user_id`` given here. The session is
``context.session_id``, else the thread id, else ``session_id``; the tenant likewise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._framework import require

require()

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse  # noqa: E402
from langchain.tools import ToolRuntime  # noqa: E402
from langchain_core.messages import SystemMessage  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from langgraph.config import get_config  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402

from portamem import Memory, SearchHit  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402
from portamem.filters import for_agent  # noqa: E402
from portamem.messages import aadd_messages, add_messages, awindow_messages, window_messages  # noqa: E402
from portamem.recall import arecall, format_memories, recall  # noqa: E402

from .messages import from_neutral_all, last_user_text, to_neutral_all  # noqa: E402

__all__ = ["PortamemMiddleware", "Scope", "Mode"]

Mode = Literal["static", "agent", "both"]


@dataclass(frozen=True)
class Scope:
    """Whose memory a run reads and writes."""

    user_id: str
    session_id: str
    tenant_id: str | None
    #: the agent whose private memories come first, then the shared layer; None reads and writes the shared layer
    agent_id: str | None = None


def _lookup(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


class PortamemMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """``create_agent(model, tools, middleware=[PortamemMiddleware(memory, user_id="alice")])``.

    ``history=True`` also puts the session's earlier turns in front of the model's messages (those
    the agent's own state does not hold already): for agents without a checkpointer, or a conversation
    begun through another framework.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str | None = None,
        session_id: str = "default",
        tenant_id: str | None = None,
        top_k: int | None = None,
        mode: Mode = "static",
        history: bool = False,
        agent_id: str | None = None,
    ) -> None:
        """``agent_id`` names the agent (e.g. the ``name`` given to ``create_agent``): what it saves is private
        to it, and it recalls its own memories first, then the user's shared layer (saved without an agent)."""
        if mode not in ("static", "agent", "both"):
            raise ValidationError(f"mode must be 'static', 'agent' or 'both', got {mode!r}")
        super().__init__()
        self.memory = memory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.top_k = top_k
        self.mode = mode
        self.history = history
        self.agent_id = agent_id
        self.tools: list[BaseTool] = self._tools() if mode in ("agent", "both") else []

    # ------------------------------------------------------------------ scope
    def scope(self, context: Any = None, config: Mapping[str, Any] | None = None) -> Scope:
        """Resolve the user, session and tenant of a run (see the module docstring)."""
        if config is None:
            try:
                config = get_config()
            except RuntimeError:  # called outside a graph run
                config = {}
        configurable = (config or {}).get("configurable", {})
        user_id = _lookup(context, "user_id") or configurable.get("user_id") or self.user_id
        if not user_id:
            raise ValidationError(
                "no user for this run: pass PortamemMiddleware(user_id=...), a context with user_id, "
                "or config={'configurable': {'user_id': ...}}"
            )
        session_id = _lookup(context, "session_id") or configurable.get("thread_id") or self.session_id
        tenant_id = _lookup(context, "tenant_id") or configurable.get("tenant_id") or self.tenant_id
        return Scope(str(user_id), str(session_id), tenant_id, self.agent_id)

    # ------------------------------------------------------------------ recall
    def _with_memories(self, request: ModelRequest, hits: list[SearchHit], earlier: list[Any]) -> ModelRequest:
        changes: dict[str, Any] = {}
        block = format_memories(hits)
        if block:
            base = request.system_message
            if base is None:
                changes["system_message"] = SystemMessage(content=block)
            elif isinstance(base.content, str):
                changes["system_message"] = SystemMessage(content=f"{base.content}\n\n{block}" if base.content else block)
            else:
                changes["system_message"] = SystemMessage(content=[*base.content, {"type": "text", "text": block}])
        if earlier:
            present = {m.id for m in request.messages if m.id}
            changes["messages"] = [*(m for m in earlier if not m.id or m.id not in present), *request.messages]
        return request.override(**changes) if changes else request

    def _query(self, request: ModelRequest) -> str:
        return last_user_text(request.messages) if self.mode in ("static", "both") else ""

    def _recall_args(self, request: ModelRequest, scope: Scope, earlier: list[Any]) -> dict[str, Any]:
        # what the model already reads (its messages, the window when prepended) is not recalled again
        return {
            "user_id": scope.user_id,
            "session_id": scope.session_id if self.history else None,
            "top_k": self.top_k,
            "tenant_id": scope.tenant_id,
            "agent_id": scope.agent_id,
            "shown": [m.text for m in [*earlier, *request.messages]],
        }

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        scope = self.scope(request.runtime.context if request.runtime else None)
        earlier = from_neutral_all(window_messages(
            self.memory, user_id=scope.user_id, session_id=scope.session_id, tenant_id=scope.tenant_id
        )) if self.history else []
        query = self._query(request)
        hits = recall(self.memory, query, **self._recall_args(request, scope, earlier)) if query else []
        return handler(self._with_memories(request, hits, earlier))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        scope = self.scope(request.runtime.context if request.runtime else None)
        earlier = from_neutral_all(await awindow_messages(
            self.memory, user_id=scope.user_id, session_id=scope.session_id, tenant_id=scope.tenant_id
        )) if self.history else []
        query = self._query(request)
        hits = await arecall(self.memory, query, **self._recall_args(request, scope, earlier)) if query else []
        return await handler(self._with_memories(request, hits, earlier))

    # ------------------------------------------------------------------ write back
    def after_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        scope = self.scope(runtime.context)
        add_messages(self.memory, to_neutral_all(state["messages"]),
                     user_id=scope.user_id, session_id=scope.session_id, tenant_id=scope.tenant_id)
        return None

    async def aafter_agent(self, state: AgentState, runtime: Runtime) -> dict[str, Any] | None:
        scope = self.scope(runtime.context)
        await aadd_messages(self.memory, to_neutral_all(state["messages"]),
                            user_id=scope.user_id, session_id=scope.session_id, tenant_id=scope.tenant_id)
        return None

    # ------------------------------------------------------------------ tools
    def _tools(self) -> list[BaseTool]:
        def search_memory(query: str, runtime: ToolRuntime[Any, Any]) -> str:
            """Search the user's long-term memory; returns the best matches, one per line."""
            scope = self.scope(runtime.context, runtime.config)
            hits = self.memory.search_memory(query, user_id=scope.user_id, top_k=self.top_k, tenant_id=scope.tenant_id,
                                             filters=for_agent(None, scope.agent_id), touch=True)
            return format_memories(hits) or "No memories match."

        def save_memory(text: str, runtime: ToolRuntime[Any, Any]) -> str:
            """Save a fact about the user to long-term memory, worded so it stands on its own."""
            scope = self.scope(runtime.context, runtime.config)
            record = self.memory.save_memory(
                text, user_id=scope.user_id, session_id=scope.session_id, tenant_id=scope.tenant_id,
                agent_id=scope.agent_id,
            )
            return f"Saved (memory {record.memory_id})."

        return [StructuredTool.from_function(search_memory), StructuredTool.from_function(save_memory)]
