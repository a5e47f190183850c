"""Recall for a prompt, over any memory (``Memory`` or ``RemoteMemory``): the pre-think gate, a search
whose hits count as used, and the prompt lines (``portamem.read.prompt``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from .entities import extract_entities, normalize_entity
from .read.prompt import DEFAULT_HEADER, for_prompt, format_memories, relative_age
from .records import SearchHit
from .write.validation import check_id

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["format_memories", "relative_age", "recall", "arecall", "needs_recall", "DEFAULT_HEADER", "REFERENCES"]

#: words that point back at something said before: a message without one (and without an entity the
#: user's memories hold) is answered without recall when ``Settings.recall_gate`` is on
REFERENCES = re.compile(
    r"\b(?:again|last time|the other day|before|earlier|previous(?:ly)?|remember|recall|as usual|the usual|"
    r"same as|like (?:last|before)|you said|i said|i told you|i mentioned|i've mentioned|mentioned|as i said|"
    r"we (?:talked|discussed|agreed|spoke|decided)|the (?:thing|one|place|guy|person|idea|plan) (?:i|we|you)|"
    r"how about my|my|mine|our|ours)\b"
    r"|上次|上回|之前|以前|刚才|那次|还记得|记得|记住|你说过|我说过|我提过|我提到|提到过|说过的|之前说的|我说的|老样子|照旧|"
    r"和上次一样|跟以前一样|我的|我们的",
    re.I,
)

def needs_recall(memory: Memory, message: str, *, user_id: str, tenant_id: str | None = None) -> bool:
    """The pre-think gate: recall only for a message that refers back ("last time", "the thing I
    mentioned", 上次, 之前说的, "my ...") or names an entity some memory of the user holds; a bare
    pronoun ("it", "that") is not a reference to memory."""
    if REFERENCES.search(message):
        return True
    entities = [normalize_entity(e) for e in extract_entities(message)]
    if not entities:
        return False
    held = memory.store.entity_counts(tenant_id or memory.tenant_id, user_id, entities)
    return any(held.values())


def recall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
    agent_id: str | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Search for a prompt, dropping what the prompt already shows and what does not bear on the question
    (``for_prompt``); the hits count as used.

    The read path keeps out memories whose text is in the session's working window or in ``shown``
    (messages the framework itself puts in front of the model), so the model does not read them twice.
    Sessions of the user that ended (``Settings.session_idle_s``) are compressed into episodes first
    (``Memory.end_idle_sessions``). With ``agent_id`` the agent sees its private memories (first) and
    the shared layer. With
    ``Settings.recall_gate`` a message that ``needs_recall`` says no to gets no search at all.
    """
    end = getattr(memory, "end_idle_sessions", None)
    if end is not None:  # a conversation that ended before this one: what it said is long-term memory now
        end(user_id=user_id, now=now, keep=session_id, tenant_id=tenant_id)
    if memory.settings.recall_gate and not needs_recall(
            memory, query, user_id=check_id(memory.settings, "user_id", user_id), tenant_id=tenant_id):
        return []
    hits = memory.search_memory(query, user_id=user_id, top_k=top_k, tenant_id=tenant_id,
                                window_session=session_id, shown=shown, touch=True, now=now,
                                filters=None if agent_id is None else {"agent_id": agent_id})
    return for_prompt(hits, margin=memory.settings.prompt_margin, min_evidence=memory.settings.prompt_min_evidence,
                      query=query)


async def arecall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
    agent_id: str | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """Async twin of :func:`recall` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        recall, memory, query, user_id=user_id, session_id=session_id, top_k=top_k, tenant_id=tenant_id,
        shown=list(shown), agent_id=agent_id, now=now,
    )
