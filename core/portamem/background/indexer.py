"""The background indexer: a write is durable when it returns; embedding, trust review, dedupe and the
vector index follow in batches from the store's outbox (``memories.indexed``).

A saved row is committed with ``indexed = REVIEW`` (keyword-searchable at once). The indexer embeds a
batch outside the store's lock, then under it reviews the batch against the index (trust rules,
``portamem.write.trust``; a duplicate is merged into the older record, whose frequency it bumps, and the
newer row is retired with ``superseded_by`` pointing at the older), writes the vector index and, in
one transaction, the vectors, the decisions, their audit rows and ``indexed = 1``. The index is
written before that commit, so a crash in between only repeats the batch: rows of the batch are never
each other's neighbours, so a replay decides the same. Reopening a store drains what a crash left.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..components import Components
from ..errors import IndexingTimeoutError
from ..records import MemoryRecord, Status, in_vector_index, utcnow
from ..storage.claims import OutboxClaims
from ..storage.schema import REVIEW, ts_of
from ..storage.vectors import VectorHit
from ..write import trust
from ..write.dedupe import dedupe
from ..write.save import unhold
from ..write.supersession import Supersessions, supersede
from .queued import HandOver
from .upkeep import index_disagrees, repair

__all__ = ["Indexer", "IndexStats", "settle", "Outcome", "needs_repair"]

log = logging.getLogger(__name__)

Scope = tuple[str, str]
#: texts embedded per call: a query waiting for the embedder waits for at most one such chunk
_EMBED_CHUNK = 16
#: seconds of history behind ``IndexStats.indexed_per_s``
_RATE_WINDOW = 60.0
#: how soon a round looks again at rows another process's indexer held (``storage.claims``)
_HELD_RETRY_S = 0.05


@dataclass(frozen=True)
class IndexStats:
    """How far the vector index is behind the committed records (``Memory.stats``)."""

    #: rows in the outbox: committed, not yet reflected by the vector index
    pending: int
    #: seconds since the oldest of them was committed (or found at open); 0 when none
    oldest_pending_s: float
    #: rows the indexer settled per second over the last minute
    indexed_per_s: float
    #: rows this Memory's indexer wrote since it opened (not those another process's indexer settled)
    indexed_total: int
    #: the last batch's failure, until a batch succeeds (the rows stay queued and are retried)
    last_error: str | None
    #: the formation worker's backlog (``portamem.background.formation.FormationStats``), set by ``Memory.stats``
    formation: Any = None
    #: the chat model's counters (``portamem.models.ModelStats.snapshot()``: calls by outcome, tokens,
    #: latency, refused answers, fallbacks) when one is configured, set by ``Memory.stats``
    model: Any = None


class Indexer:
    """One daemon thread per Memory that drains the outbox; writers ``enqueue``, readers ``wait_*``."""

    def __init__(self, parts: Components, *, batch: int, poll_s: float = 1.0) -> None:
        self._parts = parts
        self._batch = max(1, batch)
        self._poll = poll_s
        self._cond = threading.Condition()
        self._pending: dict[str, tuple[Scope, float]] = {}
        self._by_scope: dict[Scope, set[str]] = {}
        self._wake = True
        self._stop = False
        self._requested = 0
        self._drained = -1
        self._done: deque[tuple[float, int]] = deque()
        self._total = 0
        self._error: str | None = None
        #: vectors searches computed for queued rows (``portamem.background.queued``), taken instead of embedding again
        self.handover = HandOver()
        #: rows whose vector this indexer took from ``handover`` rather than embedding them
        self.offered_total = 0
        self._thread = threading.Thread(target=self._run, name="portamem-indexer", daemon=True)
        #: rows this indexer works on, where several processes share the outbox
        self._claims = OutboxClaims(parts.store.engine)
        #: whether the index disagreed with the records at open (``upkeep.index_disagrees``): the thread repairs it
        self._repair = False
        #: told of each committed batch (the ids it settled, the rows it wrote, the records whose index
        #: entry it upserted or removed), of each drained flush round, of a finished repair and of a
        #: failure: how a worker process reports to the store that started it (``background.worker``)
        self.on_batch: Callable[[list[str], int, list[MemoryRecord]], None] | None = None
        self.on_drained: Callable[[int], None] | None = None
        self.on_repaired: Callable[[], None] | None = None
        self.on_error: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ control
    def start(self, *, repair: bool | None = None) -> None:
        """Note what the outbox holds and whether the index needs repair, then start the thread; called
        before the store takes this process's first write (see ``upkeep.index_disagrees``). ``repair``:
        decided by the caller instead (a worker process, told by the store that asked at open)."""
        self._repair = needs_repair(self._parts) if repair is None else repair
        now = time.monotonic()
        with self._cond:
            for memory_id, tenant_id, user_id in self._parts.store.outbox_keys():
                self._track(memory_id, (tenant_id, user_id), now)
        self._launch()

    def _launch(self) -> None:
        """Start what drains the outbox: the thread (a worker process in ``background.process``)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the batch in hand; what is still queued stays in the outbox for the next open."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        self._claims.close()

    def enqueue(self, records: Iterable[MemoryRecord]) -> None:
        """Note rows about to be committed (before the commit, so that the thread cannot settle a row
        before it is noted) and wake the thread; ``forget`` them if the commit fails. Nothing to note
        wakes nothing (a turn without an episode, a formed turn without new statements: each woke the
        thread for a round of outbox reads that found nothing of theirs)."""
        records = list(records)
        if not records:
            return
        now = time.monotonic()
        with self._cond:
            for r in records:
                self._track(r.memory_id, (r.tenant_id, r.user_id), now)
            self._wake = True
            self._cond.notify_all()

    def wake(self) -> None:
        """Look at the outbox now (rows were committed), not at the next poll."""
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def request(self, target: int) -> None:
        """Drain the outbox once as for ``flush`` number ``target`` without waiting for it: ``on_drained``
        tells when (a worker process asked by its store's ``flush``)."""
        with self._cond:
            self._requested = max(self._requested, target)
            self._wake = True
            self._cond.notify_all()

    def forget(self, memory_ids: Iterable[str]) -> None:
        with self._cond:
            self._settled(memory_ids)
            self._cond.notify_all()

    def _track(self, memory_id: str, scope: Scope, at: float) -> None:
        if memory_id not in self._pending:
            self._pending[memory_id] = (scope, at)
            self._by_scope.setdefault(scope, set()).add(memory_id)

    def _settled(self, memory_ids: Iterable[str]) -> None:
        for memory_id in memory_ids:
            entry = self._pending.pop(memory_id, None)
            if entry is not None:
                ids = self._by_scope.get(entry[0])
                if ids is not None:
                    ids.discard(memory_id)
                    if not ids:
                        del self._by_scope[entry[0]]

    def queued(self, scope: Scope) -> list[str]:
        """The ids of one user's rows not yet in the vector index."""
        with self._cond:
            return list(self._by_scope.get(scope, ()))

    # ------------------------------------------------------------------ waiting
    def wait_ids(self, memory_ids: Sequence[str], timeout: float | None) -> None:
        """Block until these rows are indexed; ``IndexingTimeoutError`` after ``timeout`` seconds."""
        with self._cond:
            if not self._thread.is_alive():
                raise IndexingTimeoutError("the indexer is not running (the Memory is closed)")
            if not any(m in self._pending for m in memory_ids):
                return  # settled already (formation asks so for every turn): no round to wake the thread for
            self._wake = True
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._stop or not any(m in self._pending for m in memory_ids),
                                       timeout):
                raise IndexingTimeoutError(self._behind(timeout))

    def wait_scope(self, scope: Scope, timeout: float) -> bool:
        """Wait (at most ``timeout``) until the rows of one user queued now are indexed (not the ones
        queued meanwhile: a user who keeps writing does not hold a search up); False if some still wait.

        A failing indexer is not waited for: the search goes on with what the index holds.
        """
        with self._cond:
            queued = set(self._by_scope.get(scope, ()))
            if not queued or self._error is not None:
                return not queued
            self._wake = True
            self._cond.notify_all()
            return self._cond.wait_for(
                lambda: self._stop or self._error is not None or not any(m in self._pending for m in queued), timeout
            ) and not any(m in self._pending for m in queued)

    def flush(self, timeout: float | None) -> None:
        """Block until everything committed before this call is indexed (the outbox drained once)."""
        with self._cond:
            if self._stop or not self._thread.is_alive():
                return
            self._requested += 1
            target = self._requested
            self._wake = True
            self._cond.notify_all()
        self._ask(target)
        with self._cond:
            if not self._cond.wait_for(lambda: self._stop or self._drained >= target, timeout):
                raise IndexingTimeoutError(self._behind(timeout))

    def _ask(self, target: int) -> None:
        """Ask for drain round ``target`` (the thread was woken for it already; a worker process is
        asked over its pipe: ``background.process``)."""

    def _behind(self, timeout: float | None) -> str:
        why = f"; last error: {self._error}" if self._error else ""
        return (f"the vector index is still {len(self._pending)} records behind after {timeout} s{why} "
                "(the records are stored and keyword-searchable; the indexer keeps going)")

    def stats(self) -> IndexStats:
        now = time.monotonic()
        with self._cond:
            while self._done and self._done[0][0] < now - _RATE_WINDOW:
                self._done.popleft()
            oldest = min((at for _, at in self._pending.values()), default=now)
            span = min(_RATE_WINDOW, now - self._done[0][0]) if self._done else 0.0
            rate = sum(n for _, n in self._done) / span if span > 0 else 0.0
            return IndexStats(pending=len(self._pending), oldest_pending_s=now - oldest, indexed_per_s=rate,
                              indexed_total=self._total, last_error=self._error)

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        try:
            if self._repair:
                repair(self._parts)
                if self.on_repaired is not None:
                    self.on_repaired()
        except Exception as exc:  # the outbox still drains; the next open tries again
            log.exception("vector index repair failed")
            self._error = f"repair: {exc}"
            if self.on_error is not None:
                self.on_error(self._error)
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or self._wake, self._poll)
                if self._stop:
                    return
                self._wake = False
                round_id = self._requested
            held = False  # rows another process's indexer holds: this round waits for them
            try:
                if getattr(self._parts.index, "restarted", False):  # its process died and came back
                    repair(self._parts)
                after = 0
                while not self._stop:
                    rows = self._parts.store.outbox(self._batch, after=after)
                    if not rows:
                        break
                    after = rows[-1][0]
                    mine = self._claims.claim([pk for pk, _, _ in rows])
                    held = held or len(mine) < len(rows)
                    try:
                        if self._claims.shared:  # ours alone, as they stand now that they are ours
                            rows = self._parts.store.outbox(len(mine), pks=sorted(mine)) if mine else []
                        if not rows:
                            continue
                        done, written, touched = self._process(rows)
                    finally:
                        self._claims.release(sorted(mine))
                    if self.on_batch is not None:
                        self.on_batch(done, written, touched)
                    self._batch_done(done, written)
                else:
                    return
            except Exception as exc:  # the rows stay queued: retried on the next round
                log.exception("background indexing failed; the records are stored and will be retried")
                if self.on_error is not None:
                    self.on_error(f"{type(exc).__name__}: {exc}")
                with self._cond:
                    self._error = f"{type(exc).__name__}: {exc}"
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: self._stop, self._poll)
                    self._wake = True
                continue
            with self._cond:
                if held:  # not drained yet: look again once the other indexer has committed them
                    self._wake = True
                    self._cond.wait_for(lambda: self._stop, _HELD_RETRY_S)
                    continue
                drained = round_id > self._drained
                self._drained = max(self._drained, round_id)
            if drained and self.on_drained is not None:
                self.on_drained(round_id)
            self._sweep()

    def _batch_done(self, done: Sequence[str], written: int) -> None:
        """A batch committed: its rows leave the queue, and its count the rate."""
        with self._cond:
            self._settled(done)
            self._done.append((time.monotonic(), written))
            self._total += written
            self._error = None
            self._cond.notify_all()

    def _sweep(self) -> None:
        """Rows another process's indexer settled on a shared store (or never committed) leave the
        queue by their state in the store."""
        with self._cond:
            noted = list(self._pending)
        done = self._parts.store.indexed_ids(noted) if noted else set()
        with self._cond:
            self._settled(done)
            self._cond.notify_all()

    def _process(self, rows: Sequence[tuple[int, int, MemoryRecord]]
                 ) -> tuple[list[str], int, list[MemoryRecord]]:
        """Embed, review, index and commit one batch; returns the ids settled, how many rows it wrote
        and the records whose index entry it wrote or removed."""
        parts = self._parts
        todo = [r for _, _, r in rows if _needs_vector(parts, r)]
        offered = self.handover.take(todo)  # a search embedded these already
        self.offered_total += len(offered)
        vectors: dict[str, tuple[str, Any]] = {r.memory_id: (r.content, offered[r.memory_id])
                                               for r in todo if r.memory_id in offered}
        todo = [r for r in todo if r.memory_id not in offered]
        for lo in range(0, len(todo), _EMBED_CHUNK):  # outside the lock: writers and readers go on
            chunk = todo[lo:lo + _EMBED_CHUNK]
            for r, v in zip(chunk, parts.embed([r.content for r in chunk])):
                vectors[r.memory_id] = (r.content, v)
        with parts.lock:
            current = parts.store.outbox(len(rows), pks=[pk for pk, _, _ in rows])
            if not current:  # indexed meanwhile by a synchronous change
                return [r.memory_id for _, _, r in rows], 0, []
            records = [r for _, _, r in current]
            batch_ids = {r.memory_id for r in records}
            stale = []
            for r in records:
                if _needs_vector(parts, r):
                    got = vectors.get(r.memory_id)
                    if got is not None and got[0] == r.content:
                        parts.attach(r, got[1])
                    else:  # changed while we embedded
                        stale.append(r)
            if stale:
                for r, v in zip(stale, parts.embed([r.content for r in stale])):
                    parts.attach(r, v)
            embedded = [r for r in records if r.memory_id in vectors or any(r is s for s in stale)]
            review = [r for _, state, r in current if state == REVIEW]
            outcome = settle(parts, review)
            touched = {r.memory_id: r for r in records}
            touched.update((r.memory_id, r) for r in outcome.changed)
            _vectors_of_changed(parts, [r for m, r in touched.items() if m not in batch_ids])
            # a changed row still waiting for its own turn in the outbox (no vector yet) stays there
            touched = {m: r for m, r in touched.items()
                       if m in batch_ids or not in_vector_index(r) or not parts.needs_vector(r)}
            upsert = [r for r in touched.values() if in_vector_index(r)]
            gone = [m for m, r in touched.items() if not in_vector_index(r)]
            if upsert:
                parts.index.upsert(upsert)
            if gone:
                parts.index.delete(gone)
            with parts.store.transaction() as conn:
                parts.store.set_embeddings(conn, embedded)
                outcome.write(parts, conn)
                parts.store.mark_indexed(list(touched), conn)
            parts.replica.apply(upsert, [touched[m] for m in gone])
        return [r.memory_id for _, _, r in rows], len(current), list(touched.values())


