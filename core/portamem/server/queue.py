"""The server's write queue: per-user arrival order, group commit, bounded back-pressure.

Every write request becomes an operation in one bounded queue, drained by one writer thread.
The writer takes everything waiting (up to ``max_batch`` operations) and applies it as a batch:
the saves and window turns of all users go to ``Memory.save_many`` in one transaction per key (group
commit); any other write (forget, update, import...) first commits the saves and turns gathered
before it that it may depend on, so each user's writes land in arrival order.
A request is answered only after its transaction committed, so an acknowledged write survives a
crash. Each request gets its own answer: ``save_many`` reports a bad request alone. When
``max_pending`` operations wait, ``submit`` raises ``OverloadedError`` (HTTP 429) at once instead
of buffering without bound.

Reads are audited too, without a transaction each: their rows are buffered (bounded) and the
writer commits them with the next batch, or within a second when no write comes.
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

__all__ = ["WriteQueue", "QueueStats"]

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
    groups: list[int] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"pending": self.pending, "max_pending": self.max_pending, "batches": self.batches,
                "operations": self.operations, "transactions": self.transactions, "rejected": self.rejected,
                "largest_batch": self.largest_batch, "reads_audited": self.reads_audited}


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
            if len(self._ops) >= self.max_pending:
                self.stats.rejected += 1
                raise OverloadedError(
                    f"the write queue is full ({self.max_pending} writes waiting); retry shortly")
            self._ops.append(op)
            self.stats.pending = len(self._ops)
            self._cond.notify()
        return op.future

    async def save(self, drafts: Sequence[MemoryDraft], *, user_id: str, tenant_id: str) -> list[MemoryRecord]:
        """Queue a save of ``drafts`` for one user; returns the records once they are committed."""
        loop = asyncio.get_running_loop()
        op = _Op(user=(tenant_id, user_id), actor=current_actor.get(), future=loop.create_future(), loop=loop,
                 request=SaveRequest(user_id=user_id, memories=list(drafts), tenant_id=tenant_id))
        result: list[MemoryRecord] = await self._submit(op)
        return result

    async def turn(self, request: TurnRequest, *, tenant_id: str) -> list[MemoryRecord]:
        """Queue a window turn (``request.tenant_id`` is set to ``tenant_id``); returns the memories it wrote."""
        loop = asyncio.get_running_loop()
        request = dataclasses.replace(request, tenant_id=tenant_id)
        op = _Op(user=(tenant_id, request.user_id), actor=current_actor.get(), future=loop.create_future(),
                 loop=loop, request=request)
        result: list[MemoryRecord] = await self._submit(op)
        return result

    async def run(self, call: Callable[[], Any], *, user: UserKey) -> Any:
        """Queue any other write (``call`` runs on the writer thread, in the caller's context)."""
        loop = asyncio.get_running_loop()
        op = _Op(user=user, actor=current_actor.get(), future=loop.create_future(), loop=loop, call=call,
                 context=contextvars.copy_context())
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

    # ------------------------------------------------------------------ the writer
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._ops and not self._stopping:
                    self._cond.wait(timeout=1.0)
                batch = [self._ops.popleft() for _ in range(min(len(self._ops), self.max_batch))]
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
        except Exception:
            log.exception("writing %d read audit rows failed", len(rows))

    def _apply(self, batch: list[_Op]) -> None:
        self.stats.batches += 1
        self.stats.operations += len(batch)
        self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
        saves: list[_Op] = []
        for op in batch:
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

    def _call(self, op: _Op) -> None:
        assert op.call is not None and op.context is not None
        try:
            value = op.context.run(op.call)
        except BaseException as exc:
            _settle(op, exc=exc)
        else:
            _settle(op, value=value)
        self.stats.transactions += 1


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
