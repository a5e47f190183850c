"""A personal question naming a thing of the user's that no memory mentions ("What does my wife do?",
"我老婆做什么工作？") recalls nothing (``portamem.read.candidates.asked_things``,
``Settings.unknown_thing_penalty``; a relative, ``asked_relations``, by any word of the relation), while a
question about a thing that was mentioned still finds it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.errors import ConfigError
from portamem.read.candidates import asked_relations, asked_things
from portamem.recall import recall

T0 = datetime(2026, 9, 1, 9, 0, tzinfo=timezone.utc)
LATER = T0 + timedelta(days=40)


@pytest.mark.parametrize(("question", "things"), [
    ("What does my wife do for a living?", ["wife"]),
    ("What's my dog's name?", ["dog"]),
    ("What's my favourite film?", ["film"]),
    ("What's my passport number?", ["passport"]),
    ("How do I get to work?", []),
    ("What is Dana's job?", []),  # someone else's thing, not the user's
    ("我老婆做什么工作？", ["老婆"]),
    ("我的车是什么牌子？", ["车"]),
    ("我的教练是谁？", ["教练"]),
    ("我现在用什么手机？", []),  # 现在 is a time, not a thing
    ("我住在哪里？", []),  # 住 is a verb
    ("我哥住在哪里？", ["哥"]),  # the tokenizer keeps 我哥 whole
])
def test_a_personal_question_names_the_users_things(question: str, things: list[str]) -> None:
    assert asked_things(question) == things


def _intro(memory: Memory) -> None:
    for day, text in enumerate(["I'm Sam, I work in logistics.", "My manager is Priya Nair.",
                                "I take the 7:40 train to work every morning.",
                                "我叫李明，在一家物流公司上班。", "我每天坐地铁上班。"]):
        memory.save_memory(text, user_id="sam", created_at=T0 + timedelta(days=day))
    memory.flush()


def test_a_person_never_mentioned_recalls_nothing(memory: Memory) -> None:
    # the user's own work does not answer for the wife's: the job slot asks of the person named
    _intro(memory)
    assert recall(memory, "What does my wife do for a living?", user_id="sam", now=LATER) == []


def test_a_thing_never_mentioned_costs_the_penalty_of_each_hit(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    # "我的车是什么牌子？" meets the user's commute by meaning: without the word 车 in any memory each hit keeps
    # (1 - unknown_thing_penalty) of its score (a car is often named by its make alone: the penalty is a share)
    scores = {}
    for penalty in (0.0, 0.5):
        mem = Memory(settings=Settings(path=str(tmp_path / str(penalty)), unknown_thing_penalty=penalty),
                     embedder=embedder)
        try:
            _intro(mem)
            scores[penalty] = {h.content: h.score
                               for h in mem.search_memory("我的车是什么牌子？", user_id="sam", now=LATER)}
        finally:
            mem.close()
    assert scores[0.0] and scores[0.5]
    for text, score in scores[0.5].items():
        assert score == pytest.approx(0.5 * scores[0.0][text], rel=1e-6)


@pytest.mark.parametrize(("question", "answer"), [("Who is my manager?", "Priya Nair"),
                                                  ("How do I get to work?", "train")])
def test_a_thing_mentioned_is_still_found(memory: Memory, question: str, answer: str) -> None:
    _intro(memory)
    hits = recall(memory, question, user_id="sam", now=LATER)
    assert any(answer in h.content for h in hits)


def test_a_thing_named_with_its_category_answers(memory: Memory) -> None:
    memory.save_memory("We adopted a rescue dog, a greyhound called Biscuit.", user_id="sam", created_at=T0)
    memory.save_memory("I'm Sam, I work in logistics.", user_id="sam", created_at=T0 + timedelta(days=1))
    memory.flush()
    hits = recall(memory, "What breed is my dog?", user_id="sam", now=LATER)
    assert hits and "greyhound" in hits[0].content


@pytest.mark.parametrize(("said", "question"), [
    (["We adopted a rescue dog, a greyhound called Biscuit.", "Biscuit weighs 27 kg."], "What's my cat called?"),
    (["我刚领养了一只橘猫，叫年糕🐱", "年糕两岁，4.5公斤"], "我家狗叫什么？"),
])
def test_a_pet_of_another_kind_than_the_one_asked_about_answers_nothing(tmp_path, embedder, said: list[str],
                                                                       question: str) -> None:  # type: ignore[no-untyped-def]
    # the store knows of the user's dog, not of a cat: whatever the soft penalty of a thing never named
    mem = Memory(settings=Settings(path=str(tmp_path), unknown_thing_penalty=0.0), embedder=embedder)
    try:
        _intro(mem)
        for day, text in enumerate(said):
            mem.save_memory(text, user_id="sam", created_at=T0 + timedelta(days=10 + day))
        mem.flush()
        assert recall(mem, question, user_id="sam", now=LATER) == []
        # the pet asked about by its kind, or by its breed, is found
        own = "What breed is my dog?" if "dog" in said[0] else "我家猫多重？"
        assert any(said[1][:2] in h.content or said[0][:8] in h.content
                   for h in recall(mem, own, user_id="sam", now=LATER))
    finally:
        mem.close()


def test_the_tokenizer_s_bark_is_read_as_the_dog() -> None:
    assert asked_things("我家狗叫什么？") == ["狗"] and asked_things("我的猫叫什么名字？") == ["猫"]


@pytest.mark.parametrize(("question", "first"), [
    ("What does my wife do for a living?", "wife"),
    ("Where does my brother live?", "brother"),  # "live" is the verb, the brother the person
    ("What's my son's birthday?", "son"),
    ("What's my brother's wife called?", "brother"),  # the brother's wife: the first relation is the user's
    ("What breed is my dog?", None),  # a pet is a thing: introduced by its breed as often as not
    ("Who is Dana's husband?", None),  # someone else's
    ("我老婆做什么工作？", "老婆"),
    ("我哥住在哪里？", "哥"),  # the tokenizer keeps 我哥 whole
    ("我的女儿几岁了？", "女儿"),
    ("我的车是什么牌子？", None),
])
def test_a_question_names_the_users_relatives(question: str, first: str | None) -> None:
    groups = asked_relations(question)
    assert [g[0] for g in groups] == ([first] if first else [])
    if first:
        assert len(groups[0]) > 1  # every word of the relation, in both languages


@pytest.mark.parametrize("question", ["What does my wife do for a living?", "Where does my brother live?",
                                      "我老婆做什么工作？", "我哥住在哪里？"])
def test_a_relative_never_named_recalls_nothing_whatever_the_thing_penalty(tmp_path, embedder, question: str) -> None:  # type: ignore[no-untyped-def]
    mem = Memory(settings=Settings(path=str(tmp_path), unknown_thing_penalty=0.0), embedder=embedder)
    try:
        _intro(mem)
        assert recall(mem, question, user_id="sam", now=LATER) == []
        assert mem.search_memory(question, user_id="sam", now=LATER) == []
    finally:
        mem.close()


@pytest.mark.parametrize(("said", "question", "answer"), [
    ("Ana and I got married last spring; she teaches chemistry at a sixth-form college.",
     "What does my wife do for a living?", "chemistry"),
    ("我哥哥在深圳做程序员，在南山区租房。", "我哥住在哪里？", "南山"),
    ("我妈妈在老家开了一家小卖部。", "我妈是做什么的？", "小卖部"),
])
def test_a_relative_named_by_another_word_of_the_relation_answers(memory: Memory, said: str, question: str,
                                                                 answer: str) -> None:
    _intro(memory)
    memory.save_memory(said, user_id="sam", created_at=T0 + timedelta(days=10))
    memory.flush()
    # the relative is known by another word of the relation: the answer is recalled
    hits = recall(memory, question, user_id="sam", now=LATER)
    assert any(answer in h.content for h in hits)


def test_the_penalty_is_a_share() -> None:
    with pytest.raises(ConfigError):
        Settings(unknown_thing_penalty=1.5)


# ------------------------------------------------------------------ a Chinese question, on its own language's background
_ZH = ["我叫李伟，在杭州一家电商公司做产品经理。", "我住在西湖区，离公司骑车十分钟。", "我周末喜欢去爬山。", "我对花生过敏。",
       "我每天早上喝一杯美式咖啡。"]
#: e5's one background, without the Chinese one (``Settings.vector_calibration`` gives no ``cjk``)
_ONE_BACKGROUND = {"mean": 0.7486, "std": 0.0245}


def _zh(mem: Memory) -> None:
    for day, text in enumerate(_ZH):
        mem.save_memory(text, user_id="li", created_at=T0 + timedelta(days=day))
    mem.flush()


@pytest.mark.parametrize("question", ["我的狗叫什么名字？", "我女儿在哪里上学？"])
def test_a_chinese_question_about_nothing_stored_recalls_nothing(memory: Memory, question: str) -> None:
    _zh(memory)
    assert recall(memory, question, user_id="li", now=LATER) == []


@pytest.mark.parametrize(("question", "answer"), [("我对什么过敏？", "花生"), ("我在哪里工作？", "产品经理")])
def test_a_chinese_question_about_something_stored_still_finds_it(memory: Memory, question: str, answer: str) -> None:
    _zh(memory)
    hits = recall(memory, question, user_id="li", now=LATER)
    assert hits and answer in hits[0].content


def test_the_chinese_background_decides_only_whether_anything_is_relevant(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    # on e5's one background every memory is somewhat relevant to any Chinese question; on the background
    # of Chinese text the never-said question finds nothing, and an answered one ranks as before
    found = {}
    for name, calibration in (("one", _ONE_BACKGROUND), ("own", None)):
        mem = Memory(settings=Settings(path=str(tmp_path / name), vector_calibration=calibration), embedder=embedder)
        try:
            _zh(mem)
            found[name] = {q: [(h.content, round(h.score, 6)) for h in mem.search_memory(q, user_id="li", now=LATER)]
                           for q in ("我的狗叫什么名字？", "我在哪里工作？")}
        finally:
            mem.close()
    assert found["one"]["我的狗叫什么名字？"] and found["own"]["我的狗叫什么名字？"] == []
    assert found["own"]["我在哪里工作？"] == found["one"]["我在哪里工作？"]


def test_a_calibration_scores_a_chinese_question_on_its_own_background() -> None:
    from portamem.errors import ValidationError
    from portamem.read.calibration import Calibration, vector_score

    cal = Calibration(0.75, 0.025, cjk=(0.83, 0.017))
    assert vector_score(0.84, cal) == pytest.approx(0.45)
    assert vector_score(0.84, cal, cjk=True) == pytest.approx(0.01 / (8 * 0.017))
    assert vector_score(0.84, Calibration(0.75, 0.025), cjk=True) == pytest.approx(0.45)
    with pytest.raises(ValidationError):
        Calibration(0.75, 0.025, cjk=(0.83, 0.0))
