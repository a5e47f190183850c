"""Why a memory is what it is: when and from which turn it was written, its trust, and every search that returned it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..read.usage import RetrievalLog
from ..records import MemoryRecord, from_iso, to_iso
from ..storage.sql import RecordStore

__all__ = ["Retrieval", "Explanation", "explain"]

#: how written, by the first audit action of a memory
_WRITTEN_BY = {
    "save": "saved through the API",
    "compress_turns": "compressed from turns that left the working window",
    "import": "imported from an export",
}
_CAPTURED = "captured from the user's message of a turn by the write-triggers"


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
            "session_id": self.session_id, "agent_id": r.agent_id, "supersedes": r.supersedes,
            "superseded_by": r.superseded_by, "turns": self.turns, "guard": self.guard,
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
        if r.superseded_by:
            lines.append(f"  superseded by {r.superseded_by} (a newer value; kept as history)")
        if r.supersedes:
            lines.append(f"  supersedes {r.supersedes}")
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


def explain(store: RecordStore, log: RetrievalLog, record: MemoryRecord) -> Explanation:
    """Gather a stored record's audit trail, source turns and retrievals (the log's pending rows written first)."""
    log.flush()
    history = store.audit_trail(record.tenant_id, record.memory_id)
    first = history[0] if history else {"action": "save", "ts": record.created_at, "detail": {}}
    turns = [dict(t) for t in record.metadata.get("turns", [])]
    written_by = _WRITTEN_BY.get(first["action"], first["action"])
    if not turns and "trigger" in record.metadata:
        # a captured memory is the user's message of one turn, dated with that turn
        written_by = _CAPTURED
        turns = [{"created_at": to_iso(record.created_at), "user": record.content,
                  "trigger": record.metadata["trigger"]}]
    retrievals = [Retrieval(row["ts"], row["query"], row["rank"], row["score"], row["search_id"])
                  for row in store.retrievals(record.tenant_id, record.memory_id)]
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
