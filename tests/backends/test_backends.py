"""The abstract backend suite on the backend combination this run selects (``PORTAMEM_TEST_BACKEND``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from portamem_conformance.backends import RecordStoreTests, VectorIndexTests
from portamem_conformance.fixtures import Backend

from portamem.storage.sql import RecordStore
from portamem.storage.vectors import MilvusVectorIndex


class TestRecordStore(RecordStoreTests):
    @pytest.fixture
    def record_store(self, backend: Backend, tmp_path: Path) -> Iterator[Callable[[], Any]]:
        opened: list[RecordStore] = []

        def open_store() -> RecordStore:
            opened.append(RecordStore(backend.settings(tmp_path / "store").resolved_db_url))
            return opened[-1]

        yield open_store
        for store in opened:
            store.close()


class TestVectorIndex(VectorIndexTests):
    @pytest.fixture
    def vector_index(self, backend: Backend, tmp_path: Path) -> Iterator[Callable[..., Any]]:
        opened: list[MilvusVectorIndex] = []

        def open_index(partition_per_user: bool = True) -> MilvusVectorIndex:
            uri = backend.settings(tmp_path / "store").resolved_vector_uri
            opened.append(MilvusVectorIndex(uri, model="test-model", dim=self.DIM, partition_per_user=partition_per_user))
            return opened[-1]

        yield open_index
        for index in opened:
            index.close()
