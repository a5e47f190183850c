"""As-of questions: the past period a question asks about, and which memory about one thing held then.

"Where did I live in March?", "What was my salary in 2024?", "我去年用的什么手机？" ask for the value of
a thing at a time, not the current one. ``asked_period`` reads that period from the question (a month,
a year, a season, "last year", "two months ago", 去年, 上个月, 2025年3月), resolved against the time the
question is asked; a question naming no past period gets None and is read as before.

A statement holds from when it was said until the next statement about the same thing (``validity``):
the write path's mark on the older (``EARLIER_KEY``: its "until"), the rule that superseded it, or, for
two hits the search linked as stating different values of one thing (``conflicts_with``), the newer's
time. ``held_then`` puts, in each group of hits about one thing, the one that held during the period
first, at the group's best score, so the prompt's margin never cuts it behind a line that came later.

May import: the data model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from ..records import EARLIER_KEY, MemoryRecord, SearchHit, ended_by, from_iso

__all__ = ["Period", "asked_period", "validity", "held_then"]


@dataclass(frozen=True)
class Period:
    """A half-open span of time, [start, end), in UTC."""

    start: datetime
    end: datetime

    def overlap(self, start: datetime, end: datetime | None) -> float:
        """Seconds of [start, end) (end None: open) inside this period."""
        hi = self.end if end is None else min(self.end, end)
        return max(0.0, (hi - max(self.start, start)).total_seconds())


_MONTHS = {name: i for i, names in enumerate(
    [(), ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")]) for name in names}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
#: northern-hemisphere seasons: first month, months long
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12, "春": 3, "夏": 6, "秋": 9, "冬": 12}
_ZH_DIGITS = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
#: 今年 / 去年 / 前年: years before now's
_ZH_YEARS_BACK = {"今年": 0, "去年": 1, "前年": 2}
_WORD_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

# English: a month ("in March", "back in March 2025", "last March"), a year ("in 2024"), a season
# ("last summer", "in the winter of 2024"), "last year / month / week", "N years / months ago"
_EN_MONTH = re.compile(rf"\b(?P<lead>in|during|back in|around|last|that|this past|early|late|mid)[- ]+(?:the )?"
                       rf"(?:(?:early|late|mid)[- ]+)?(?P<m>{_MONTH})\b\.?(?:,?\s+(?:of\s+)?(?P<y>(?:19|20)\d\d)\b)?", re.I)
_EN_MONTH_YEAR = re.compile(rf"\b(?P<m>{_MONTH})\.?,?\s+(?:of\s+)?(?P<y>(?:19|20)\d\d)\b", re.I)
_EN_YEAR = re.compile(r"\b(?:in|during|back in|around|since|for|of)\s+(?:(?:early|late|mid)[- ]+)?(?P<y>(?:19|20)\d\d)\b", re.I)
_EN_SEASON = re.compile(r"\b(?P<lead>in|during|last|that|this past|over)\s+(?:the\s+)?(?P<s>spring|summer|autumn|fall|winter)"
                        r"\b(?:\s+(?:of\s+)?(?P<y>(?:19|20)\d\d)\b)?", re.I)
_EN_LAST = re.compile(r"\b(?:last|the previous|the past)\s+(?P<u>year|month|week)\b|\bthe (?P<u2>year|month) before last\b", re.I)
_EN_AGO = re.compile(r"\b(?P<n>\d{1,2}|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+"
                     r"(?P<u>years?|months?|weeks?)\s+ago\b", re.I)
#: a bare month or year names a past period only in a question about the past ("Where did I live in
#: March?"), not in one about plans ("What's on in March?")
_EN_PAST_TENSE = re.compile(r"\b(?:did|was|were|had|used to|back then|at the time)\b|\b\w{3,}ed\b", re.I)
#: a question about plans names a period to come ("What will I do in March?", "next summer")
_EN_FUTURE = re.compile(r"\b(?:will|going to|gonna|plan(?:ning)?|next|upcoming|coming|should)\b|'ll\b", re.I)

# Chinese: 2025年3月, (今年|去年|前年)三月, 三月份, 2024年, 去年, 前年, 上个月, 上周, N年前, N个月前, 去年夏天
_ZH_NUM = r"\d{1,2}|[一二两三四五六七八九十]{1,3}"
_ZH_YEAR_MONTH = re.compile(rf"(?P<y>(?:19|20)\d\d)\s*年\s*(?P<m>{_ZH_NUM})\s*月(?!\s*[0-9一二三四五六七八九十]+\s*[号日])")
_ZH_REL_MONTH = re.compile(rf"(?P<rel>今年|去年|前年)?\s*(?<![几个第每])(?P<m>{_ZH_NUM})\s*月(?:份)?(?!\s*[0-9一二三四五六七八九十]+\s*[号日])(?!前)")
_ZH_YEAR = re.compile(r"(?P<y>(?:19|20)\d\d)\s*年(?!\s*[0-9一二三四五六七八九十]+\s*月)")
_ZH_REL = re.compile(r"(?P<rel>去年|前年|上个月|上上个月|上周|上星期|上礼拜)(?!\s*(?:[一二两三四五六七八九十\d]{1,3}\s*月|[春夏秋冬]))")
_ZH_AGO = re.compile(rf"(?P<n>\d{{1,2}}|[一二两三四五六七八九十]{{1,3}}|半)\s*(?P<u>年|个月|周|个星期)(?:以|之)?前")
_ZH_SEASON = re.compile(r"(?P<rel>今年|去年|前年)?\s*(?P<s>[春夏秋冬])(?:天|季)")
#: a bare month or season in a Chinese question about the past (Chinese marks tense with words, not forms)
_ZH_PAST = re.compile(r"以前|之前|那时|当时|那会|的时候|过|了")
_ZH_FUTURE = re.compile(r"要|将|打算|计划|准备|会|下个|下周|明年|今后|以后")


def _zh_int(text: str) -> int:
    """A number of one or two places, in digits or Chinese numerals (十 alone is 10, 十二 12, 二十 20)."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, ones = text.split("十", 1)
        return _ZH_DIGITS.get(tens, 1) * 10 + _ZH_DIGITS.get(ones, 0)
    return _ZH_DIGITS.get(text, 0)


