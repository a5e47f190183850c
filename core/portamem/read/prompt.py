"""How recalled memories are written into a model's prompt: one line each, with its id, date and age.

May import: the data model.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..records import SearchHit, from_iso, utcnow

__all__ = ["format_memories", "relative_age", "DEFAULT_HEADER"]

DEFAULT_HEADER = "Relevant memories (id, date and age, source, trust), most relevant first:"


def relative_age(then: datetime, now: datetime) -> str:
    """'today', 'yesterday', '3 days ago', '2 weeks ago', '5 months ago', '2 years ago'."""
    days = int((now - then).total_seconds() // 86400)
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    for size, unit in ((365, "year"), (30, "month"), (7, "week"), (1, "day")):
        if days >= size:
            n = days // size
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "today"


def format_memories(
    hits: Sequence[SearchHit], *, header: str | None = DEFAULT_HEADER, ids: bool = True, time: bool = False,
    now: datetime | None = None,
) -> str:
    """Render hits for a prompt; an empty string when there is nothing to show.

    The id lets the model say which memory it used (and pass it to a forget tool), the date and
    age ("3 days ago", from ``now``) let it weigh stale facts, the source and trust doubtful ones,
    and a memory that disagrees with a newer one says so, so the model prefers the newer; ``time``
    adds the hour. Scores are not shown: they rank, they mean nothing to the model.
    """
    if not hits:
        return ""
    now = now or utcnow()
    by_id = {h.memory_id: h for h in hits}
    lines = [header] if header else []
    for hit in hits:
        r = hit.record
        content = " ".join(r.content.split())
        ref = f"id {r.memory_id}, " if ids else ""
        when = (f"{r.created_at:%Y-%m-%d %H:%M}" if time else f"{r.created_at:%Y-%m-%d}") + \
            f" ({relative_age(r.created_at, now)})"
        others = [by_id[m].record for m in hit.conflicts_with if m in by_id]
        note = ""
        if any(o.created_at > r.created_at for o in others):
            note = ", superseded by a newer memory"
        elif others:
            note = ", replaces an older memory"
        replaced = r.metadata.get("replaced")  # the older value a statement outdated (portamem.write.supersession)
        if isinstance(replaced, dict) and isinstance(replaced.get("value"), str) and replaced["value"]:
            then = from_iso(replaced["at"]) if isinstance(replaced.get("at"), str) else None
            note += f", replaces \"{' '.join(replaced['value'].split())[:80]}\"" + (f" of {then:%Y-%m-%d}" if then else "")
        lines.append(f"- [{ref}{when}, {r.source.value}, trust {r.trust.value}{note}] {content}")
    return "\n".join(lines)
