"""As-of questions: the past period a question names (``portamem.read.asof.asked_period``), and the memory
about one thing that held then put first (``held_then``), through ``recall`` on a real store."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from portamem import Memory
from portamem.read.asof import Period, asked_period, held_then, validity
from portamem.read.prompt import format_memories
from portamem.recall import recall
from portamem.records import EARLIER_KEY, MemoryRecord, ScoreBreakdown, SearchHit

NOW = datetime(2026, 12, 7, 15, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(("question", "span"), [
    ("Where did I live in March?", ("2026-03-01", "2026-04-01")),
    ("Where did I live in March 2025?", ("2025-03-01", "2025-04-01")),
    ("What was my salary in 2024?", ("2024-01-01", "2025-01-01")),
    ("Where was I working in early 2025?", ("2025-01-01", "2026-01-01")),
    ("What did I drive last year?", ("2025-01-01", "2026-01-01")),
    ("Who was my manager two months ago?", ("2026-10-01", "2026-11-01")),
    ("What was my rent 3 months ago?", ("2026-09-01", "2026-10-01")),
    ("Where did I go on holiday last summer?", ("2026-06-01", "2026-09-01")),
    ("Who managed my team back in May?", ("2026-05-01", "2026-06-01")),
    ("我去年用的什么手机？", ("2025-01-01", "2026-01-01")),
    ("我三月住在哪里？", ("2026-03-01", "2026-04-01")),
    ("2025年3月我住哪？", ("2025-03-01", "2025-04-01")),
    ("上个月我的老板是谁？", ("2026-11-01", "2026-12-01")),
    ("两年前我住哪？", ("2024-01-01", "2025-01-01")),
    ("去年夏天我去哪了？", ("2025-06-01", "2025-09-01")),
])
def test_a_question_names_a_past_period(question: str, span: tuple[str, str]) -> None:
    period = asked_period(question, NOW)
    assert period is not None
    assert (period.start.date().isoformat(), period.end.date().isoformat()) == span


@pytest.mark.parametrize("question", [
    "Where do I live?", "What's planned for March?", "What will I do in March?", "May I ask where I live?",
    "Can you book something for next summer?", "十月会冷吗？", "我下个月去哪？", "我们几月去成都？", "这个月的预算是多少？",
    "我要在三月搬家吗？",
])
def test_a_question_about_now_or_plans_names_no_past_period(question: str) -> None:
    assert asked_period(question, NOW) is None


def test_a_month_is_the_latest_one_that_has_begun() -> None:
    february = datetime(2026, 2, 10, tzinfo=timezone.utc)
    period = asked_period("Where did I live in March?", february)
    assert period is not None and period.start.date() == date(2025, 3, 1)
    # "last March", asked in March, is the year before's
    march = datetime(2026, 3, 20, tzinfo=timezone.utc)
    period = asked_period("Where did I live last March?", march)
    assert period is not None and period.start.date() == date(2025, 3, 1)
    assert asked_period("Where did I live in 2031?", NOW) is None  # not begun: no as-of question


def test_a_naive_now_is_read_as_utc() -> None:
    assert asked_period("Where did I live in March?", NOW.replace(tzinfo=None)) == asked_period(
        "Where did I live in March?", NOW)


# ------------------------------------------------------------------ which memory held then
def _hit(text: str, said: datetime, score: float, **metadata: object) -> SearchHit:
    record = MemoryRecord(content=text, user_id="u", created_at=said, metadata=dict(metadata))
    return SearchHit(record, score, ScoreBreakdown(final=score, components={}, weights={}), ("vector",))


def _linked(*hits: SearchHit) -> list[SearchHit]:
    """The hits, each conflicting with every other (as the search links values of one thing)."""
    ids = [h.memory_id for h in hits]
    for h in hits:
        h.conflicts_with = tuple(i for i in ids if i != h.memory_id)
    return list(hits)


def _period(start: str, end: str) -> Period:
    return Period(datetime.fromisoformat(start).replace(tzinfo=timezone.utc),
                  datetime.fromisoformat(end).replace(tzinfo=timezone.utc))


def test_the_statement_that_held_during_the_period_goes_first_at_the_groups_best_score() -> None:
    berlin = _hit("I live in Berlin now.", datetime(2026, 10, 1, tzinfo=timezone.utc), 0.8)
    paris = _hit("We moved to Paris.", datetime(2026, 6, 1, tzinfo=timezone.utc), 0.7)
    lyon = _hit("I live in Lyon.", datetime(2026, 1, 1, tzinfo=timezone.utc), 0.6)
    other = _hit("My cat is called Mochi.", datetime(2026, 2, 1, tzinfo=timezone.utc), 0.75)
    hits = [berlin, other, *_linked(berlin, paris, lyon)[1:]]
    march = held_then(hits, _period("2026-03-01", "2026-04-01"))
    assert [h.content for h in march] == ["I live in Lyon.", "My cat is called Mochi.", "I live in Berlin now.",
                                          "We moved to Paris."]
    assert march[0].score == 0.8  # never cut by the margin behind a later line
    july = held_then(hits, _period("2026-07-01", "2026-08-01"))
    assert july[0].content == "We moved to Paris." and july[1].content == "My cat is called Mochi."
    # before the first statement of the thing, the earliest one stands for it
    assert held_then(hits, _period("2024-01-01", "2025-01-01"))[0].content == "I live in Lyon."
    # the current one, when the period is now's
    assert held_then(hits, _period("2026-11-01", "2026-12-01"))[0].content == "I live in Berlin now."


def test_unlinked_hits_keep_their_order() -> None:
    a = _hit("I live in Berlin now.", datetime(2026, 10, 1, tzinfo=timezone.utc), 0.8)
    b = _hit("I live in Lyon.", datetime(2026, 1, 1, tzinfo=timezone.utc), 0.6)
    assert held_then([a, b], _period("2026-03-01", "2026-04-01")) == [a, b]


def test_the_write_paths_mark_bounds_a_statements_validity() -> None:
    said = datetime(2026, 1, 1, tzinfo=timezone.utc)
    marked = MemoryRecord(content="x", user_id="u", created_at=said,
                          metadata={EARLIER_KEY: {"by": "n", "until": "2026-05-01T00:00:00+00:00"}})
    assert validity(marked) == (said, datetime(2026, 5, 1, tzinfo=timezone.utc))
    assert validity(MemoryRecord(content="x", user_id="u", created_at=said)) == (said, None)


# ------------------------------------------------------------------ through recall, on a real store
T0 = datetime(2026, 9, 1, 9, 0, tzinfo=timezone.utc)


def _say(mem: Memory, text: str, days: int, user: str = "sam") -> str:
    return mem.save_memory(text, user_id=user, created_at=T0 + timedelta(days=days)).memory_id  # type: ignore[arg-type]


def _first_line(hits: list[SearchHit], now: datetime) -> str:
    return format_memories(hits, now=now).splitlines()[1]


def test_an_as_of_question_recalls_the_value_that_held_then(memory: Memory) -> None:
    _say(memory, "I'm Sam, I work in logistics.", 0)
    old = _say(memory, "My manager is Priya Nair.", 1)
    new = _say(memory, "Priya left the company; Tom Becker runs our team now.", 30)
    memory.flush()
    now = T0 + timedelta(days=97)  # 7 December
    hits = recall(memory, "Who was my manager in September?", user_id="sam", now=now)
    assert hits and hits[0].memory_id == old
    assert "earlier, until 2026-10-01" in _first_line(hits, now)
    # asked of now, the newer value leads as before
    hits = recall(memory, "Who is my manager?", user_id="sam", now=now)
    assert hits and hits[0].memory_id == new
    hits = recall(memory, "Who was my manager last month?", user_id="sam", now=now)
    assert hits and hits[0].memory_id == new


def test_an_as_of_question_in_chinese(memory: Memory) -> None:
    _say(memory, "我叫小林，在杭州做设计。", 0, user="lin")
    old = _say(memory, "我的老板是王强。", 1, user="lin")
    new = _say(memory, "王强走了，现在李明管我们组。", 30, user="lin")
    memory.flush()
    now = T0 + timedelta(days=97)
    hits = recall(memory, "九月的时候我的老板是谁？", user_id="lin", now=now)
    assert hits and hits[0].memory_id == old
    hits = recall(memory, "上个月我的老板是谁？", user_id="lin", now=now)
    assert hits and hits[0].memory_id == new
