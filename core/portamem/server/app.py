"""The HTTP API of ``portamem serve``: the public ``Memory`` API as JSON, behind API keys.

FastAPI, not bare Starlette: on this 2-core machine a trivial JSON POST measured 94 req/s under
FastAPI against 112 under Starlette with 50 concurrent clients (both bound by the shared CPU,
the client included), a gap lost in the milliseconds of any search or save, while FastAPI gives the
request validation and the OpenAPI schema (``/openapi.json``) that clients and the fuzz test use.

Every route takes its tenant from the key (no body has a ``tenant_id``); a route that names a
memory answers a user outside the key's scope exactly as it answers a missing memory (404), so
the API tells no one which memories exist. Writes go through the write queue (``queue.py``);
reads run in worker threads. Errors leave as ``{"error": {"type", "message"}}`` (``portamem.portable.wire``).

In front of the routes (``limits.Guard``): the Host allow-list (421), the body limit (413), the key
(401, from the headers before any byte of a body is read) and the bytes all requests hold at once
(429); around everything, the request metrics (``metrics.Measured``) and, outermost, the answer and
the one log line of a request that failed inside (``failures.Failures``: a request id, never SQL or its values).
Keys are checked from memory (``auth.KeyCache``), once a request (by the guard, whose principal the
routes take): a request with a known key makes no query.
"""

# no `from __future__ import annotations`: FastAPI reads the route annotations, some of them local aliases
import asyncio
import dataclasses
import io
import queue as queue_mod
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..storage.actor import acting_as
from ..errors import (
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    PortamemError,
    ValidationError,
)
from ..filters import SearchFilters
from ..messages import Message, archive_messages
from ..portable import wire
from ..write.privacy import redacted_text, sealed_original
from ..write.requests import MemoryDraft, TurnRequest
from . import schemas as s
from .auth import Principal
from .failures import REQUEST_ID, Failures, log_failure
from .inspector import mount_inspector
from .limits import MAX_IMPORT_BYTES, PRINCIPAL, Guard, spool_import
from .metrics import CONTENT_TYPE_LATEST, Measured, Metrics
from .state import ServerState

__all__ = ["create_app", "ServerState"]

_bearer = HTTPBearer(auto_error=False, description="an API key from `portamem keys create`")


class _ErrorBody(BaseModel):
    """The error body every failure leaves with (``portamem.portable.wire.error_body``)."""

    error: dict[str, str]


