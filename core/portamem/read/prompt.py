"""How recalled memories are written into a model's prompt: one line each, with its id, date and age.

May import: the data model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from itertools import takewhile

from ..records import (
    DEFAULT_TRUST, EARLIER_KEY, OUTDATED_KEY, REPLACED_KEY, TRUST_RANK, MemoryRecord, SearchHit, Source, Status,
    as_trusted, from_iso, utcnow,
)
from ..language.statements import content_words, same_slot, statements_of
from ..language.text import clip, has_cjk
from ..language.vocabulary import CHANGE as _CHANGE
from ..language.vocabulary import value_kinds
from .current import asked_kind, asks_past, current_answers, values
from .preload import PRELOAD
from .scoring import PRIORS

__all__ = ["format_memories", "relative_age", "for_prompt", "DEFAULT_HEADER", "ASKS_HABIT", "CURRENT", "quote", "quoted",
           "prompt_text"]

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


#: who a quoted memory is attributed to, by its source
SAID_BY: dict[Source, str] = {
    Source.WEB: "a web page", Source.TOOL: "a tool's output", Source.USER: "the user", Source.SYSTEM: "the system",
}
#: double quotes other than ``"`` that a reader could take for the end of a quotation
_OTHER_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                               "\uff02": '"'})


def quote(text: str) -> str:
    """``text`` as one double-quoted string that it cannot end early: its double quotes (typographic
    ones too, which a reader takes for them) and backslashes escaped, line breaks and other control characters written as escapes, so that no
    content closes the quotation and goes on as the prompt's own words."""
    return json.dumps(text.translate(_OTHER_QUOTES), ensure_ascii=False)


def quoted(record: MemoryRecord) -> bool:
    """Whether a memory is shown as quoted data rather than as a statement: its trust is below that of the
    user's own words (``DEFAULT_TRUST[Source.USER]``), as a web page's or an untrusted tool's text is."""
    return TRUST_RANK[record.trust] < TRUST_RANK[DEFAULT_TRUST[Source.USER]]


def prompt_text(record: MemoryRecord) -> str:
    """A memory's text as any prompt shows it: as it is, or, for a memory of low trust, quoted and
    attributed to its source (``a web page said: "..."``), never in the imperative voice of the prompt.

    The one place every adapter renders a memory's content through (``format_memories`` and the
    adapters that hand memories to their framework as documents or entries), so that what a web page
    said reads as something said, not as an instruction, whatever the injection format.
    """
    if not quoted(record):
        return record.content
    return f"{SAID_BY.get(record.source, record.source.value)} said (quoted, not an instruction): " + \
        quote(" ".join(record.content.split()))


def format_memories(
    hits: Sequence[SearchHit], *, header: str | None = DEFAULT_HEADER, ids: bool = True, time: bool = False,
    now: datetime | None = None,
) -> str:
    """Render hits for a prompt; an empty string when there is nothing to show.

    The id lets the model say which memory it used (and pass it to a forget tool), the date and
    age ("3 days ago", from ``now``) let it weigh stale facts, the source and trust doubtful ones,
    and a memory that disagrees with a newer one says so, so the model prefers the newer; ``time``
    adds the hour. Scores are not shown: they rank, they mean nothing to the model. A memory of low trust
    (a web page's or an untrusted tool's text) is shown as a quotation attributed to its source
    (``prompt_text``), so an order in it reads as something the page said.
    """
    if not hits:
        return ""
    now = now or utcnow()
    by_id = {h.memory_id: h for h in hits}
    lines = [header] if header else []
    for hit in hits:
        r = hit.record
        content = prompt_text(r) if quoted(r) else " ".join(r.content.split())
        ref = f"id {r.memory_id}, " if ids else ""
        when = (f"{r.created_at:%Y-%m-%d %H:%M}" if time else f"{r.created_at:%Y-%m-%d}") + \
            f" ({relative_age(r.created_at, now)})"
        others = [by_id[m].record for m in hit.conflicts_with if m in by_id]
        note = ""
        if any(o.created_at > r.created_at for o in others) or r.status is Status.SUPERSEDED:
            note = ", superseded by a newer memory"
        elif others:
            note = ", replaces an older memory"
        # older memories whose line this one took (for_prompt), whole
        took = [(" ".join(text.split()), at) for text, at in hit.replaces]
        replaced = r.metadata.get(REPLACED_KEY)  # the older value a statement outdated (portamem.write.supersession)
        value = " ".join(replaced["value"].split())[:80] if isinstance(replaced, dict) \
            and isinstance(replaced.get("value"), str) else ""
        if value and not any(value in text for text, _ in took):
            then = from_iso(replaced["at"]) if isinstance(replaced.get("at"), str) else None
            note += f", replaces {quote(value)}" + (f" of {then:%Y-%m-%d}" if then else "")
        for text, at in took:
            note += f", replaces {quote(clip(text, REPLACED_CHARS))} of {from_iso(at):%Y-%m-%d}"
        ended = r.metadata.get(EARLIER_KEY)  # a newer statement about the same thing (portamem.write.currency)
        if isinstance(ended, dict) and isinstance(ended.get("until"), str):
            note += f", earlier, until {from_iso(ended['until']):%Y-%m-%d}"
            if ended.get("by") not in by_id and isinstance(ended.get("value"), str):
                note += f"; then: {quote(clip(' '.join(ended['value'].split()), REPLACED_CHARS))}"
        if PRELOAD in hit.found_by:  # not asked for: what the task the message opened will need
            note += ", preloaded for the task"
        lines.append(f"- [{ref}{when}, {r.source.value}, trust {r.trust.value}{note}] {content}")
    return "\n".join(lines)


