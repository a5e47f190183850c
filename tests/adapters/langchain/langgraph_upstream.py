"""What LangGraph's own store tests get for the stores they build: ``PortamemStore``s on one shared Memory.

Each store the tests build is a fresh tenant of one store opened for the test module, in
tenant-wide mode with the user at label 0 (the tests browse every namespace and put at one-label
namespaces). Its index configuration (``index={"dims": ..., "embed": ...}``) configures the
framework store's own embedder and is not used: portamem embeds with its packaged model.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from portamem_langchain import PortamemStore

from portamem import Memory
from portamem.embedding.embedders import get_embedder

__all__ = ["UpstreamStore", "SqliteStoreShim", "shared_memory"]

_SHARED: list[Memory] = []


class UpstreamStore(PortamemStore):
    """``InMemoryStore(**config)`` as the tests call it."""

    def __init__(self, **_config: Any) -> None:
        super().__init__(_SHARED[-1], user_label=0, tenant_wide=True, tenant_id=uuid.uuid4().hex)

    def setup(self) -> None:
        """The SQLite store creates its tables here; a portamem store is ready when opened."""


class SqliteStoreShim:
    """``SqliteStore.from_conn_string(...)`` as the SQLite store's tests call it."""

    @staticmethod
    @contextlib.contextmanager
    def from_conn_string(_conn: str, **config: Any) -> Iterator[UpstreamStore]:
        yield UpstreamStore(**config)


@pytest.fixture(scope="module", autouse=True)
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """One store for the module; the fast packaged embedder keeps the hundreds of puts quick."""
    with Memory(Path(tmp_path_factory.mktemp("upstream")) / "store",
                embedder=get_embedder("use-multilingual-v3")) as mem:
        _SHARED.append(mem)
        yield mem
        _SHARED.remove(mem)
