"""Read-your-writes for vector search without waiting for the indexer's queue.

A search used to wait for the background indexer to reach the user's queued rows; behind a busy
queue (many users writing) that wait was the whole queue's, seconds long. Instead the search takes
the user's own queued rows from the store (they are committed and keyword-searchable already),
embeds those that have no vector of this model in one embedder batch, and scores them exactly
beside the indexed ones. The vectors go to the indexer's hand-over cache, so no row is embedded
twice. What only the indexer's review decides (a duplicate merged, an older value superseded, a
trust verdict) shows once it has run; ``Memory.flush`` and ``save_memory(wait=True)`` wait for it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ..filters import SearchFilters
from ..records import MemoryRecord
from ..storage.sql import RecordStore

__all__ = ["HandOver", "Queue", "queued_vectors"]

#: the most queued rows of one user a search scores itself; the others wait for the index
MAX_QUEUED = 256


class HandOver:
    """Vectors a search computed for queued rows, kept (bounded, oldest dropped) until the indexer takes them."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, records: Sequence[MemoryRecord], vectors: Sequence[np.ndarray]) -> None:
        with self._lock:
            for r, v in zip(records, vectors):
                self._items[r.memory_id] = (r.content, v)
                self._items.move_to_end(r.memory_id)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def get(self, record: MemoryRecord) -> np.ndarray | None:
        """The vector handed over for this row's current content, if any (kept for other searches)."""
        with self._lock:
            found = self._items.get(record.memory_id)
        return found[1] if found is not None and found[0] == record.content else None

    def take(self, records: Sequence[MemoryRecord]) -> dict[str, np.ndarray]:
        """The vectors of these rows' current content (the indexer's), removed from the cache."""
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for r in records:
                found = self._items.pop(r.memory_id, None)
                if found is not None and found[0] == r.content:
                    out[r.memory_id] = found[1]
        return out

    def __len__(self) -> int:
        return len(self._items)


class Queue(Protocol):
    """The indexer as a search sees it: which rows of a user wait, and the vectors handed over."""

    handover: HandOver

    def queued(self, scope: tuple[str, str]) -> list[str]: ...


def queued_vectors(store: RecordStore, indexer: Queue, embed: Callable[[list[str]], np.ndarray],
                   model: str, tenant_id: str, user_id: str, filters: SearchFilters) -> dict[str, np.ndarray]:
    """Vectors (float32) of one user's rows still queued for the index that ``filters`` admit: stored
    ones of ``model``, else handed over by an earlier search, else embedded now (and handed over)."""
    ids = indexer.queued((tenant_id, user_id))[:MAX_QUEUED]
    if not ids:
        return {}
    admitted = [r for r in store.get(tenant_id, user_id, ids, vectors=False).values() if filters.admits(r)]
    stored = [r.memory_id for r in admitted if r.embedding_model == model]
    out = store.vectors(tenant_id, user_id, stored, model) if stored else {}
    todo: list[MemoryRecord] = []
    for r in admitted:
        if r.memory_id in out:
            continue
        if (v := indexer.handover.get(r)) is not None:
            out[r.memory_id] = v
        else:
            todo.append(r)
    if todo:
        vectors = list(np.asarray(embed([r.content for r in todo]), dtype=np.float32))
        indexer.handover.put(todo, vectors)
        out.update((r.memory_id, v) for r, v in zip(todo, vectors))
    return out
