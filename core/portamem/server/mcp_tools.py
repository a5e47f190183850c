"""``portamem mcp``: save, search, forget and explain as MCP tools, for any MCP-capable agent.

The tools act for one user, fixed when the server starts (``--user``), so a model cannot reach
another user's memory by naming one. The memory behind them is the local store, or a
``portamem serve`` server (``--url``/discovered), whose key then bounds the scope again.
Errors reach the agent as tool errors carrying the ``portamem.errors`` message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from ..errors import PortamemError
from ..memory import Memory
from ..read.prompt import format_memories
from ..records import to_iso

__all__ = ["build_mcp", "run_mcp"]

INSTRUCTIONS = (
    "Long-term memory of the user you talk with. search_memory before answering anything that depends on "
    "the user's facts, preferences or history; save_memory for what they ask you to remember or state as a "
    "lasting fact; forget_memory when they ask you to forget; explain_memory when asked why you believe something."
)


def _reported(tool: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A portamem error becomes a tool error the model can read ("NotFoundError: no memory ...")."""

    @functools.wraps(tool)
    async def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return await tool(*args, **kwargs)
        except PortamemError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc

    return run


def build_mcp(memory: Memory, *, user_id: str, name: str = "portamem") -> MCPServer:
    """An MCP server whose tools read and write ``user_id``'s memories in ``memory``."""
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)

    @server.tool()
    @_reported
    async def save_memory(content: str, importance: float | None = None, kind: str | None = None,
                          source: Literal["user", "tool", "web"] = "user") -> dict[str, Any]:
        """Remember a fact about the user. importance 0..1 (default: scored); source of the fact."""
        record = await memory.asave_memory(content, user_id=user_id, importance=importance, kind=kind, source=source)
        return {"memory_id": record.memory_id, "status": record.status.value, "content": record.content}

    @server.tool()
    @_reported
    async def search_memory(query: str, top_k: int = 5, archive: bool = False,
                            metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """The user's memories most relevant to the query, best first, and the lines to put in a prompt.
        archive: also search the archive of old, rarely used memories (the cold tier).
        metadata: only memories whose metadata matches, e.g. {"project": "apollo", "priority": {"$gte": 2}}
        (operators $eq $ne $in $nin $gt $gte $lt $lte $exists; every key must match)."""
        tiers = ("hot", "warm", "cold") if archive else None
        hits = await memory.asearch_memory(query, user_id=user_id, top_k=top_k, touch=True,  # a model reads them
                                           tiers=tiers, filters={"metadata": metadata} if metadata else None)
        out: dict[str, Any] = {
            "memories": [{"memory_id": h.memory_id, "content": h.content, "score": h.score,
                          "found_by": list(h.found_by), "created_at": to_iso(h.record.created_at),
                          "trust": h.record.trust.value, "tier": h.record.tier.value} for h in hits],
            "prompt": format_memories(hits, ids=True),
        }
        if not hits:  # where it looked: a server key of another tenant, or another --user, is the usual reason
            out["note"] = (f"nothing found for user {user_id!r} in tenant {memory.tenant_id!r}"
                           + (f" at {memory.url}" if getattr(memory, "url", None) else ""))
        return out

    @server.tool()
    @_reported
    async def forget_memory(memory_id: str) -> dict[str, Any]:
        """Forget one memory by its id (from search_memory); it leaves search at once."""
        return {"forgotten": await memory.aforget_memory([memory_id], user_id=user_id)}

    @server.tool()
    @_reported
    async def explain_memory(memory_id: str) -> dict[str, Any]:
        """Why a memory is believed: when and from what it was written, its source, trust and use."""
        why = await memory.aexplain(memory_id, user_id=user_id)
        return why.to_dict()

    return server


def run_mcp(memory: Memory, *, user_id: str, transport: str = "stdio", host: str = "127.0.0.1",
            port: int = 8766) -> None:
    """Serve the tools on stdio, or on streamable HTTP at ``http://host:port/mcp``."""
    server = build_mcp(memory, user_id=user_id)
    # the MCP server logs at INFO; httpx would add a line per request a RemoteMemory makes
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