def needs_repair(parts: Components) -> bool:
    """``upkeep.index_disagrees``, and True when asking failed (the repair then tries and reports)."""
    try:
        return index_disagrees(parts)
    except Exception:  # noqa: BLE001 - the thread's repair tries again and reports its failure
        log.warning("checking the vector index against the records failed; repairing it", exc_info=True)
        return True


def _vectors_of_changed(parts: Components, records: Sequence[MemoryRecord]) -> None:
    """Give stored rows the review changed their stored vector when they were read without it."""
    todo: dict[Scope, list[MemoryRecord]] = {}
    for r in records:
        if r.status is Status.ACTIVE and parts.needs_vector(r):
            todo.setdefault((r.tenant_id, r.user_id), []).append(r)
    for scope, group in todo.items():
        found = parts.store.vectors(*scope, [r.memory_id for r in group], parts.embedder.name)
        for r in group:
            if r.memory_id in found:
                parts.attach(r, found[r.memory_id])


def _needs_vector(parts: Components, record: MemoryRecord) -> bool:
    return record.status not in (Status.DELETED, Status.QUARANTINED) and parts.needs_vector(record)


@dataclass
class Outcome:
    """What reviewing a batch decided: records whose fields changed, and rows retired into others."""

    reviewed: list[MemoryRecord]
    confirmations: list[Any]
    merges: list[tuple[MemoryRecord, MemoryRecord]]
    superseded: Supersessions = field(default_factory=Supersessions)

    @property
    def changed(self) -> list[MemoryRecord]:
        return [*self.reviewed, *(c.pending for c in self.confirmations), *(t for t, _ in self.merges),
                *self.superseded.changed]

    def write(self, parts: Components, conn: Any) -> None:
        now = utcnow()
        # statuses the review set (pending by trust), or a merge retired: one statement for the batch
        parts.store.update_each(conn, [
            {"memory_id": r.memory_id, "status": r.status.value, "metadata": r.metadata,
             "superseded_by": r.superseded_by, "deleted_at": ts_of(r.deleted_at)} for r in self.reviewed])
        trust.apply_confirmations(parts, conn, self.confirmations)
        parts.store.update_each(conn, [
            {"memory_id": t.memory_id, "frequency": t.frequency, "importance": t.importance,
             "importance_band": t.importance_band, "type": t.type.value, "kind": t.kind,
             "half_life_days": t.half_life_days, "trust": t.trust.value, "updated_at": t.updated_at.timestamp(),
             "metadata": t.metadata} for t, _ in self.merges])
        self.superseded.write(parts, conn, {r.memory_id for r in self.reviewed})
        retired = [(c.pending, c.by) for c in self.confirmations] + self.merges
        parts.store.audit_many(
            conn,
            [{"action": "dedupe", "tenant_id": t.tenant_id, "user_id": t.user_id, "memory_id": t.memory_id,
              "detail": {"frequency": t.frequency, "session_id": d.session_id, "source": d.source.value,
                         "duplicate": d.memory_id}} for t, d in self.merges]
            + [{"action": "merged", "tenant_id": d.tenant_id, "user_id": d.user_id, "memory_id": d.memory_id,
                "detail": {"into": t.memory_id, "at": now.isoformat()}} for t, d in retired],
        )


