"""Which hit holds the current answer to a question that asks for an amount or a date.

A question such as "How many guests are we having?" or "我哪天去成都？" asks for one value of one
thing. Where several hits give a value of that kind about the same thing ("we're expecting around 120
guests", then "the guest list has crept back up to 95"), the latest one is what the user last said:
it takes the rank of the best hit it outdates, and the older ones leave the prompt. This reads the
question, so it also catches what the write path's statements missed (a value said in words the rule
extractor does not know). A question about the past ("what was my old salary?", "以前住哪") keeps
every value. Lines that give a value of the asked kind come before lines that give none: "By when do I
drop the shoes off?" is answered by the line with a date.

Two hits are about the same thing when the clauses that hold their values share the question's words
(the newer's shared words include the older's), or when both values carry the same unit and the newer
clause says that something changed ("she's up to 29 kg").

May import: the data model and the text helpers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records import SearchHit, as_trusted
from ..language.statements import content_words
from ..language.text import normalize
from ..language.vocabulary import AMOUNT as _AMOUNT
from ..language.vocabulary import CHANGE as _CHANGE
from ..language.vocabulary import CURRENCY as _CURRENCY
from ..language.vocabulary import DATE as _DATE

__all__ = ["asked_kind", "asks_past", "values", "current_answers"]

#: questions that ask for an amount, and for a date or time
_ASKS_AMOUNT = re.compile(r"\bhow (?:much|many|far|long|heavy|old|big|tall|often)\b|\bwhat(?:'s| is| are| was)? "
                          r"(?:the |my |our )?(?:[\w-]+ ){0,2}(?:price|cost|budget|salary|pay|wage|rent|fee|rate|total|"
                          r"amount|number of|weight|distance|size|balance|limit|deposit|premium|bill|quote|target)s?\b|"
                          r"多少|多重|多高|多远|多久|多大|几[个人桌岁次天周年]|几公里|几公斤", re.I)
_ASKS_DATE = re.compile(r"\bwhen\b|\bwhat (?:date|day|time)\b|\bwhich (?:date|day)\b|\bby when\b|\bwhat time\b|"
                        r"哪天|哪一天|什么时候|几号|几点|几月|哪个月|日期|时间", re.I)
#: a question about what held before: every value stays
_PAST = re.compile(r"\b(?:before|previous(?:ly)?|used to|originally|initially|at first|old|former(?:ly)?|"
                   r"first time|earlier|history|changes?)\b|以前|之前|原来|本来|最初|当初|一开始|原先|改之前", re.I)
#: the words that ask rather than name the thing asked about
_ASKING = frozenset(
    "what whats which when where who whom whose how much many long far often heavy old big tall does do did is are am "
    "was were will would should can could my me mine our we us i you your the a an of for on in at to by "
    "much price cost date day time number amount total "
    "多少 几 哪天 哪 一天 什么 时候 几号 几点 我 我们 吗 呢 的 了 是 现在 要 多 钱".split())
#: a clause of a hit: a value's context ends at sentence punctuation
_CLAUSE = re.compile(r"[.;!?\n。；！？]+\s*|,\s*(?:but|and|so)\s+|\s+but\s+|[，,]\s*(?:但|不过|而且|另外)")
#: "the new salary": a change where the clause names the asked thing itself (a "new helmet" is another thing)
_NEW = re.compile(r"\bnew\b|新的|新", re.I)


def asks_past(question: str) -> bool:
    """Whether a question asks about what held before ("what did I use to drive?", "我以前住哪")."""
    return bool(_PAST.search(question))


def asked_kind(question: str) -> str | None:
    """"date" for a question that asks when, "amount" for one that asks how much or how many, else None
    (and None for a question about what held before)."""
    if _PAST.search(question):
        return None
    if _ASKS_DATE.search(question):
        return "date"
    if _ASKS_AMOUNT.search(question):
        return "amount"
    return None


@dataclass(frozen=True)
class _Value:
    text: str
    unit: str
    clause: str


def values(text: str, kind: str) -> list[_Value]:
    """The values of ``kind`` ("date" or "amount") in ``text``, each with its unit and its clause. An
    amount is not a part of a date ("14 June 2025" holds no amount)."""
    out = []
    for clause in _CLAUSE.split(normalize(text)):
        if not clause:
            continue
        dates = list(_DATE.finditer(clause))
        if kind == "date":
            out += [_Value(m.group(0).strip(), "", clause) for m in dates]
            continue
        rest = _DATE.sub(" ", clause)
        for m in _AMOUNT.finditer(rest):
            unit = (m.group("unit") or m.group("zh") or m.group("zhw") or "").lower()
            currency = _CURRENCY.search(m.group(0))
            unit = currency.group(0) if currency else re.sub(r"\d", "", unit)
            out.append(_Value(m.group(0).strip(), unit, clause))
    return out


def _question_words(question: str) -> frozenset[str]:
    return frozenset(w for w in content_words(question) if w not in _ASKING)


@dataclass
class _Holder:
    hit: SearchHit
    #: the question's words in the clauses that hold a value
    words: frozenset[str]
    units: frozenset[str]
    #: the values as written, lower-case
    said: frozenset[str]
    #: a clause that holds a value says its value changed ("up to", "now", 改成)
    changes: bool
    #: ... or calls it new ("the new salary")
    renews: bool


def _replaces(newer: _Holder, older: _Holder) -> bool:
    """The later holder gives the value the question asks about in place of the older one's: about
    the same words of the question (at least those the older names), or with the same unit where the
    later says a change ("she's up to 29 kg" after "weighs 27 kg"; "the new salary is 78k" after "I'm on
    65k", where the later names the asked thing), or naming the older value beside
    its own ("it's £110 with labour, not £85")."""
    if older.words and newer.words >= older.words:
        return True
    if newer.units & older.units and ((newer.words and (newer.changes or newer.renews))
                                      or (older.words and newer.changes)):
        return True
    return bool(older.said & newer.said) and bool(newer.said - older.said)


#: what a question measures, and the units a value of it is given in: "How much does Biscuit weigh?" is
#: answered in kilograms, "豆豆多高？" in centimetres, whatever other amounts the lines near it give
_DIMENSIONS = (
    (re.compile(r"\bweigh|\bweight\b|\bheavy\b|多重|体重|几公斤|几斤", re.I),
     re.compile(r"^(?:kgs?|g|lbs?|pounds?|stone|公斤|斤|千克|克)$", re.I)),
    (re.compile(r"\bhow tall\b|\bheight\b|多高|身高|个子", re.I),
     re.compile(r"^(?:cm|mm|m|ft|feet|inch(?:es)?|米|厘米|公分)$", re.I)),
    (re.compile(r"\bhow far\b|\bdistance\b|多远|几公里|距离", re.I),
     re.compile(r"^(?:km|kms|miles?|m|公里|千米|米)$", re.I)),
)


def _asked_units(question: str) -> re.Pattern[str] | None:
    return next((units for asks, units in _DIMENSIONS if asks.search(question)), None)


def _holders_first(hits: list[SearchHit], holders: Mapping[str, object],
                   units: re.Pattern[str] | None = None) -> list[SearchHit]:
    """The hits that give a value of the asked kind before those that give none ("when?" is answered
    by a line with a date), each group in its order; with ``units``, what the question measures, the
    hits giving a value in one of them first."""
    def measures(h: SearchHit) -> bool:
        holder = holders.get(h.memory_id)
        return units is not None and holder is not None and any(units.match(u) for u in holder.units)  # type: ignore[attr-defined]
    return ([h for h in hits if measures(h)] + [h for h in hits if h.memory_id in holders and not measures(h)]
            + [h for h in hits if h.memory_id not in holders])


def current_answers(question: str, hits: Sequence[SearchHit]) -> tuple[list[SearchHit], dict[str, float]]:
    """The hits without those a later hit outdates on the value the question asks for, a current
    holder moved up to the rank of the best hit it outdates, and the hits that give a value of the
    asked kind before those that give none; and the score each moved hit stands at for the prompt's
    margin rule (the best score it took the place of)."""
    kind = asked_kind(question)
    if kind is None or len(hits) < 2:
        return list(hits), {}
    asked = _question_words(question)
    units = _asked_units(question)
    holders: dict[str, _Holder] = {}
    for h in hits:
        vals = values(h.record.content, kind)
        if vals:
            clauses = " ".join(dict.fromkeys(v.clause for v in vals))
            holders[h.memory_id] = _Holder(h, content_words(clauses) & asked, frozenset(v.unit for v in vals if v.unit),
                                           frozenset(v.text.lower() for v in vals if len(v.text) >= 2),
                                           bool(_CHANGE.search(clauses)), bool(_NEW.search(clauses)))
    outdated: dict[str, str] = {}  # older id -> the newer holder that outdates it
    for older in holders.values():
        # a less trusted line never takes a more trusted one's place (a web page's date does not hide
        # the date the user said), as in the prompt's own outdating
        newer = [n for n in holders.values() if n.hit.record.created_at > older.hit.record.created_at
                 and as_trusted(n.hit.record, older.hit.record) and _replaces(n, older)]
        if newer:
            outdated[older.hit.memory_id] = max(newer, key=lambda n: n.hit.record.created_at).hit.memory_id
    if not outdated:
        return _holders_first(list(hits), holders, units), {}
    # follow a chain (120 -> 85 -> 95) to its end: the last holder takes every rank it replaced
    def last(memory_id: str) -> str:
        seen = set()
        while memory_id in outdated and memory_id not in seen:
            seen.add(memory_id)
            memory_id = outdated[memory_id]
        return memory_id
    rank = {h.memory_id: i for i, h in enumerate(hits)}
    score = {h.memory_id: h.score for h in hits}
    for older_id in outdated:
        current = last(older_id)
        if rank[older_id] < rank[current]:
            rank[current] = rank[older_id]
        score[current] = max(score[current], score[older_id])
    kept = _holders_first(sorted((h for h in hits if h.memory_id not in outdated),
                                 key=lambda h: (rank[h.memory_id], -h.score)), holders, units)
    moved = {h.memory_id: score[h.memory_id] for h in kept if score[h.memory_id] > h.score}
    return kept, moved
