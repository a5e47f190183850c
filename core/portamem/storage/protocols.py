"""The storage seam: what the read and write paths need from a record store, keyword index and vector index.

``portamem.storage.sql.RecordStore`` (SQLite or PostgreSQL), ``portamem.storage.keywords.PostingsKeywordIndex``
and ``portamem.storage.vectors.MilvusVectorIndex`` (milvus-lite or a Milvus server) implement them; the backend
test suite (``portamem_conformance.backends``) holds every implementation to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..filters import SearchFilters
from ..records import MemoryRecord

__all__ = ["KeywordIndex", "RecordStore", "VectorIndex", "VectorHitLike"]


class VectorHitLike(Protocol):
    memory_id: str
    score: float


@runtime_checkable
class KeywordIndex(Protocol):
    """Exact per-user BM25 over record texts, written in the record store's transactions."""

    def add(self, conn: Any, entries: Sequence[tuple[int, str, str, str]]) -> None: ...

    def drop(self, conn: Any, pks: Sequence[int]) -> None: ...

    def stats(self, conn: Any, tenant_id: str, user_id: str, tokens: Sequence[str]) -> tuple[int, float, dict[str, int]]: ...

    def search(self, conn: Any, tenant_id: str, user_id: str, tokens: Sequence[str], k: int,
               records: Any, where: Sequence[Any] = ()) -> list[tuple[str, float]]: ...


@runtime_checkable
class RecordStore(Protocol):
    """The source of truth: records, their keyword and entity indexes, turns and the audit log."""

    url: str

    def transaction(self) -> AbstractContextManager[Any]: ...

    def insert(self, conn: Any, records: Sequence[MemoryRecord]) -> None: ...

    def get(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> dict[str, MemoryRecord]: ...

    def count(self, tenant_id: str | None = None, user_id: str | None = None,
              filters: SearchFilters | None = None) -> int: ...

    def keyword_search(self, tenant_id: str, user_id: str, query: str, filters: SearchFilters,
                       k: int) -> list[tuple[str, float]]: ...

    def keyword_stats(self, tenant_id: str, user_id: str, tokens: Sequence[str]) -> tuple[float, dict[str, int]]: ...

    def iter_vectors(self, batch: int = 1000) -> Iterator[list[MemoryRecord]]: ...

    def close(self) -> None: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Derived, rebuildable cosine search over active records, scoped by tenant and user."""

    model: str
    dim: int

    def upsert(self, records: Sequence[MemoryRecord]) -> None: ...

    def delete(self, memory_ids: Iterable[str]) -> None: ...

    def search(self, tenant_id: str, user_id: str, vector: np.ndarray, k: int,
               filters: SearchFilters) -> Sequence[VectorHitLike]: ...

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3) -> dict[str, Sequence[VectorHitLike]]: ...

    def count(self) -> int: ...

    def ids(self) -> set[str]: ...

    def flush(self) -> None: ...

    def drop(self) -> None: ...

    def close(self) -> None: ...