def _with_earlier(records: Sequence[MemoryRecord], near: dict[str, list[Any]], k: int) -> dict[str, list[Any]]:
    """Add each record's earlier rows of the same batch and user to its stored neighbours: two saves
    in a row meet in one batch, and the second must see the first as the index would have."""
    by_scope: dict[Scope, list[MemoryRecord]] = {}
    for r in records:
        by_scope.setdefault((r.tenant_id, r.user_id), []).append(r)
    out = dict(near)
    for group in by_scope.values():
        if len(group) < 2:
            continue
        mat = np.asarray([r.embedding for r in group], dtype=np.float32)
        sims = mat @ mat.T
        for i, r in enumerate(group[1:], 1):
            earlier = [VectorHit(group[j].memory_id, float(sims[i, j])) for j in range(i)]
            out[r.memory_id] = sorted(out.get(r.memory_id, []) + earlier, key=lambda h: -h.score)[:k]
    return out


def settle(parts: Components, records: Sequence[MemoryRecord]) -> Outcome:
    """Trust review and dedupe of newly committed rows (embeddings attached) against the index.

    A row that repeats a stored PENDING memory, or duplicates an older memory, is retired into it
    (status deleted, ``superseded_by`` the older id); the older one counts the sighting. A row that
    gives a new value of an attribute supersedes the older value (``portamem.write.supersession``).
    """
    if not records:
        return Outcome([], [], [])
    for r in records:
        unhold(r)
    batch = {r.memory_id for r in records}
    active = [r for r in records if r.status is Status.ACTIVE]
    near = parts.replica.nearest(active, k=trust.NEIGHBOURS, exclude=batch) if active else {}
    near = _with_earlier(active, near, trust.NEIGHBOURS)
    # the rules ask the store one user at a time: their neighbours' rows and pending memories are
    # read here for the whole batch in two statements
    with parts.store.reading([h.memory_id for hits in near.values() for h in hits],
                             [(r.tenant_id, r.user_id) for r in active]):
        confirmations = trust.review(parts, records, near)
        retired = {c.by.memory_id for c in confirmations}
        merges: list[tuple[MemoryRecord, MemoryRecord]] = []
        by_scope: dict[Scope, list[MemoryRecord]] = {}
        for r in records:
            if r.memory_id not in retired:
                by_scope.setdefault((r.tenant_id, r.user_id), []).append(r)
        for group in by_scope.values():
            merges.extend(dedupe(parts, group, near, batch={r.memory_id: r for r in records}))
        now = utcnow()
        for target, duplicate in [(c.pending, c.by) for c in confirmations] + merges:
            duplicate.status = Status.DELETED
            duplicate.superseded_by = target.memory_id
            duplicate.deleted_at = now
        superseded = supersede(parts, records, near)
    return Outcome(list(records), confirmations, merges, superseded)
