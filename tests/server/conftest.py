"""One real ``portamem serve`` subprocess per test session, and keys minted in its store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("fastapi", reason="the server tests need the `server` extra")

from portamem import RemoteMemory  # noqa: E402
from portamem_conformance.remote import ServerProcess  # noqa: E402
from portamem_conformance.served import remote, server, tenant_key, user  # noqa: E402,F401


@pytest.fixture
def connect(server: ServerProcess) -> Iterator[Callable[..., RemoteMemory]]:
    opened: list[RemoteMemory] = []

    def make(key: str) -> RemoteMemory:
        opened.append(RemoteMemory(server.url, key))
        return opened[-1]

    yield make
    for mem in opened:
        mem.close()

