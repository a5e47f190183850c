"""The working window's write side: turns that leave it become episodic memory; triggers capture facts."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ..components import Components
from ..filters import SearchFilters
from ..pipeline import TriggerVote, WriteContext
from ..records import MemoryRecord, MemoryType, Source, Status, Turn
from ..language.statements import Statement
from ..language.text import clip, same_passage
from .requests import MemoryDraft
from .save import build_record, prepare, write

__all__ = ["MESSAGES_KEY", "LASTING_KINDS", "capture", "capture_drafts", "compress", "episode", "episode_draft",
           "tool_drafts"]

#: metadata key of a turn folded from a framework's messages: the messages themselves (``portamem.messages``)
MESSAGES_KEY = "messages"
#: characters of a tool's result kept in its memory (the rest stays with the tool)
TOOL_RESULT_CHARS = 300

#: kinds a person states once and expects remembered: captured straight into long-term memory
LASTING_KINDS = frozenset({"identity", "preference"})
#: a write-trigger vote this strong (a correction, say) is long-term at once too
LASTING_STRENGTH = 0.8


def capture(
    parts: Components, turn: Turn, *, user_id: str, tenant_id: str, session_id: str, wait: bool = False
) -> list[MemoryRecord]:
    """Write what the user's message leaves in memory (``capture_drafts``)."""
    out: list[MemoryRecord] = []
    for draft, explicit in capture_drafts(parts, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id):
        out.extend(write(parts, [draft], user_id=user_id, tenant_id=tenant_id, explicit=explicit, wait=wait))
    return out


def capture_drafts(
    parts: Components, turn: Turn, *, user_id: str, tenant_id: str, session_id: str
) -> list[tuple[MemoryDraft, bool]]:
    """What the user's message leaves in memory, each with whether the user stressed it.

    - Each statement it makes ("I moved from Lyon to Paris", "my budget is now 15000", "I've gone off
      spicy food") goes to long-term memory at once as its own memory, the clause it was said in; the
      indexer's review reconciles it with what the user said before (``portamem.write.supersession``).
    - Questions, requests to the assistant and small talk leave nothing (the extractor tells them apart).
    - Any other sentence the write-triggers keep goes to long-term memory when the user stressed it
      ("remember that ..."), it says who the user is or what they like (``LASTING_KINDS``) or a trigger
      votes for it strongly (a correction), else to working memory as a candidate that becomes
      long-term when it is seen a second time.
    """
    if not parts.settings.auto_capture or not turn.user.strip():
        return []
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings,
                       session_id=session_id, source=Source.USER, explicit=False)
    user, unmask = _masked(parts, turn.user, ctx)
    extraction = parts.hooks.extract(user, ctx)
    statements = extraction.statements if extraction is not None else []
    said = [s for s, act in extraction.utterances if act == "statement"] \
        if extraction is not None and extraction.utterances else [user.strip()]
    explicit = any(v.explicit for _, v in parts.hooks.trigger_votes(user, ctx) if v.remember)
    out: list[tuple[MemoryDraft, bool]] = []
    by_clause: dict[str, list[Statement]] = {}
    for st in statements:
        by_clause.setdefault(st.text or user.strip(), []).append(st)
    for clause, group in by_clause.items():
        kinds = {st.kind for st in group}
        kind = next((k for k in ("identity", "preference", "fact") if k in kinds), "fact")
        out.append((MemoryDraft(
            content=unmask(clause)[: parts.settings.max_content_chars], type=MemoryType.SEMANTIC, kind=kind,
            session_id=session_id, created_at=turn.created_at,
            metadata={"trigger": unmask("states " + ", ".join(_named(st) for st in group))},
        ), explicit))
    rest = " ".join(s for s in said if not any(same_passage(clause, s) for clause in by_clause))
    best = _voted(parts, rest, ctx) if rest.strip() else None
    if best is not None:
        lasting = explicit or best.kind in LASTING_KINDS or best.strength >= LASTING_STRENGTH
        out.append((MemoryDraft(
            content=unmask(rest.strip())[: parts.settings.max_content_chars],
            type=best.type if lasting else MemoryType.WORKING,
            kind=best.kind if best.kind in parts.settings.half_lives else None,
            session_id=session_id,
            created_at=turn.created_at,
            half_life_days=None if lasting else parts.settings.half_lives["task"],
            metadata={"trigger": unmask(best.reason), **({} if lasting else {"promote_to": best.type.value})},
        ), explicit))
    return out


