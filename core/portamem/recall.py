"""How recalled memories are written into a model's prompt: one line each, with its date and confidence."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .records import SearchHit

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["format_memories", "recall", "arecall", "DEFAULT_HEADER"]

DEFAULT_HEADER = "Relevant memories (date, source, trust, score), most relevant first:"


def format_memories(
    hits: Sequence[SearchHit], *, header: str | None = DEFAULT_HEADER, ids: bool = False, time: bool = False
) -> str:
    """Render hits for a prompt; an empty string when there is nothing to show.

    The date lets the model weigh stale facts, the source, trust and score let it weigh doubtful
    ones, and a memory that disagrees with a newer one says so, so the model prefers the newer;
    ``ids`` adds each memory id, for a model that may call a forget tool; ``time`` adds the hour.
    """
    if not hits:
        return ""
    by_id = {h.memory_id: h for h in hits}
    lines = [header] if header else []
    for hit in hits:
        r = hit.record
        content = " ".join(r.content.split())
        ref = f"id {r.memory_id}, " if ids else ""
        when = f"{r.created_at:%Y-%m-%d %H:%M}" if time else f"{r.created_at:%Y-%m-%d}"
        others = [by_id[m].record for m in hit.conflicts_with if m in by_id]
        note = ""
        if any(o.created_at > r.created_at for o in others):
            note = ", superseded by a newer memory"
        elif others:
            note = ", replaces an older memory"
        lines.append(f"- [{ref}{when}, {r.source.value}, trust {r.trust.value}, score {hit.score:.2f}{note}] {content}")
    return "\n".join(lines)


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
    return memory.search_memory(query, user_id=user_id, top_k=top_k, tenant_id=tenant_id,
                                window_session=session_id, shown=shown)


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
