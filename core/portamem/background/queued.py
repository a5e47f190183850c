"""Read-your-writes for vector search without waiting for the indexer's queue.

A search used to wait for the background indexer to reach the user's queued rows; behind a busy
queue (many users writing) that wait was the whole queue's, seconds long. Instead the search takes
the user's own queued rows from the store (they are committed and keyword-searchable already),
embeds those that have no vector of this model, and scores them exactly beside the indexed ones.
The vectors go to the indexer's hand-over cache, so no row is embedded twice. What only the
indexer's review decides (a duplicate merged, an older value superseded, a trust verdict) shows once
it has run; ``Memory.flush`` and ``save_memory(wait=True)`` wait for it.

Every queued row of the user is scored, however many there are: after a crash with thousands of
rows queued for one user, a search by meaning still covers each of them (it used to score 256 and
leave the others to the index, so a search right after the restart missed them by meaning). The
first search then embeds what the indexer has not reached yet, in chunks, newest first (the indexer
works oldest first, so the two meet in the middle instead of embedding the same rows), and hands each
chunk over as it is done; a second search of the same user at the same time waits for the chunks
the first one is embedding rather than embedding them again. That first search costs the backlog's
embedding (about its rows / the embedder's texts per second); ``Settings.search_queued_budget_s``
bounds it, leaving the oldest rows past the budget to the index (the keyword search finds them meanwhile).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from ..filters import SearchFilters
from ..records import MemoryRecord
from ..storage.sql import RecordStore

__all__ = ["HandOver", "Queue", "queued_vectors", "CHUNK"]

#: queued rows a search embeds per embedder call (each chunk is handed over as soon as it is done)
CHUNK = 64
#: ids read from the store per statement
_READ = 500


class HandOver:
    """Vectors a search computed for queued rows, kept (bounded, oldest dropped) until the indexer takes them."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[str, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        #: rows a search is embedding right now: other searches wait for them instead of embedding them too
        self._inflight: dict[str, threading.Event] = {}

    def claim(self, records: Sequence[MemoryRecord]) -> tuple[list[MemoryRecord], list[threading.Event]]:
        """The rows this caller is to embed (no other search is embedding them), and the events of those
        another search is embedding; ``release`` the claimed ones when done, whatever happened."""
        mine: list[MemoryRecord] = []
        waits: dict[int, threading.Event] = {}
        with self._lock:
            for r in records:
                event = self._inflight.get(r.memory_id)
                if event is None:
                    self._inflight[r.memory_id] = threading.Event()
                    mine.append(r)
                else:
                    waits[id(event)] = event
        return mine, list(waits.values())

    def release(self, records: Sequence[MemoryRecord]) -> None:
        with self._lock:
            for r in records:
                event = self._inflight.pop(r.memory_id, None)
                if event is not None:
                    event.set()

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
                   model: str, tenant_id: str, user_id: str, filters: SearchFilters,
                   budget_s: float | None = None) -> dict[str, np.ndarray]:
    """Vectors (float32) of every row of one user still queued for the index that ``filters`` admit:
    stored ones of ``model``, else handed over by an earlier search, else embedded now (and handed
    over); rows another search is embedding are waited for. ``budget_s`` (``Settings.search_queued_budget_s``)
    bounds the time spent embedding and waiting: past it the rows left wait for the index (newest are done first)."""
    started = time.monotonic()

    def left() -> float:
        return float("inf") if budget_s is None else budget_s - (time.monotonic() - started)

    ids = indexer.queued((tenant_id, user_id))
    if not ids:
        return {}
    rows: dict[str, MemoryRecord] = {}
    for lo in range(0, len(ids), _READ):
        rows.update(store.get(tenant_id, user_id, ids[lo:lo + _READ], vectors=False))
    admitted = [r for r in rows.values() if filters.admits(r)]
    stored = [r.memory_id for r in admitted if r.embedding_model == model]
    out: dict[str, np.ndarray] = {}
    for lo in range(0, len(stored), _READ):
        out.update(store.vectors(tenant_id, user_id, stored[lo:lo + _READ], model))
    todo = _missing(indexer.handover, admitted, out)
    # newest first: the indexer drains oldest first, so the two meet in the middle
    todo.sort(key=lambda r: r.created_at, reverse=True)
    mine, others = indexer.handover.claim(todo)

    def embedded(rows: Sequence[MemoryRecord]) -> None:
        """Embed ``rows`` in chunks while time is left, handing each chunk over as it finishes."""
        for lo in range(0, len(rows), CHUNK):
            if left() <= 0:
                break
            chunk = rows[lo:lo + CHUNK]
            vectors = list(np.asarray(embed([r.content for r in chunk]), dtype=np.float32))
            indexer.handover.put(chunk, vectors)
            out.update((r.memory_id, v) for r, v in zip(chunk, vectors))

    try:
        embedded(mine)
    finally:
        indexer.handover.release(mine)
    if others:
        for event in others:
            if not event.wait(max(0.0, min(left(), 600.0))):
                break
        # a search that gave up or failed: embedded here
        embedded(_missing(indexer.handover, [r for r in todo if r.memory_id not in out], out))
    return out


def _missing(handover: HandOver, records: Sequence[MemoryRecord], out: dict[str, np.ndarray]) -> list[MemoryRecord]:
    """The records with no vector in ``out`` nor handed over (those found are added to ``out``)."""
    todo: list[MemoryRecord] = []
    for r in records:
        if r.memory_id in out:
            continue
        if (v := handover.get(r)) is not None:
            out[r.memory_id] = v
        else:
            todo.append(r)
    return todo
