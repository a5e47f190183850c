"""What a request must pass before the application sees it: an allowed ``Host``, a key, a bounded body.

``Guard`` is a plain ASGI middleware in front of everything (API, ``/ui``, ``/metrics``):

- **Host allow-list** (the DNS-rebinding defence, as ``portamem mcp --transport http`` has): a server
  on a loopback address takes only the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``, any
  port) and the names given in ``Settings.server_allowed_hosts`` / ``portamem serve --allowed-host``;
  any other ``Host`` is answered 421 ``HostNotAllowedError``. A web page that rebinds its own name to
  127.0.0.1 so reaches nothing. A server on another address needs keys anyway, and checks the Host
  only when a list is given. Any server refuses (421) a request with more than one ``Host`` header,
  which a proxy and this server could each read differently; a ``Host`` that is no ``name[:port]``
  or ``[address][:port]`` (``[::1]evil.example``) matches no name.
- **Body limit**: a ``Content-Length`` over the limit is answered 413 ``PayloadTooLargeError`` at
  once; a body without one (chunked) is read here, counted as it arrives, and refused the moment it
  passes the limit. Either way nothing of it was parsed; a body within the limit reaches the
  application from memory. The import route streams its body to a spool file itself and has its own
  limit (``MAX_IMPORT_BYTES``), counted here as it passes (``spool_import`` reads it line by line).
- **Key first**: every route but the public ones (``PUBLIC``: health, the schema, ``/ui``, whose
  forms carry a session cookie and are held to ``UI_BODY_BYTES``) needs its key checked from the
  headers before one byte of the body is read: a request without a valid key is answered 401 at once
  and its body is dropped unread by the HTTP server as it arrives, so it costs no memory. The
  principal found is handed to the route (``request.state.principal``), which does not check the key again.
- **Shape** (``shape.check``): a JSON body read whole is judged from its bytes before it is parsed: more
  values than ``shape.MAX_VALUES``, nesting deeper than ``shape.MAX_DEPTH`` or a string longer than
  ``shape.MAX_STRING_BYTES`` is answered 413 ``PayloadTooLargeError``, and what it will cost parsed
  (``Shape.cost``, many small values costing far more than their bytes) is charged to the budget below.
- **Bytes in flight** (``Budget``): the bodies of every request together, from the moment they are
  read until the request is answered (parsing and handling cost a multiple of a body), stay within
  ``Settings.server_max_inflight_bytes``. A request that would pass it waits, without reading its
  body (the bytes stay in the client's socket), up to ``BUDGET_WAIT_S``, then is answered 429
  ``OverloadedError`` with ``Retry-After``: the answer both clients already retry, and the one that
  says "not now" rather than "never" (413) or "broken" (503). Waiting first lets a burst of honest
  clients through one after the other instead of refusing them.

Every answer carries the API's typed error body, ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import IO, Any

from ..errors import (
    AuthenticationError,
    HostNotAllowedError,
    ImportFormatError,
    OverloadedError,
    PayloadTooLargeError,
    PortamemError,
)
from ..portable import wire
from ..portable.transfer import EXPORT_FORMAT
from .shape import Shape
from .shape import check as check_shape

__all__ = ["Budget", "Guard", "HostPolicy", "LOOPBACK_NAMES", "MAX_IMPORT_BYTES", "PRINCIPAL", "PUBLIC", "host_name",
           "request_token", "spool_import"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the names a loopback server always answers to, with any port
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: largest import body taken (spooled to disk past 8 MiB)
MAX_IMPORT_BYTES = 512 * 1024 * 1024
#: routes whose body the route streams itself, with their own limit
STREAMED = {"/v1/import": MAX_IMPORT_BYTES}
#: routes answered without a key: liveness and the API's schema and documentation pages
PUBLIC = frozenset({"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
#: the inspector (``/ui``) logs in with a key posted in a form and then goes by a session cookie that it
#: checks itself: its forms are small, so its bodies are held to this
UI_BODY_BYTES = 64 * 1024
#: where the guard leaves the checked key's principal for the route (``request.state.principal``)
PRINCIPAL = "principal"
#: how long a request waits for room in the bytes-in-flight budget before its 429
BUDGET_WAIT_S = 5.0
#: the longest first line of an import read before it is judged (a portamem-export header is ~300 bytes)
IMPORT_HEADER_BYTES = 64 * 1024
#: what an import spools in memory before its spool file goes to disk
IMPORT_SPOOL_MEMORY = 1024 * 1024
#: a body shorter than this is judged by its shape in the event loop (a 64 KiB scan takes about 2 ms)
SCAN_INLINE_BYTES = 64 * 1024
#: how much of a refused body is still read (and dropped) before the answer, so that a client still
#: sending reads the 413 instead of a reset connection (a client sends its whole body before it reads); past
#: this the connection is just closed
DRAIN_BYTES = 128 * 1024 * 1024


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port, lower case (``[::1]:8765`` -> ``::1``); a header
    that is no ``name[:port]`` or ``[address][:port]`` is returned whole, so it matches no name
    (``[::1]evil.example`` is not ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1:] if end > 0 else ""
        if end > 0 and (not rest or rest[0] == ":" and rest[1:].isdigit()):
            return host[1:end]
        return host
    name, sep, port = host.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else host


@dataclass(frozen=True)
class HostPolicy:
    """The ``Host`` names a server answers to: ``names`` with any port, ``exact`` as ``name:port`` only."""

    names: frozenset[str] = LOOPBACK_NAMES
    exact: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, allowed: Iterable[str] | None, *, loopback: bool) -> HostPolicy | None:
        """The policy of a server: loopback names plus ``allowed`` on a loopback address; on another
        address ``allowed`` alone, or none (every Host) when no list is given."""
        given = [h.strip().lower() for h in (allowed or ()) if h.strip()]
        if not loopback and allowed is None:
            return None
        names = set(LOOPBACK_NAMES) if loopback else set()
        exact = set()
        for h in given:
            if h.startswith("[") and "]:" in h or (h.count(":") == 1 and h.rpartition(":")[2].isdigit()):
                exact.add(h)
            else:
                names.add(h.strip("[]"))
        return cls(frozenset(names), frozenset(exact))

    def allows(self, host: str | None) -> bool:
        if not host:
            return False
        host = host.strip().lower()
        return host in self.exact or host_name(host) in self.names


def _error(exc: PortamemError) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(wire.error_body(exc)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if isinstance(exc, AuthenticationError):
        headers.append((b"www-authenticate", b"Bearer"))
    if isinstance(exc, OverloadedError):
        headers.append((b"retry-after", b"1"))
    if isinstance(exc, PayloadTooLargeError):
        headers.append((b"connection", b"close"))
    # otherwise the connection is kept: the HTTP server then drops what is left of the body as it comes,
    # holding none of it, and closes the connection when it idles
    return wire.status_for(exc), headers, body


def request_token(headers: dict[bytes, bytes]) -> str | None:
    """The API key a request presents: ``Authorization: Bearer <key>``, else ``X-API-Key`` (as the
    routes read it)."""
    auth = headers.get(b"authorization", b"").decode("latin-1").strip()
    scheme, _, credentials = auth.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    key = headers.get(b"x-api-key", b"").decode("latin-1").strip()
    return key or None


def is_public(path: str) -> bool:
    """Whether ``path`` is answered without an API key (``PUBLIC`` and the inspector's ``/ui``)."""
    return path in PUBLIC or path == "/ui" or path.startswith("/ui/")


class Budget:
    """The request bytes held by every request together, bounded: ``take`` waits for room (up to
    ``wait_s``), ``give`` returns it. Counted per server process, in its event loop."""

    def __init__(self, capacity: int, *, wait_s: float = BUDGET_WAIT_S) -> None:
        self.capacity = capacity
        self.wait_s = wait_s
        self.held = 0
        #: the most held at once, and the requests refused for want of room (tests, stats)
        self.peak = 0
        self.refused = 0
        self._room: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._room is None:
            self._room = asyncio.Condition()
        return self._room

    async def take(self, n: int) -> int:
        """Hold ``n`` bytes (at most the whole budget); the bytes held, or OverloadedError after ``wait_s``."""
        n = max(0, min(n, self.capacity))
        if not n:
            return 0
        room = self._cond()
        deadline = time.monotonic() + self.wait_s
        async with room:
            while self.held + n > self.capacity:
                left = deadline - time.monotonic()
                try:
                    if left <= 0:
                        raise asyncio.TimeoutError
                    await asyncio.wait_for(room.wait(), left)
                except asyncio.TimeoutError:
                    self.refused += 1
                    raise OverloadedError(
                        f"the server holds {self.held} bytes of requests already, its limit "
                        f"(Settings.server_max_inflight_bytes, {self.capacity}); retry after a short pause") from None
            self.held += n
            self.peak = max(self.peak, self.held)
        return n

    async def give(self, n: int) -> None:
        if not n:
            return
        # returned before any await: a request cancelled while waiting for the lock below would
        # otherwise keep its bytes for good, and the budget would shrink until every request is refused
        self.held -= n
        room = self._cond()
        async with room:
            room.notify_all()


class Guard:
    """The ASGI middleware of the module docstring."""

    def __init__(self, app: ASGIApp, *, hosts: HostPolicy | None, max_body_bytes: int,
                 streamed: dict[str, int] | None = None,
                 on_refused: Callable[[Scope, int], None] | None = None,
                 authenticate: Callable[[str | None], Awaitable[Any]] | None = None,
                 budget: Budget | None = None) -> None:
        self.app = app
        self.hosts = hosts
        self.max_body_bytes = max_body_bytes
        self.streamed = STREAMED if streamed is None else streamed
        #: told of each request refused here (the metrics count them)
        self.on_refused = on_refused
        #: checks a request's key (None when it presents none); raises AuthenticationError. None: no check
        self.authenticate = authenticate
        self.budget = budget
        self._scanning: asyncio.Lock | None = None

    async def _refuse(self, scope: Scope, send: Send, exc: PortamemError) -> None:
        status, headers, body = _error(exc)
        if self.on_refused is not None:
            self.on_refused(scope, status)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = scope.get("headers", ())
        headers = {k.lower(): v for k, v in raw}
        hosts = sum(1 for k, _ in raw if k.lower() == b"host")
        if hosts > 1 or self.hosts is not None:
            host = headers.get(b"host", b"").decode("latin-1")
            if hosts > 1 or not self.hosts.allows(host):  # type: ignore[union-attr]
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await self._refuse(scope, send, HostNotAllowedError(
                    f"a request carries one Host header, {hosts} here" if hosts > 1 else
                    f"this server does not answer to Host {host!r}: it takes loopback names and those given with "
                    "--allowed-host (Settings.server_allowed_hosts)"))
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = self.streamed.get(path, self.max_body_bytes)
        if path == "/ui" or path.startswith("/ui/"):
            limit = min(limit, UI_BODY_BYTES)
        length = headers.get(b"content-length")
        declared: int | None = None
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared > limit:
                if declared <= DRAIN_BYTES and headers.get(b"expect", b"").lower() != b"100-continue":
                    await _drain(receive, declared)
                await self._refuse(scope, send, _too_large(limit))
                return
        if self.authenticate is not None and not is_public(path):
            try:  # from the headers alone: nothing of the body was read
                who = await self.authenticate(request_token(headers))
            except PortamemError as exc:
                await self._refuse(scope, send, exc)
                return
            scope["state"] = {**(scope.get("state") or {}), PRINCIPAL: who}  # the route's, unchecked again
        if path in self.streamed:
            # a streamed route holds a spool's worth in memory at most, whatever its size
            await self._held(scope, send, min(IMPORT_SPOOL_MEMORY, limit if declared is None else max(declared, 0)),
                             lambda: self._streamed(scope, receive, send, limit))
            return
        if declared is not None and declared >= 0:
            await self._held(scope, send, declared,
                             lambda: self._buffered(scope, receive, send, limit, None, held=declared))
        else:  # no length (chunked): held as it arrives
            await self._buffered(scope, receive, send, limit, self.budget)

    async def _held(self, scope: Scope, send: Send, n: int, run: Callable[[], Awaitable[None]]) -> None:
        """``run`` while ``n`` bytes of the budget are held (429 when no room comes in time)."""
        if self.budget is None:
            await run()
            return
        try:
            taken = await self.budget.take(n)
        except OverloadedError as exc:
            await self._refuse(scope, send, exc)
            return
        try:
            await run()
        finally:
            await self.budget.give(taken)

    async def _buffered(self, scope: Scope, receive: Receive, send: Send, limit: int, budget: Budget | None,
                        held: int = 0) -> None:
        """Read the whole body here, counting: past the limit nothing reaches the application. With a
        ``budget`` (a body of no announced length) each chunk is held from it as it arrives; ``held``,
        the bytes the caller holds for it already. A JSON body is then judged by its shape (``shape.check``:
        413 past its bounds) and the budget charged what it costs parsed (``Shape.cost``), beyond what is held."""
        chunks: list[bytes] = []
        size = 0
        taken = 0
        extra = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    chunks.clear()
                    if message.get("more_body", False):
                        await _drain(receive, DRAIN_BYTES)
                    await self._refuse(scope, send, _too_large(limit))
                    return
                if budget is not None and chunk:
                    try:
                        taken += await budget.take(len(chunk))
                    except OverloadedError as exc:
                        chunks.clear()
                        await self._refuse(scope, send, exc)
                        return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)
            chunks.clear()
            if body and self.measured(scope):
                try:
                    cost = (await self._shape(body)).cost
                    if self.budget is not None:  # what it costs parsed, past its bytes (never more than all)
                        extra = await self.budget.take(min(cost, self.budget.capacity) - held - taken)
                except PortamemError as exc:
                    await self._refuse(scope, send, exc)
                    return
            delivered = False

            async def replay() -> Message:
                nonlocal delivered
                if not delivered:
                    delivered = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()  # after the body: the client's disconnect, when it comes

            await self.app(scope, replay, send)
        finally:
            if budget is not None:
                await budget.give(taken)
            if extra and self.budget is not None:
                await self.budget.give(extra)

    def measured(self, scope: Scope) -> bool:
        """Whether a body is JSON judged by its shape: every route's but the inspector's forms (``UI_BODY_BYTES``)."""
        path = scope.get("path", "")
        return not (path == "/ui" or path.startswith("/ui/"))

    async def _shape(self, body: bytes) -> Shape:
        """``shape.check`` of ``body``: a large one in a worker thread, one at a time (a scan holds a few
        arrays of half a MiB), so the event loop keeps answering."""
        if len(body) < SCAN_INLINE_BYTES:
            return check_shape(body)
        if self._scanning is None:
            self._scanning = asyncio.Lock()
        async with self._scanning:
            return await asyncio.to_thread(check_shape, body)

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """A route that streams its body: counted as it passes; past the limit the route reads an error
        (``PayloadTooLargeError``, answered 413 by the API's error handler)."""
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, counted, send)


