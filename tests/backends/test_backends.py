"""The abstract backend suite on the backend combination this run selects (``PORTAMEM_TEST_BACKEND``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from portamem_conformance.backends import RecordStoreTests, VectorIndexTests
from portamem_conformance.fixtures import Backend

from portamem.storage.sql import RecordStore
from portamem.storage.indexes import AnyVectorIndex, open_vector_index


class TestRecordStore(RecordStoreTests):
    #: keyword postings scored in SQL, from an in-memory cache, and from one too small to keep a whole
    #: query's terms between searches (SQLite only: a PostgreSQL store always scores in SQL)
    @pytest.fixture(params=[0.0, 64.0, 0.001], ids=["sql", "cached", "tiny-cache"])
    def record_store(self, request: pytest.FixtureRequest, backend: Backend,
                     tmp_path: Path) -> Iterator[Callable[[], Any]]:
        opened: list[RecordStore] = []

        def open_store() -> RecordStore:
            opened.append(RecordStore(backend.settings(tmp_path / "store").resolved_db_url,
                                      keyword_cache_mb=request.param))
            return opened[-1]

        yield open_store
        for store in opened:
            store.close()


class TestVectorIndex(VectorIndexTests):
    @pytest.fixture
    def vector_index(self, backend: Backend, tmp_path: Path) -> Iterator[Callable[..., Any]]:
        opened: list[AnyVectorIndex] = []

        def open_index(partition_per_user: bool = True) -> AnyVectorIndex:
            settings = backend.settings(tmp_path / "store", partition_per_user=partition_per_user, vector_process="inline")
            opened.append(open_vector_index(settings, model="test-model", dim=self.DIM))
            return opened[-1]

        yield open_index
        for index in opened:
            index.close()
