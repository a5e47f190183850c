"""Fixtures over one real ``portamem serve`` per test session, for suites that import them into a conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from portamem import RemoteMemory

from .remote import ServerProcess

__all__ = ["server", "tenant_key", "remote", "user"]


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
