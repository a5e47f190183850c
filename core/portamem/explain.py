"""Why a memory is what it is: when and from which turn it was written, its trust, and every search that returned it."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .pipeline import WriteContext
from .plugins import Hooks
from .records import MemoryRecord, SearchHit, from_iso, to_iso
from .store import RecordStore

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["RetrievalLog", "Retrieval", "Explanation", "explain", "RETRIEVAL_LOG_ROWS"]

#: retrieval rows a store keeps: the hits of 50,000 searches of top 10,
#: the newest ones staying
RETRIEVAL_LOG_ROWS = 500_000

log = logging.getLogger(__name__)

#: how written, by the first audit action of a memory
_WRITTEN_BY = {
    "save": "saved through the API",
    "compress_turns": "compressed from turns that left the working window",
    "import": "imported from an export",
}
_CAPTURED = "captured from the user's message of a turn by the write-triggers"


class RetrievalLog:
    """Buffers which search returned which memory and writes the rows in batches, so search stays fast.

    Every ``batch`` rows a background thread writes them (no search waits for the disk); ``flush``
    writes the rest, on close and on ``explain``. Rows still buffered are lost if the process dies.
    The query is stored after PII redaction. The newest ``keep`` rows of the store are kept (older
    ones are dropped as new ones arrive), so a busy server's log does not grow without end.
    """

    def __init__(self, store: RecordStore, hooks: Hooks, *, batch: int = 256, keep: int = RETRIEVAL_LOG_ROWS) -> None:
        self.store = store
        self.hooks = hooks
        self.batch = batch
        self.keep = keep
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None

    def record(self, query: str, hits: Sequence[SearchHit], ctx: WriteContext) -> None:
        if not hits:
            return
        text, _ = self.hooks.redact(query, ctx)  # redacted whole: a cut first could split a number
        text = text[:500]
        now, search_id = time.time(), uuid.uuid4().hex
        rows = [{"ts": now, "search_id": search_id, "tenant_id": ctx.tenant_id, "user_id": ctx.user_id,
                 "memory_id": h.memory_id, "rank": rank, "score": float(h.score), "query": text}
                for rank, h in enumerate(hits, 1)]
        with self._lock:
            self._rows.extend(rows)
            if len(self._rows) < self.batch or (self._writer is not None and self._writer.is_alive()):
                return
            self._writer = threading.Thread(target=self._write, name="portamem-retrieval-log", daemon=True)
            self._writer.start()

    def _write(self) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
        try:
            self.store.log_retrievals(rows, keep=self.keep)
        except Exception:  # a diagnostic log must never fail a search; the rows are lost
            log.exception("writing %d retrieval log rows failed", len(rows))

    def flush(self) -> None:
        """Write every buffered row now (after any background write in flight)."""
        writer = self._writer
        if writer is not None:
            writer.join()
        with self._lock:
            rows, self._rows = self._rows, []
        self.store.log_retrievals(rows, keep=self.keep)


@dataclass(frozen=True)
class Retrieval:
    """One search that returned the memory."""

    at: datetime
    query: str
    rank: int
    score: float
    search_id: str


@dataclass
class Explanation:
    """Provenance and use of one memory (``Memory.explain``, ``portamem show``)."""

    record: MemoryRecord
    written_at: datetime
    written_by: str
    session_id: str | None
    #: the turns it came from, when it was compressed or captured from the working window
    turns: list[dict[str, Any]]
    guard: dict[str, Any] | None
    trust_note: dict[str, Any] | None
    redactions: list[str]
    history: list[dict[str, Any]]
    retrievals: list[Retrieval] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {
            "memory_id": r.memory_id, "user_id": r.user_id, "content": r.content, "type": r.type.value,
            "kind": r.kind, "status": r.status.value, "source": r.source.value, "trust": r.trust.value,
            "importance": r.importance, "importance_band": r.importance_band, "access_count": r.access_count,
            "frequency": r.frequency, "written_at": to_iso(self.written_at), "written_by": self.written_by,
            "session_id": self.session_id, "agent_id": r.agent_id, "turns": self.turns, "guard": self.guard,
            "trust_note": self.trust_note, "redactions": self.redactions,
            "history": [{**h, "ts": to_iso(h["ts"])} for h in self.history],
            "retrievals": [{"at": to_iso(x.at), "query": x.query, "rank": x.rank, "score": x.score,
                            "search_id": x.search_id} for x in self.retrievals],
        }

    def render(self) -> str:
        """A few lines for a person: the answer to "why does the assistant believe this?"."""
        r = self.record
        lines = [
            f"memory {r.memory_id} ({r.type.value}/{r.kind or '-'}, {r.status.value})",
            f"  {r.content.splitlines()[0][:120] if r.content else ''}",
            f"  written {self.written_at:%Y-%m-%d %H:%M} UTC, {self.written_by}"
            + (f", session {self.session_id}" if self.session_id else "")
            + (f", agent {r.agent_id}" if r.agent_id else ""),
            f"  source {r.source.value}, trust {r.trust.value}, importance {r.importance:.2f} (band {r.importance_band}),"
            f" seen {r.frequency}x, accessed {r.access_count}x",
        ]
        for t in self.turns:
            lines.append(f"  from turn {t.get('created_at', '?')}: user: {str(t.get('user', ''))[:80]!r}")
        if self.guard:
            lines.append(f"  guard: {self.guard.get('action')} - {self.guard.get('reason')}")
        if self.trust_note:
            lines.append(f"  trust: {self.trust_note.get('reason') or self.trust_note}")
        if self.redactions:
            lines.append(f"  redacted: {', '.join(self.redactions)}")
        lines.append(f"  returned by {len(self.retrievals)} search(es)" + (":" if self.retrievals else ""))
        for x in self.retrievals[-20:]:
            lines.append(f"    {x.at:%Y-%m-%d %H:%M:%S}  rank {x.rank}  score {x.score:.3f}  {x.query[:70]!r}")
        lines.append("  history: " + ", ".join(f"{h['action']} {h['ts']:%Y-%m-%d %H:%M}" for h in self.history))
        return "\n".join(lines)


def explain(mem: Memory, record: MemoryRecord) -> Explanation:
    """Gather a stored record's audit trail, source turns and retrievals."""
    mem.retrieval_log.flush()
    history = mem.store.audit_trail(record.tenant_id, record.memory_id)
    first = history[0] if history else {"action": "save", "ts": record.created_at, "detail": {}}
    turns = [dict(t) for t in record.metadata.get("turns", [])]
    written_by = _WRITTEN_BY.get(first["action"], first["action"])
    if not turns and "trigger" in record.metadata:
        # a captured memory is the user's message of one turn, dated with that turn
        written_by = _CAPTURED
        turns = [{"created_at": to_iso(record.created_at), "user": record.content,
                  "trigger": record.metadata["trigger"]}]
    retrievals = [Retrieval(row["ts"], row["query"], row["rank"], row["score"], row["search_id"])
                  for row in mem.store.retrievals(record.tenant_id, record.memory_id)]
    written_at = from_iso(first["ts"]) or record.created_at
    return Explanation(
        record=record,
        written_at=written_at,
        written_by=written_by,
        session_id=record.session_id or first.get("detail", {}).get("session_id"),
        turns=turns,
        guard=record.metadata.get("guard"),
        trust_note=record.metadata.get("trust"),
        redactions=list(record.metadata.get("redactions", [])),
        history=history,
        retrievals=retrievals,
    )