def _months(year: int, month: int, count: int = 1) -> Period:
    """``count`` calendar months from the first of ``month`` of ``year``."""
    y, m = divmod(month - 1 + count, 12)
    return Period(datetime(year, month, 1, tzinfo=timezone.utc), datetime(year + y, m + 1, 1, tzinfo=timezone.utc))


def _year(year: int) -> Period:
    return Period(datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc))


def _back(now: datetime, months: int) -> tuple[int, int]:
    """(year, month) of the month ``months`` before ``now``'s."""
    y, m = divmod(now.year * 12 + now.month - 1 - months, 12)
    return y, m + 1


def _recent_months(month: int, now: datetime, *, strictly: bool) -> int:
    """The year of the latest ``month`` at or before ``now``'s month (before it when ``strictly``)."""
    return now.year if month < now.month or (month == now.month and not strictly) else now.year - 1


def _ago(now: datetime, count: int, unit: str) -> Period:
    """The calendar year, month or week (from Monday) ``count`` of them before ``now``'s."""
    if unit == "year":
        return _year(now.year - count)
    if unit == "month":
        return _months(*_back(now, count))
    start = (now - timedelta(weeks=count, days=now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    return Period(start, start + timedelta(weeks=1))


def _season(name: str, year: int | None, now: datetime, *, last: bool) -> Period:
    first = _SEASONS[name.lower()]
    if year is not None:  # "the winter of 2024": from its December
        return _months(year, first, 3)
    y = now.year if first <= now.month else now.year - 1  # in January, the winter that began last December
    span = _months(y, first, 3)
    if last and span.start <= now < span.end:  # "last summer", asked in summer: the one before
        span = _months(y - 1, first, 3)
    return span


def asked_period(question: str, now: datetime) -> Period | None:
    """The past period ``question`` asks about, resolved at ``now`` (aware), or None when it names none:
    a month or season alone counts only in a question about the past, and a period that has not begun
    by ``now`` is no as-of question."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    period = _english(question, now) or _chinese(question, now)
    return period if period is not None and period.start <= now else None


def _english(q: str, now: datetime) -> Period | None:
    past = bool(_EN_PAST_TENSE.search(q))
    if _EN_FUTURE.search(q) and not past:
        return None
    if m := _EN_AGO.search(q):
        n = int(m["n"]) if m["n"].isdigit() else _WORD_NUMBERS[m["n"].lower()]
        return _ago(now, n, m["u"].lower().rstrip("s"))
    if m := _EN_MONTH_YEAR.search(q):
        return _months(int(m["y"]), _MONTHS[m["m"].lower()])
    if m := _EN_MONTH.search(q):
        last = m["lead"].lower() in ("last", "this past")
        if m["y"]:
            return _months(int(m["y"]), _MONTHS[m["m"].lower()])
        if last or past:
            month = _MONTHS[m["m"].lower()]
            return _months(_recent_months(month, now, strictly=last), month)
    if m := _EN_SEASON.search(q):
        last = m["lead"].lower() in ("last", "this past")
        if last or past or m["y"]:
            return _season(m["s"], int(m["y"]) if m["y"] else None, now, last=last)
    if m := _EN_LAST.search(q):
        return _ago(now, 2 if m["u2"] else 1, (m["u"] or m["u2"]).lower())
    m = _EN_YEAR.search(q)
    if m and (int(m["y"]) < now.year or past):
        return _year(int(m["y"]))
    return None


def _chinese(q: str, now: datetime) -> Period | None:
    past = bool(_ZH_PAST.search(q))
    if _ZH_FUTURE.search(q) and not re.search(r"去年|前年|上个月|上上个月|上周|上星期|以前|之前|当时|那时|年前|个月前", q):
        return None
    if m := _ZH_AGO.search(q):
        unit, n = m["u"], m["n"]
        if n == "半":
            return _months(*_back(now, 6)) if unit == "年" else None
        return _ago(now, _zh_int(n), {"年": "year", "个月": "month"}.get(unit, "week"))
    if m := _ZH_YEAR_MONTH.search(q):
        month = _zh_int(m["m"])
        return _months(int(m["y"]), month) if 1 <= month <= 12 else None
    if m := _ZH_SEASON.search(q):
        if m["rel"] or past:
            year = now.year - _ZH_YEARS_BACK[m["rel"]] if m["rel"] else None
            return _season(m["s"], year, now, last=False)
    if m := _ZH_REL_MONTH.search(q):
        month = _zh_int(m["m"])
        if 1 <= month <= 12:
            rel = m["rel"]
            if rel in ("去年", "前年"):
                return _months(now.year - _ZH_YEARS_BACK[rel], month)
            if rel == "今年" or past or month < now.month:
                return _months(_recent_months(month, now, strictly=False), month)
    if m := _ZH_REL.search(q):
        rel = m["rel"]
        if rel in ("去年", "前年"):
            return _year(now.year - _ZH_YEARS_BACK[rel])
        if rel in ("上个月", "上上个月"):
            return _ago(now, 2 if rel == "上上个月" else 1, "month")
        return _ago(now, 1, "week")
    if (m := _ZH_YEAR.search(q)) and (int(m["y"]) < now.year or past):
        return _year(int(m["y"]))
    return None


def validity(record: MemoryRecord, next_said: datetime | None = None) -> tuple[datetime, datetime | None]:
    """When ``record`` held: from when it was said until its mark's "until" (``EARLIER_KEY``), else until
    ``next_said`` (when the next statement about the same thing was said), else open."""
    mark = record.metadata.get(EARLIER_KEY)
    if isinstance(mark, dict) and isinstance(mark.get("until"), str):
        try:
            return record.created_at, from_iso(mark["until"])
        except ValueError:
            pass
    return record.created_at, next_said


def held_then(hits: Sequence[SearchHit], period: Period) -> list[SearchHit]:
    """The hits, where several are about one thing (linked by the write path, or by the search as stating
    different values of it), with the one that held longest during ``period`` first in that group, at the
    group's best score; before the first statement of a thing, the earliest one holds. Other hits keep
    their places."""
    by_id = {h.memory_id: i for i, h in enumerate(hits)}
    parent = list(range(len(hits)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, h in enumerate(hits):
        linked = [*h.conflicts_with, *ended_by(h.record), h.record.superseded_by, h.record.supersedes]
        for other in linked:
            j = by_id.get(other) if isinstance(other, str) else None
            if j is not None and j != i:
                parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(hits)):
        groups.setdefault(root(i), []).append(i)
    out = list(hits)
    for members in groups.values():
        if len(members) < 2:
            continue
        said = sorted(members, key=lambda i: hits[i].record.created_at)
        held: list[tuple[float, int]] = []
        for k, i in enumerate(said):
            nxt = hits[said[k + 1]].record.created_at if k + 1 < len(said) else None
            start, end = validity(hits[i].record, nxt)
            held.append((period.overlap(start, end), i))
        best_overlap, best = max(held, key=lambda t: (t[0], -t[1]))
        if best_overlap <= 0.0:
            best = said[0] if period.end <= hits[said[0]].record.created_at else said[-1]
        top = max(hits[i].score for i in members)
        rest = [i for i in sorted(members) if i != best]
        for slot, i in zip(sorted(members), [best, *rest]):
            out[slot] = replace(hits[i], score=top) if i == best else hits[i]
    return out
