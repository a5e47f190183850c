"""The conformance driver: the suite's neutral actions as an Agents SDK user makes them."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._framework import require

require()

from agents import Agent, FunctionTool, RunConfig, Runner  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem_conformance.driver import AsyncFirstDriver  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402

from .items import from_item  # noqa: E402
from .session import PortamemSession  # noqa: E402
from .testing import ScriptedModel  # noqa: E402
from .tools import PortamemTools, ToolResult  # noqa: E402

__all__ = ["OpenAIAgentsDriver"]


@dataclass
class _Handle:
    memory: Memory
    session: PortamemSession
    tools: dict[str, FunctionTool]


async def _call(tool: FunctionTool, **arguments: Any) -> ToolResult:
    """Invoke a tool as the runner does, with the JSON arguments a model would send."""
    raw = json.dumps(arguments)
    ctx = ToolContext(None, tool_name=tool.name, tool_call_id=f"call_{uuid.uuid4().hex}", tool_arguments=raw)
    result = await tool.on_invoke_tool(ctx, raw)
    if not isinstance(result, ToolResult):
        raise TypeError(f"{tool.name} returned {type(result).__name__}, not a ToolResult")
    return result


class OpenAIAgentsDriver(AsyncFirstDriver):
    """Memories through ``PortamemTools``' function tools, turns through ``Runner.run`` with ``PortamemSession``."""

    name = "openai-agents"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        tools = PortamemTools(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id)
        # errors raised to the caller (the SDK's own option), so the suite sees portamem's typed errors
        return _Handle(memory, PortamemSession(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id),
                       {t.name: t for t in tools.tools(failure_error_function=None)})

    def close(self, handle: _Handle) -> None:
        handle.memory.close()

    async def aremember(self, handle: _Handle, text: str) -> str:
        return (await _call(handle.tools["save_memory"], content=text, key=None)).memory_ids[0]

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return [h.content for h in (await _call(handle.tools["search_memory"], query=query, limit=k)).hits]

    async def aforget(self, handle: _Handle, ref: str) -> None:
        await _call(handle.tools["forget_memory"], memory_id=ref)

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        agent = Agent(name="assistant", instructions="", model=ScriptedModel([assistant_text]))
        await Runner.run(agent, user_text, session=handle.session, run_config=RunConfig(tracing_disabled=True))

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        messages = [from_item(i) for i in await handle.session.get_items()]
        return [(m.role, m.text) for m in messages if m.role in ("user", "assistant") and not m.calls_tools]
