"""The parts of one open store that the stages share: ``Memory`` builds them, each stage receives them.

A stage (``write``, ``background``, ``read``, ``lifecycle``, ``portable``) takes these parts, never the
``Memory`` facade, so no stage can reach back up into it. Two parts belong to stages above the write
path and are seen here only through the protocols below: the background indexer's queue (the write
path tells it about committed rows) and the in-memory vector replica (the write path's review asks it
for a record's nearest neighbours).

May import: the data model, settings, embedders, hooks, the vault and the storage package.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .config import Settings
from .embedding.embedders import Embedder, PassageBatcher
from .errors import StoreError
from .plugins import Hooks
from .records import MemoryRecord
from .storage.sql import RecordStore
from .storage.indexes import AnyVectorIndex
from .storage.vault import Vault

__all__ = ["Components", "IndexQueue", "VectorCache", "FormationQueue"]


class IndexQueue(Protocol):
    """Rows committed but not yet in the vector index (``portamem.background.indexer.Indexer``)."""

    def enqueue(self, records: Iterable[MemoryRecord]) -> None:
        """Note rows about to be committed; ``forget`` them if the commit fails."""

    def forget(self, memory_ids: Iterable[str]) -> None: ...

    def wait_ids(self, memory_ids: Sequence[str], timeout: float | None) -> None: ...


class FormationQueue(Protocol):
    """The formation worker (``portamem.background.formation.Former``): told when turns were queued."""

    def notify(self) -> None: ...


class VectorCache(Protocol):
    """The vectors of the users a store serves, in memory (``portamem.read.replica.VectorReader``)."""

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3,
                exclude: Collection[str] = ()) -> Mapping[str, Sequence[Any]]: ...

    def apply(self, upserts: Sequence[MemoryRecord], removed: Sequence[MemoryRecord]) -> None: ...

    def forget(self, memory_ids: Collection[str]) -> None: ...

    def clear(self) -> None: ...


@dataclass(eq=False)
class Components:
    """One open store's parts. ``vectors`` and ``queue`` are set by ``Memory`` once built (they take
    these parts themselves)."""

    settings: Settings
    #: the tenant a call without one is scoped to
    tenant_id: str
    store: RecordStore
    index: AnyVectorIndex
    embedder: Embedder
    hooks: Hooks
    #: seals the originals of redacted memories when a vault public key is set
    vault: Vault | None
    #: held while a change and its index update must not interleave with the indexer's review
    lock: threading.RLock
    passages: PassageBatcher
    vectors: VectorCache | None = None
    queue: IndexQueue | None = None
    #: the formation worker, woken after a commit that queued turns (None: they wait for its next poll)
    formation: FormationQueue | None = None

    @property
    def replica(self) -> VectorCache:
        assert self.vectors is not None, "Memory sets the replica before any stage runs"
        return self.vectors

    @property
    def outbox(self) -> IndexQueue:
        assert self.queue is not None, "Memory sets the indexer's queue before any stage runs"
        return self.queue

    def embed(self, texts: list[str]) -> np.ndarray:
        """Passage vectors of ``texts`` (batched with other threads' asks), shape-checked."""
        vectors = self.passages.embed(texts)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise StoreError(f"embedder {self.embedder.name} returned shape {vectors.shape}")
        return vectors

    def needs_vector(self, record: MemoryRecord) -> bool:
        """True when the record has no vector of this store's model."""
        return record.embedding is None or record.embedding_model != self.embedder.name

    def attach(self, record: MemoryRecord, vector: Any) -> None:
        record.embedding = [float(x) for x in vector]
        record.embedding_model = self.embedder.name
        record.embedding_version = self.embedder.version

    def attach_embeddings(self, records: Sequence[MemoryRecord]) -> None:
        """Embed the records that lack a vector of this model, in one call."""
        missing = [r for r in records if self.needs_vector(r)]
        if missing:
            for record, vector in zip(missing, self.embed([r.content for r in missing])):
                self.attach(record, vector)
