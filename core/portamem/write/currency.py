"""Currency at write time: a newer statement about the same thing as an older one, with another value,
ends the older one's validity without retiring it.

The rules of ``portamem.write.supersession`` retire an older value when a statement names its slot
("my budget is now 15000") or what it replaced ("moved from Lyon to Paris"). Most changes people make
in conversation name neither: "Priya left the company; Tom Becker runs our team now." after "My
manager is Priya Nair.". For each new statement of the user that the rules linked to nothing, the
review asks ``portamem.language.sameness.same_thing`` of its nearest older memories (the neighbours it
already looked up, against the rest of those neighbours as the user's own background) and marks the
best one it finds about the same thing with another value:

- the older memory stays ACTIVE, with ``EARLIER_KEY``: ``{"by": newer id, "from": when it was said,
  "until": when the newer was said, "value": what the newer says}``, its validity interval; a question
  about the past ("where did I live before?", "以前") still finds it, and the prompt shows it as
  earlier, or leaves it out where the newer line is shown (``portamem.read.prompt``);
- the newer records what it took the place of (``REPLACED_KEY`` with ``"earlier": true``).

Nothing is deleted: a wrong mark leaves both statements, newest first. The same limits hold as for the
rules: a write acts only within its scope (``portamem.write.scope``), and a less trusted statement never
ends a more trusted one.

May import: the data model, the text helpers and the write path's scope rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..language.sameness import APART_S, same_thing
from ..records import EARLIER_KEY, OUTDATED_KEY, REPLACED_KEY, MemoryRecord, Status, as_trusted, \
    speaks_for_the_user, to_iso
from .scope import acts_on

__all__ = ["earlier_pairs", "mark_earlier", "EARLIER_KEY"]

#: characters of the newer statement kept on the older one's mark
_VALUE_CHARS = 200


def _open(record: MemoryRecord) -> bool:
    """A memory that holds as current: active, not a keyed entry, not marked earlier or outdated."""
    return record.status is Status.ACTIVE and record.key is None and speaks_for_the_user(record) \
        and EARLIER_KEY not in record.metadata and OUTDATED_KEY not in record.metadata


def earlier_pairs(newer: Sequence[MemoryRecord], near: Mapping[str, Sequence[Any]],
                  get: Callable[[str], MemoryRecord | None]) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """(newer, older) for each newer statement and the older memory among its neighbours (``near``:
    hits with ``memory_id`` and cosine ``score``; ``get`` reads a neighbour's record) that
    ``same_thing`` finds about the same thing with another value, the most probable one; none for a
    newer statement the rules already linked (it states what it replaced)."""
    out: list[tuple[MemoryRecord, MemoryRecord]] = []
    taken: set[str] = set()
    for n in newer:
        if not _open(n) or REPLACED_KEY in n.metadata or n.supersedes:
            continue
        # the user's own statements among the neighbours: their cosines are the background a pair is
        # measured against (an episode or a web page's text is not the user's own distribution)
        hits = [(h, r) for h in near.get(n.memory_id, ()) if h.memory_id != n.memory_id
                and (r := get(h.memory_id)) is not None and speaks_for_the_user(r)]
        best: tuple[float, MemoryRecord] | None = None
        for h, o in hits:
            if o.memory_id in taken or not _open(o) or (n.created_at - o.created_at).total_seconds() < APART_S \
                    or not acts_on(n, o) or not as_trusted(n, o):
                continue
            pool = [float(x.score) for x, _ in hits if x.memory_id != o.memory_id]
            found = same_thing(o.content, n.content, float(h.score), pool)
            if found.same and found.differs and (best is None or found.probability > best[0]):
                best = (found.probability, o)
        if best is not None:
            taken.add(best[1].memory_id)
            out.append((n, best[1]))
    return out


def mark_earlier(newer: MemoryRecord, older: MemoryRecord) -> None:
    """End ``older``'s validity at ``newer`` (both changed in place; the caller commits them)."""
    older.metadata[EARLIER_KEY] = {"by": newer.memory_id, "from": to_iso(older.created_at),
                                   "until": to_iso(newer.created_at), "value": newer.content[:_VALUE_CHARS]}
    newer.metadata[REPLACED_KEY] = {"memory_id": older.memory_id, "at": to_iso(older.created_at),
                                    "value": older.content[:_VALUE_CHARS], "earlier": True}