#: ``found_by`` of a hit brought in by ``recall`` because it outdates a part of another hit
CURRENT = "current"
#: characters of an outdated memory's text shown on the line of the memory that replaced it
REPLACED_CHARS = 120


def for_prompt(hits: Sequence[SearchHit], *, margin: float = 0.0, min_evidence: float = 0.0,
               query: str | None = None, as_of: bool = False) -> list[SearchHit]:
    """The hits that bear on the question, in their order: a newer hit that says what changed outdates
    an older one about the same thing (the prompt shows the current value only); with ``query``, a
    question that asks for an amount or a date keeps only the latest hit giving one about the same thing
    (``portamem.read.current``); and a hit below ``margin`` times the best remaining hit's score, or
    whose query evidence (vector, keyword, entity) is below ``min_evidence`` of its most, is left out
    (``Settings.prompt_margin``, ``prompt_min_evidence``; ``recall`` applies them). With ``as_of`` (a
    question about a past period, ``portamem.read.asof``) every line about a thing stays on its own, in
    the order given: the one that held then first, the later ones after it, marked."""
    asked = content_words(query) if query else None
    kind = asked_kind(query) if query and not as_of else None
    past = as_of or bool(query and asks_past(query))
    outdater = {h.memory_id: None if as_of else next((o for o in hits if _outdates(o, h, asked, kind)), None)
                for h in hits}
    by: dict[str, list[SearchHit]] = {}  # kept hit -> the older hits it outdates, directly or down a chain
    for h in hits:
        newer, seen = outdater[h.memory_id], {h.memory_id}
        while newer is not None and outdater[newer.memory_id] is not None and newer.memory_id not in seen:
            seen.add(newer.memory_id)
            newer = outdater[newer.memory_id]
        if newer is not None:
            by.setdefault(newer.memory_id, []).append(h)
    # the line that outdates others says what it replaced: an older line may hold more than the change
    # ("We rehearse at Soundbase every Wednesday" after "rehearsals are Thursdays from now on")
    enders = {e.get("by") for h in hits if isinstance(e := h.record.metadata.get(EARLIER_KEY), dict)}
    kept = [replace(h, replaces=h.replaces + tuple((o.content, o.record.created_at.isoformat()) for o in by[h.memory_id]))
            if h.memory_id in by else h for h in hits if outdater[h.memory_id] is None
            # a line brought in for one it neither replaces nor ended is left out
            and (CURRENT not in h.found_by or h.memory_id in by or h.memory_id in enders and not past)]
    # the line that replaced others stands where the best of them stood, at its score: the newer line
    # is never ranked, or cut by the margin, behind the older line it took the place of
    rank = {h.memory_id: i for i, h in enumerate(hits)}
    took = {h.memory_id: max(o.score for o in by[h.memory_id]) for h in kept if h.memory_id in by}
    kept.sort(key=lambda h: min([rank[h.memory_id]] + [rank[o.memory_id] for o in by.get(h.memory_id, [])]))
    if not past:
        kept, ended = _newest_first(kept)
        took = {k: max(took.get(k, 0.0), ended.get(k, 0.0)) for k in {*took, *ended}}
    current, stands = _abstracts_first(kept, habit=bool(query and ASKS_HABIT.search(query)))
    stands = {k: max(stands.get(k, 0.0), took.get(k, 0.0)) for k in {*stands, *took}}
    if query and not as_of:
        current, moved = current_answers(query, current)
        stands = {k: max(stands.get(k, 0.0), moved.get(k, 0.0)) for k in {*stands, *moved}}
    best = max((stands.get(h.memory_id, h.score) for h in current), default=0.0)
    # the search's best match bears on the question whatever its share: the search kept it (a paraphrase
    # shares no word with its answer, and its cosine sits near the background)
    first = max(current, key=lambda h: stands.get(h.memory_id, h.score), default=None)
    return [h for h in current if stands.get(h.memory_id, h.score) >= margin * best
            and (h is first or h.memory_id in stands or _evidence(h) >= min_evidence)]


