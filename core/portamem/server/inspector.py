"""The memory inspector at ``/ui``: server-rendered pages over the same Memory calls, keys and audit as the API.

A browser cannot send an ``Authorization`` header on a page load, so the key is posted once to
``/ui/login`` and stays in this process's session table; the browser holds only a random session
id in an ``HttpOnly``, ``SameSite=Strict`` cookie scoped to ``/ui`` (no key in a URL, in script
reach or in browser storage). Every request authenticates the session's key again (from the key
cache), so a revoked key closes its sessions within half a second. A change (confirm, reject, restore, logout) is a POST that must
carry the session's CSRF token and, where the browser sends one, a same-origin ``Origin``; it runs
through the write queue as its key, so the audit names the key that did it. A key bound to agents
reads here what it reads over the API (one of its agents' memories and the shared layer) and changes
only its agents' own. Pages send a CSP that allows no inline script or style, a second wall behind the
escaping of ``pages.el``.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..errors import AuthenticationError, NotFoundError, PermissionDeniedError, PortamemError, ValidationError
from ..portable import wire
from ..read.prompt import format_memories
from ..records import MemoryType, Status
from . import pages
from .auth import Principal

if TYPE_CHECKING:
    from .state import ServerState

__all__ = ["mount_inspector", "UiSessions", "COOKIE"]

COOKIE = "portamem_ui"
#: largest form body taken (a key, a CSRF token and a few ids)
MAX_FORM_BYTES = 16 * 1024
#: memories a timeline shows at most
TIMELINE_LIMIT = 1000

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make a browser send "Origin: null"
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
_STATIC = {"inspector.css": "text/css; charset=utf-8", "inspector.js": "text/javascript; charset=utf-8"}
_DONE = {"confirm": "Memory confirmed: it is active now.", "reject": "Memory forgotten (restorable until purged).",
         "restore": "Memory restored."}

Read = Callable[..., Awaitable[Any]]
Write = Callable[..., Awaitable[Any]]


@dataclass
class _Session:
    token: str
    csrf: str
    seen: float


class UiSessions:
    """Session id -> the key it logged in with; bounded in number and idle time, kept in memory only."""

    def __init__(self, *, idle_s: float = 8 * 3600, limit: int = 1024) -> None:
        self.idle_s, self.limit = idle_s, limit
        self._rows: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, token: str) -> tuple[str, _Session]:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._rows) >= self.limit:
                self._rows.popitem(last=False)
            self._rows[sid] = _Session(token, secrets.token_urlsafe(32), time.monotonic())
            return sid, self._rows[sid]

    def get(self, sid: str | None) -> _Session | None:
        if not sid:
            return None
        with self._lock:
            row = self._rows.get(sid)
            if row is None:
                return None
            now = time.monotonic()
            if now - row.seen > self.idle_s:
                del self._rows[sid]
                return None
            row.seen = now
            self._rows.move_to_end(sid)
            return row

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._rows.pop(sid or "", None)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers=_HEADERS)


def _to_login() -> RedirectResponse:
    return RedirectResponse("/ui", status_code=303, headers=_HEADERS)


def _static(name: str) -> bytes:
    return (resources.files("portamem.server") / "static" / name).read_bytes()


def _local_time(name: str, value: str) -> str | None:
    """A ``datetime-local`` field (read as UTC) as an ISO time; blank is no bound."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{name} must be a date and time (YYYY-MM-DDTHH:MM), got {value!r}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).isoformat()


def timeline_filters(params: dict[str, str]) -> dict[str, Any]:
    """The ``list_memories`` filters of the timeline's form; Memory checks the values themselves."""
    out: dict[str, Any] = {"statuses": [params["status"]] if params.get("status")
                           else [Status.ACTIVE.value, Status.PENDING.value]}
    if params.get("type"):
        out["types"] = [params["type"]]
    if params.get("agent"):
        out["agent_id"] = params["agent"]
    for field, name in (("created_after", "since"), ("created_before", "until")):
        bound = _local_time(name, params.get(name, ""))
        if bound is not None:
            out[field] = bound
    return out


