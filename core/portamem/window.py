"""The working window's write side: turns that leave it become episodic memory; triggers capture facts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from .filters import SearchFilters
from .pipeline import WriteContext
from .records import MemoryRecord, MemoryType, Source, Status, Turn
from .writing import MemoryDraft, build_record, prepare, write

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["capture", "capture_draft", "episode", "episode_draft"]


def capture(
    mem: Memory, turn: Turn, *, user_id: str, tenant_id: str, session_id: str, wait: bool = False
) -> list[MemoryRecord]:
    """Run the write-triggers on the user's message and write what they keep (``capture_draft``)."""
    found = capture_draft(mem, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
    if found is None:
        return []
    draft, explicit = found
    return write(mem, [draft], user_id=user_id, tenant_id=tenant_id, explicit=explicit, wait=wait)


def capture_draft(
    mem: Memory, turn: Turn, *, user_id: str, tenant_id: str, session_id: str
) -> tuple[MemoryDraft, bool] | None:
    """What the write-triggers keep of the user's message, and whether the user stressed it; None for nothing.

    A vote the user stressed ("remember that ...") goes to long-term memory at once; any other goes
    to working memory as a candidate that becomes long-term when it is seen a second time.
    """
    if not mem.settings.auto_capture or not turn.user.strip():
        return None
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=mem.settings,
                       session_id=session_id, source=Source.USER, explicit=False)
    votes = mem.hooks.trigger_votes(turn.user, ctx)
    yes = [v for _, v in votes if v.remember]
    no = max((v.strength for _, v in votes if not v.remember), default=0.0)
    if not yes:
        return None
    best = max(yes, key=lambda v: v.strength)
    if best.strength < mem.settings.trigger_threshold or best.strength <= no:
        return None
    explicit = any(v.explicit for v in yes)
    draft = MemoryDraft(
        content=turn.user.strip()[: mem.settings.max_content_chars],
        type=best.type if explicit else MemoryType.WORKING,
        kind=best.kind if best.kind in mem.settings.half_lives else None,
        session_id=session_id,
        created_at=turn.created_at,
        half_life_days=None if explicit else mem.settings.half_lives["task"],
        metadata={"trigger": best.reason, **({} if explicit else {"promote_to": best.type.value})},
    )
    return draft, explicit


def captured_from(
    mem: Memory, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> list[str]:
    """Ids of memories the write-triggers captured from these turns (same session, same time)."""
    times = {t.created_at.timestamp() for t in turns}
    window = SearchFilters(statuses=(Status.ACTIVE, Status.PENDING), session_id=session_id,
                           created_after=min(turns, key=lambda t: t.created_at).created_at - timedelta(seconds=1),
                           created_before=max(turns, key=lambda t: t.created_at).created_at)
    return [r.memory_id for r in mem.store.list(tenant_id, user_id, window)
            if "trigger" in r.metadata and r.created_at.timestamp() in times]


def episode_draft(
    mem: Memory, turns: Sequence[Turn], *, user_id: str, tenant_id: str, session_id: str
) -> MemoryDraft | None:
    """The episodic memory that stands for turns leaving a window (the summariser plugins write its text);
    None when nothing was summarised. The turns themselves ride in its metadata."""
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=mem.settings,
                       session_id=session_id, source=Source.USER, explicit=False)
    text = (mem.hooks.summarize_turns(turns, ctx) or "").strip()[: mem.settings.max_content_chars]
    if not text:
        return None
    covers = captured_from(mem, turns, user_id, tenant_id, session_id)
    return MemoryDraft(
        content=text,
        type=MemoryType.EPISODIC,
        source=Source.USER,
        session_id=session_id,
        kind="episodic",
        created_at=turns[0].created_at,
        metadata={
            **({"covers": covers} if covers else {}),
            "turns": [{"user": t.user, "assistant": t.assistant, "created_at": t.created_at.isoformat(),
                       "metadata": t.metadata} for t in turns],
        },
    )


def episode(
    mem: Memory, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> MemoryRecord | None:
    draft = episode_draft(mem, turns, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
    if draft is None:
        return None
    record = build_record(mem, draft, user_id=user_id, tenant_id=tenant_id)
    prepare(mem, draft, record, explicit=False)
    return record