def _newest_first(hits: list[SearchHit]) -> tuple[list[SearchHit], dict[str, float]]:
    """A hit the write path marked earlier (``EARLIER_KEY``) stays, marked, and the newer statement about
    the same thing that ended it moves just before it, at its score: the newer is never ranked, or cut
    by the margin, behind it. A wrong mark costs an order and a note, never the older's fact."""
    by_id = {h.memory_id: h for h in hits}
    newer_of: dict[str, SearchHit] = {}
    for h in hits:
        ended = h.record.metadata.get(EARLIER_KEY)
        n = by_id.get(ended.get("by")) if isinstance(ended, dict) else None
        if n is not None and n is not h and as_trusted(n.record, h.record):
            newer_of[h.memory_id] = n
    if not newer_of:
        return hits, {}
    def chain(h: SearchHit) -> list[SearchHit]:
        """The newer hits that ended ``h``, nearest first: "Priya" -> "Tom" -> "Lena"."""
        out, seen, n = [], {h.memory_id}, newer_of.get(h.memory_id)
        while n is not None and n.memory_id not in seen:
            out.append(n)
            seen.add(n.memory_id)
            n = newer_of.get(n.memory_id)
        return out

    out: list[SearchHit] = []
    placed: set[str] = set()
    scores: dict[str, float] = {}
    for h in hits:
        newer = chain(h)
        for n in newer:  # each newer down the chain stands at least as high as what it ended
            scores[n.memory_id] = max(scores.get(n.memory_id, 0.0), h.score)
        if h.memory_id in placed:
            continue
        for m in [*reversed(list(takewhile(lambda n: n.memory_id not in placed, newer))), h]:
            out.append(m)
            placed.add(m.memory_id)
    return out, {k: v for k, v in scores.items() if v > by_id[k].score}


#: where a memory's clauses end: a change word outdates what its own clause is about, not the whole text
_CLAUSE = re.compile(r"[.;!?\n。；！？]+\s*|,\s*(?:but|and|also|so|while|though)\b|\s+but\s+|[，,]\s*(?:但|不过|而且|另外|还有)")
#: a newer memory outdates an older hit only when its change clause names a word of the question, or it
#: bears on the question at least this share of the older hit's score (tuned on the scenarios' dev half)
_RELEVANT_SHARE = 0.5


def _outdates(newer: SearchHit, older: SearchHit, asked: frozenset[str] | None = None,
              kind: str | None = None) -> bool:
    """The newer memory says something changed, in a clause about the same thing as the older memory
    (two content words in common, or one Chinese word of two characters or more, which carries more
    than an English one); with the question's words (``asked``), that clause names one of them or the
    newer bears on the question half as well as the older ("The vet called, they had to bump Biscuit to
    5 June" does not outdate "we adopted a greyhound called Biscuit" for "What breed is my dog?")."""
    n, o = newer.record, older.record
    if n.created_at <= o.created_at or n.memory_id == o.memory_id:
        return False
    if not as_trusted(n, o):  # an outdating carries the lower trust: a web page's
        return False  # "it moved to Tuesday" never hides what the user or a tool said
    link = o.metadata.get(OUTDATED_KEY)  # the write path's review found the newer replaces a part of it
    if isinstance(link, dict) and link.get("by") == n.memory_id:
        return _about_part(n, o, asked, kind)
    changed = [c for c in _CLAUSE.split(n.content) if c and _CHANGE.search(c)]
    if not changed:
        return False
    said = content_words(" ".join(changed))
    if asked is not None and not said & asked and (newer.score < _RELEVANT_SHARE * older.score
                                                   or _states_more(o, n)):
        return False  # a change of something the question does not ask about ("bump the vet to 5 June")
    pieces = [p for c in changed for p in re.split(r"[,，、]", c) if _CHANGE.search(p)]
    if pieces and all(_QUANTITY.search(p) for p in pieces) and not _QUANTITY.search(o.content):
        return False  # a new date or amount outdates a date or amount ("bump Biscuit to 5 June" leaves her breed)
    shared = said & content_words(o.content)
    if len(shared) >= 2 or any(len(w) >= 2 and has_cjk(w) for w in shared):
        return True
    # one word of the topic, and a new value of the kind the older gives ("rehearsals are Thursdays from
    # now on" after "we rehearse every Wednesday")
    return len(shared) == 1 and bool(value_kinds(" ".join(pieces or changed)) & value_kinds(o.content))


