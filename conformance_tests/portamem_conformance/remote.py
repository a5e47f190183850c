"""The remote backend of the conformance suite: any driver's adapter, unchanged, over a real server.

``ServerProcess`` starts ``portamem serve`` in a subprocess on a free loopback port and mints API
keys in its store. ``RemoteDriver`` wraps a driver: where that driver builds a ``portamem.Memory``
on a store path, the adapter gets a ``RemoteMemory`` instead, holding a key of a tenant private to
that path (so each test still starts from an empty store on one shared server, and the tenant the
test names maps onto it). With no arguments it is rebuilt from ``PORTAMEM_REMOTE_*`` variables,
as the process-restart contract and the cross-process matrix do in child processes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from portamem.client import RemoteMemory
from portamem.config import Settings
from portamem.errors import PortamemError

from .driver import MemoryDriver

#: how long closing a handle waits for the server to settle its writes
FLUSH_S = 60.0

__all__ = ["ServerProcess", "RemoteDriver", "URL_ENV", "KEYS_ENV", "BASE_ENV"]

URL_ENV = "PORTAMEM_REMOTE_URL"
#: the record database of the server's store, where keys are minted
KEYS_ENV = "PORTAMEM_REMOTE_KEYS_DB"
#: ``module:Class`` of the wrapped driver
BASE_ENV = "PORTAMEM_REMOTE_BASE"

_PATCH_LOCK = threading.Lock()


class ServerProcess:
    """``portamem --path <path> serve --port 0`` in a subprocess; ``url`` once it listens."""

    def __init__(self, path: Path, *, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 timeout: float = 240.0) -> None:
        self.path = Path(path)
        environ = {**os.environ, **(env or {})}
        # the server's own settings (its environment's PORTAMEM_DB_URL: a PostgreSQL store under a backend env)
        self.db_url = Settings.load(env=environ, path=str(self.path)).resolved_db_url
        cmd = [sys.executable, "-m", "portamem", "--path", str(self.path), "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ)
        self.output: list[str] = []
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("portamem serve exited before listening:\n" + "".join(self.output[-40:]))
            self.output.append(line)
            if line.startswith("portamem serving") and " on http" in line:
                self.url = line.split(" on ", 1)[1].split()[0]
                break
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("portamem serve did not start in time:\n" + "".join(self.output[-40:]))
        # keep draining its output so the server never blocks on a full pipe
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _read_rest(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def key(self, tenant_id: str, *, users: list[str] | None = None, agents: list[str] | None = None,
            read_only: bool = False) -> str:
        """A new API key of the server's store (the key table is read on every request)."""
        return mint_key(self.db_url, tenant_id, users=users, agents=agents, read_only=read_only)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGINT, as Ctrl-C: the server drains its queue and closes the store."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.proc.returncode)

    def kill(self) -> None:
        """SIGKILL: nothing is flushed or closed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def mint_key(db_url: str, tenant_id: str, **scope: Any) -> str:
    from portamem.server.auth import KeyStore

    keys = KeyStore(db_url)
    try:
        return keys.create(tenant_id, name="conformance", **scope)[1]
    finally:
        keys.close()


class _AliasedRemote(RemoteMemory):
    """A RemoteMemory whose key tenant (private to one store path) answers to the tenant name the test uses."""

    def __init__(self, url: str, api_key: str, alias: str) -> None:
        super().__init__(url, api_key)
        self.server_tenant_id = self.tenant_id
        self.tenant_id = alias


def _load(locator: str) -> MemoryDriver:
    module, _, name = locator.partition(":")
    driver: MemoryDriver = getattr(importlib.import_module(module), name)()
    return driver


class RemoteDriver:
    """``base``'s adapter on a ``RemoteMemory``: the conformance suite and the matrix run unchanged over a server."""

    supports_async = True

    def __init__(self, base: MemoryDriver | None = None, *, url: str | None = None,
                 keys_db: str | None = None) -> None:
        self.base = base if base is not None else _load(os.environ[BASE_ENV])
        self.url = url or os.environ[URL_ENV]
        self.keys_db = keys_db or os.environ[KEYS_ENV]
        self.name = f"remote-{self.base.name}"
        self.supports_async = self.base.supports_async
        self._remotes: dict[int, RemoteMemory] = {}

    def env(self) -> dict[str, str]:
        """The variables that rebuild this driver with no arguments in a child process."""
        cls = type(self.base)
        return {URL_ENV: self.url, KEYS_ENV: self.keys_db, BASE_ENV: f"{cls.__module__}:{cls.__qualname__}"}

    def _memory_for(self, path: Path, tenant_id: str) -> RemoteMemory:
        space = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:12]
        return _AliasedRemote(self.url, mint_key(self.keys_db, f"{space}.{tenant_id}"), alias=tenant_id)

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> Any:
        module = sys.modules[type(self.base).__module__]
        made: list[RemoteMemory] = []

        def remote(_path: Any = None, *, tenant_id: str = "default", **_: Any) -> RemoteMemory:
            made.append(self._memory_for(path, tenant_id))
            return made[-1]

        with _PATCH_LOCK:
            original = module.Memory  # type: ignore[attr-defined]
            module.Memory = remote  # type: ignore[attr-defined]
            try:
                handle = self.base.open(path, user_id=user_id, session_id=session_id, tenant_id=tenant_id)
            finally:
                module.Memory = original  # type: ignore[attr-defined]
        if not made:
            raise RuntimeError(f"{self.base.name}'s driver built no Memory; it cannot run remotely")
        self._remotes[id(handle)] = made[-1]
        return handle

    def close(self, handle: Any) -> None:
        """Close as a local store closes: its writes settled first. A local ``Memory.close`` waits for
        its indexer, so a reopened store sees each write reviewed (a changed value superseded); the
        server keeps indexing after a client leaves, so the handle asks it to settle (``/v1/flush``).
        A server that is gone (a test killed it) has nothing to settle."""
        remote = self._remotes.pop(id(handle), None)
        try:
            if remote is not None:
                with contextlib.suppress(PortamemError):
                    remote.flush(FLUSH_S)
        finally:
            self.base.close(handle)
            if remote is not None:
                remote.close()

    def remember(self, handle: Any, text: str) -> str:
        return self.base.remember(handle, text)

    def recall(self, handle: Any, query: str, k: int) -> list[str]:
        return self.base.recall(handle, query, k)

    def forget(self, handle: Any, ref: str) -> None:
        self.base.forget(handle, ref)

    def write_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        self.base.write_turn(handle, user_text, assistant_text)

    def history(self, handle: Any) -> list[tuple[str, str]]:
        return self.base.history(handle)

    async def aremember(self, handle: Any, text: str) -> str:
        return await self.base.aremember(handle, text)

    async def arecall(self, handle: Any, query: str, k: int) -> list[str]:
        return await self.base.arecall(handle, query, k)

    async def awrite_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        await self.base.awrite_turn(handle, user_text, assistant_text)

    async def ahistory(self, handle: Any) -> list[tuple[str, str]]:
        return await self.base.ahistory(handle)


def _main() -> None:
    """A child of the cross-process matrix: write through one adapter, wait to read everyone's through it.

    Reads one JSON job on stdin (``base``, ``path``, ``scope``, ``remember``, ``expect``,
    ``query``, ``timeout``) and prints what it recalled as JSON.
    """
    job = json.loads(sys.stdin.read())
    driver = RemoteDriver(_load(job["base"]))
    handle = driver.open(Path(job["path"]), **job["scope"])
    try:
        for text in job["remember"]:
            driver.remember(handle, text)
        deadline = time.monotonic() + float(job.get("timeout", 120))
        expect = set(job["expect"])
        # each expected memory is asked for by its own text: recall returns what matches, not a quota
        while missing := sorted(t for t in expect if t not in driver.recall(handle, t, k=3)):
            if time.monotonic() > deadline:
                raise SystemExit(f"{driver.name} never saw {missing}")
            time.sleep(0.2)
        out = {"adapter": driver.base.name, "recall": driver.recall(handle, job["query"], 1)}
    finally:
        driver.close(handle)
    print(json.dumps(out))


if __name__ == "__main__":
    _main()
