"""How recalled memories are written into a model's prompt: one line each, with its date and confidence."""

from __future__ import annotations

from collections.abc import Sequence

from .records import SearchHit

__all__ = ["format_memories", "DEFAULT_HEADER"]

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
