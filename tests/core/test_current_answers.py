"""A question that asks for an amount or a date gets the value the user last gave (``portamem.read.current``),
and a newer memory's change outdates only what its own clause is about (``portamem.read.prompt``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.portable.wire import dump_hit, load_hit
from portamem.read.current import asked_kind, current_answers, values
from portamem.read.prompt import for_prompt, format_memories
from portamem.recall import recall
from portamem.records import MemoryRecord, ScoreBreakdown, SearchHit
from portamem.language.text import tokenize

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


def _hit(text: str, day: int, score: float, triples: list[list[str]] | None = None) -> SearchHit:
    record = MemoryRecord(content=text, user_id="u", created_at=T0 + timedelta(days=day), triples=triples or [])
    return SearchHit(record, score, ScoreBreakdown(score, {"vector": score, "keyword": 0.0}, {"vector": 1.0, "keyword": 0.5}),
                     ("vector",))


@pytest.mark.parametrize(("question", "kind"), [
    ("How many guests are we having?", "amount"),
    ("How much is the bike repair?", "amount"),
    ("What's my salary?", "amount"),
    ("每桌多少钱？", "amount"),
    ("我现在多重？", "amount"),
    ("When do we fly to Lisbon?", "date"),
    ("By when do I need to drop the shoes off?", "date"),
    ("我哪天入职？", "date"),
    ("半马比赛是什么时候？", "date"),
    ("Where do I live?", None),
    ("What was my old salary?", None),  # a question about what held before keeps every value
    ("我以前住在哪里？", None),
])
def test_what_a_question_asks_for(question: str, kind: str | None) -> None:
    assert asked_kind(question) == kind


def test_values_and_their_units() -> None:
    assert [(v.text, v.unit) for v in values("The date is 14 June 2025, and we're expecting around 120 guests", "amount")] \
        == [("120 guests", "guests")]  # the date holds no amount
    assert [v.text for v in values("The date is 14 June 2025, and we're expecting around 120 guests", "date")] \
        == ["14 june 2025"]
    assert [(v.text, v.unit) for v in values("it's £110 with labour, not £85", "amount")] == [("£110", "£"), ("£85", "£")]
    assert [(v.text, v.unit) for v in values("先减到每周25公里", "amount")] == [("25公里", "公里")]
    assert [v.text for v in values("客户那边时间变了，出发改到5月21号，24号回。", "date")] == ["5月21号", "24号"]
    assert [v.text for v in values("新公司让我提前到7月8号入职。", "date")] == ["7月8号"]


@pytest.mark.parametrize(("question", "older", "newer", "kept"), [
    # the same words of the question, a newer value: the newer takes the older's rank
    ("How many guests are we having?", "we're expecting around 120 guests", "the guest list has crept back up to 95 guests",
     ["the guest list has crept back up to 95 guests", "an unrelated line about the cake"]),
    # the newer names the older value beside its own
    ("How much is the bike repair?", "they said the repair is £85", "oh and they called back, it's £110 with labour, not £85",
     ["oh and they called back, it's £110 with labour, not £85", "an unrelated line about the cake"]),
    # the same unit and a change: "she's up to 29 kg" after "weighs 27 kg"
    ("How much does Biscuit weigh?", "she's 4 years old and weighs 27 kg", "also she's up to 29 kg already",
     ["also she's up to 29 kg already", "an unrelated line about the cake"]),
    ("每桌多少钱？", "酒店最后定了华尔道夫，每桌8888", "每桌价格也涨到9888了",
     ["每桌价格也涨到9888了", "an unrelated line about the cake"]),
])
def test_the_latest_value_of_the_asked_thing_wins(question: str, older: str, newer: str, kept: list[str]) -> None:
    hits = [_hit(older, 1, 0.8), _hit("an unrelated line about the cake", 2, 0.5), _hit(newer, 9, 0.4)]
    out, stands = current_answers(question, hits)
    assert [h.content for h in out] == kept
    assert stands == {out[0].memory_id: 0.8}  # it stands at the score of the hit it replaced for the margin rule


def test_a_line_with_a_value_of_the_asked_kind_comes_first() -> None:
    swap = _hit("I want to swap them for a size 8, wait no scratch that, 7.5 should be enough", 3, 0.45)
    ret = _hit("Return RMA-20931 created. Drop off at any InPost locker by 28 Feb.", 4, 0.30)
    out, stands = current_answers("By when do I need to drop the shoes off?", [swap, ret])
    assert [h.content for h in out] == [ret.content, swap.content] and stands == {}
    assert current_answers("Which shoes did I order?", [swap, ret])[0] == [swap, ret]  # no value asked for


def test_values_of_other_things_and_questions_about_the_past_keep_every_line() -> None:
    hits = [_hit("the bike repair is £85", 1, 0.8), _hit("my new helmet cost £60", 9, 0.6)]
    assert current_answers("How much is the bike repair?", hits)[0] == hits  # the helmet is not the repair
    hits = [_hit("I'm on 65k", 1, 0.8), _hit("and the new salary is 78k", 9, 0.6)]
    assert current_answers("What was my salary before?", hits)[0] == hits
    assert current_answers("Where do I work?", hits)[0] == hits


def test_a_change_outdates_what_its_own_clause_is_about_only() -> None:
    order = _hit("hi, I ordered running shoes from Stride last week, order number ST-40917", 1, 0.53)
    later = _hit("Makes sense if you order often. also I upgraded to Stride Plus, £4.99 a month but returns are free", 5, 0.27)
    assert [h.content for h in for_prompt([order, later])] == [order.content, later.content]
    moved = _hit("Big news: I moved from Lyon to Paris last month, I live in Paris now", 5, 0.5)
    lyon = _hit("I live in Lyon with my two cats", 1, 0.6)
    assert [h.content for h in for_prompt([lyon, moved])] == [moved.content]
    assert [h.content for h in for_prompt([lyon, moved], query="Where do I live now?")] == [moved.content]


def test_a_change_the_question_does_not_ask_about_outdates_nothing() -> None:
    dog = _hit("we just adopted a rescue greyhound called Biscuit", 1, 0.27)
    vet = _hit("The vet called, they had to bump Biscuit to 5 June at 10:40", 9, 0.13)
    assert [h.content for h in for_prompt([dog, vet], query="What breed is my dog?")] == [dog.content, vet.content]
    # a new date outdates a date: the line that gives none still stands, whatever the question
    assert [h.content for h in for_prompt([dog, vet])] == [dog.content, vet.content]
    first = _hit("Biscuit's first vet check is on 2 June at Oakfield Vets", 5, 0.3)
    asked = "When is Biscuit's vet appointment?"
    assert [h.content for h in for_prompt([first, dog, vet], query=asked)] == [vet.content, dog.content]


def test_a_change_leaves_what_the_older_memory_states_about_other_things() -> None:
    job = _hit("Starting as a machine learning engineer at Delivery Hero on 1 September.", 1, 0.17,
               triples=[["user", "occupation", "machine learning engineer"], ["user", "works_at", "Delivery Hero"]])
    start = _hit("Quick update, HR rescheduled my start to 16 September because of onboarding batches", 9, 0.15)
    assert [h.content for h in for_prompt([job, start], query="Where do I work?")] == [job.content, start.content]
    assert [h.content for h in for_prompt([job, start], query="When do I start the new job?")] == [start.content]


def test_a_number_before_chinese_is_its_own_token() -> None:
    assert "入职" in tokenize("入职时间是7月15号") and "15" in tokenize("入职时间是7月15号")
    assert "7月8号入职" not in tokenize("新公司让我提前到7月8号入职")
    assert "7" in tokenize("新公司让我提前到7月8号入职")


def test_a_possessive_is_the_word_it_belongs_to() -> None:
    assert tokenize("What's my dentist's name?") == ["dentist", "name"]
    assert tokenize("Biscuit’s vet, don't") == ["biscuit", "vet", "don't"]


@pytest.fixture
def planned(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    mem = Memory(settings=settings, embedder=embedder)
    turns = [
        (0, "The wedding is on 14 June 2025 and we're expecting around 120 guests", "Lovely!"),
        (3, "and the caterer is Fig & Thistle, they quoted £65 a head", "Noted."),
        (9, "Fig & Thistle also put their price up to £72 a head", "That's a jump."),
        (12, "so the guest list has crept back up to 95 guests", "Okay, 95 it is."),
    ]
    for day, user, reply in turns:
        mem.add_turn(user, reply, user_id="dana", session_id=f"s{day}", created_at=T0 + timedelta(days=day))
    mem.flush()
    yield mem
    mem.close()


@pytest.mark.parametrize(("question", "current", "stale"), [
    ("How many guests are we having?", "95", "120"),
    ("How much is the caterer charging per head?", "£72", "£65"),
])
def test_recall_shows_the_value_last_given(planned: Memory, question: str, current: str, stale: str) -> None:
    hits = recall(planned, question, user_id="dana", session_id="later", now=T0 + timedelta(days=30))
    assert hits and current in hits[0].content
    assert not any(stale in h.content and current not in h.content for h in hits)


def test_the_line_that_outdates_another_says_what_it_replaced() -> None:
    rehearse = _hit("We rehearse at Soundbase studios every Wednesday", 1, 0.5)
    moved = _hit("and rehearsals are Thursdays from now on, the drummer got a new shift pattern", 9, 0.4)
    shown = for_prompt([rehearse, moved], query="What day do we rehearse?")
    assert [h.content for h in shown] == [moved.content]
    assert shown[0].replaces == ((rehearse.content, rehearse.record.created_at.isoformat()),)
    prompt = format_memories(shown, now=T0 + timedelta(days=30))
    assert 'replaces "We rehearse at Soundbase studios every Wednesday" of ' in prompt
    assert prompt.splitlines()[-1].endswith(moved.content)  # the older text in the bracket, the newer as the line
    back = load_hit(dump_hit(shown[0]))
    assert back.replaces == shown[0].replaces


@pytest.mark.parametrize(("question", "lines", "first"), [
    # what the question measures puts the line in its unit first, whatever other amounts stand above it
    ("我现在多重？", [("膝盖有点疼，先减到每周25公里。", 3, 0.6), ("体重降到74公斤了，开心。", 2, 0.4)], "74公斤"),
    ("豆豆多高？", [("我家宝宝叫豆豆，八个月大了", 0, 0.6), ("身高长到75厘米了", 5, 0.4)], "75厘米"),
    ("How much does Biscuit weigh?", [("Biscuit is 4 years old", 0, 0.6), ("she weighs 27 kg", 1, 0.3)], "27 kg"),
    ("How far is the run?", [("it costs £12 to enter", 0, 0.6), ("the route is 21 km", 1, 0.3)], "21 km"),
])
def test_the_line_in_the_asked_unit_comes_first(question: str, lines: list[tuple[str, int, float]], first: str) -> None:
    kept, _ = current_answers(question, [_hit(t, d, s) for t, d, s in lines])
    assert first in kept[0].content


def test_chinese_units_of_length_and_months_are_amounts() -> None:
    assert [(v.text, v.unit) for v in values("身高长到75厘米了", "amount")] == [("75厘米", "厘米")]
    assert [v.unit for v in values("我家宝宝八个月大了", "amount")] == ["个月"]
