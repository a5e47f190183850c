"""The server's write queue: per-user arrival order, group commit, bounded back-pressure.

Every write request becomes an operation in one bounded queue, drained by one writer thread.
The writer takes everything ready (up to ``max_batch`` operations) and applies it as a batch:
the saves and window turns of all users go to ``Memory.save_many`` in one transaction per key (group
commit); any other write (forget, update, import...) first commits the saves and turns gathered
before it that it may depend on, so each user's writes land in arrival order.
A request is answered only after its transaction committed, so an acknowledged write survives a
crash. Each request gets its own answer: ``save_many`` reports a bad request alone. When
``max_pending`` operations wait, ``submit`` raises ``OverloadedError`` (HTTP 429) at once instead
of buffering without bound.

A large save (more than ``PREPARE_APART_CHARS`` characters of text) is validated, guarded, redacted
and scored in a worker thread while it waits in the queue, and the writer only commits it: those
steps cost about 10 CPU-µs a character, so a batch of a hundred 8,000-character memories would
otherwise hold every tenant's writes for seconds. An operation still being prepared holds back only the
later writes of its own user (a tenant-wide one, all writes after it); everyone else's go on.

Reads are audited too, without a transaction each: their rows are buffered (bounded) and the
writer commits them with the next batch, or within a second when no write comes.

``QueueStats`` counts per tenant as well (``/v1/stats`` shows a key its own tenant's counters).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..storage.actor import acting_as, current_actor
from ..errors import OverloadedError, StoreError
from ..memory import Memory
from ..records import MemoryRecord
from ..write.requests import MemoryDraft, SaveRequest, TurnRequest
from ..write.save import checked_drafts, commit, drafted
from .failures import describe

__all__ = ["WriteQueue", "QueueStats", "PREPARE_APART_CHARS"]

#: a save with more text than this (content, summaries, metadata as JSON) is prepared off the writer thread
PREPARE_APART_CHARS = 20_000

log = logging.getLogger(__name__)

#: (tenant, user) a write belongs to; None for a tenant-wide one (import, maintain), which waits for all before it
UserKey = tuple[str, str] | None


@dataclass
class _Op:
    user: UserKey
    actor: str
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    #: a groupable save or turn (``Memory.save_many``); otherwise ``call``
    request: SaveRequest | TurnRequest | None = None
    call: Callable[[], Any] | None = None
    context: contextvars.Context | None = None
    #: the tenant it counts for (``QueueStats.tenants``)
    tenant: str | None = None
    #: a large save prepared apart: False while its worker thread runs, then its records (or its error)
    ready: bool = True
    prepared: list[MemoryRecord] | None = None
    error: BaseException | None = None


@dataclass
class TenantCounters:
    """One tenant's share of the queue's counters."""

    operations: int = 0
    rejected: int = 0
    reads_audited: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"operations": self.operations, "rejected": self.rejected, "reads_audited": self.reads_audited}


@dataclass
class QueueStats:
    """Counters for ``/v1/stats`` and the load benchmark."""

    pending: int = 0
    max_pending: int = 0
    batches: int = 0
    operations: int = 0
    transactions: int = 0
    rejected: int = 0
    largest_batch: int = 0
    reads_audited: int = 0
    #: saves prepared off the writer thread (``PREPARE_APART_CHARS``)
    prepared_apart: int = 0
    groups: list[int] = field(default_factory=list, repr=False)
    tenants: dict[str, TenantCounters] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"pending": self.pending, "max_pending": self.max_pending, "batches": self.batches,
                "operations": self.operations, "transactions": self.transactions, "rejected": self.rejected,
                "largest_batch": self.largest_batch, "reads_audited": self.reads_audited,
                "prepared_apart": self.prepared_apart}

    def tenant(self, tenant_id: str) -> TenantCounters:
        found = self.tenants.get(tenant_id)
        if found is None:
            found = self.tenants[tenant_id] = TenantCounters()
        return found


class WriteQueue:
    """One writer thread in front of a ``Memory``; see the module docstring."""

    def __init__(self, memory: Memory, *, max_pending: int = 2048, max_batch: int = 256,
                 max_read_rows: int = 20000) -> None:
        if max_pending < 1 or max_batch < 1:
            raise ValueError("max_pending and max_batch must be >= 1")
        self.memory = memory
        self.max_pending = max_pending
        self.max_batch = max_batch
        self.max_read_rows = max_read_rows
        self.stats = QueueStats(max_pending=max_pending)
        self._ops: deque[_Op] = deque()
        self._reads: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="portamem-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Apply what is queued, write the buffered read audit, and stop the writer."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # ------------------------------------------------------------------ submitting
    def _submit(self, op: _Op) -> asyncio.Future[Any]:
        with self._cond:
            if self._stopping:
                raise StoreError("the server is shutting down")
            counters = None if op.tenant is None else self.stats.tenant(op.tenant)
            if len(self._ops) >= self.max_pending:
                self.stats.rejected += 1
                if counters is not None:
                    counters.rejected += 1
                raise OverloadedError(
                    f"the write queue is full ({self.max_pending} writes waiting); retry shortly")
            if counters is not None:
                counters.operations += 1
            self._ops.append(op)
            self.stats.pending = len(self._ops)
            self._cond.notify()
        return op.future

    def pending_of(self, tenant_id: str) -> int:
        """Writes of one tenant waiting now."""
        with self._cond:
            return sum(1 for op in self._ops if op.tenant == tenant_id)

    async def save(self, drafts: Sequence[MemoryDraft], *, user_id: str, tenant_id: str) -> list[MemoryRecord]:
        """Queue a save of ``drafts`` for one user; returns the records once they are committed. A large one
        is prepared in a worker thread meanwhile (``PREPARE_APART_CHARS``)."""
        loop = asyncio.get_running_loop()
        request = SaveRequest(user_id=user_id, memories=list(drafts), tenant_id=tenant_id)
        apart = _chars(request.memories) > PREPARE_APART_CHARS
        op = _Op(user=(tenant_id, user_id), actor=current_actor.get(), future=loop.create_future(), loop=loop,
                 request=request, tenant=tenant_id, ready=not apart)
        future = self._submit(op)
        if apart:
            self.stats.prepared_apart += 1
            threading.Thread(target=self._prepare, args=(op,), name="portamem-prepare", daemon=True).start()
        result: list[MemoryRecord] = await future
        return result

    def _prepare(self, op: _Op) -> None:
        """Validate, guard, redact and score a large save off the writer thread; the writer commits it."""
        assert isinstance(op.request, SaveRequest)
        parts = self.memory.parts
        try:
            user_id, tenant_id, items = checked_drafts(parts, op.request.memories, op.request.user_id,
                                                       op.request.tenant_id)
            op.prepared = drafted(parts, items, user_id=user_id, tenant_id=tenant_id, explicit=True)
        except BaseException as exc:
            op.error = exc
        with self._cond:
            op.ready = True
            self._cond.notify_all()

    async def turn(self, request: TurnRequest, *, tenant_id: str) -> list[MemoryRecord]:
        """Queue a window turn (``request.tenant_id`` is set to ``tenant_id``); returns the memories it wrote."""
        loop = asyncio.get_running_loop()
        request = dataclasses.replace(request, tenant_id=tenant_id)
        op = _Op(user=(tenant_id, request.user_id), actor=current_actor.get(), future=loop.create_future(),
                 loop=loop, request=request, tenant=tenant_id)
        result: list[MemoryRecord] = await self._submit(op)
        return result

    async def run(self, call: Callable[[], Any], *, user: UserKey, tenant: str | None = None) -> Any:
        """Queue any other write (``call`` runs on the writer thread, in the caller's context)."""
        loop = asyncio.get_running_loop()
        op = _Op(user=user, actor=current_actor.get(), future=loop.create_future(), loop=loop, call=call,
                 context=contextvars.copy_context(), tenant=tenant if user is None else user[0])
        return await self._submit(op)

    def note_read(self, action: str, *, tenant_id: str, user_id: str | None, detail: dict[str, Any]) -> None:
        """Buffer the audit row of a read; dropped (and logged) only when the buffer is full."""
        row = {"action": action, "actor": current_actor.get(), "tenant_id": tenant_id, "user_id": user_id,
               "ts": time.time(), "detail": detail}
        with self._cond:
            if len(self._reads) >= self.max_read_rows:
                log.warning("read audit buffer full; a read of %s went unaudited", action)
                return
            self._reads.append(row)
            self.stats.tenant(tenant_id).reads_audited += 1

    # ------------------------------------------------------------------ the writer
    def _take(self) -> list[_Op]:
        """The operations to apply now, in arrival order (at most ``max_batch``): one still being prepared
        holds back the later operations of its user, and a tenant-wide one waits for all before it and
        holds back all after it."""
        taken: list[_Op] = []
        rest: deque[_Op] = deque()
        blocked: set[UserKey] = set()
        barrier = False
        for op in self._ops:
            if barrier or len(taken) >= self.max_batch:
                rest.append(op)
            elif op.user is None and (blocked or not op.ready):
                barrier = True
                rest.append(op)
            elif not op.ready or op.user in blocked:
                blocked.add(op.user)
                rest.append(op)
            else:
                taken.append(op)
        self._ops = rest
        return taken

    def _run(self) -> None:
        while True:
            with self._cond:
                batch = self._take()
                if not batch and not self._stopping:
                    self._cond.wait(timeout=1.0)
                    batch = self._take()
                elif not batch and self._ops:  # stopping: the saves still being prepared finish first
                    self._cond.wait(timeout=0.05)
                reads, self._reads = self._reads, []
                self.stats.pending = len(self._ops)
                done = self._stopping and not self._ops
            if reads:
                self._write_reads(reads)
            if batch:
                self._apply(batch)
            if done:
                return

    def _write_reads(self, rows: list[dict[str, Any]]) -> None:
        try:
            with self.memory.store.transaction() as conn:
                self.memory.store.audit_many(conn, rows)
            self.stats.reads_audited += len(rows)
        except Exception as exc:  # one line: the rows' values (users, queries) stay out of the log
            log.error("writing %d read audit rows failed: %s", len(rows), describe(exc))

    def _apply(self, batch: list[_Op]) -> None:
        self.stats.batches += 1
        self.stats.operations += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        saves: list[_Op] = []
        for op in batch:
            if op.request is not None and (op.prepared is not None or op.error is not None):
                if any(s.user == op.user for s in saves):  # its user's earlier saves commit first
                    self._save(saves)
                    saves = []
                self._commit_prepared(op)
                continue
            if op.request is not None:
                saves.append(op)
                continue
            # a non-save write waits for the saves before it: of its user, or of everyone when tenant-wide
            if any(op.user is None or s.user == op.user for s in saves):
                self._save(saves)
                saves = []
            self._call(op)
        self._save(saves)

    def _save(self, ops: list[_Op]) -> None:
        """Commit waiting saves and turns: one ``save_many`` transaction per key."""
        by_actor: dict[str, list[_Op]] = {}
        for op in ops:
            by_actor.setdefault(op.actor, []).append(op)
        for actor, group in by_actor.items():
            try:
                with acting_as(actor):
                    results = self.memory.save_many([op.request for op in group])  # type: ignore[misc]
            except BaseException as exc:  # the commit itself failed: none of them was written
                for op in group:
                    _settle(op, exc=exc)
                continue
            finally:
                self.stats.transactions += 1
            for op, result in zip(group, results):
                _settle(op, value=list(result.records), exc=result.error)

    def _commit_prepared(self, op: _Op) -> None:
        """Commit a save prepared apart (after the gathered saves of its user, which came before it)."""
        if op.error is not None:
            _settle(op, exc=op.error)
            return
        assert op.prepared is not None
        try:
            with acting_as(op.actor):
                commit(self.memory.parts, op.prepared)
        except BaseException as exc:
            _settle(op, exc=exc)
        else:
            _settle(op, value=list(op.prepared))
        finally:
            self.stats.transactions += 1

    def _call(self, op: _Op) -> None:
        assert op.call is not None and op.context is not None
        try:
            value = op.context.run(op.call)
        except BaseException as exc:
            _settle(op, exc=exc)
        else:
            _settle(op, value=value)
        self.stats.transactions += 1


def _chars(drafts: Sequence[MemoryDraft]) -> int:
    """The text a save brings to the guard and redaction: contents, summaries and metadata."""
    total = 0
    for d in drafts:
        total += len(d.content) if isinstance(d.content, str) else 0
        total += len(d.summary) if isinstance(d.summary, str) else 0
        if d.metadata:
            total += len(repr(d.metadata))
    return total


def _settle(op: _Op, *, value: Any = None, exc: BaseException | None = None) -> None:
    """Answer a request from the writer thread (the caller may have gone away meanwhile)."""

    def deliver() -> None:
        if op.future.done():
            return
        if exc is not None:
            op.future.set_exception(exc)
        else:
            op.future.set_result(value)

    try:
        op.loop.call_soon_threadsafe(deliver)
    except RuntimeError:  # the event loop closed: nobody is waiting
        pass
