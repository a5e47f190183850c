"""One real ``portamem serve`` subprocess per test session, and keys minted in its store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("fastapi", reason="the server tests need the `server` extra")

from portamem import RemoteMemory  # noqa: E402
from portamem_conformance.remote import ServerProcess  # noqa: E402


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("served") / "store")
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def tenant_key(server: ServerProcess) -> str:
    """A read-write key of tenant ``acme`` for any user."""
    return server.key("acme")


@pytest.fixture
def remote(server: ServerProcess, tenant_key: str) -> Iterator[RemoteMemory]:
    mem = RemoteMemory(server.url, tenant_key)
    yield mem
    mem.close()


@pytest.fixture
def user(request: pytest.FixtureRequest) -> str:
    """A user id private to the test, so tests sharing the session's server do not see each other."""
    return f"u-{request.node.name}"[:200]


@pytest.fixture
def connect(server: ServerProcess) -> Iterator[Callable[..., RemoteMemory]]:
    opened: list[RemoteMemory] = []

    def make(key: str) -> RemoteMemory:
        opened.append(RemoteMemory(server.url, key))
        return opened[-1]

    yield make
    for mem in opened:
        mem.close()

