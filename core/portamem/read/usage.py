"""Which search returned which memory, and which hits reached a prompt (a use: decay counts from the
last one), buffered and written in batches off the search path.

May import: the data model, hooks and ``portamem.storage``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..pipeline import WriteContext
from ..plugins import Hooks
from ..records import SearchHit
from ..storage.sql import RecordStore

__all__ = ["RetrievalLog", "RETRIEVAL_LOG_ROWS"]

#: retrieval rows a store keeps: the hits of 50,000 searches of top 10,
#: the newest ones staying
RETRIEVAL_LOG_ROWS = 500_000

log = logging.getLogger(__name__)


class RetrievalLog:
    """Buffers which search returned which memory and writes the rows in batches, so search stays fast.

    Every ``batch`` rows a background thread writes them (no search waits for the disk); ``flush``
    writes the rest, on close and on ``explain``. Rows still buffered are lost if the process dies.
    The query is stored after PII redaction. The newest ``keep`` rows of the store are kept (older
    ones are dropped as new ones arrive), so a busy server's log does not grow without end.

    A search whose hits reach the prompt (``touch``) also counts as a use of each hit: the same
    writer adds to its ``access_count`` and moves ``last_accessed_at``, which decay counts from.
    """

    def __init__(self, store: RecordStore, hooks: Hooks, *, batch: int = 256, keep: int = RETRIEVAL_LOG_ROWS) -> None:
        self.store = store
        self.hooks = hooks
        self.batch = batch
        self.keep = keep
        self._rows: list[dict[str, Any]] = []
        #: (tenant_id, memory_id) -> [uses, last use]
        self._touches: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None

    def record(self, query: str, hits: Sequence[SearchHit], ctx: WriteContext, *, touch: bool = False,
               now: datetime | None = None) -> None:
        """Log which search returned which memory; with ``touch``, count each hit as used at ``now``."""
        if not hits:
            return
        text, _ = self.hooks.redact(query, ctx)  # redacted whole: a cut first could split a number
        text = text[:500]
        ts, search_id = time.time(), uuid.uuid4().hex
        rows = [{"ts": ts, "search_id": search_id, "tenant_id": ctx.tenant_id, "user_id": ctx.user_id,
                 "memory_id": h.memory_id, "rank": rank, "score": float(h.score), "query": text}
                for rank, h in enumerate(hits, 1)]
        used = now.timestamp() if now is not None else ts
        with self._lock:
            self._rows.extend(rows)
            if touch:
                for h in hits:
                    seen = self._touches.setdefault((ctx.tenant_id, h.memory_id), [0, used])
                    seen[0] += 1
                    seen[1] = max(seen[1], used)
            if len(self._rows) < self.batch or (self._writer is not None and self._writer.is_alive()):
                return
            self._writer = threading.Thread(target=self._write, name="portamem-retrieval-log", daemon=True)
            self._writer.start()

    def _take(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self._lock:
            rows, self._rows = self._rows, []
            touches, self._touches = self._touches, {}
        return rows, [{"tenant_id": t, "memory_id": m, "n": n, "ts": ts} for (t, m), (n, ts) in touches.items()]

    def _write(self) -> None:
        rows, touches = self._take()
        try:
            self.store.log_retrievals(rows, keep=self.keep)
            self.store.record_access(touches)
        except Exception:  # a diagnostic log must never fail a search; the rows are lost
            log.exception("writing %d retrieval log rows failed", len(rows))

    def flush(self) -> None:
        """Write every buffered row now (after any background write in flight)."""
        writer = self._writer
        if writer is not None:
            writer.join()
        rows, touches = self._take()
        self.store.log_retrievals(rows, keep=self.keep)
        self.store.record_access(touches)