def mount_inspector(app: FastAPI, state: ServerState, *, read: Read, write: Write) -> UiSessions:
    """Add the ``/ui`` routes to the API's app; ``read``/``write`` are the API's own audited call paths."""
    mem, sessions = state.memory, UiSessions()
    static = {name: _static(name) for name in _STATIC}

    async def principal(request: Request) -> tuple[Principal, str, _Session]:
        sid = request.cookies.get(COOKIE)
        row = sessions.get(sid)
        if row is None:
            raise AuthenticationError("log in first")
        try:
            who = await asyncio.to_thread(state.authenticate, row.token or None)
        except AuthenticationError:
            sessions.close(sid)
            raise
        return who, sid or "", row

    def keyless() -> bool:
        """Whether the server takes requests without a key (started ``--keyless``, loopback only)."""
        return bool(state.open_access and state.keyless)

    def frame(who: Principal, row: _Session, params: dict[str, str]) -> dict[str, Any]:
        return {"csrf": row.csrf, "who": who.key_id, "notice": _DONE.get(params.get("done", ""))}

    def page_route(path: str) -> Callable[[Callable[..., Awaitable[str]]], Any]:
        """A GET page: logged-in principal in, HTML out; typed errors become an HTML page of their status."""
        def register(fn: Callable[..., Awaitable[str]]) -> Any:
            async def route(request: Request) -> Response:
                params = dict(request.query_params)
                try:
                    who, _, row = await principal(request)
                    if "user" in params:
                        if not params["user"].strip():
                            raise ValidationError("user must not be blank")
                        who.check_user(params["user"])
                    return _html(await fn(who, params, frame(who, row, params)))
                except AuthenticationError:
                    return _to_login()
                except PortamemError as exc:
                    return _html(pages.error_page(wire.status_for(exc), str(exc)), wire.status_for(exc))
            route.__name__, route.__doc__ = fn.__name__, fn.__doc__  # not functools.wraps: FastAPI would read fn's signature
            app.add_api_route(path, route, methods=["GET"], include_in_schema=False)
            return route
        return register

    async def form(request: Request, row: _Session | None) -> dict[str, str]:
        """A POSTed form, refused when it comes from another origin or lacks the session's CSRF token."""
        origin = request.headers.get("origin")
        if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
            raise PermissionDeniedError("a form of another origin was refused")
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise PermissionDeniedError("a cross-site form was refused")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise ValidationError("form too large")
        try:
            fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
        except UnicodeDecodeError:
            raise ValidationError("a form must be UTF-8") from None
        if row is not None and not hmac.compare_digest(fields.get("csrf", ""), row.csrf):
            raise PermissionDeniedError("the form's CSRF token is missing or stale: reload the page")
        return fields

    @app.get("/ui", include_in_schema=False)
    async def home(request: Request) -> Response:
        """The login form, or the users the key may inspect."""
        try:
            who, _, row = await principal(request)
        except AuthenticationError:
            return _html(pages.login_page(open_access=await asyncio.to_thread(keyless)))
        if who.users is not None:
            users: list[str] = sorted(who.users)
        else:
            users = await read(who, "read.users", lambda user_id: mem.user_ids(tenant_id=who.tenant_id),
                               user_id=None)
        return _html(pages.home_page(users, **frame(who, row, {})))

    @app.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        try:
            fields = await form(request, None)
            token = fields.get("key", "").strip()
            await asyncio.to_thread(state.authenticate, token or None)
        except PortamemError as exc:
            return _html(pages.login_page(open_access=await asyncio.to_thread(keyless), error=str(exc)),
                         wire.status_for(exc))
        sid, _ = sessions.open(token)
        response = RedirectResponse("/ui", status_code=303, headers=_HEADERS)
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/ui",
                            secure=request.url.scheme == "https")
        return response

    @app.post("/ui/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        sid = request.cookies.get(COOKIE)
        row = sessions.get(sid)
        if row is not None:
            try:
                await form(request, row)
            except PortamemError as exc:
                return _html(pages.error_page(wire.status_for(exc), str(exc)), wire.status_for(exc))
            sessions.close(sid)
        response = _to_login()
        response.delete_cookie(COOKIE, path="/ui")
        return response

    @app.get("/ui/static/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in static:
            raise NotFoundError(f"no asset {name!r}")
        return Response(static[name], media_type=_STATIC[name],
                        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"})

    @page_route("/ui/memories")
    async def timeline(who: Principal, params: dict[str, str], fr: dict[str, Any]) -> str:
        user = params.get("user", "")
        if not user:
            raise ValidationError("say which user (?user=...)")
        if params.get("type") and params["type"] not in {t.value for t in MemoryType}:
            raise ValidationError(f"unknown type {params['type']!r}")
        records = await read(who, "read.list", mem.list_memories, user_id=user, tenant_id=who.tenant_id,
                             filters=who.reading(timeline_filters(params)), limit=TIMELINE_LIMIT)
        windows: dict[str, Any] = {}
        if params.get("type") in (None, "", "working") and not any(
                params.get(k) for k in ("status", "agent", "since", "until")):
            windows = await read(who, "read.context", lambda user_id: {
                sid: mem.context(user_id=user_id, session_id=sid, tenant_id=who.tenant_id)
                for sid in mem.store.session_ids(who.tenant_id, user_id)}, user_id=user)
        return pages.timeline_page(user, records, params, windows, **fr)

    @page_route("/ui/search")
    async def search(who: Principal, params: dict[str, str], fr: dict[str, Any]) -> str:
        user, query = params.get("user", ""), params.get("q", "")
        if not user:
            raise ValidationError("say which user (?user=...)")
        if not query.strip():
            return pages.search_page(user, "", None, "", **fr)
        hits = await read(who, "read.search", mem.search_memory, query, user_id=user, tenant_id=who.tenant_id,
                          filters=who.reading(None))
        return pages.search_page(user, query, hits, format_memories(hits), **fr)

    @page_route("/ui/memory")
    async def explanation(who: Principal, params: dict[str, str], fr: dict[str, Any]) -> str:
        user, memory_id = params.get("user", ""), params.get("id", "")
        if not user or not memory_id:
            raise ValidationError("say which user and memory (?user=...&id=...)")

        def readable(user_id: str) -> Any:
            why = mem.explain(memory_id, user_id=user_id, tenant_id=who.tenant_id)
            if not who.may_read(why.record):
                raise NotFoundError(f"no memory {memory_id!r}")
            return why

        why = await read(who, "read.explain", readable, user_id=user, detail={"memory_id": memory_id})
        return pages.explanation_page(user, why, **fr)

    @page_route("/ui/review")
    async def review(who: Principal, params: dict[str, str], fr: dict[str, Any]) -> str:
        user = params.get("user", "")
        if not user:
            raise ValidationError("say which user (?user=...)")
        findings = await read(who, "read.audit", mem.audit_scan, user_id=user, tenant_id=who.tenant_id,
                              include_quarantined=True)
        findings = [f for f in findings if who.may_read(f.record)]
        rejected = await read(who, "read.list", mem.list_memories, user_id=user, tenant_id=who.tenant_id,
                              filters=who.reading({"statuses": [Status.DELETED.value]}), limit=200)
        rejected.sort(key=lambda r: r.deleted_at or r.updated_at, reverse=True)
        return pages.review_page(user, findings, rejected, **fr)

    actions: dict[str, Callable[[Principal, str, str], Any]] = {
        "confirm": lambda who, user, mid: mem.confirm_memory(mid, user_id=user, tenant_id=who.tenant_id),
        "reject": lambda who, user, mid: mem.forget_memory([mid], user_id=user, tenant_id=who.tenant_id),
        "restore": lambda who, user, mid: mem.restore_memory(mid, user_id=user, tenant_id=who.tenant_id),
    }

    def acted(who: Principal, user: str, mid: str, action: str) -> Any:
        """``action`` on a memory the key may change: a key bound to agents only its agents' own."""
        if who.agents is not None and mem.get_memory(mid, user_id=user, tenant_id=who.tenant_id).agent_id \
                not in who.agents:
            raise NotFoundError(f"no memory {mid!r}")
        return actions[action](who, user, mid)

    @app.post("/ui/act", include_in_schema=False)
    async def act(request: Request) -> Response:
        """Confirm, reject (forget) or restore one memory as the session's key, then back to the review queue."""
        try:
            who, _, row = await principal(request)
            fields = await form(request, row)
            user, mid, action = fields.get("user", ""), fields.get("id", ""), fields.get("action", "")
            if action not in actions or not user or not mid:
                raise ValidationError("an action needs user, id and one of confirm, reject, restore")
            who.check_write()
            if not who.may_act_for(user):
                raise NotFoundError(f"no memory {mid!r}")
            await write(who, lambda: acted(who, user, mid, action), user_id=user)
        except AuthenticationError:
            return _to_login()
        except PortamemError as exc:
            return _html(pages.error_page(wire.status_for(exc), str(exc)), wire.status_for(exc))
        return RedirectResponse(pages.href("/ui/review", user=user, done=action), status_code=303, headers=_HEADERS)

    return sessions
