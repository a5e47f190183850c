"""``portamem mcp --transport http`` decides who may call its tools as ``portamem serve`` does: the store's
API keys, or none only when started ``--keyless`` on loopback; a key's tenant, users, read-only flag and
agents bound every tool; the Host checks are the server's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402  (the mcp client's HTTP library)
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from portamem.config import Settings  # noqa: E402
from portamem_conformance.remote import mint_key  # noqa: E402

USER = "dana"


class McpProcess:
    """``portamem --path <path> mcp --user dana --transport http`` on a free port, once it answers."""

    def __init__(self, path: Path, *args: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc = subprocess.Popen([sys.executable, "-m", "portamem", "--path", str(path), "mcp", "--user", USER,
                                      "--transport", "http", "--port", str(self.port), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=5)
                return
            except httpx.HTTPError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"portamem mcp exited: {self.proc.stderr.read()}")  # type: ignore[union-attr]
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-http") / "store"


def _key(store: Path, tenant: str, **scope: Any) -> str:
    return mint_key(Settings(path=str(store)).resolved_db_url, tenant, **scope)


@pytest.fixture(scope="module")
def keyed(store: Path) -> Iterator[McpProcess]:
    _key(store, "t1")  # the store has keys before the server starts
    proc = McpProcess(store)
    yield proc
    proc.stop()


async def _call(url: str, key: str | None, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, payload or error text) of one tool call made with ``key``."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        result = await client.call_tool(tool, arguments)
    if result.is_error:
        return True, result.content[0].text
    data = result.structured_content
    if isinstance(data, dict) and set(data) == {"result"}:
        data = data["result"]
    return False, data if isinstance(data, dict) else json.loads(result.content[0].text)


def _post(url: str, headers: dict[str, str]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx.post(url, json=body, timeout=30,
                      headers={"Accept": "application/json, text/event-stream", **headers})


def test_a_call_without_a_key_is_refused_before_any_tool(keyed: McpProcess) -> None:
    r = _post(keyed.url, {})
    assert r.status_code == 401 and r.json()["error"]["type"] == "AuthenticationError"
    r = _post(keyed.url, {"Authorization": "Bearer pm_nope_nope"})
    assert r.status_code == 401


async def test_a_key_bounds_every_tool(keyed: McpProcess, store: Path) -> None:
    mine = _key(store, "t1", users=[USER])
    error, saved = await _call(keyed.url, mine, "save_memory", {"content": "Dana's locker code is 4711."})
    assert not error, saved
    error, found = await _call(keyed.url, mine, "search_memory", {"query": "locker code"})
    assert [m["memory_id"] for m in found["memories"]] == [saved["memory_id"]]
    # another tenant's key reaches none of it, by search or by id
    other = _key(store, "t2")
    _, elsewhere = await _call(keyed.url, other, "search_memory", {"query": "locker code"})
    assert elsewhere["memories"] == [] and "'t2'" in elsewhere["note"]
    error, text = await _call(keyed.url, other, "explain_memory", {"memory_id": saved["memory_id"]})
    assert error and "NotFoundError" in text
    error, text = await _call(keyed.url, other, "forget_memory", {"memory_id": saved["memory_id"]})
    assert error and "NotFoundError" in text
    # a key of other users may not act for --user; a read-only key reads and never writes
    error, text = await _call(keyed.url, _key(store, "t1", users=["eve"]), "search_memory", {"query": "locker"})
    assert error and "PermissionDeniedError" in text
    reader = _key(store, "t1", read_only=True)
    for tool, args in (("save_memory", {"content": "x y z"}), ("forget_memory", {"memory_id": saved["memory_id"]})):
        error, text = await _call(keyed.url, reader, tool, args)
        assert error and "PermissionDeniedError" in text and "read-only" in text
    error, why = await _call(keyed.url, reader, "explain_memory", {"memory_id": saved["memory_id"]})
    assert not error and why["user_id"] == USER
    error, gone = await _call(keyed.url, mine, "forget_memory", {"memory_id": saved["memory_id"]})
    assert not error and gone["forgotten"] == [saved["memory_id"]]


async def test_an_agent_key_acts_as_its_agent(keyed: McpProcess, store: Path) -> None:
    sales, support = _key(store, "t3", agents=["sales"]), _key(store, "t3", agents=["support"])
    _, theirs = await _call(keyed.url, support, "save_memory", {"content": "The kiln door sticks."})
    _, own = await _call(keyed.url, sales, "save_memory", {"content": "The kiln fires on Fridays."})
    _, why = await _call(keyed.url, sales, "explain_memory", {"memory_id": own["memory_id"]})
    assert why["agent_id"] == "sales"
    _, found = await _call(keyed.url, sales, "search_memory", {"query": "the kiln", "top_k": 5})
    assert theirs["memory_id"] not in [m["memory_id"] for m in found["memories"]]
    for tool in ("explain_memory", "forget_memory"):
        error, text = await _call(keyed.url, sales, tool, {"memory_id": theirs["memory_id"]})
        assert error and "NotFoundError" in text


@pytest.mark.parametrize("hosts", [["rebind.attacker.example"], ["[::1]evil.example"], ["127.0.0.1", "127.0.0.1"]])
def test_a_foreign_malformed_or_repeated_host_is_refused(keyed: McpProcess, store: Path, hosts: list[str]) -> None:
    key = _key(store, "t1")
    with socket.create_connection(("127.0.0.1", keyed.port), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\n" + b"".join(f"Host: {h}\r\n".encode() for h in hosts)
                     + f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                       "Connection: close\r\n\r\n{}".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.split(b" ", 2)[1] == b"421" and b"HostNotAllowedError" in data


@pytest.mark.parametrize("args", [("--host", "0.0.0.0"), ("--host", "0.0.0.0", "--keyless"),
                                  ("--keyless", "--allowed-host", "memory.internal")])
def test_keyless_is_a_loopback_only_choice(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-m", "portamem", "--path", str(tmp_path / "store"), "mcp", "--user", USER,
                           "--transport", "http", "--port", "0", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ})
    assert done.returncode != 0 and ("no API key" in done.stderr or "--keyless" in done.stderr), done.stderr


async def test_a_keyless_loopback_server_serves_callers_without_a_key(tmp_path: Path) -> None:
    proc = McpProcess(tmp_path / "store", "--keyless")
    try:
        error, saved = await _call(proc.url, None, "save_memory", {"content": "Dana's bakery opens at 7am."})
        assert not error, saved
        assert _post(proc.url, {"Host": "rebind.attacker.example"}).status_code == 421
    finally:
        proc.stop()