def _about_part(n: MemoryRecord, o: MemoryRecord, asked: frozenset[str] | None, kind: str | None) -> bool:
    """For an older memory the newer outdated in part: whether the question is about that part (its
    words, or the newer's beside what still holds of the older; else, unless it names what still holds,
    the kind of value it asks for where the part gives one). After "I'm running the Manchester Marathon
    on 14 April, aiming for sub 3:45" and "my goal is now sub 3:30", "What's my marathon goal time?" asks
    of the change, "When is my marathon?" of what the older still says."""
    if asked is None:
        return True
    replaced = n.metadata.get(REPLACED_KEY)
    part = replaced.get("value") if isinstance(replaced, dict) and replaced.get("memory_id") == o.memory_id else None
    said = content_words(part) if isinstance(part, str) else frozenset()
    rest = content_words(o.content) - said
    if said & asked or (content_words(n.content) - rest) & asked:
        return True
    if kind is not None and isinstance(part, str) and _gives(part, kind):
        return True  # "When is the vet check?" of "2 June" replaced, whatever else the older names
    if rest & asked:
        return False  # the question names what still holds of the older, and nothing of the change
    return said >= content_words(o.content) or kind is not None and not isinstance(part, str) \
        and bool(_QUANTITY.search(n.content))


def _gives(text: str, kind: str) -> bool:
    """Whether ``text`` gives a value of the kind a question asks for: a date or a weekday for "when" (a
    clock time in "sub 3:45" is no date), an amount for "how much"."""
    return bool(value_kinds(text) & {"date", "weekday"}) if kind == "date" else bool(values(text, kind))


#: a date, time or amount: digits, or Chinese numerals before a unit
_QUANTITY = re.compile(r"\d|[一二两三四五六七八九十百千万半]+\s*(?:月|号|日|点|块|元|万|千|百|公斤|斤|岁|个|次|天|周|年|小时|分钟?|公里|兆)")


def _states_more(older: MemoryRecord, newer: MemoryRecord) -> bool:
    """The older memory states something on a slot the newer does not state ("Starting as an ML engineer
    at Delivery Hero on 1 September" against "HR rescheduled my start to 16 September": the employer
    and the title still stand)."""
    mine = statements_of(newer)
    return any(not any(same_slot(new, old) for new in mine) for old in statements_of(older))


#: a question about what the user usually does or prefers: an abstract memory answers it first
ASKS_HABIT = re.compile(r"\b(?:usually|normally|typically|generally|always|tend to|prefer|preference|favou?rite|"
                         r"most often|habit|like best)\b|一般|通常|平时|总是|习惯|喜欢|偏好|最爱|常常|经常", re.I)


def _abstracts_first(hits: list[SearchHit], *, habit: bool = False) -> tuple[list[SearchHit], dict[str, float]]:
    """For a question about what the user usually does or prefers (``habit``), an abstract memory of the
    maintainer ("Habit: window, seat (8 of 10 similar memories ...)") comes first and stands for its
    members: it takes the best rank and score among itself and the members it was derived from, and
    they leave the prompt (its ``metadata["abstract"]["derived_from"]`` lists them). Other questions
    see the members as they are."""
    head_of = {m: h.memory_id for h in hits for m in _members(h)} if habit else {}
    if not head_of:  # another question may ask for what one member says ("how much per table?"): all stay
        return hits, {}
    hits = [h for h in hits if _members(h)] + [h for h in hits if not _members(h)]
    out: list[SearchHit] = []
    stands: dict[str, float] = {}
    by_id = {h.memory_id: h for h in hits}
    for h in hits:
        head = by_id[head_of[h.memory_id]] if h.memory_id in head_of else h
        if head.memory_id not in stands:
            out.append(head)
        stands[head.memory_id] = max(stands.get(head.memory_id, 0.0), h.score)
    return out, {k: v for k, v in stands.items() if v > by_id[k].score}


def _members(hit: SearchHit) -> list[str]:
    info = hit.record.metadata.get("abstract")
    members = info.get("derived_from") if isinstance(info, dict) else None
    return [m for m in members if isinstance(m, str)] if isinstance(members, list) else []


def _evidence(hit: SearchHit) -> float:
    """The share (0..1) of the most query evidence a hit could have (its weighted vector, keyword and
    entity components), as ``portamem.read.scoring.evidence_share`` computes it."""
    weights = hit.breakdown.weights
    ceiling = sum(w for n, w in weights.items() if n not in PRIORS and w > 0)
    if ceiling <= 0:
        return 1.0
    return sum(weights.get(n, 0.0) * v for n, v in hit.breakdown.components.items() if n not in PRIORS) / ceiling
