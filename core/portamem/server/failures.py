"""How the server logs and answers a request that failed inside it: a request id, the error's type and
a short message, never an SQL statement or a bound value.

SQLAlchemy's exception text carries the whole statement and every parameter (the tenant, the user, a
filter's values, a saved text): six failed requests once wrote 13 MB of them to the log. A failure is
logged as one line instead: the route template (never the path or query, which name users and
memories), the request id the client also reads (``X-Request-Id`` and the error message), the error's
type, the first line of its message with quoted literals masked, cut to ``MESSAGE_CHARS``, and the
deepest line of portamem's code it passed. No traceback is logged, since each of its exceptions would print its text.

``Failures`` is the outermost middleware: an exception no route handler turned into an answer is answered
500 here and goes no further, so the HTTP server does not log it (with its traceback) a second time.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import traceback
from pathlib import Path
from typing import Any

from ..errors import PortamemError
from ..portable import wire

__all__ = ["Failures", "REQUEST_ID", "describe", "log_failure"]

log = logging.getLogger("portamem.server.app")

#: the header a failed request's answer carries its request id in
REQUEST_ID = "X-Request-Id"
#: the most characters of an error's message logged
MESSAGE_CHARS = 200
#: a quoted literal in a database's message ('abc', "abc"), which may be a bound value
_PACKAGE = "portamem"
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def describe(exc: BaseException) -> str:
    """``Type: message (file:line in function)`` of ``exc``, without statements or parameters.

    A SQLAlchemy error is described by its driver's error (``exc.orig``), whose first line holds no
    statement; any message is cut at its first line (SQLAlchemy's own text puts the statement and the
    parameters on the lines after) and its quoted literals are masked."""
    orig = getattr(exc, "orig", None)
    name = type(exc).__name__ if orig is None else f"{type(exc).__name__} ({type(orig).__module__}.{type(orig).__name__})"
    text = str(orig if orig is not None else exc).strip().split("\n", 1)[0]
    text = _QUOTED.sub("'…'", text)
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + "…"
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if _PACKAGE in Path(f.filename).parts] or frames  # the deepest line of portamem's
    where = f" ({Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name})" if ours else ""
    return f"{name}: {text}{where}" if text else f"{name}{where}"


def _operation(scope: Any) -> str:
    route = scope.get("route")
    return f"{scope.get('method', '')} {getattr(route, 'path', None) or '(unmatched)'}"


def log_failure(scope: Any, exc: BaseException) -> str:
    """Log ``exc`` as the failure of the request of ``scope`` (``describe``); its new request id."""
    request_id = secrets.token_hex(8)
    log.error("%s failed, request id %s: %s", _operation(scope), request_id, describe(exc))
    return request_id


class Failures:
    """The ASGI middleware of the module docstring."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            request_id = log_failure(scope, exc)
            if started:  # a stream cut short: the client sees the connection end
                return
            body = json.dumps(wire.error_body(PortamemError(
                f"internal error: {type(exc).__name__} (request id {request_id})"))).encode()
            await send({"type": "http.response.start", "status": 500, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (REQUEST_ID.lower().encode(), request_id.encode())]})
            await send({"type": "http.response.body", "body": body})
