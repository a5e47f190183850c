"""``RemoteMemory``: the ``Memory`` interface over a ``portamem serve`` server.

Same methods, same arguments, same return types, same errors (the server's typed error is raised
again here), sync and async twins, so an adapter given a ``RemoteMemory`` works unchanged and
several processes, frameworks or languages share one memory. The tenant is the API key's:
``tenant_id`` arguments are accepted when they name it and refused otherwise.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

try:
    import httpx
except ImportError:  # without the `server` extra RemoteMemory says which extra to install
    httpx = None  # type: ignore[assignment]

from .config import Settings
from .errors import FrameworkNotInstalledError, PermissionDeniedError, StoreError, ValidationError
from .filters import SearchFilters
from .lifecycle.erasure import Erasure
from .messages import Message
from .portable import wire
from .read.prompt import format_memories
from .read.trace import TraceEntry
from .read.trace import explain as explain_search
from .records import MemoryType, SearchHit, Source, Trust, to_iso
from .write.requests import MemoryDraft
from .write.validation import check_private_key

__all__ = ["RemoteMemory", "discover", "SERVER_FILE", "API_KEY_ENV"]

#: the file a running server writes into its store directory: ``{"url": ..., "pid": ...}``
SERVER_FILE = "server.json"
#: where ``RemoteMemory`` and the CLI look for a key when none is given
API_KEY_ENV = "PORTAMEM_API_KEY"


def discover(path: str | Path) -> str | None:
    """The URL of the server that owns the store at ``path``, when one is running there."""
    try:
        info = json.loads((Path(path) / SERVER_FILE).read_text(encoding="utf-8"))
        pid, url = int(info["pid"]), str(info["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return url


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value


def _filters(value: SearchFilters | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, SearchFilters):
        return {f.name: value.metadata.to_json() if f.name == "metadata" and value.metadata is not None
                else _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if not isinstance(value, Mapping):
        raise ValidationError(f"filters must be a mapping or SearchFilters, got {type(value).__name__}")
    return _jsonable(value)


def _memory_ids(value: Any) -> list[str]:
    """One id or a list of them, as a list."""
    if not isinstance(value, (str, list, tuple)):
        raise ValidationError(f"memory ids must be a string or a list of strings, got {type(value).__name__}")
    return [value] if isinstance(value, str) else list(value)


def _tiers(value: Any) -> list[str]:
    """Tier names, checked as ``Memory`` checks them (one name, or a non-empty list of hot, warm, cold)."""
    tiers = SearchFilters.coerce({"tiers": value}).tiers
    return [t.value for t in tiers or ()]


def _draft(d: MemoryDraft | Mapping[str, Any] | str) -> dict[str, Any]:
    if isinstance(d, str):
        return {"content": d}
    if isinstance(d, MemoryDraft):
        fields = {f.name: getattr(d, f.name) for f in dataclasses.fields(d)}
    elif isinstance(d, Mapping):
        fields = dict(d)
    else:
        raise ValidationError(f"each memory must be a MemoryDraft, mapping or string, got {type(d).__name__}")
    return {k: _jsonable(v) for k, v in fields.items() if v is not None or k == "content"}


@dataclass
class _Call:
    """One HTTP request and how its JSON answer becomes the return value."""

    method: str
    path: str
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    decode: Callable[[Any], Any] = lambda body: body


def _twins(spec: Callable[..., _Call]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A sync method and its async twin from one request builder (``self._run`` / ``self._arun``)."""

    @functools.wraps(spec)
    def sync(self: RemoteMemory, *args: Any, **kwargs: Any) -> Any:
        return self._run(spec(self, *args, **kwargs))

    @functools.wraps(spec)
    async def twin(self: RemoteMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._arun(spec(self, *args, **kwargs))

    twin.__doc__ = f"Async twin of :meth:`{spec.__name__}`."
    return sync, twin


class RemoteMemory:
    """A ``Memory`` whose store is a ``portamem serve`` server at ``url``."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 120.0,
                 tenant_id: str | None = None) -> None:
        """Connect (one ``/v1/whoami`` request learns the key's tenant); ``api_key`` defaults to $PORTAMEM_API_KEY."""
        if httpx is None:
            raise FrameworkNotInstalledError("httpx", "server")
        self.url = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeout = timeout
        self._client = httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout)
        self._async: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None
        self._closed = False
        try:
            me = self._run(_Call("GET", "/v1/whoami"))
        except BaseException:
            self._client.close()
            raise
        self.key_id: str = me["key_id"]
        self.tenant_id: str = me["tenant_id"]
        if tenant_id is not None:
            self._tenant(tenant_id)
        self.settings = Settings(tenant_id=self.tenant_id)

    # ------------------------------------------------------------------ transport
    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections. Idempotent; the server and its store stay up."""
        if self._closed:
            return
        self._closed = True
        self._client.close()
        if self._async is not None:
            loop, client = self._async
            self._async = None
            if not loop.is_closed():
                try:
                    if loop.is_running():
                        loop.create_task(client.aclose())
                    else:
                        loop.run_until_complete(client.aclose())
                except RuntimeError:
                    pass

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this RemoteMemory is closed")

    @staticmethod
    def _answer(call: _Call, response: httpx.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            wire.raise_error(response.status_code, body)
        return call.decode(body)

    def _run(self, call: _Call) -> Any:
        self._check_open()
        try:
            response = self._client.request(call.method, call.path, json=call.json, params=call.params)
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the portamem server at {self.url}: {exc}") from exc
        return self._answer(call, response)

    def _aclient(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._async is None or self._async[0] is not loop:
            self._async = (loop, httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=self._timeout))
        return self._async[1]

    async def _arun(self, call: _Call) -> Any:
        self._check_open()
        try:
            response = await self._aclient().request(call.method, call.path, json=call.json, params=call.params)
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the portamem server at {self.url}: {exc}") from exc
        return self._answer(call, response)

    def _tenant(self, tenant_id: str | None) -> None:
        if tenant_id is not None and tenant_id != self.tenant_id:
            raise PermissionDeniedError(
                f"this API key belongs to tenant {self.tenant_id!r}, not {tenant_id!r}; use a key of that tenant")

    # ------------------------------------------------------------------ write
    def _save_memory(
        self, content: str, *, user_id: str, type: MemoryType | str = MemoryType.SEMANTIC,
        importance: float | None = None, half_life_days: float | None = None, source: Source | str = Source.USER,
        trust: Trust | str | None = None, session_id: str | None = None, agent_id: str | None = None,
        kind: str | None = None, summary: str | None = None, entities: list[str] | None = None,
        metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None, tenant_id: str | None = None,
        key: str | None = None, key_namespace: str | Sequence[str] = (), wait: bool = False,
    ) -> _Call:
        """Store one memory; the server answers once it is committed (and indexed too, with ``wait``)."""
        self._tenant(tenant_id)
        fields = {"type": type, "importance": importance, "half_life_days": half_life_days, "source": source,
                  "trust": trust, "session_id": session_id, "agent_id": agent_id, "kind": kind, "summary": summary,
                  "entities": entities, "metadata": metadata, "created_at": created_at, "key": key,
                  "key_namespace": list(key_namespace) if not isinstance(key_namespace, str) else key_namespace}
        body = {"content": content, "user_id": user_id, **{k: _jsonable(v) for k, v in fields.items() if v is not None},
                **({"wait": True} if wait else {})}
        return _Call("POST", "/v1/memories", body, decode=wire.load_record)

    def _save_memories(self, drafts: Iterable[MemoryDraft | Mapping[str, Any] | str], *, user_id: str,
                       tenant_id: str | None = None, wait: bool = False) -> _Call:
        """Store several memories of one user in one transaction (all or none)."""
        self._tenant(tenant_id)
        items = [_draft(d) for d in drafts]
        if not items:
            return _Call("GET", "/v1/health", decode=lambda _: [])
        return _Call("POST", "/v1/memories/batch", {"user_id": user_id, "memories": items, "wait": bool(wait)},
                     decode=lambda b: [wire.load_record(r) for r in b["records"]])

    # ------------------------------------------------------------------ read
    def _search_memory(
        self, query: str, *, user_id: str, filters: SearchFilters | Mapping[str, Any] | None = None,
        top_k: int | None = None, tenant_id: str | None = None, now: datetime | None = None,
        sources: Sequence[str] | None = None, weights: Mapping[str, float] | None = None,
        window_session: str | None = None, shown: Iterable[str] = (), debug: bool | IO[str] = False,
        trace: list[TraceEntry] | None = None,
        touch: bool = False,
        tiers: Sequence[str] | None = None,
    ) -> _Call:
        """Hybrid search of one user's memories, each hit with its score breakdown and provenance.

        ``tiers`` (or ``filters["tiers"]``) names the storage tiers to search, as in ``Memory.search_memory``
        (the cold tier is searched only when named).

        ``debug`` and ``trace`` as in ``Memory.search_memory`` (the server sends every candidate's sources,
        scores and fate; the key needs the ``debug`` scope): ``debug`` prints the same candidate table to
        stderr or the stream given, ``trace`` collects the ``TraceEntry`` objects."""
        self._tenant(tenant_id)
        if now is not None:
            raise ValidationError("now is an in-process option; a server searches at its own time")
        if trace is not None and not isinstance(trace, list):
            raise ValidationError(f"trace must be a list or None, got {type(trace).__name__}")
        if not isinstance(debug, bool) and not callable(getattr(debug, "write", None)):
            raise ValidationError(f"debug must be True, False or a text stream, got {type(debug).__name__}")
        wanted = bool(debug) or trace is not None
        body: dict[str, Any] = {"user_id": user_id, "query": query, "top_k": top_k, "filters": _filters(filters),
                                "window_session": window_session, "shown": list(shown), "touch": touch}
        if sources is not None:
            body["sources"] = list(sources)
        if weights is not None:
            body["weights"] = dict(weights)
        if tiers is not None:
            body["tiers"] = _tiers(tiers)
        if wanted:
            body["debug"] = True

        def decode(answer: Any) -> list[SearchHit]:
            hits = [wire.load_hit(h) for h in answer["hits"]]
            if wanted:
                entries = [wire.load_trace(e) for e in answer.get("trace", [])]
                if trace is not None:
                    trace.extend(entries)
                if debug:  # the query as the server redacted it: a printed table ends up in logs
                    print(explain_search(str(answer.get("query", "")), entries, format_memories(hits)),
                          file=sys.stderr if debug is True else debug)
            return hits

        return _Call("POST", "/v1/search", body, decode=decode)

    def _get_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        self._tenant(tenant_id)
        return _Call("GET", f"/v1/memories/{_segment(memory_id)}", params={"user_id": user_id},
                     decode=wire.load_record)

    def _list_memories(self, *, user_id: str, filters: SearchFilters | Mapping[str, Any] | None = None,
                       limit: int | None = None, offset: int = 0, tenant_id: str | None = None) -> _Call:
        """One user's memories in insertion order."""
        self._tenant(tenant_id)
        return _Call("POST", "/v1/memories/list",
                     {"user_id": user_id, "filters": _filters(filters), "limit": limit, "offset": offset},
                     decode=lambda b: [wire.load_record(r) for r in b["records"]])

    def _history(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """The audit trail of one memory."""
        self._tenant(tenant_id)
        return _Call("GET", f"/v1/memories/{_segment(memory_id)}/history", params={"user_id": user_id},
                     decode=lambda b: wire.load_history(b["history"]))

    def _explain(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """When and from which turn a memory was written, and every search that returned it."""
        self._tenant(tenant_id)
        return _Call("GET", f"/v1/memories/{_segment(memory_id)}/explain", params={"user_id": user_id},
                     decode=wire.load_explanation)

    # ------------------------------------------------------------------ change
    def _forget_memory(self, memory_ids: Sequence[str] | str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """Soft-delete memories: they leave search at once."""
        self._tenant(tenant_id)
        ids = _memory_ids(memory_ids)
        if not ids:
            return _Call("GET", "/v1/health", decode=lambda _: [])
        return _Call("POST", "/v1/memories/forget", {"user_id": user_id, "memory_ids": ids},
                     decode=lambda b: list(b["forgotten"]))

    def _set_tier(self, memory_ids: Sequence[str] | str, tier: str, *, user_id: str, tenant_id: str | None = None,
                  now: datetime | None = None) -> _Call:
        """Move memories to a storage tier ("hot", "warm" or "cold"), audited; a cold memory comes back
        from the archive whole. Keyed memories never go cold. Returns the ids that moved."""
        self._tenant(tenant_id)
        if now is not None:
            raise ValidationError("now is an in-process option; a server moves memories at its own time")
        target = _tiers([tier])[0]
        ids = _memory_ids(memory_ids)
        if not ids:
            return _Call("GET", "/v1/health", decode=lambda _: [])
        return _Call("POST", "/v1/memories/tier", {"user_id": user_id, "memory_ids": ids, "tier": target},
                     decode=lambda b: list(b["moved"]))

    def _tier_counts(self, *, user_id: str | None = None, tenant_id: str | None = None) -> _Call:
        """Active memories in the hot and warm tiers, and archived ones in the cold tier (of one user, or
        with a tenant-wide key of the whole tenant)."""
        self._tenant(tenant_id)
        params = {} if user_id is None else {"user_id": user_id}
        return _Call("GET", "/v1/tiers", params=params,
                     decode=lambda b: {str(t): int(n) for t, n in b["tier_counts"].items()})

    def _memory_post(self, memory_id: str, action: str, body: dict[str, Any], tenant_id: str | None) -> _Call:
        self._tenant(tenant_id)
        return _Call("POST", f"/v1/memories/{_segment(memory_id)}/{action}", body, decode=wire.load_record)

    def _restore_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """Undo a forget while the memory has not been purged."""
        return self._memory_post(memory_id, "restore", {"user_id": user_id}, tenant_id)

    def _refresh_memory(self, memory_id: str, delta: float = 0.1, *, user_id: str,
                        tenant_id: str | None = None) -> _Call:
        """Reinforce a memory: importance += delta, counted as accessed now."""
        return self._memory_post(memory_id, "refresh", {"user_id": user_id, "delta": delta}, tenant_id)

    def _confirm_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """Activate a pending memory after review."""
        return self._memory_post(memory_id, "confirm", {"user_id": user_id}, tenant_id)

    def _update_memory(self, memory_id: str, *, user_id: str, content: str | None = None,
                       metadata: Mapping[str, Any] | None = None, tenant_id: str | None = None) -> _Call:
        """Rewrite a memory's content and/or metadata, keeping its id and history."""
        self._tenant(tenant_id)
        if content is None and metadata is None:
            raise ValidationError("nothing to update: give content, metadata or both")
        body = {"user_id": user_id, "content": content,
                "metadata": None if metadata is None else _jsonable(metadata)}
        return _Call("PATCH", f"/v1/memories/{_segment(memory_id)}", body, decode=wire.load_record)

    # ------------------------------------------------------------------ keyed memories
    def _get_by_key(self, key: str, *, user_id: str, key_namespace: str | Sequence[str] = (),
                    tenant_id: str | None = None) -> _Call:
        """The memory stored under ``(key_namespace, key)``, or ``NotFoundError``."""
        self._tenant(tenant_id)
        return _Call("GET", "/v1/keyed", params={"user_id": user_id, "key": key,
                                                 "key_namespace": _namespace(key_namespace)},
                     decode=wire.load_record)

    def _forget_by_key(self, key: str, *, user_id: str, key_namespace: str | Sequence[str] = (),
                       tenant_id: str | None = None) -> _Call:
        """Soft-delete the memory under a key; returns its id."""
        self._tenant(tenant_id)
        return _Call("DELETE", "/v1/keyed", params={"user_id": user_id, "key": key,
                                                    "key_namespace": _namespace(key_namespace)},
                     decode=lambda b: str(b["forgotten"]))

    def _list_keyed(self, *, user_id: str, key_namespace: str | Sequence[str] = (),
                    filters: SearchFilters | Mapping[str, Any] | None = None, limit: int | None = None,
                    offset: int = 0, tenant_id: str | None = None) -> _Call:
        """One user's keyed memories in a namespace or below it, in write order."""
        self._tenant(tenant_id)
        body = {"user_id": user_id, "key_namespace": _namespace(key_namespace), "filters": _filters(filters),
                "limit": limit, "offset": offset}
        return _Call("POST", "/v1/keyed/list", body, decode=lambda b: [wire.load_record(r) for r in b["records"]])

    def _user_ids(self, *, tenant_id: str | None = None) -> _Call:
        """The users of the tenant that hold memories (needs a tenant-wide key)."""
        self._tenant(tenant_id)
        return _Call("GET", "/v1/users", decode=lambda b: list(b["users"]))

    def _erase_user(self, *, user_id: str, tenant_id: str | None = None) -> _Call:
        """Erase everything of one user now, with no grace period and no undo (a read-write key with the
        ``admin`` scope); one audit row without content remains (``Memory.erase_user``)."""
        self._tenant(tenant_id)
        return _Call("POST", "/v1/users/erase", {"user_id": user_id},
                     decode=lambda b: Erasure(str(b["tenant_id"]), str(b["user_id"]), int(b["memories"]),
                                              {str(k): int(v) for k, v in b["rows"].items()}))

    # ------------------------------------------------------------------ working window
    def _add_turn(self, user: str, assistant: str, *, user_id: str, session_id: str = "default",
                  metadata: Mapping[str, Any] | None = None, tenant_id: str | None = None,
                  created_at: datetime | None = None) -> _Call:
        """Append a turn to the working window; returns the memories written."""
        self._tenant(tenant_id)
        body = {"user_id": user_id, "session_id": session_id, "user": user, "assistant": assistant,
                "metadata": _jsonable(dict(metadata or {})), "created_at": to_iso(created_at)}
        return _Call("POST", "/v1/turns", body, decode=lambda b: [wire.load_record(r) for r in b["memories"]])

    def _context(self, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> _Call:
        """The turns in the session's working window, oldest first."""
        self._tenant(tenant_id)
        return _Call("GET", "/v1/context", params={"user_id": user_id, "session_id": session_id},
                     decode=lambda b: [wire.load_turn(t) for t in b["turns"]])

    def _clear_context(self, *, user_id: str, session_id: str | None = None, tenant_id: str | None = None) -> _Call:
        """Drop the working window (of one session, or all)."""
        self._tenant(tenant_id)
        params = {"user_id": user_id, **({} if session_id is None else {"session_id": session_id})}
        return _Call("DELETE", "/v1/context", params=params, decode=lambda _: None)

    def _pop_turn(self, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> _Call:
        """Take the newest turn out of the session's working window and return it (None when it is empty)."""
        self._tenant(tenant_id)
        return _Call("POST", "/v1/turns/pop", {"user_id": user_id, "session_id": session_id},
                     decode=lambda b: None if b["turn"] is None else wire.load_turn(b["turn"]))

    def _archive_messages(self, messages: Iterable[Message], *, user_id: str, session_id: str = "default",
                          tenant_id: str | None = None) -> _Call:
        """Compress messages that left a framework's own window into one episodic memory (or None)."""
        self._tenant(tenant_id)
        body = {"user_id": user_id, "session_id": session_id, "messages": [m.to_dict() for m in messages]}
        return _Call("POST", "/v1/messages/archive", body,
                     decode=lambda b: None if b["memory"] is None else wire.load_record(b["memory"]))

    # ------------------------------------------------------------------ tenant-wide
    def _audit_scan(self, *, user_id: str | None = None, tenant_id: str | None = None,
                    since: datetime | None = None, window: timedelta = timedelta(days=1), factor: float = 2.0,
                    include_quarantined: bool = False) -> _Call:
        """Memories to review: weight that rose sharply, low-trust and pending ones."""
        self._tenant(tenant_id)
        body = {"user_id": user_id, "since": to_iso(since), "window_hours": window.total_seconds() / 3600,
                "factor": factor, "include_quarantined": include_quarantined}
        return _Call("POST", "/v1/audit", body, decode=lambda b: [wire.load_finding(f) for f in b["findings"]])

    def _maintain(self, *, now: datetime | None = None, policy: str | None = None,
                  tenant_id: str | None = None) -> _Call:
        """Evict decayed memories, purge after the grace period, consolidate (a tenant-wide key)."""
        self._tenant(tenant_id)
        if now is not None:
            raise ValidationError("now is an in-process option; a server maintains at its own time")
        return _Call("POST", "/v1/maintain", {"policy": policy}, decode=wire.load_report)

    def _purge_deleted(self, *, older_than: timedelta | None = None, tenant_id: str | None = None,
                       now: datetime | None = None) -> _Call:
        """Hard-delete forgotten memories whose grace period has passed (a tenant-wide key)."""
        self._tenant(tenant_id)
        if now is not None:
            raise ValidationError("now is an in-process option; a server purges at its own time")
        if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
            raise ValidationError(f"older_than must be a non-negative timedelta, got {older_than!r}")
        days = None if older_than is None else older_than.total_seconds() / 86400
        return _Call("POST", "/v1/purge", {"older_than_days": days}, decode=lambda b: int(b["purged"]))

    def _reindex(self, *, progress: Any = None) -> _Call:
        """Rebuild the server's vector index from its records (a tenant-wide key); returns the tenant's
        indexed memories. ``progress`` is an in-process option and is not shown remotely."""
        return _Call("POST", "/v1/reindex", decode=lambda b: int(b["reindexed"]))

    def reveal_memory(self, memory_id: str, *, user_id: str, private_key: str | bytes | None = None,
                      key_file: str | Path | None = None, tenant_id: str | None = None) -> dict[str, Any]:
        """The original (unredacted) texts of a memory. The server audits the reveal and hands out the
        sealed originals; they are opened here, so the private key never leaves this process."""
        from .storage.vault import load_private_key, open_sealed

        self._tenant(tenant_id)
        check_private_key(private_key, key_file)
        key = load_private_key(private_key, key_file=key_file)
        token = self._run(_Call("POST", f"/v1/memories/{_segment(memory_id)}/reveal", {"user_id": user_id},
                                decode=lambda b: b["sealed"]))
        return open_sealed(token, key, tenant_id=self.tenant_id, user_id=user_id, memory_id=memory_id)

    async def areveal_memory(self, memory_id: str, **kwargs: Any) -> dict[str, Any]:
        """Async twin of :meth:`reveal_memory` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.reveal_memory, memory_id, **kwargs)

    save_memory, asave_memory = _twins(_save_memory)
    save_memories, asave_memories = _twins(_save_memories)
    search_memory, asearch_memory = _twins(_search_memory)
    get_memory, aget_memory = _twins(_get_memory)
    list_memories, alist_memories = _twins(_list_memories)
    history, ahistory = _twins(_history)
    explain, aexplain = _twins(_explain)
    forget_memory, aforget_memory = _twins(_forget_memory)
    restore_memory, arestore_memory = _twins(_restore_memory)
    refresh_memory, arefresh_memory = _twins(_refresh_memory)
    confirm_memory, aconfirm_memory = _twins(_confirm_memory)
    update_memory, aupdate_memory = _twins(_update_memory)
    set_tier, aset_tier = _twins(_set_tier)
    tier_counts, atier_counts = _twins(_tier_counts)
    add_turn, aadd_turn = _twins(_add_turn)
    context, acontext = _twins(_context)
    clear_context, aclear_context = _twins(_clear_context)
    pop_turn, apop_turn = _twins(_pop_turn)
    archive_messages, aarchive_messages = _twins(_archive_messages)
    audit_scan, aaudit_scan = _twins(_audit_scan)
    get_by_key, aget_by_key = _twins(_get_by_key)
    forget_by_key, aforget_by_key = _twins(_forget_by_key)
    list_keyed, alist_keyed = _twins(_list_keyed)
    user_ids, auser_ids = _twins(_user_ids)
    erase_user, aerase_user = _twins(_erase_user)
    maintain, amaintain = _twins(_maintain)
    purge_deleted, apurge_deleted = _twins(_purge_deleted)
    reindex, areindex = _twins(_reindex)

    # ------------------------------------------------------------------ export / import (streamed)
    def export(self, fp: IO[str] | str | Path, *, user_id: str | None = None, include_embeddings: bool = True,
               include_deleted: bool = False, tenant_id: str | None = None) -> int:
        """Stream an export from the server into ``fp``; returns the number of memories."""
        self._tenant(tenant_id)
        self._check_open()
        if isinstance(fp, (str, Path)):
            with open(fp, "w", encoding="utf-8") as handle:
                return self.export(handle, user_id=user_id, include_embeddings=include_embeddings,
                                   include_deleted=include_deleted)
        params = {"include_embeddings": include_embeddings, "include_deleted": include_deleted,
                  **({} if user_id is None else {"user_id": user_id})}
        count = 0
        try:
            with self._client.stream("GET", "/v1/export", params=params) as response:
                if response.status_code >= 400:
                    response.read()
                    self._answer(_Call("GET", "/v1/export"), response)
                for line in response.iter_lines():
                    if line:
                        fp.write(line + "\n")
                        count += line.startswith('{"record"')
        except httpx.HTTPError as exc:
            raise StoreError(f"export from {self.url} failed: {exc}") from exc
        return count

    def import_(self, fp: IO[str] | str | Path, *, tenant_id: str | None = None, on_conflict: str = "error",
                progress: Any = None, trusted: bool = False) -> int:
        """Stream an export to the server, which imports it into the key's tenant, all or nothing;
        ``trusted`` as in ``Memory.import_``."""
        self._tenant(tenant_id)
        self._check_open()
        if not isinstance(trusted, bool):
            raise ValidationError(f"trusted must be True or False, got {trusted!r}")
        if isinstance(fp, (str, Path)):
            with open(fp, "rb") as handle:
                return self._import(handle, on_conflict, trusted)
        return self._import(fp, on_conflict, trusted)

    def _import(self, fp: IO[Any], on_conflict: str, trusted: bool) -> int:
        def chunks() -> Iterator[bytes]:
            while block := fp.read(64 * 1024):
                yield block.encode("utf-8") if isinstance(block, str) else block

        call = _Call("POST", "/v1/import", decode=lambda b: int(b["imported"]))
        try:
            params = {"on_conflict": on_conflict, "trusted": trusted}
            response = self._client.post("/v1/import", content=chunks(), params=params,
                                         headers={"Content-Type": "application/x-ndjson"})
        except httpx.HTTPError as exc:
            raise StoreError(f"import to {self.url} failed: {exc}") from exc
        return int(self._answer(call, response))

    async def aexport(self, fp: IO[str] | str | Path, **kwargs: Any) -> int:
        """Async twin of :meth:`export` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.export, fp, **kwargs)

    async def aimport(self, fp: IO[str] | str | Path, **kwargs: Any) -> int:
        """Async twin of :meth:`import_` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.import_, fp, **kwargs)

    def _flush(self, timeout: float | None = None) -> _Call:
        """Wait until the server's vector search reflects every write committed before this call."""
        return _Call("POST", "/v1/flush", {"timeout": timeout}, decode=lambda _: None)

    flush, aflush = _twins(_flush)

    def stats(self, *, all_tenants: bool = False) -> dict[str, Any]:
        """The key's tenant's write-queue counters; ``all_tenants`` (an ``admin`` key) the whole server's,
        the indexer's lag included."""
        params = {"all_tenants": True} if all_tenants else {}
        return dict(self._run(_Call("GET", "/v1/stats", params=params)))


def _namespace(namespace: str | Sequence[str]) -> str:
    """A namespace in its one-string form (labels joined by "."); the server validates the labels."""
    if isinstance(namespace, str):
        return namespace
    if not isinstance(namespace, (list, tuple)) or not all(isinstance(x, str) for x in namespace):
        raise ValidationError("a key namespace must be a string or a tuple of strings")
    if any("." in x or not x for x in namespace):
        raise ValidationError(f"namespace labels must be non-empty and must not contain '.': {namespace!r}")
    return ".".join(namespace)


def _segment(memory_id: str) -> str:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValidationError("memory_id must be a non-empty string")
    return quote(memory_id, safe="")

