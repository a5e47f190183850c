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
- the newer records what it took the place of (``REPLACED_KEY`` with ``"earlier": true``);
- when the older also says something the newer has nothing in common with ("I'm running the Manchester
  Marathon on 14 April, and I'm aiming for sub 3:45" against "my goal is now sub 3:30"), only the part
  the newer is about changed: the older is outdated in part (``OUTDATED_KEY``), the newer's record names
  that part (``"part": true``), and the prompt shows the newer in the older's place only for a question
  about that part (``portamem.read.prompt``); "When is my marathon?" still reads the older as it is.

A mark keeps how surely the pair was found about one thing (``"p"``), and a later statement more surely
about the older memory marks it again, the first one's claim withdrawn: an early wrong guess does not
keep the right one out. Nothing is deleted: a wrong mark leaves both statements, newest first. The same limits hold as for the
rules: a write acts only within its scope (``portamem.write.scope``), and a less trusted statement never
ends a more trusted one.

May import: the data model, the text helpers and the write path's scope rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..language.sameness import APART_S, same_thing
from ..records import EARLIER_KEY, OUTDATED_KEY, REPLACED_KEY, MemoryRecord, Status, as_trusted, \
    speaks_for_the_user, to_iso
from .scope import acts_on

__all__ = ["Earlier", "earlier_pairs", "mark_earlier", "withdraw", "EARLIER_KEY"]

#: characters of the newer statement kept on the older one's mark
_VALUE_CHARS = 200


class Earlier(NamedTuple):
    """A newer statement found about the same thing as an older memory, with another value: how surely,
    and the part of the older it is about (clauses, or values of one clause) when the rest of the older
    still holds (else it ends it whole)."""

    newer: MemoryRecord
    older: MemoryRecord
    probability: float
    part: tuple[str, ...] = ()


def _open(record: MemoryRecord) -> bool:
    """A memory that holds as current: active, not a keyed entry, not marked earlier or outdated."""
    return record.status is Status.ACTIVE and record.key is None and speaks_for_the_user(record) \
        and EARLIER_KEY not in record.metadata and OUTDATED_KEY not in record.metadata


def _ended_by(record: MemoryRecord) -> tuple[str, float] | None:
    """Who ended a memory marked earlier, or outdated a part of it, and how surely it was found about the
    same thing (a mark without a probability, the model's, the rules' or an older release's, counts as
    certain)."""
    for key in (EARLIER_KEY, OUTDATED_KEY):
        ended = record.metadata.get(key)
        if isinstance(ended, dict) and isinstance(ended.get("by"), str):
            p = ended.get("p")
            return ended["by"], float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else 1.0
    return None


def _revisable(record: MemoryRecord) -> bool:
    """A memory marked earlier or outdated in part that a statement more surely about it may mark again:
    otherwise open."""
    return _ended_by(record) is not None and record.status is Status.ACTIVE and record.key is None \
        and speaks_for_the_user(record)


def earlier_pairs(newer: Sequence[MemoryRecord], near: Mapping[str, Sequence[Any]],
                  get: Callable[[str], MemoryRecord | None]) -> list[Earlier]:
    """For each newer statement, the older memory among its neighbours (``near``: hits with ``memory_id``
    and cosine ``score``; ``get`` reads a neighbour's record) that ``same_thing`` finds about the same
    thing with another value, the most probable one, ended whole or in part; none for a newer statement
    the rules already linked (it states what it replaced).

    A mark is revised when a later statement is more surely about the memory than the one that ended it
    ("它现在吃皇家的猫粮" ended by "那就豆腐猫砂吧" at 0.974, then by "年糕吃皇家的软便，改喂渴望了" at 0.989), unless
    that one is about the same thing as the later statement too: a chain (12k, then 15k, then 18k) goes
    on from its newest link, it is not cut back to its first."""
    out: list[Earlier] = []
    taken: set[str] = set()
    for n in newer:
        if not _open(n) or REPLACED_KEY in n.metadata or n.supersedes:
            continue
        # the user's own statements among the neighbours: their cosines are the background a pair is
        # measured against (an episode or a web page's text is not the user's own distribution)
        hits = [(h, r) for h in near.get(n.memory_id, ()) if h.memory_id != n.memory_id
                and (r := get(h.memory_id)) is not None and speaks_for_the_user(r)]
        found_for: dict[str, Earlier] = {}
        for h, o in hits:
            if o.memory_id in taken or not (_open(o) or _revisable(o)) \
                    or (n.created_at - o.created_at).total_seconds() < APART_S \
                    or not acts_on(n, o) or not as_trusted(n, o):
                continue
            pool = [float(x.score) for x, _ in hits if x.memory_id != o.memory_id]
            found = same_thing(o.content, n.content, float(h.score), pool)
            if (found.same or found.part) and found.differs:
                # ended whole, unless the rest of the older states something of its own: then in part
                found_for[o.memory_id] = Earlier(n, o, found.probability, found.part)
        best: Earlier | None = None
        for e in found_for.values():
            ended = _ended_by(e.older)
            if ended is not None and (e.probability <= ended[1] or ended[0] in found_for or ended[0] == n.memory_id):
                continue  # ended as surely already, or by a link of this statement's own chain
            if best is None or e.probability > best.probability:
                best = e
        if best is not None:
            taken.add(best.older.memory_id)
            out.append(best)
    return out


def mark_earlier(newer: MemoryRecord, older: MemoryRecord, probability: float | None = None,
                 part: Sequence[str] = ()) -> str | None:
    """End ``older``'s validity at ``newer`` (both changed in place; the caller commits them), or with
    ``part``, the older's clauses the newer is about, outdate that part of it (``OUTDATED_KEY``: it stays
    current for the rest), with how surely the two were found about one thing, where known; the id of the
    statement that had marked it before, if another (its claim to have replaced ``older`` is the caller's
    to withdraw: ``withdraw``)."""
    before = _ended_by(older)
    older.metadata.pop(EARLIER_KEY, None)
    older.metadata.pop(OUTDATED_KEY, None)
    sure = {"p": round(float(probability), 4)} if probability is not None else {}
    if part:
        older.metadata[OUTDATED_KEY] = {"by": newer.memory_id, "at": to_iso(newer.created_at), **sure}
    else:
        older.metadata[EARLIER_KEY] = {"by": newer.memory_id, "from": to_iso(older.created_at),
                                       "until": to_iso(newer.created_at), "value": newer.content[:_VALUE_CHARS],
                                       **sure}
    newer.metadata[REPLACED_KEY] = {"memory_id": older.memory_id, "at": to_iso(older.created_at),
                                    "value": ("; ".join(part) if part else older.content)[:_VALUE_CHARS],
                                    "earlier": True, **({"part": True} if part else {})}
    return before[0] if before is not None and before[0] != newer.memory_id else None


def withdraw(record: MemoryRecord, older_id: str) -> bool:
    """Take back ``record``'s claim to have ended the memory ``older_id`` (a later statement ended it more
    surely); whether it claimed so."""
    replaced = record.metadata.get(REPLACED_KEY)
    if isinstance(replaced, dict) and replaced.get("memory_id") == older_id and replaced.get("earlier"):
        del record.metadata[REPLACED_KEY]
        return True
    return False