async def _drain(receive: Receive, most: int) -> None:
    """Read and drop what the client still sends of a refused body, ``most`` bytes at most."""
    seen = 0
    while seen <= most:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"the request body is larger than this server takes ({limit} bytes; "
                                "Settings.server_max_body_bytes)")


async def spool_import(chunks: AsyncIterator[bytes], *, max_bytes: int, max_line: int) -> IO[bytes]:
    """An import body from ``chunks`` into a spool file (on disk past ``IMPORT_SPOOL_MEMORY``), read as a
    stream: its first line is judged as soon as it ends (``ImportFormatError`` when it is no
    portamem-export header, ``PayloadTooLargeError`` when it runs past ``IMPORT_HEADER_BYTES``), and any
    line longer than ``max_line`` bytes, or a body past ``max_bytes``, is refused (413) the moment it
    does, so no line is ever held whole. Returns the spool, rewound."""
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=IMPORT_SPOOL_MEMORY, mode="w+b")
    size = line = 0
    lineno = 1
    header: bytearray | None = bytearray()  # None once the header was judged
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise PayloadTooLargeError(f"an import body is limited to {max_bytes} bytes; nothing was imported")
            at = 0
            while True:
                nl = chunk.find(b"\n", at)
                stop = len(chunk) if nl < 0 else nl
                line += stop - at
                if header is not None:
                    if line > IMPORT_HEADER_BYTES:
                        raise PayloadTooLargeError(
                            f"line {lineno} of the import is past {IMPORT_HEADER_BYTES} bytes and not ended: no "
                            f"{EXPORT_FORMAT} header is that long; nothing was imported")
                    header += chunk[at:stop]
                elif line > max_line:
                    raise PayloadTooLargeError(
                        f"line {lineno} of the import is longer than {max_line} bytes, the most one line may hold "
                        "(Settings.server_max_body_bytes); nothing was imported")
                if nl < 0:
                    break
                if header is not None and header.strip():
                    _check_header(bytes(header))
                    header = None
                elif header is not None:
                    header.clear()  # a blank line before the header, as the import itself skips
                line, lineno, at = 0, lineno + 1, nl + 1
            spool.write(chunk)
        if header:
            _check_header(bytes(header))
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def _check_header(raw: bytes) -> None:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        obj = None
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"line 1 is not a {EXPORT_FORMAT} header; nothing was imported")
