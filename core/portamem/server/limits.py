"""What a request must pass before the application sees it: an allowed ``Host`` and a bounded body.

``Guard`` is a plain ASGI middleware in front of everything (API, ``/ui``, ``/metrics``):

- **Host allow-list** (the DNS-rebinding defence, as ``portamem mcp --transport http`` has): a server
  on a loopback address takes only the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``, any
  port) and the names given in ``Settings.server_allowed_hosts`` / ``portamem serve --allowed-host``;
  any other ``Host`` is answered 421 ``HostNotAllowedError``. A web page that rebinds its own name to
  127.0.0.1 so reaches nothing. A server on another address needs keys anyway, and checks the Host
  only when a list is given.
- **Body limit**: a ``Content-Length`` over the limit is answered 413 ``PayloadTooLargeError`` at
  once; a body without one (chunked) is read here, counted as it arrives, and refused the moment it
  passes the limit. Either way nothing of it was parsed and its key was not checked yet; a body within
  the limit reaches the application from memory. The import route streams its body to a spool file
  itself and has its own limit (``MAX_IMPORT_BYTES``), counted here as it passes.

Both answers carry the API's typed error body, ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import HostNotAllowedError, PayloadTooLargeError, PortamemError
from ..portable import wire

__all__ = ["Guard", "HostPolicy", "LOOPBACK_NAMES", "MAX_IMPORT_BYTES", "host_name"]

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
#: how much of a refused body is still read (and dropped) before the answer, so that a client still
#: sending reads the 413 instead of a reset connection (a client sends its whole body before it reads); past
#: this the connection is just closed
DRAIN_BYTES = 128 * 1024 * 1024


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port, lower case (``[::1]:8765`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
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
    return wire.status_for(exc), [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                  (b"connection", b"close")], body


class Guard:
    """The ASGI middleware of the module docstring."""

    def __init__(self, app: ASGIApp, *, hosts: HostPolicy | None, max_body_bytes: int,
                 streamed: dict[str, int] | None = None,
                 on_refused: Callable[[Scope, int], None] | None = None) -> None:
        self.app = app
        self.hosts = hosts
        self.max_body_bytes = max_body_bytes
        self.streamed = STREAMED if streamed is None else streamed
        #: told of each request refused here (the metrics count them)
        self.on_refused = on_refused

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
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        if self.hosts is not None:
            host = headers.get(b"host", b"").decode("latin-1")
            if not self.hosts.allows(host):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await self._refuse(scope, send, HostNotAllowedError(
                    f"this server does not answer to Host {host!r}: it takes loopback names and those given with "
                    "--allowed-host (Settings.server_allowed_hosts)"))
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.streamed.get(scope.get("path", ""), self.max_body_bytes)
        length = headers.get(b"content-length")
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
        if scope.get("path", "") in self.streamed:
            await self._streamed(scope, receive, send, limit)
            return
        # read the whole body here, counting: past the limit nothing reaches the application
        chunks: list[bytes] = []
        size = 0
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
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect, when it comes

        await self.app(scope, replay, send)

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
