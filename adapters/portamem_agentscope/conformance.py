"""The conformance driver: the suite's neutral actions as an AgentScope 2.x user makes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._framework import require

require(2)

from agentscope.agent import Agent  # noqa: E402
from agentscope.message import UserMsg  # noqa: E402
from agentscope.state import AgentState  # noqa: E402
from agentscope.tool import ToolBase, ToolChunk  # noqa: E402
from portamem_conformance.driver import AsyncFirstDriver  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402

from .messages import text_of  # noqa: E402
from .middleware import PortamemMiddleware, restore_context  # noqa: E402
from .testing import ScriptedChatModel  # noqa: E402

__all__ = ["AgentScopeDriver"]


@dataclass
class _Handle:
    memory: Memory
    middleware: PortamemMiddleware
    tools: dict[str, ToolBase]


async def _call(tool: ToolBase, **kwargs: Any) -> ToolChunk:
    chunk = await tool(**kwargs)
    if not isinstance(chunk, ToolChunk):  # the memory tools never stream
        raise TypeError(f"{tool.name} returned {type(chunk).__name__}, not a ToolChunk")
    return chunk


class AgentScopeDriver(AsyncFirstDriver):
    """Memories through the middleware's tools, turns through an ``Agent`` reply, history through ``AgentState``."""

    name = "agentscope"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        memory = Memory(path, embedder=self._embedder, tenant_id=tenant_id)
        mw = PortamemMiddleware(memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id)
        return _Handle(memory, mw, {t.name: t for t in asyncio.run(mw.list_tools())})

    def close(self, handle: _Handle) -> None:
        handle.memory.close()

    async def aforget(self, handle: _Handle, ref: str) -> None:
        await _call(handle.tools["forget_memory"], memory_ids=[ref])

    async def aremember(self, handle: _Handle, text: str) -> str:
        chunk = await _call(handle.tools["add_memory"], thinking="", content=[text])
        return str(chunk.metadata["memory_ids"][0])

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        chunk = await _call(handle.tools["search_memory"], keywords=[query], limit=k)
        return [m["content"] for m in chunk.metadata["memories"]]

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        agent = Agent(name="assistant", system_prompt="", model=ScriptedChatModel([assistant_text]),
                      middlewares=[handle.middleware])
        await agent.reply(UserMsg(name="user", content=user_text))

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        state = AgentState()
        s = handle.middleware.scope
        await restore_context(state, s.memory, user_id=s.user_id, session_id=s.session_id, tenant_id=s.tenant_id)
        return [(m.role, text_of(m)) for m in state.context if m.role in ("user", "assistant")]
