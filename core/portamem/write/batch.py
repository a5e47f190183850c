"""Many users' saves and window turns in one transaction (``Memory.save_many``, the server's write queue).

A write queue hands over everything waiting at once. Each request is validated, guarded and redacted
on its own, so a bad one gets its typed error in its ``SaveResult`` and the others are still written;
the valid ones commit together and one fsync covers them all. Requests apply in the order given: a
turn reads the window its session's earlier turns left. A second turn of one session in the list
starts the next transaction, so the episode of a turn leaving the window always finds the memories
captured from it (they are committed by then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..components import Components
from ..errors import PortamemError, ValidationError
from ..pipeline import WriteContext
from ..records import MemoryRecord, Turn, utcnow
from . import validation as check
from .privacy import redact_turn
from .requests import SaveRequest, SaveResult, TurnRequest
from ..storage import formation as formation_queue
from .forming import turn_row
from .save import checked_drafts, drafted, stage
from .window import capture_drafts, compress

__all__ = ["save_many", "close_sessions", "FORMATION_CONTEXT"]

#: the turns before a user turn that the formation queue keeps with it (its session context)
FORMATION_CONTEXT = 3


@dataclass
class _Turn:
    """A checked turn: its scope, the turn itself, and the memories its write-triggers keep."""

    tenant_id: str
    user_id: str
    session_id: str
    turn: Turn
    captured: list[MemoryRecord] = field(default_factory=list)
    #: the formation queue's row for the turn (``portamem.background.formation``), set as it is written
    queued: dict[str, Any] | None = None

    @property
    def session(self) -> tuple[str, str, str]:
        return self.tenant_id, self.user_id, self.session_id


def _checked_turn(parts: Components, req: TurnRequest) -> _Turn:
    user_id = check.check_id(parts.settings, "user_id", req.user_id)
    tenant_id = check.check_tenant(parts.settings, req.tenant_id, parts.tenant_id)
    session_id = check.check_id(parts.settings, "session_id", req.session_id)
    check.check_opaque_ids(parts.hooks, parts.settings, tenant_id, user_id, session_id=session_id)
    user, assistant, meta = check.check_turn(parts.settings, req.user, req.assistant, req.metadata)
    # an episode quotes its turns' metadata: a caller's turn may not bring provenance into it
    check.check_provenance("turn metadata", meta)
    created_at = check.check_datetime("created_at", req.created_at)
    turn = Turn(user=user, assistant=assistant, metadata=meta, created_at=created_at or utcnow())
    planned = _Turn(tenant_id, user_id, session_id, turn)
    for draft, explicit in capture_drafts(parts, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id):
        planned.captured += drafted(parts, [draft], user_id=user_id, tenant_id=tenant_id, explicit=explicit)
    return planned


def save_many(parts: Components, requests: Sequence[SaveRequest | TurnRequest]) -> list[SaveResult]:
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
                planned = _checked_turn(parts, req)
            else:
                user_id, tenant_id, items = checked_drafts(parts, req.memories, req.user_id, req.tenant_id)
                result.records = drafted(parts, items, user_id=user_id, tenant_id=tenant_id, explicit=True)
        except PortamemError as exc:
            result.error = exc
            continue
        if planned is not None:
            if planned.session in sessions:
                _apply(parts, segment)
                segment, sessions = [], set()
            sessions.add(planned.session)
        segment.append((result, planned))
    _apply(parts, segment)
    return results


def _apply(parts: Components, segment: Sequence[tuple[SaveResult, _Turn | None]]) -> None:
    """One transaction for a segment: each turn's window change and episode, then every new record."""
    if not segment:
        return
    episodes: list[MemoryRecord] = []
    try:
        with parts.lock, parts.store.transaction() as conn:
            compressed: list[dict[str, Any]] = []
            for result, planned in segment:
                if planned is None:
                    continue
                try:
                    written = _turn(parts, conn, planned, compressed)
                except PortamemError as exc:  # its summariser or guard refused: this turn alone fails
                    result.error = exc
                    continue
                episodes.extend(written)
                result.records = written + planned.captured
            parts.outbox.enqueue(episodes)  # noted before the commit, as ``stage`` does
            parts.store.insert(conn, episodes)
            parts.store.audit_many(conn, compressed)
            stage(parts, conn, [r for result, planned in segment if result.error is None
                                for r in (result.records if planned is None else planned.captured)])
            # each user turn waits for formation in the transaction that writes it: acknowledged is queued
            queued = [planned.queued for result, planned in segment
                      if planned is not None and result.error is None and planned.queued is not None]
            formation_queue.enqueue(conn, queued)
    except BaseException:
        parts.outbox.forget([r.memory_id for result, _ in segment for r in result.records])
        raise
    if queued and parts.formation is not None:
        parts.formation.notify()


