"""The working window's write side: turns that leave it become episodic memory; triggers capture facts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from ..components import Components
from ..filters import SearchFilters
from ..pipeline import WriteContext
from ..records import MemoryRecord, MemoryType, Source, Status, Turn
from ..statements import single_valued
from .requests import MemoryDraft
from .save import build_record, prepare, write

__all__ = ["MESSAGES_KEY", "LASTING_KINDS", "capture", "capture_draft", "compress", "episode", "episode_draft", "tool_drafts"]

#: metadata key of a turn folded from a framework's messages: the messages themselves (``portamem.messages``)
MESSAGES_KEY = "messages"
#: characters of a tool's result kept in its memory (the rest stays with the tool)
TOOL_RESULT_CHARS = 300

#: kinds a person states once and expects remembered: captured straight into long-term memory
LASTING_KINDS = frozenset({"identity", "preference"})


def capture(
    parts: Components, turn: Turn, *, user_id: str, tenant_id: str, session_id: str, wait: bool = False
) -> list[MemoryRecord]:
    """Run the write-triggers on the user's message and write what they keep (``capture_draft``)."""
    found = capture_draft(parts, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
    if found is None:
        return []
    draft, explicit = found
    return write(parts, [draft], user_id=user_id, tenant_id=tenant_id, explicit=explicit, wait=wait)


def capture_draft(
    parts: Components, turn: Turn, *, user_id: str, tenant_id: str, session_id: str
) -> tuple[MemoryDraft, bool] | None:
    """What the write-triggers keep of the user's message, and whether the user stressed it; None for nothing.

    A vote the user stressed ("remember that ...") goes to long-term memory at once, and so does
    who the user is and what they like (``LASTING_KINDS``: said once, "My name is Dana", it holds for
    its kind's half-life) and the value of one of their attributes ("my budget is 8000", which
    supersedes the previous value); any other goes to working memory as a candidate that becomes long-term
    when it is seen a second time.
    """
    if not parts.settings.auto_capture or not turn.user.strip():
        return None
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings,
                       session_id=session_id, source=Source.USER, explicit=False)
    votes = parts.hooks.trigger_votes(turn.user, ctx)
    yes = [v for _, v in votes if v.remember]
    no = max((v.strength for _, v in votes if not v.remember), default=0.0)
    if not yes:
        return None
    best = max(yes, key=lambda v: v.strength)
    if best.strength < parts.settings.trigger_threshold or best.strength <= no:
        return None
    explicit = any(v.explicit for v in yes)
    extraction = parts.hooks.extract(turn.user, ctx)
    states_a_value = extraction is not None and any(len(t) >= 3 and single_valued(str(t[1]))
                                                    for t in extraction.triples)
    lasting = explicit or best.kind in LASTING_KINDS or states_a_value
    draft = MemoryDraft(
        content=turn.user.strip()[: parts.settings.max_content_chars],
        type=best.type if lasting else MemoryType.WORKING,
        kind=best.kind if best.kind in parts.settings.half_lives else None,
        session_id=session_id,
        created_at=turn.created_at,
        half_life_days=None if lasting else parts.settings.half_lives["task"],
        metadata={"trigger": best.reason, **({} if lasting else {"promote_to": best.type.value})},
    )
    return draft, explicit


