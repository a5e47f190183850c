"""Who a server lets in, and what a request may cost it before it is let in.

- Keyless is a choice made once, at start (``--keyless``, loopback only, never with ``--allowed-host``):
  a server whose last key is revoked, or that never had one, refuses every caller without a key, and
  a rotation done as "revoke the old, then create the new" never opens it.
- The key is checked from the headers before any byte of the body is read; the bytes all requests
  hold at once are bounded (``limits.Budget``): a request past it waits, then gets 429.
- An import is read as a stream: the header is judged as soon as its line ends, and a line past the
  limit is refused the moment it passes it, never held whole.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from portamem import Memory, Settings
from portamem.errors import ConfigError, ImportFormatError, OverloadedError, PayloadTooLargeError
from portamem.server.auth import KeyStore
from portamem.server.commands import check_keyless
from portamem.server.limits import Budget, Guard, spool_import
from portamem_conformance.remote import ServerProcess, mint_key

MIB = 1024 * 1024
PROXY_NAME = "mem.example.com"


def _hostport(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", int(parts.port or 80)


# ---------------------------------------------------------------------- keyless is decided at start
@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The documented reverse-proxy set-up, started on a store with no key yet."""
    proc = ServerProcess(tmp_path_factory.mktemp("proxied") / "store", args=("--allowed-host", PROXY_NAME))
    yield proc
    proc.stop()


def _as_proxy(server: ServerProcess, key: str | None, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Host": PROXY_NAME, **({"Authorization": f"Bearer {key}"} if key else {})}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kw)


def _shut(server: ServerProcess) -> None:
    """Every door a keyless server would open stays shut to a caller without a key."""
    assert _as_proxy(server, None, "GET", "/v1/whoami").status_code == 401
    assert _as_proxy(server, None, "GET", "/v1/stats", params={"all_tenants": "true"}).status_code == 401
    assert _as_proxy(server, None, "GET", "/metrics").status_code == 401
    saved = _as_proxy(server, None, "POST", "/v1/memories", json={"user_id": "u", "content": "Opened up."})
    assert saved.status_code == 401 and saved.json()["error"]["type"] == "AuthenticationError"
    assert saved.headers.get("www-authenticate") == "Bearer"


def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_a_server_without_keys_stays_shut_through_revocation_and_rotation(proxied: ServerProcess) -> None:
    _shut(proxied)  # no key at all yet: shut, not open to loopback callers
    first = proxied.key("acme")
    me = _as_proxy(proxied, first, "GET", "/v1/whoami")
    assert me.status_code == 200 and me.json()["tenant_id"] == "acme"
    keys = KeyStore(proxied.db_url)
    try:
        keys.revoke(first.split("_")[1])  # the last key: the server must not fall back to keyless
        _until(lambda: _as_proxy(proxied, first, "GET", "/v1/whoami").status_code == 401)
        time.sleep(2 * 0.5)  # a few more polls of the key table
        _shut(proxied)
        second = proxied.key("acme")  # the rotation's "then create the new"
        assert _as_proxy(proxied, second, "GET", "/v1/whoami").status_code == 200
        _shut(proxied)
    finally:
        keys.close()


def test_the_allowed_host_is_served_with_a_key(proxied: ServerProcess) -> None:
    key = proxied.key("hosts")
    _, port = _hostport(proxied.url)
    for host in (f"127.0.0.1:{port}", "localhost", PROXY_NAME, f"MEM.example.com:{port}"):
        response = httpx.get(proxied.url + "/v1/whoami", headers={"Host": host, "Authorization": f"Bearer {key}"})
        assert response.status_code == 200 and response.json()["tenant_id"] == "hosts", host
    assert httpx.get(proxied.url + "/v1/whoami", headers={"Host": "rebind.example"}).status_code == 421


@pytest.mark.parametrize("host, allowed, message", [
    ("0.0.0.0", None, "not a loopback address"),
    ("192.168.1.20", None, "not a loopback address"),
    ("127.0.0.1", ["mem.example.com"], "--allowed-host"),
    ("::1", ["mem.example.com:443"], "--allowed-host"),
])
def test_keyless_is_refused_off_loopback_and_behind_a_proxy(tmp_path: Path, host: str, allowed: list[str] | None,
                                                           message: str) -> None:
    settings = Settings(path=str(tmp_path), server_keyless=True, server_allowed_hosts=allowed)
    with pytest.raises(ConfigError, match=message):
        check_keyless(settings, host)
    check_keyless(settings.replace(server_keyless=False), host)  # keyed: nothing to refuse here
    check_keyless(Settings(path=str(tmp_path), server_keyless=True), "127.0.0.1")


def test_serve_keyless_with_an_allowed_host_exits_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "portamem", "--path", str(tmp_path / "s"), "serve", "--port", "0",
                           "--keyless", "--allowed-host", PROXY_NAME], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--keyless" in done.stderr and "refused with --allowed-host" in done.stderr, done.stderr
    assert not (tmp_path / "s" / "server.json").exists()