def close_sessions(parts: Components, tenant_id: str, user_id: str, *, now: datetime, idle_s: float,
                   keep: str | None = None) -> list[MemoryRecord]:
    """End the user's sessions whose last turn is ``idle_s`` or more before ``now`` (all but ``keep``):
    their windows leave as episodes, as when a full window empties, so what was said in a finished
    conversation is in long-term memory when the next one begins. Returns the episodes written."""
    ended = []
    for session_id in parts.store.session_ids(tenant_id, user_id):
        if session_id == keep:
            continue
        window = parts.store.turns(tenant_id, user_id, session_id)
        if window and (now - window[-1].created_at).total_seconds() >= idle_s:
            ended.append((session_id, window))
    written: list[MemoryRecord] = []
    for session_id, window in ended:
        with parts.lock:
            episodes = compress(parts, window, user_id, tenant_id, session_id)
            try:
                with parts.store.transaction() as conn:
                    parts.outbox.enqueue(episodes)  # noted before the commit, as ``stage`` does
                    parts.store.insert(conn, episodes)
                    parts.store.drop_turns(conn, [t.seq for t in window if t.seq])
                    parts.store.audit_many(conn, _compressed(episodes, tenant_id, user_id, session_id, len(window),
                                                             ended=True))
            except BaseException:
                parts.outbox.forget([e.memory_id for e in episodes])
                raise
        written.extend(episodes)
    return written


def _compressed(episodes: Sequence[MemoryRecord], tenant_id: str, user_id: str, session_id: str, turns: int, *,
                ended: bool = False) -> list[dict[str, Any]]:
    return [{"action": "compress_turns", "tenant_id": tenant_id, "user_id": user_id, "memory_id": e.memory_id,
             "detail": {"session_id": session_id, "turns": turns, **({"session_ended": True} if ended else {})}}
            for e in episodes]


def _turn(parts: Components, conn: Any, planned: _Turn, audit: list[dict[str, Any]]) -> list[MemoryRecord]:
    """Append a turn to its window in ``conn``; the turns it pushes out become the returned
    episode and tool memories (``portamem.write.window.compress``)."""
    tenant_id, user_id, session_id, turn = planned.tenant_id, planned.user_id, planned.session_id, planned.turn
    window = parts.store.turns(tenant_id, user_id, session_id, conn=conn)
    overflow = len(window) + 1 - parts.settings.window_turns
    if overflow > len(window):  # no window at all: the turn itself leaves at once
        evicted = [*window, turn]
    elif overflow > 0:  # the oldest half of the window leaves together: one episode of several turns
        evicted = window[: max(overflow, parts.settings.window_turns // 2)]
    else:
        evicted = []
    episodes = compress(parts, evicted, user_id, tenant_id, session_id) if evicted else []
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings, session_id=session_id)
    kept = redact_turn(parts.hooks, turn, ctx) if parts.settings.redact_window else turn
    if not any(t is turn for t in evicted):
        parts.store.add_turn(conn, tenant_id, user_id, session_id, kept)
    if parts.settings.auto_capture and kept.user.strip():  # the turn and the few before it, as the window keeps them
        planned.queued = turn_row(tenant_id, user_id, session_id, kept, window[-FORMATION_CONTEXT:],
                                  [r.memory_id for r in planned.captured])
    parts.store.drop_turns(conn, [t.seq for t in evicted if t.seq])
    audit.extend(_compressed(episodes, tenant_id, user_id, session_id, len(evicted)))
    return episodes
