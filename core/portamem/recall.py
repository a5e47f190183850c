"""How recalled memories are written into a model's prompt: one line each, with its date and confidence."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .records import SearchHit

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["format_memories", "recall", "arecall", "DEFAULT_HEADER"]

DEFAULT_HEADER = "Relevant memories (date, trust, score), most relevant first:"


def format_memories(hits: Sequence[SearchHit], *, header: str | None = DEFAULT_HEADER, ids: bool = False) -> str:
    """Render hits for a prompt; an empty string when there is nothing to show.

    The date lets the model weigh stale facts and the trust and score let it weigh doubtful ones;
    ``ids`` adds each memory id, for a model that may call a forget tool.
    """
    if not hits:
        return ""
    lines = [header] if header else []
    for hit in hits:
        r = hit.record
        content = " ".join(r.content.split())
        ref = f"id {r.memory_id}, " if ids else ""
        lines.append(f"- [{ref}{r.created_at:%Y-%m-%d}, trust {r.trust.value}, score {hit.score:.2f}] {content}")
    return "\n".join(lines)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def recall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
) -> list[SearchHit]:
    """Search for a prompt, dropping what the prompt already shows.

    The read path keeps out memories whose text is in the session's working window or in ``shown``
    (messages the framework itself puts in front of the model), so the model does not read them twice.
    """
    seen = {_norm(t) for t in shown if t.strip()}
    if session_id is not None:
        for turn in memory.context(user_id=user_id, session_id=session_id, tenant_id=tenant_id):
            seen.update(_norm(t) for t in (turn.user, turn.assistant) if t.strip())
    k = memory.settings.top_k if top_k is None else top_k
    valid = isinstance(k, int) and not isinstance(k, bool) and k >= 1  # else search_memory raises its typed error
    hits = memory.search_memory(query, user_id=user_id, top_k=k + len(seen) if valid else k, tenant_id=tenant_id)
    return [h for h in hits if _norm(h.record.content) not in seen][:k]


async def arecall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
) -> list[SearchHit]:
    """Async twin of :func:`recall` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        recall, memory, query, user_id=user_id, session_id=session_id, top_k=top_k, tenant_id=tenant_id,
        shown=list(shown),
    )