def _masked(parts: Components, text: str, ctx: WriteContext) -> tuple[str, Callable[[str], str]]:
    """``text`` with each PII span the redactors find in the whole message stood in for by a token no
    sentence or clause splitter cuts, and the function that puts the originals back. Split first, an
    e-mail's dots or the full stop of "passport no." would end a sentence, and each piece, PII no more
    to the redactor, would be kept as said; masked, each captured clause holds its span whole, and the
    write path redacts it (and seals the original) whole."""
    _, spans = parts.hooks.redact(text, ctx)
    if not spans:
        return text, lambda s: s
    originals: dict[str, str] = {}
    out = text
    for i, r in reversed(list(enumerate(spans))):
        token = f"[{re.sub(r'[^A-Za-z]', '', r.kind).upper() or 'PII'}{i}]"
        originals[token.lower()] = text[r.start:r.end]
        out = out[: r.start] + token + out[r.end:]
    found = re.compile("|".join(rf"\[?{re.escape(t[1:-1])}\]?(?![0-9])" for t in originals), re.I)

    def unmask(s: str) -> str:
        return found.sub(lambda m: originals.get(f"[{m.group(0).strip('[]').lower()}]", m.group(0)), s)

    return out, unmask


def _voted(parts: Components, text: str, ctx: WriteContext) -> TriggerVote | None:
    """The strongest yes of the write-triggers on ``text``, when it clears the threshold and every no."""
    votes = parts.hooks.trigger_votes(text, ctx)
    yes = [v for _, v in votes if v.remember]
    no = max((v.strength for _, v in votes if not v.remember), default=0.0)
    if not yes:
        return None
    best = max(yes, key=lambda v: v.strength)
    return best if best.strength >= parts.settings.trigger_threshold and best.strength > no else None


def _named(statement: Statement) -> str:
    what = f"{statement.attribute} {statement.qualifier}".strip()
    return f"{what}: {'' if statement.polarity else 'no longer '}{statement.value}"


def captured_records(
    parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> list[MemoryRecord]:
    """The memories the write-triggers captured from these turns (same session, same time), those a later
    statement superseded included: an episode built after the change must not state the old value again."""
    times = {t.created_at.timestamp() for t in turns}
    window = SearchFilters(statuses=(Status.ACTIVE, Status.PENDING, Status.SUPERSEDED), session_id=session_id,
                           created_after=min(turns, key=lambda t: t.created_at).created_at - timedelta(seconds=1),
                           created_before=max(turns, key=lambda t: t.created_at).created_at)
    return [r for r in parts.store.list(tenant_id, user_id, window)
            if "trigger" in r.metadata and r.created_at.timestamp() in times]


def episode_draft(
    parts: Components, turns: Sequence[Turn], *, user_id: str, tenant_id: str, session_id: str,
    captured: bool = False,
) -> MemoryDraft | None:
    """The episodic memory that stands for turns leaving a window (the summariser plugins write its text
    and its key facts, intent and outcome); None when nothing was worth keeping. The turns themselves
    ride in its metadata. ``captured``: the turns' statements were captured as memories of their own
    (portamem's own window), so the episode points at them rather than repeating them."""
    covered = captured_records(parts, turns, user_id, tenant_id, session_id)
    covers = [r.memory_id for r in covered]
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings,
                       session_id=session_id, source=Source.USER, explicit=False, captured=captured,
                       # a working candidate may decay before it is seen again: the episode keeps its
                       # sentence, unless a later statement superseded it
                       captured_texts=tuple(r.content for r in covered if r.type is not MemoryType.WORKING
                                            or r.status is Status.SUPERSEDED) if captured else ())
    found = parts.hooks.summarize_turns(turns, ctx)
    fields = found if isinstance(found, dict) else {"summary": found or ""}
    text = str(fields["summary"]).strip()[: parts.settings.max_content_chars]
    if not text:
        return None
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
            result = clip(str(m.get("text") or ""), TOOL_RESULT_CHARS)
            if not result:
                continue
            name = m.get("name") or "a tool"
            content = (f"Tool {name} was called for: {clip(turn.user, 160) or '(no request text)'}. "
                       f"It returned: {result}. The reply used: {clip(turn.assistant, 200)}")
            out.append(MemoryDraft(content=content, type=MemoryType.EPISODIC, kind="episodic", source=Source.TOOL,
                                   session_id=session_id, created_at=turn.created_at,
                                   metadata={"tool": {"name": name, "result_chars": len(str(m.get("text") or ""))}}))
    return out


def compress(parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> list[MemoryRecord]:
    """What turns leaving the window become: their episode (unless nothing was worth keeping) and
    one tool memory per tool result."""
    drafts = [d for d in [episode_draft(parts, turns, user_id=user_id, tenant_id=tenant_id, session_id=session_id,
                                        captured=parts.settings.auto_capture)]
              if d is not None] + tool_drafts(turns, session_id)
    records = []
    for draft in drafts:
        record = build_record(parts, draft, user_id=user_id, tenant_id=tenant_id)
        prepare(parts, draft, record, explicit=False)
        records.append(record)
    return records


def episode(
    parts: Components, turns: Sequence[Turn], user_id: str, tenant_id: str, session_id: str) -> MemoryRecord | None:
    draft = episode_draft(parts, turns, user_id=user_id, tenant_id=tenant_id, session_id=session_id,
                          captured=parts.settings.auto_capture)
    if draft is None:
        return None
    record = build_record(parts, draft, user_id=user_id, tenant_id=tenant_id)
    prepare(parts, draft, record, explicit=False)
    return record