def captured_from(
    parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> list[str]:
    """Ids of memories the write-triggers captured from these turns (same session, same time)."""
    times = {t.created_at.timestamp() for t in turns}
    window = SearchFilters(statuses=(Status.ACTIVE, Status.PENDING), session_id=session_id,
                           created_after=min(turns, key=lambda t: t.created_at).created_at - timedelta(seconds=1),
                           created_before=max(turns, key=lambda t: t.created_at).created_at)
    return [r.memory_id for r in parts.store.list(tenant_id, user_id, window)
            if "trigger" in r.metadata and r.created_at.timestamp() in times]


def episode_draft(
    parts: Components, turns: Sequence[Turn], *, user_id: str, tenant_id: str, session_id: str
) -> MemoryDraft | None:
    """The episodic memory that stands for turns leaving a window (the summariser plugins write its text
    and its key facts, intent and outcome); None when nothing was worth keeping. The turns themselves
    ride in its metadata."""
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings,
                       session_id=session_id, source=Source.USER, explicit=False)
    found = parts.hooks.summarize_turns(turns, ctx)
    fields = found if isinstance(found, dict) else {"summary": found or ""}
    text = str(fields["summary"]).strip()[: parts.settings.max_content_chars]
    if not text:
        return None
    covers = captured_from(parts, turns, user_id, tenant_id, session_id)
    episode = {k: fields[k] for k in ("key_facts", "user_intent", "outcome") if fields.get(k)}
    return MemoryDraft(
        content=text,
        type=MemoryType.EPISODIC,
        source=Source.USER,
        session_id=session_id,
        kind="episodic",
        created_at=turns[0].created_at,
        entities=list(fields["entities"]) if fields.get("entities") else None,
        metadata={
            **({"covers": covers} if covers else {}),
            **({"episode": episode} if episode else {}),
            "turns": [{"user": t.user, "assistant": t.assistant, "created_at": t.created_at.isoformat(),
                       "metadata": _without_tool_output(t.metadata)} for t in turns],
        },
    )


def _sentence(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _tool_messages(turn: Turn) -> list[dict[str, Any]]:
    stored = turn.metadata.get(MESSAGES_KEY)
    return [m for m in stored if isinstance(m, dict) and m.get("role") == "tool"] if isinstance(stored, list) else []


def _without_tool_output(metadata: dict[str, Any]) -> dict[str, Any]:
    """A turn's metadata for an episode: tool results become a pointer to their tool memory."""
    stored = metadata.get(MESSAGES_KEY)
    if not isinstance(stored, list):
        return metadata
    slim = [{**m, "text": "[summarised in a source=tool memory]", "native": None}
            if isinstance(m, dict) and m.get("role") == "tool" else m for m in stored]
    return {**metadata, MESSAGES_KEY: slim}


def tool_drafts(turns: Sequence[Turn], session_id: str) -> list[MemoryDraft]:
    """One ``source=tool`` memory per tool result in the turns: what was called (for what request),
    what came back (its start) and what the reply made of it."""
    out = []
    for turn in turns:
        for m in _tool_messages(turn):
            result = _sentence(str(m.get("text") or ""), TOOL_RESULT_CHARS)
            if not result:
                continue
            name = m.get("name") or "a tool"
            content = (f"Tool {name} was called for: {_sentence(turn.user, 160) or '(no request text)'}. "
                       f"It returned: {result}. The reply used: {_sentence(turn.assistant, 200)}")
            out.append(MemoryDraft(content=content, type=MemoryType.EPISODIC, kind="episodic", source=Source.TOOL,
                                   session_id=session_id, created_at=turn.created_at,
                                   metadata={"tool": {"name": name, "result_chars": len(str(m.get("text") or ""))}}))
    return out


def compress(parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> list[MemoryRecord]:
    """What turns leaving the window become: their episode (unless nothing was worth keeping) and
    one tool memory per tool result."""
    drafts = [d for d in [episode_draft(parts, turns, user_id=user_id, tenant_id=tenant_id, session_id=session_id)]
              if d is not None] + tool_drafts(turns, session_id)
    records = []
    for draft in drafts:
        record = build_record(parts, draft, user_id=user_id, tenant_id=tenant_id)
        prepare(parts, draft, record, explicit=False)
        records.append(record)
    return records


def episode(
    parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> MemoryRecord | None:
    draft = episode_draft(parts, turns, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
    if draft is None:
        return None
    record = build_record(parts, draft, user_id=user_id, tenant_id=tenant_id)
    prepare(parts, draft, record, explicit=False)
    return record
