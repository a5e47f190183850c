"""Group commit: the saves and window turns of many users and tenants in one transaction (``Memory.save_many``).

A write queue hands over everything waiting at once. Each request is validated, guarded and redacted
on its own, so a bad one gets its typed error in its ``SaveResult`` and the others are still written;
the valid ones commit together and one fsync covers them all. Requests apply in the order given: a
turn reads the window its session's earlier turns left. A second turn of one session in the list
starts the next transaction, so the episode of a turn leaving the window always finds the memories
captured from it (they are committed by then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import validation as check
from .errors import PortamemError, ValidationError
from .pipeline import WriteContext
from .privacy import redact_turn
from .records import MemoryRecord, Turn, utcnow
from .window import capture_draft, compress
from .writing import SaveRequest, SaveResult, drafted, stage

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["TurnRequest", "save_many"]


@dataclass(frozen=True)
class TurnRequest:
    """One turn for the working window in a group commit: the same fields as ``Memory.add_turn``."""

    user_id: str
    user: str
    assistant: str
    session_id: str = "default"
    metadata: Mapping[str, Any] | None = None
    tenant_id: str | None = None
    created_at: datetime | None = None


@dataclass
class _Turn:
    """A checked turn: its scope, the turn itself, and the memories its write-triggers keep."""

    tenant_id: str
    user_id: str
    session_id: str
    turn: Turn
    captured: list[MemoryRecord] = field(default_factory=list)

    @property
    def session(self) -> tuple[str, str, str]:
        return self.tenant_id, self.user_id, self.session_id


def _checked_turn(mem: Memory, req: TurnRequest) -> _Turn:
    user_id = mem._user(req.user_id)
    tenant_id = mem._tenant(req.tenant_id)
    session_id = check.check_id(mem.settings, "session_id", req.session_id)
    check.check_opaque_ids(mem.hooks, mem.settings, tenant_id, user_id, session_id=session_id)
    user, assistant, meta = check.check_turn(mem.settings, req.user, req.assistant, req.metadata)
    created_at = check.check_datetime("created_at", req.created_at)
    turn = Turn(user=user, assistant=assistant, metadata=meta, created_at=created_at or utcnow())
    planned = _Turn(tenant_id, user_id, session_id, turn)
    found = capture_draft(mem, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
    if found is not None:
        draft, explicit = found
        planned.captured = drafted(mem, [draft], user_id=user_id, tenant_id=tenant_id, explicit=explicit)
    return planned


def save_many(mem: Memory, requests: Sequence[SaveRequest | TurnRequest]) -> list[SaveResult]:
    """``Memory.save_many``: see the module docstring."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence):
        raise ValidationError("save_many takes a list of SaveRequest or TurnRequest")
    results: list[SaveResult] = []
    segment: list[tuple[SaveResult, _Turn | None]] = []
    sessions: set[tuple[str, str, str]] = set()
    for req in requests:
        if not isinstance(req, (SaveRequest, TurnRequest)):
            raise ValidationError(f"save_many takes SaveRequest or TurnRequest items, got {type(req).__name__}")
    for req in requests:
        result = SaveResult(req)
        results.append(result)
        planned: _Turn | None = None
        try:
            if isinstance(req, TurnRequest):
                planned = _checked_turn(mem, req)
            else:
                user_id, tenant_id, items = mem._checked_drafts(req.memories, req.user_id, req.tenant_id)
                result.records = drafted(mem, items, user_id=user_id, tenant_id=tenant_id, explicit=True)
        except PortamemError as exc:
            result.error = exc
            continue
        if planned is not None:
            if planned.session in sessions:
                _apply(mem, segment)
                segment, sessions = [], set()
            sessions.add(planned.session)
        segment.append((result, planned))
    _apply(mem, segment)
    return results


def _apply(mem: Memory, segment: Sequence[tuple[SaveResult, _Turn | None]]) -> None:
    """One transaction for a segment: each turn's window change and episode, then every new record."""
    if not segment:
        return
    episodes: list[MemoryRecord] = []
    try:
        with mem._lock, mem.store.transaction() as conn:
            compressed: list[dict[str, Any]] = []
            for result, planned in segment:
                if planned is None:
                    continue
                try:
                    written = _turn(mem, conn, planned, compressed)
                except PortamemError as exc:  # its summariser or guard refused: this turn alone fails
                    result.error = exc
                    continue
                episodes.extend(written)
                result.records = written + planned.captured
            mem.indexer.enqueue(episodes)  # noted before the commit, as ``stage`` does
            mem.store.insert(conn, episodes)
            mem.store.audit_many(conn, compressed)
            stage(mem, conn, [r for result, planned in segment if result.error is None
                              for r in (result.records if planned is None else planned.captured)])
    except BaseException:
        mem.indexer.forget([r.memory_id for result, _ in segment for r in result.records])
        raise


def _turn(mem: Memory, conn: Any, planned: _Turn, audit: list[dict[str, Any]]) -> list[MemoryRecord]:
    """Append a turn to its window in ``conn``; the turns it pushes out become the returned
    episode and tool memories (``portamem.window.compress``)."""
    tenant_id, user_id, session_id, turn = planned.tenant_id, planned.user_id, planned.session_id, planned.turn
    window = mem.store.turns(tenant_id, user_id, session_id, conn=conn)
    overflow = len(window) + 1 - mem.settings.window_turns
    evicted = [*window, turn] if overflow > len(window) else window[: max(0, overflow)]
    episodes = compress(mem, evicted, user_id, tenant_id, session_id) if evicted else []
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=mem.settings, session_id=session_id)
    kept = redact_turn(mem.hooks, turn, ctx) if mem.settings.redact_window else turn
    if not any(t is turn for t in evicted):
        mem.store.add_turn(conn, tenant_id, user_id, session_id, kept)
    mem.store.drop_turns(conn, [t.seq for t in evicted if t.seq])
    audit.extend({"action": "compress_turns", "tenant_id": tenant_id, "user_id": user_id, "memory_id": e.memory_id,
                  "detail": {"session_id": session_id, "turns": len(evicted)}} for e in episodes)
    return episodes