def test_a_keyless_server_still_checks_a_key_that_is_sent(tmp_path: Path) -> None:
    path = tmp_path / "store"
    token = mint_key(Settings(path=str(path)).resolved_db_url, "acme")
    proc = ServerProcess(path, args=("--keyless",))
    try:
        assert "keyless" in "".join(proc.output)
        assert httpx.get(proc.url + "/v1/whoami").json()["key_id"] == "local"
        me = httpx.get(proc.url + "/v1/whoami", headers={"Authorization": f"Bearer {token}"}).json()
        assert me["tenant_id"] == "acme" and me["key_id"] == token.split("_")[1]
        wrong = token[:-4] + "AAAA"
        assert httpx.get(proc.url + "/v1/whoami", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
    finally:
        proc.stop()


# ---------------------------------------------------------------------- the key before the body
def test_a_request_without_a_key_is_answered_before_its_body_is_sent(server: ServerProcess) -> None:
    host, port = _hostport(server.url)
    with socket.create_connection((host, port), timeout=10) as sock:
        # the headers of a 4 MiB save, and not one byte of the body: the answer must not wait for it
        sock.sendall(f"POST /v1/memories HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {4 * MIB}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, "the server closed without an answer"
            data += chunk
    assert data.startswith(b"HTTP/1.1 401"), data[:200]


def test_a_request_has_its_key_checked_once(memory: Memory) -> None:
    """The guard checks the key and hands its principal to the route: one key lookup a request, for a
    read, a write with a body, an unknown route (404 with a key) and either header."""
    from fastapi.testclient import TestClient

    from portamem.server.app import ServerState, create_app

    keys = KeyStore(memory.settings.resolved_db_url)
    _, token = keys.create("once")
    state = ServerState(memory, keys, open_access=False)
    checked: list[str] = []
    lookup = state.key_cache.lookup
    state.key_cache.lookup = lambda t: (checked.append(t), lookup(t))[1]  # type: ignore[method-assign]
    calls = [("GET", "/v1/whoami", {}, 200),
             ("POST", "/v1/memories", {"json": {"user_id": "u", "content": "The kiln fires on Fridays."}}, 201),
             ("POST", "/v1/search", {"json": {"user_id": "u", "query": "kiln"}}, 200),
             ("GET", "/v1/nowhere", {}, 404)]
    try:
        with TestClient(create_app(state)) as client:
            for header in ({"Authorization": f"Bearer {token}"}, {"X-API-Key": token}):
                for method, path, kwargs, status in calls:
                    before = len(checked)
                    assert client.request(method, path, headers=header, **kwargs).status_code == status, path
                    assert checked[before:] == [token], (path, len(checked) - before)
            assert client.get("/v1/nowhere").status_code == 401
    finally:
        keys.close()


class _Received:
    """A receive() that counts how much of the body the application side asked for."""

    def __init__(self, body: bytes, *, pieces: int = 4) -> None:
        step = max(1, len(body) // pieces)
        self.parts = [body[i:i + step] for i in range(0, len(body), step)] or [b""]
        self.calls = 0

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls > len(self.parts):
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": self.parts[self.calls - 1], "more_body": self.calls < len(self.parts)}


def _scope(path: str, length: int, token: str | None = None) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1"), (b"content-length", str(length).encode())]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {"type": "http", "method": "POST", "path": path, "headers": headers}


def test_the_guard_refuses_an_unknown_key_without_reading_the_body() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    async def authenticate(token: str | None) -> Any:
        if token != "pm_good_secret":
            from portamem.errors import AuthenticationError
            raise AuthenticationError("invalid or revoked API key")
        return object()

    async def run(token: str | None, path: str = "/v1/memories") -> tuple[list[dict[str, Any]], _Received]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        body = b"x" * (2 * MIB)
        receive = _Received(body)
        guard = Guard(app, hosts=None, max_body_bytes=4 * MIB, authenticate=authenticate, budget=Budget(8 * MIB))
        await guard(_scope(path, len(body), token), receive, send)
        return sent, receive

    sent, receive = asyncio.run(run(None))
    assert sent[0]["status"] == 401 and receive.calls == 0 and reached == []
    assert (b"www-authenticate", b"Bearer") in sent[0]["headers"]
    sent, receive = asyncio.run(run("pm_bad_secret"))
    assert sent[0]["status"] == 401 and receive.calls == 0 and reached == []
    sent, receive = asyncio.run(run("pm_good_secret"))
    assert reached == ["/v1/memories"] and receive.calls == 4
    sent, receive = asyncio.run(run(None, "/v1/health"))  # public: no key asked
    assert reached[-1] == "/v1/health"


def test_the_budget_holds_bytes_in_flight_across_requests() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        running: list[int] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            message = await receive()
            running.append(len(message["body"]))
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def authenticate(token: str | None) -> Any:
            return object()

        budget = Budget(5 * MIB, wait_s=0.5)
        guard = Guard(app, hosts=None, max_body_bytes=4 * MIB, authenticate=authenticate, budget=budget)
        answers: list[list[dict[str, Any]]] = []

        async def request(size: int) -> None:
            sent: list[dict[str, Any]] = []

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            answers.append(sent)
            await guard(_scope("/v1/memories", size, "pm_k_s"), _Received(b"x" * size), send)

        first = asyncio.create_task(request(3 * MIB))
        await asyncio.sleep(0.05)
        assert running == [3 * MIB] and budget.held == 3 * MIB
        # 3 MiB more would pass 5 MiB: it waits without reading its body, then is refused 429
        await request(3 * MIB)
        refused = answers[-1][0]
        assert refused["status"] == 429 and (b"retry-after", b"1") in refused["headers"]
        assert json.loads(answers[-1][1]["body"])["error"]["type"] == "OverloadedError"
        assert running == [3 * MIB] and budget.refused == 1
        # one that waits while the first is answered gets through
        waiting = asyncio.create_task(request(3 * MIB))
        await asyncio.sleep(0.1)
        assert running == [3 * MIB]
        release.set()
        await asyncio.wait_for(asyncio.gather(first, waiting), 5)
        assert running == [3 * MIB, 3 * MIB] and budget.held == 0 and budget.peak <= 5 * MIB

    asyncio.run(scenario())


def test_a_budget_wait_gives_up_with_the_typed_error() -> None:
    async def scenario() -> None:
        budget = Budget(MIB, wait_s=0.05)
        assert await budget.take(MIB) == MIB
        with pytest.raises(OverloadedError, match="server_max_inflight_bytes"):
            await budget.take(1)
        await budget.give(MIB)
        assert await budget.take(10 * MIB) == MIB  # never more than the whole budget: one body always fits

    asyncio.run(scenario())


def test_a_request_cancelled_while_it_returns_its_bytes_still_returns_them() -> None:
    async def scenario() -> None:
        budget = Budget(MIB, wait_s=0.05)
        assert await budget.take(MIB) == MIB
        room = budget._cond()
        async with room:  # the lock is busy: the give below waits for it, and is cancelled there
            giving = asyncio.create_task(budget.give(MIB))
            await asyncio.sleep(0.01)
            giving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await giving
        assert budget.held == 0 and await budget.take(MIB) == MIB

    asyncio.run(scenario())


# ---------------------------------------------------------------------- imports read as a stream
async def _repeat(first: bytes, filler: bytes, times: int, seen: list[int]) -> AsyncIterator[bytes]:
    seen.append(len(first))
    yield first
    for _ in range(times):
        seen.append(len(filler))
        yield filler


def test_a_huge_first_line_is_refused_after_64_kib() -> None:
    seen: list[int] = []
    with pytest.raises(PayloadTooLargeError, match="line 1"):
        asyncio.run(spool_import(_repeat(b'{"format": "', b"x" * MIB, 100, seen), max_bytes=512 * MIB,
                                 max_line=4 * MIB))
    assert sum(seen) <= MIB + 64  # one chunk past the header's limit, not 100 MiB


def test_a_first_line_that_is_no_header_is_refused_as_it_ends() -> None:
    seen: list[int] = []
    with pytest.raises(ImportFormatError, match="not a portamem-export header"):
        asyncio.run(spool_import(_repeat(b'{"format": "csv"}\n', b"x" * MIB, 100, seen), max_bytes=512 * MIB,
                                 max_line=4 * MIB))
    assert len(seen) == 1


def test_a_long_later_line_is_refused_past_the_line_limit(memory: Memory) -> None:
    memory.save_memory("Dana's bakery opens at 7am.", user_id="dana")
    out = io.StringIO()
    memory.export(out, user_id="dana")
    export = out.getvalue().encode()
    header = export.split(b"\n", 1)[0] + b"\n"
    seen: list[int] = []
    with pytest.raises(PayloadTooLargeError, match="line 2 .* longer than 4194304 bytes"):
        asyncio.run(spool_import(_repeat(header + b'{"record": "', b"y" * MIB, 100, seen), max_bytes=512 * MIB,
                                 max_line=4 * MIB))
    assert sum(seen) <= 5 * MIB + len(header) + 32
    # a real export passes through whole, in any chunking, blank lines before the header too

    async def pieces(data: bytes, step: int) -> AsyncIterator[bytes]:
        for i in range(0, len(data), step):
            yield data[i:i + step]

    for step in (1, 7, 4096):
        spool = asyncio.run(spool_import(pieces(b"\n\n" + export, step), max_bytes=512 * MIB, max_line=4 * MIB))
        with spool:
            assert spool.read() == b"\n\n" + export


def test_a_100_mib_import_line_is_refused_before_it_is_sent(server: ServerProcess, tenant_key: str) -> None:
    host, port = _hostport(server.url)
    size = 100 * MIB
    sent = 0
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(f"POST /v1/import HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {tenant_key}\r\n"
                     f"Content-Type: application/x-ndjson\r\nContent-Length: {size}\r\n\r\n".encode())
        stop = threading.Event()

        def pour() -> None:
            nonlocal sent
            piece = b'{"format": "' + b"x" * (MIB - 12)
            try:
                while sent < size and not stop.is_set():
                    sock.sendall(piece)
                    sent += len(piece)
            except OSError:
                pass

        start = time.monotonic()
        pourer = threading.Thread(target=pour, daemon=True)
        pourer.start()
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, "the server closed without an answer"
            data += chunk
        answered_after = sent
        elapsed = time.monotonic() - start
        stop.set()
    pourer.join(30)
    assert data.startswith(b"HTTP/1.1 413"), data[:300]
    assert answered_after < 50 * MIB and elapsed < 30
