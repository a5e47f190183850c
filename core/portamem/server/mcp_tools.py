"""``portamem mcp``: save, search, forget and explain as MCP tools, for any MCP-capable agent.

The tools act for one user, fixed when the server starts (``--user``), so a model cannot reach
another user's memory by naming one. The memory behind them is the local store, or a
``portamem serve`` server (``--url``/discovered), whose key then bounds the scope again.
Errors reach the agent as tool errors carrying the ``portamem.errors`` message.

On stdio the tools serve the process that launched them. Over HTTP (``http_app``) they sit behind the
guard of ``portamem serve`` (``limits.Guard``): the Host allow-list (421), the body limit (413) and an
API key of the store, checked from the headers (401), or none on a keyless loopback server
(``--keyless``, chosen at start; ``auth.Access``). The key then bounds every tool as it bounds the HTTP
API: its tenant, its users (``--user`` outside them: 403), read-only (no save or forget), its agents (a
save as its agent, a search of its agents' and the shared layer's memories, a forget of its agents' own,
an explain of what it may read; anything else answers as a missing memory).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from ..config import Settings
from ..errors import AuthenticationError, NotFoundError, PortamemError
from ..memory import Memory
from ..read.prompt import format_memories
from ..records import to_iso
from ..storage.actor import acting_as
from .auth import Access, KeyStore, Principal
from .limits import LOOPBACK_NAMES, PRINCIPAL, Guard, HostPolicy

__all__ = ["build_mcp", "http_app", "run_mcp"]

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


class _Caller:
    """Who a tool call acts as: nobody in particular on stdio and in process (``keyed`` False), the key the
    guard checked for its HTTP request otherwise (``limits.Guard`` leaves it in the request's state)."""

    def __init__(self, memory: Memory, user_id: str, keyed: bool) -> None:
        self.memory, self.user_id, self.keyed = memory, user_id, keyed

    def who(self, ctx: Context | None, *, write: bool = False) -> Principal | None:
        if not self.keyed:
            return None
        request = None if ctx is None else ctx.request_context.request
        who = getattr(request, "scope", {}).get("state", {}).get(PRINCIPAL)
        if not isinstance(who, Principal):
            raise AuthenticationError("this MCP server needs an API key (Authorization: Bearer pm_...)")
        who.check_user(self.user_id)
        if write:
            who.check_write()
        return who

    @staticmethod
    def scope(who: Principal | None) -> dict[str, Any]:
        """The tenant a call names: the key's."""
        return {} if who is None else {"tenant_id": who.tenant_id}

    @staticmethod
    @contextlib.contextmanager
    def acting(who: Principal | None) -> Iterator[None]:
        """The audit log's actor: the key's id."""
        if who is None:
            yield
        else:
            with acting_as(who.key_id):
                yield

    async def check(self, who: Principal | None, memory_id: str, *, reading: bool) -> None:
        """A memory a key bound to agents may not read (or change) answers as a missing one."""
        if who is None or who.agents is None:
            return
        try:
            record = await self.memory.aget_memory(memory_id, user_id=self.user_id, tenant_id=who.tenant_id)
        except NotFoundError:
            record = None
        if record is None or not (who.may_read(record) if reading else who.may_change(record)):
            raise NotFoundError(f"no memory {memory_id!r}")


def build_mcp(memory: Memory, *, user_id: str, name: str = "portamem", keyed: bool = False) -> MCPServer:
    """An MCP server whose tools read and write ``user_id``'s memories in ``memory``; ``keyed``, each call
    within the scope of its HTTP request's API key (``http_app``)."""
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS)
    caller = _Caller(memory, user_id, keyed)

    @server.tool()
    @_reported
    async def save_memory(content: str, importance: float | None = None, kind: str | None = None,
                          source: Literal["user", "tool", "web"] = "user", ctx: Context | None = None
                          ) -> dict[str, Any]:
        """Remember a fact about the user. importance 0..1 (default: scored); source of the fact."""
        who = caller.who(ctx, write=True)
        agent = {} if who is None or who.agents is None else {"agent_id": who.agent_for(None)}
        with caller.acting(who):
            record = await memory.asave_memory(content, user_id=user_id, importance=importance, kind=kind,
                                               source=source, **agent, **caller.scope(who))
        return {"memory_id": record.memory_id, "status": record.status.value, "content": record.content}

    @server.tool()
    @_reported
    async def search_memory(query: str, top_k: int = 5, archive: bool = False,
                            metadata: dict[str, Any] | None = None, ctx: Context | None = None) -> dict[str, Any]:
        """The user's memories most relevant to the query, best first, and the lines to put in a prompt.
        archive: also search the archive of old, rarely used memories (the cold tier).
        metadata: only memories whose metadata matches, e.g. {"project": "apollo", "priority": {"$gte": 2}}
        (operators $eq $ne $in $nin $gt $gte $lt $lte $exists; every key must match)."""
        who = caller.who(ctx)
        tiers = ("hot", "warm", "cold") if archive else None
        filters: Any = {"metadata": metadata} if metadata else None
        if who is not None:
            filters = who.reading(filters)
        with caller.acting(who):
            hits = await memory.asearch_memory(query, user_id=user_id, top_k=top_k, touch=True,  # a model reads them
                                               tiers=tiers, filters=filters, **caller.scope(who))
        out: dict[str, Any] = {
            "memories": [{"memory_id": h.memory_id, "content": h.content, "score": h.score,
                          "found_by": list(h.found_by), "created_at": to_iso(h.record.created_at),
                          "trust": h.record.trust.value, "tier": h.record.tier.value} for h in hits],
            "prompt": format_memories(hits, ids=True),
        }
        if not hits:  # where it looked: a server key of another tenant, or another --user, is the usual reason
            tenant = memory.tenant_id if who is None else who.tenant_id
            out["note"] = (f"nothing found for user {user_id!r} in tenant {tenant!r}"
                           + (f" at {memory.url}" if getattr(memory, "url", None) else ""))
        return out

    @server.tool()
    @_reported
    async def forget_memory(memory_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Forget one memory by its id (from search_memory); it leaves search at once."""
        who = caller.who(ctx, write=True)
        await caller.check(who, memory_id, reading=False)
        with caller.acting(who):
            return {"forgotten": await memory.aforget_memory([memory_id], user_id=user_id, **caller.scope(who))}

    @server.tool()
    @_reported
    async def explain_memory(memory_id: str, ctx: Context | None = None) -> dict[str, Any]:
        """Why a memory is believed: when and from what it was written, its source, trust and use."""
        who = caller.who(ctx)
        await caller.check(who, memory_id, reading=True)
        with caller.acting(who):
            why = await memory.aexplain(memory_id, user_id=user_id, **caller.scope(who))
        return why.to_dict()

    return server


def _transport_security(hosts: HostPolicy | None) -> TransportSecuritySettings:
    """The MCP library's own Origin check (a browser page's request) where the Host is checked: the
    Hosts the guard lets through, any port, as the Origins a page may come from."""
    if hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = [f"[{h}]" if ":" in h else h for h in sorted(hosts.names | LOOPBACK_NAMES)]
    exact = sorted(hosts.exact)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[p for n in names for p in (n, f"{n}:*")] + exact,
        allowed_origins=[f"{scheme}://{p}" for scheme in ("http", "https")
                         for p in [*(q for n in names for q in (n, f"{n}:*")), *exact]])


def http_app(memory: Memory, *, user_id: str, access: Access, hosts: HostPolicy | None,
             max_body_bytes: int) -> Any:
    """The tools on streamable HTTP at ``/mcp`` behind ``limits.Guard``: ``hosts`` (None: any), a body
    limit and the keys of ``access`` (module docstring)."""
    server = build_mcp(memory, user_id=user_id, keyed=True)
    app = server.streamable_http_app(transport_security=_transport_security(hosts), max_request_body_size=max_body_bytes)
    return Guard(app, hosts=hosts, max_body_bytes=max_body_bytes, streamed={}, authenticate=access.check)


def run_mcp(memory: Memory, *, user_id: str, transport: str = "stdio", host: str = "127.0.0.1",
            port: int = 8766, keys: KeyStore | None = None, settings: Settings | None = None,
            hosts: HostPolicy | None = None) -> None:
    """Serve the tools on stdio, or on streamable HTTP at ``http://host:port/mcp`` behind ``keys`` (the
    store's API keys) or, with ``settings.server_keyless`` (loopback only; ``commands.open_keys`` checked
    it), without them, answering to the Host names of ``hosts`` (None: any)."""
    # the MCP server logs at INFO; httpx would add a line per request a RemoteMemory makes
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if transport == "stdio":
        build_mcp(memory, user_id=user_id).run("stdio")
        return
    import uvicorn

    settings = settings or memory.settings
    access = Access(keys, open_access=settings.server_keyless, tenant_id=memory.tenant_id,
                    refresh_s=settings.server_key_refresh_s)
    app = http_app(memory, user_id=user_id, access=access, max_body_bytes=settings.server_max_body_bytes,
                   hosts=hosts)
    access.start()
    try:
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()
    finally:
        access.stop()