def _not_found(ids: Sequence[str]) -> NotFoundError:
    """The one answer for a missing memory and for a user outside the key's scope."""
    return NotFoundError(f"no memory {ids[0]!r}" if len(ids) == 1 else f"no memories among {list(ids)!r}")


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors()[:5]:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {e.get('msg')}" if loc else str(e.get("msg")))
    return "; ".join(parts) or "invalid request"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(PortamemError)
    async def portamem_error(request: Request, exc: PortamemError) -> JSONResponse:
        status = wire.status_for(exc)
        headers = {"Retry-After": "1"} if status == 429 else None
        if status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        if status >= 500:  # one line, no statement or parameter in it (failures.describe)
            headers = {**(headers or {}), REQUEST_ID: log_failure(request.scope, exc)}
        return JSONResponse(wire.error_body(exc), status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(wire.error_body(ValidationError(_validation_message(exc))), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        err: PortamemError = NotFoundError(str(exc.detail)) if exc.status_code == 404 else (
            ValidationError(str(exc.detail)) if exc.status_code < 500 else PortamemError(str(exc.detail)))
        return JSONResponse(wire.error_body(err), status_code=exc.status_code, headers=exc.headers)


class _Pipe(io.TextIOBase):
    """A bounded text pipe from the exporting thread to the response stream; closing it stops the export."""

    def __init__(self) -> None:
        self.chunks: queue_mod.Queue[str | None] = queue_mod.Queue(maxsize=64)
        self.gone = threading.Event()
        self.buffer: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:  # type: ignore[override]
        self.buffer.append(text)
        self.size += len(text)
        if self.size >= 64 * 1024:
            self.push()
        return len(text)

    def push(self, final: bool = False) -> None:
        items = ["".join(self.buffer)] if self.buffer else []
        self.buffer, self.size = [], 0
        for item in items + ([None] if final else []):
            while True:
                if self.gone.is_set():
                    raise BrokenPipeError("the client went away")
                try:
                    self.chunks.put(item, timeout=0.5)
                    break
                except queue_mod.Full:
                    continue


def create_app(state: ServerState) -> FastAPI:
    """The FastAPI application over one ``ServerState`` (``portamem serve`` builds both)."""
    mem, q = state.memory, state.queue

    metrics = state.metrics = Metrics(state)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        q.start()
        state.start()
        metrics.start()
        try:
            yield
        finally:
            await asyncio.to_thread(q.stop)
            metrics.stop()
            state.stop()

    app = FastAPI(
        title="portamem", version="1", lifespan=lifespan,
        description="Portable long-term memory for LLM agents, shared over HTTP. The tenant comes from the "
                    "API key; errors are {\"error\": {\"type\": <portamem.errors class>, \"message\": ...}}.",
        responses={413: {"description": "PayloadTooLargeError: the body is larger than the server takes",
                         "model": _ErrorBody},
                   421: {"description": "HostNotAllowedError: a Host the server does not answer to",
                         "model": _ErrorBody}},
    )
    _install_error_handlers(app)
    app.add_middleware(Guard, hosts=state.hosts, max_body_bytes=state.max_body_bytes,  # type: ignore[arg-type]
                       authenticate=state.check, budget=state.budget)
    app.add_middleware(Measured, metrics=metrics)  # type: ignore[arg-type]
    app.add_middleware(Failures)  # type: ignore[arg-type]  # outermost: any other exception is answered 500 here

    async def principal(_: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
                        request: Request) -> Principal:
        """The key the guard checked before the body was read (``limits.Guard``); ``_bearer`` names the
        scheme in the OpenAPI schema."""
        who = request.scope.get("state", {}).get(PRINCIPAL)
        if who is None:
            raise AuthenticationError("this server needs an API key (Authorization: Bearer pm_...)")
        return who

    Who = Annotated[Principal, Depends(principal)]

    async def read(who: Principal, action: str, fn: Callable[..., Any], *args: Any, user_id: str | None,
                   detail: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        with acting_as(who.key_id):
            result = await asyncio.to_thread(fn, *args, user_id=user_id, **kwargs)
            q.note_read(action, tenant_id=who.tenant_id, user_id=user_id, detail=detail or {})
        return result

    async def write(who: Principal, fn: Callable[[], Any], *, user_id: str | None) -> Any:
        who.check_write()
        with acting_as(who.key_id):
            return await q.run(fn, user=None if user_id is None else (who.tenant_id, user_id), tenant=who.tenant_id)

    async def on_memory(who: Principal, user_id: str, ids: Sequence[str], call: Any,
                        key_namespace: str | None = None, reading: bool = False) -> Any:
        """Run ``call`` (an awaitable factory) for memories of ``user_id``; 404 alike for missing and out of scope.
        A key bound to agents acts only on its agents' own memories (``portamem.write.scope``): never the
        shared layer's nor another agent's; ``reading``, it reads the shared layer's too (``Principal.may_read``).
        With ``key_namespace``, ``ids`` are keys of that namespace."""
        if not who.may_act_for(user_id):
            raise _not_found(ids)
        try:
            if who.agents is not None:
                held = await asyncio.to_thread(
                    lambda: [mem.get_memory(i, user_id=user_id, tenant_id=who.tenant_id) if key_namespace is None
                             else mem.get_by_key(i, user_id=user_id, key_namespace=key_namespace,
                                                 tenant_id=who.tenant_id) for i in ids])
                if any(not (who.may_read(r) if reading else who.may_change(r)) for r in held):
                    raise _not_found(ids)
            return await call()
        except NotFoundError:
            raise _not_found(ids) from None

    def tenant_wide(who: Principal, what: str) -> None:
        if not who.tenant_wide:
            raise PermissionDeniedError(f"{what} needs a key for the whole tenant; {who.key_id} is bound to users")

    def every_agent(who: Principal, what: str) -> None:
        if who.agents is not None:
            raise PermissionDeniedError(f"{what} needs a key of every agent; {who.key_id} is bound to agents "
                                        f"{sorted(who.agents)}")

    # ------------------------------------------------------------------ service
    @app.get("/v1/health", tags=["service"])
    async def health() -> dict[str, str]:
        """Liveness; needs no key."""
        return {"status": "ok"}

    @app.get("/v1/whoami", tags=["service"])
    async def whoami(who: Who) -> dict[str, Any]:
        """The key's id, tenant and scope."""
        return {"key_id": who.key_id, "tenant_id": who.tenant_id,
                "users": None if who.users is None else sorted(who.users),
                "agents": None if who.agents is None else sorted(who.agents), "read_only": who.read_only,
                "scopes": sorted(who.scopes)}

    @app.get("/v1/stats", tags=["service"])
    async def stats(who: Who, all_tenants: bool = False) -> dict[str, Any]:
        """The key's tenant's write-queue counters; with ``all_tenants`` (an ``admin`` key) the whole
        server's: the queue of every tenant and the indexer's lag."""
        own = q.stats.tenants.get(who.tenant_id)
        counters = own.to_dict() if own is not None else {"operations": 0, "rejected": 0, "reads_audited": 0}
        out: dict[str, Any] = {"tenant_id": who.tenant_id, "queue": {
            "pending": q.pending_of(who.tenant_id), "max_pending": q.stats.max_pending, **counters}}
        if not all_tenants:
            return out
        who.check_scope("admin", "the statistics of every tenant")
        out["server"] = {"queue": q.stats.to_dict(),
                         "tenants": {t: c.to_dict() for t, c in sorted(q.stats.tenants.items())}}
        mem_stats = getattr(mem, "stats", None)
        if callable(mem_stats):
            value = await asyncio.to_thread(mem_stats)
            out["server"]["memory"] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
        return out

    @app.get("/metrics", tags=["service"], response_class=Response,
             responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
    async def prometheus(who: Who) -> Response:
        """The server in the Prometheus text format (an ``admin`` key, or a keyless loopback server)."""
        who.check_scope("admin", "/metrics")
        return Response(await asyncio.to_thread(metrics.render), media_type=CONTENT_TYPE_LATEST)

    # ------------------------------------------------------------------ save
    def draft_of(who: Principal, body: s.Draft) -> MemoryDraft:
        fields = body.model_dump(exclude={"user_id", "wait"})
        fields["agent_id"] = who.agent_for(body.agent_id)
        return MemoryDraft(**fields)

    @app.post("/v1/memories", status_code=201, tags=["memories"])
    async def save(body: s.SaveRequest, who: Who) -> dict[str, Any]:
        """Save one memory; answered once it is committed."""
        who.check_write()
        who.check_user(body.user_id)
        with acting_as(who.key_id):
            records = await q.save([draft_of(who, body)], user_id=body.user_id, tenant_id=who.tenant_id)
        if body.wait:
            await indexed(None)
        return wire.dump_record(records[0])

    @app.post("/v1/memories/batch", status_code=201, tags=["memories"])
    async def save_batch(body: s.BatchSaveRequest, who: Who) -> dict[str, Any]:
        """Save several memories of one user, all or none."""
        who.check_write()
        who.check_user(body.user_id)
        drafts = [draft_of(who, d) for d in body.memories]
        with acting_as(who.key_id):
            records = await q.save(drafts, user_id=body.user_id, tenant_id=who.tenant_id)
        if body.wait:
            await indexed(None)
        return {"records": [wire.dump_record(r) for r in records]}

    async def indexed(timeout: float | None) -> None:
        """Wait until vector search reflects every committed write (a memory that indexes in the background)."""
        flush = getattr(mem, "flush", None)
        if callable(flush):
            await asyncio.to_thread(flush, timeout)

    @app.post("/v1/flush", tags=["memories"])
    async def flush(body: s.FlushRequest, who: Who) -> dict[str, Any]:
        """Wait until vector search reflects every write committed before this request."""
        await indexed(body.timeout)
        return {"flushed": True}

    # ------------------------------------------------------------------ read
    @app.post("/v1/search", tags=["memories"])
    async def search(body: s.SearchRequest, who: Who) -> dict[str, Any]:
        """Hybrid search; each hit has its score breakdown and the retrievers that found it. With ``debug``
        (a key with the ``debug`` scope) also every candidate: its sources, component scores, final score and fate."""
        who.check_user(body.user_id)
        if body.debug:
            who.check_scope("debug", "a search's candidate table")
        extra: dict[str, Any] = {} if body.sources is None else {"sources": tuple(body.sources)}
        if body.tiers is not None:
            extra["tiers"] = [t.value for t in body.tiers]
        trace: list[Any] | None = [] if body.debug else None
        if trace is not None:
            extra["trace"] = trace
        hits = await read(
            who, "read.search", mem.search_memory, body.query, user_id=body.user_id, tenant_id=who.tenant_id,
            filters=who.reading(body.filters), top_k=body.top_k, window_session=body.window_session, shown=body.shown,
            weights=body.weights, touch=body.touch, **extra,
        )
        out: dict[str, Any] = {"hits": [wire.dump_hit(h) for h in hits]}
        if trace is not None:
            out["trace"] = [wire.dump_trace(e) for e in trace]
            # the query the caller's candidate table prints (and its logs keep): redacted, as the retrieval log has it
            out["query"] = redacted_text(mem.hooks, mem.settings, body.query, tenant_id=who.tenant_id,
                                         user_id=body.user_id)
        return out

    @app.post("/v1/memories/list", tags=["memories"])
    async def list_memories(body: s.ListRequest, who: Who) -> dict[str, Any]:
        """One user's memories in insertion order (active only unless ``filters`` says otherwise)."""
        who.check_user(body.user_id)
        records = await read(who, "read.list", mem.list_memories, user_id=body.user_id, tenant_id=who.tenant_id,
                             filters=who.reading(body.filters), limit=body.limit, offset=body.offset)
        return {"records": [wire.dump_record(r) for r in records]}

    UserQ = Annotated[str, Query(min_length=1, max_length=256)]

    @app.get("/v1/memories/{memory_id}", tags=["memories"])
    async def get(memory_id: str, user_id: UserQ, who: Who) -> dict[str, Any]:
        record = await on_memory(who, user_id, [memory_id], lambda: read(
            who, "read.get", mem.get_memory, memory_id, user_id=user_id, tenant_id=who.tenant_id,
            detail={"memory_id": memory_id}), reading=True)
        return wire.dump_record(record)

    @app.get("/v1/memories/{memory_id}/history", tags=["memories"])
    async def history(memory_id: str, user_id: UserQ, who: Who) -> dict[str, Any]:
        """The audit trail of one memory."""
        rows = await on_memory(who, user_id, [memory_id], lambda: read(
            who, "read.history", mem.history, memory_id, user_id=user_id, tenant_id=who.tenant_id,
            detail={"memory_id": memory_id}), reading=True)
        return {"history": wire.dump_history(rows)}

    @app.get("/v1/memories/{memory_id}/explain", tags=["memories"])
    async def explain(memory_id: str, user_id: UserQ, who: Who) -> dict[str, Any]:
        """When and from which turn a memory was written, its trust and weight, and the searches that returned it."""
        why = await on_memory(who, user_id, [memory_id], lambda: read(
            who, "read.explain", mem.explain, memory_id, user_id=user_id, tenant_id=who.tenant_id,
            detail={"memory_id": memory_id}), reading=True)
        return {**why.to_dict(), "record": wire.dump_record(why.record)}

    # ------------------------------------------------------------------ change
    @app.post("/v1/memories/forget", tags=["memories"])
    async def forget(body: s.ForgetRequest, who: Who) -> dict[str, Any]:
        """Soft-delete memories (all or none): they leave search at once."""
        who.check_write()
        ids = list(body.memory_ids)
        done = await on_memory(who, body.user_id, ids, lambda: write(
            who, lambda: mem.forget_memory(ids, user_id=body.user_id, tenant_id=who.tenant_id),
            user_id=body.user_id))
        return {"forgotten": done}

    def memory_write(name: str, path: str, body_type: type[s.UserRequest] | type[s.RefreshRequest] |
                     type[s.UpdateRequest], method: str, call: Callable[[str, Any, Principal], Any],
                     doc: str) -> None:
        async def route(memory_id: str, body: Any, who: Who) -> dict[str, Any]:
            who.check_write()
            record = await on_memory(who, body.user_id, [memory_id], lambda: write(
                who, lambda: call(memory_id, body, who), user_id=body.user_id))
            return wire.dump_record(record)

        route.__annotations__["body"] = body_type
        route.__name__, route.__doc__ = name, doc
        app.add_api_route(path, route, methods=[method], tags=["memories"])

    memory_write("restore", "/v1/memories/{memory_id}/restore", s.UserRequest, "POST",
                 lambda m, b, w: mem.restore_memory(m, user_id=b.user_id, tenant_id=w.tenant_id),
                 "Undo a forget while the memory has not been purged.")
    memory_write("refresh", "/v1/memories/{memory_id}/refresh", s.RefreshRequest, "POST",
                 lambda m, b, w: mem.refresh_memory(m, b.delta, user_id=b.user_id, tenant_id=w.tenant_id),
                 "Reinforce a memory: importance += delta, counted as accessed now.")
    memory_write("confirm", "/v1/memories/{memory_id}/confirm", s.UserRequest, "POST",
                 lambda m, b, w: mem.confirm_memory(m, user_id=b.user_id, tenant_id=w.tenant_id),
                 "Activate a pending memory after review.")
    memory_write("update", "/v1/memories/{memory_id}", s.UpdateRequest, "PATCH",
                 lambda m, b, w: mem.update_memory(m, user_id=b.user_id, tenant_id=w.tenant_id, content=b.content,
                                                   metadata=b.metadata),
                 "Rewrite a memory's content and/or metadata, keeping its id and history.")

    @app.post("/v1/memories/tier", tags=["memories"])
    async def set_tier(body: s.TierRequest, who: Who) -> dict[str, Any]:
        """Move memories to a storage tier (hot, warm or cold), all or none, each move audited: a cold
        memory comes back from the archive whole, a keyed one never goes cold. Answers the ids that moved."""
        who.check_write()
        ids = list(body.memory_ids)
        moved = await on_memory(who, body.user_id, ids, lambda: write(
            who, lambda: mem.set_tier(ids, body.tier.value, user_id=body.user_id, tenant_id=who.tenant_id),
            user_id=body.user_id))
        return {"moved": moved}

    @app.get("/v1/tiers", tags=["memories"])
    async def tier_counts(who: Who, user_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None
                          ) -> dict[str, Any]:
        """Active memories in the hot and warm tiers and archived ones in the cold tier, of one user or
        (a tenant-wide key) of the whole tenant."""
        if user_id is None:
            tenant_wide(who, "the tier counts of the whole tenant")
        else:
            who.check_user(user_id)
        counts = await read(who, "read.tier_counts", mem.tier_counts, user_id=user_id, tenant_id=who.tenant_id)
        return {"tier_counts": dict(counts)}

    @app.post("/v1/memories/{memory_id}/reveal", tags=["memories"])
    async def reveal(memory_id: str, body: s.UserRequest, who: Who) -> dict[str, Any]:
        """The sealed originals of a redacted memory, audited: the client opens them with the vault's
        private key, which never reaches the server."""

        def hand_out() -> str:
            record = mem.get_memory(memory_id, user_id=body.user_id, tenant_id=who.tenant_id)
            token = sealed_original(record)
            with mem.store.transaction() as conn:
                mem.store.audit(conn, "reveal", tenant_id=record.tenant_id, user_id=record.user_id,
                                memory_id=memory_id, detail={"opened_by": "client"})
            return token

        async def queued() -> str:
            with acting_as(who.key_id):
                return str(await q.run(hand_out, user=(who.tenant_id, body.user_id), tenant=who.tenant_id))

        return {"sealed": await on_memory(who, body.user_id, [memory_id], queued)}

    # ------------------------------------------------------------------ keyed memories
    KeyQ = Annotated[str, Query(min_length=1, max_length=256)]
    NamespaceQ = Annotated[str, Query(max_length=1024, description="labels joined by '.'")]

    @app.get("/v1/keyed", tags=["keyed"])
    async def get_by_key(user_id: UserQ, key: KeyQ, who: Who, key_namespace: NamespaceQ = "") -> dict[str, Any]:
        """The memory stored under (key_namespace, key)."""
        record = await on_memory(who, user_id, [key], lambda: read(
            who, "read.get_by_key", mem.get_by_key, key, user_id=user_id, key_namespace=key_namespace,
            tenant_id=who.tenant_id, detail={"key": key, "key_namespace": key_namespace}),
            key_namespace=key_namespace, reading=True)
        return wire.dump_record(record)

    @app.delete("/v1/keyed", tags=["keyed"])
    async def forget_by_key(user_id: UserQ, key: KeyQ, who: Who, key_namespace: NamespaceQ = "") -> dict[str, Any]:
        """Soft-delete the memory under a key; a later write under it revives the key."""
        who.check_write()
        memory_id = await on_memory(who, user_id, [key], lambda: write(who, lambda: mem.forget_by_key(
            key, user_id=user_id, key_namespace=key_namespace, tenant_id=who.tenant_id), user_id=user_id),
            key_namespace=key_namespace)
        return {"forgotten": memory_id}

    @app.post("/v1/keyed/list", tags=["keyed"])
    async def list_keyed(body: s.KeyedListRequest, who: Who) -> dict[str, Any]:
        """One user's keyed memories in a namespace or below it, in write order."""
        who.check_user(body.user_id)
        records = await read(who, "read.list_keyed", mem.list_keyed, user_id=body.user_id,
                             key_namespace=body.key_namespace, filters=who.reading(body.filters), limit=body.limit,
                             offset=body.offset, tenant_id=who.tenant_id)
        return {"records": [wire.dump_record(r) for r in records]}

    @app.get("/v1/users", tags=["tenant"])
    async def user_ids(who: Who) -> dict[str, Any]:
        """The users of the key's tenant that hold memories (a tenant-wide key)."""
        tenant_wide(who, "listing the tenant's users")
        return {"users": await read(who, "read.users", lambda user_id: mem.user_ids(tenant_id=who.tenant_id),
                                    user_id=None)}

    @app.post("/v1/users/erase", tags=["tenant"])
    async def erase_user(body: s.UserRequest, who: Who) -> dict[str, Any]:
        """Erase everything of one user of the key's tenant now, with no grace period and no undo
        (``Memory.erase_user``): a read-write key with the ``admin`` scope. One audit row without content
        remains; answers what went (memories, rows per table)."""
        who.check_scope("admin", "erasing a user")
        who.check_write()
        who.check_user(body.user_id)
        done = await write(who, lambda: mem.erase_user(user_id=body.user_id, tenant_id=who.tenant_id),
                           user_id=body.user_id)
        return done.to_dict()

    # ------------------------------------------------------------------ working window
    @app.post("/v1/turns", tags=["window"])
    async def add_turn(body: s.TurnRequest, who: Who) -> dict[str, Any]:
        """Append a turn to the working window; returns the memories it wrote."""
        who.check_write()
        who.check_user(body.user_id)
        with acting_as(who.key_id):
            records = await q.turn(TurnRequest(user_id=body.user_id, user=body.user, assistant=body.assistant,
                                               session_id=body.session_id, metadata=body.metadata,
                                               created_at=body.created_at), tenant_id=who.tenant_id)
        return {"memories": [wire.dump_record(r) for r in records]}

    @app.post("/v1/turns/pop", tags=["window"])
    async def pop_turn(body: s.SessionRequest, who: Who) -> dict[str, Any]:
        """Take the newest turn out of the session's working window, without writing episodic memory: an undo
        of the last exchange. Returns it, or null when the window is empty."""
        who.check_user(body.user_id)
        turn = await write(who, lambda: mem.pop_turn(user_id=body.user_id, session_id=body.session_id,
                                                     tenant_id=who.tenant_id), user_id=body.user_id)
        return {"turn": None if turn is None else wire.dump_turn(turn)}

    @app.get("/v1/context", tags=["window"])
    async def context(user_id: UserQ, who: Who,
                      session_id: Annotated[str, Query(min_length=1, max_length=256)] = "default") -> dict[str, Any]:
        """The turns in the session's working window, oldest first."""
        who.check_user(user_id)
        turns = await read(who, "read.context", mem.context, user_id=user_id, session_id=session_id,
                           tenant_id=who.tenant_id)
        return {"turns": [wire.dump_turn(t) for t in turns]}

    @app.delete("/v1/context", tags=["window"])
    async def clear_context(user_id: UserQ, who: Who, session_id: Annotated[
            str | None, Query(min_length=1, max_length=256)] = None) -> dict[str, Any]:
        """Drop the working window (of one session, or all) without writing episodic memory."""
        who.check_user(user_id)
        await write(who, lambda: mem.clear_context(user_id=user_id, session_id=session_id, tenant_id=who.tenant_id),
                    user_id=user_id)
        return {"cleared": True}

    @app.post("/v1/messages/archive", tags=["window"])
    async def archive(body: s.ArchiveRequest, who: Who) -> dict[str, Any]:
        """Compress messages that left a framework's own window into one episodic memory."""
        who.check_user(body.user_id)
        try:
            messages = [Message.from_dict(m) for m in body.messages]
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValidationError(f"bad message: {exc}") from exc
        record = await write(who, lambda: archive_messages(
            mem, messages, user_id=body.user_id, session_id=body.session_id, tenant_id=who.tenant_id),
            user_id=body.user_id)
        return {"memory": None if record is None else wire.dump_record(record)}

    # ------------------------------------------------------------------ audit, maintenance, export/import
    @app.post("/v1/audit", tags=["tenant"])
    async def audit(body: s.AuditRequest, who: Who) -> dict[str, Any]:
        """Memories to review: weight that rose sharply, low-trust and pending ones."""
        if body.user_id is None:
            tenant_wide(who, "an audit of the whole tenant")
        else:
            who.check_user(body.user_id)
        findings = await read(who, "read.audit", mem.audit_scan, user_id=body.user_id, tenant_id=who.tenant_id,
                              since=body.since, window=timedelta(hours=body.window_hours), factor=body.factor,
                              include_quarantined=body.include_quarantined)
        return {"findings": [wire.dump_finding(f) for f in findings if who.may_read(f.record)]}

    @app.post("/v1/maintain", tags=["tenant"])
    async def maintain(body: s.MaintainRequest, who: Who) -> dict[str, Any]:
        """Evict decayed memories, purge those past the grace period, consolidate, move memories between
        storage tiers by age and use (``tiered``: the ids moved, by the tier they moved to)."""
        tenant_wide(who, "maintenance")
        report = await write(who, lambda: mem.maintain(policy=body.policy, tenant_id=who.tenant_id), user_id=None)
        return wire.dump_report(report)

    @app.post("/v1/purge", tags=["tenant"])
    async def purge(body: s.PurgeRequest, who: Who) -> dict[str, Any]:
        """Hard-delete the tenant's forgotten memories whose grace period has passed."""
        who.check_write()
        tenant_wide(who, "purging")
        older = None if body.older_than_days is None else timedelta(days=body.older_than_days)
        return {"purged": await write(who, lambda: mem.purge_deleted(older_than=older, tenant_id=who.tenant_id),
                                      user_id=None)}

    @app.post("/v1/reindex", tags=["tenant"])
    async def reindex(who: Who) -> dict[str, Any]:
        """Rebuild the store's vector index from the records; answers with the tenant's indexed count."""
        who.check_write()
        tenant_wide(who, "reindexing")

        def run() -> int:
            mem.reindex()
            return mem.store.count(who.tenant_id, filters=SearchFilters())

        return {"reindexed": await write(who, run, user_id=None)}

    @app.get("/v1/export", tags=["tenant"], response_class=StreamingResponse,
             responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    async def export(who: Who, user_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
                     include_embeddings: bool = False, include_deleted: bool = False) -> StreamingResponse:
        """Stream memories (one user's, or the tenant's) and their windows as portable JSON lines."""
        if user_id is None:
            tenant_wide(who, "an export of the whole tenant")
        else:
            who.check_user(user_id)
        every_agent(who, "an export")
        pipe = _Pipe()
        outcome: dict[str, BaseException] = {}

        def produce() -> None:
            try:
                with acting_as(who.key_id):
                    mem.export(pipe, user_id=user_id, include_embeddings=include_embeddings,
                               include_deleted=include_deleted, tenant_id=who.tenant_id)
                pipe.push(final=True)
            except BrokenPipeError:
                pass
            except BaseException as exc:  # reaches the client before the first byte, or ends the stream
                outcome["error"] = exc
                pipe.chunks.put(None)

        threading.Thread(target=produce, name="portamem-export", daemon=True).start()
        first = await asyncio.to_thread(pipe.chunks.get)
        if first is None and "error" in outcome:
            raise outcome["error"]
        q.note_read("read.export", tenant_id=who.tenant_id, user_id=user_id, detail={})

        async def stream() -> AsyncIterator[bytes]:
            try:
                chunk = first
                while chunk is not None:
                    yield chunk.encode()
                    chunk = await asyncio.to_thread(pipe.chunks.get)
            finally:
                pipe.gone.set()

        return StreamingResponse(stream(), media_type="application/x-ndjson")

    @app.post("/v1/import", tags=["tenant"], openapi_extra={"requestBody": {
        "required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    async def import_(request: Request, who: Who,
                      on_conflict: Literal["error", "skip", "replace"] = "error",
                      trusted: bool = False) -> dict[str, Any]:
        """Read an export back into the key's tenant, all or nothing (the body is streamed to a spool file);
        ``trusted`` keeps the file's source, trust and status (a restore of the tenant's own backup)."""
        who.check_write()
        tenant_wide(who, "an import")
        every_agent(who, "an import")  # the file's records name any agent
        # line by line as it arrives: the header judged first, no line held whole (limits.spool_import)
        spool = await spool_import(request.stream(), max_bytes=MAX_IMPORT_BYTES, max_line=state.max_body_bytes)

        def run() -> int:
            with spool, io.TextIOWrapper(spool, encoding="utf-8", errors="strict") as text:
                try:
                    return mem.import_(text, tenant_id=who.tenant_id, on_conflict=on_conflict, trusted=trusted)
                except UnicodeDecodeError as exc:
                    raise ValidationError(f"an import must be UTF-8 JSON lines: {exc}") from exc

        return {"imported": await write(who, run, user_id=None)}

    mount_inspector(app, state, read=read, write=write)
    return app
