"""The conformance suite over a real server: each adapter, unchanged, on a RemoteMemory."""

from __future__ import annotations

import pytest
from portamem_conformance import BUILTIN_DRIVERS, ConformanceTests, MemoryDriver, load_driver
from portamem_conformance.remote import RemoteDriver, ServerProcess

from portamem.embedding.embedders import Embedder


@pytest.mark.parametrize("adapter", list(BUILTIN_DRIVERS))
class TestRemoteConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, adapter: str, server: ServerProcess, embedder: Embedder,
               monkeypatch: pytest.MonkeyPatch) -> MemoryDriver:
        remote = RemoteDriver(load_driver(BUILTIN_DRIVERS[adapter], embedder=embedder), url=server.url,
                              keys_db=server.db_url)
        for name, value in remote.env().items():  # the restart contract rebuilds it in a child process
            monkeypatch.setenv(name, value)
        return remote
