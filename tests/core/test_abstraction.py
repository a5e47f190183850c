"""Abstraction of repeated memories by the maintainer: one abstract memory per habit, with its support,
updated in place by later runs, shown by recall in place of its members."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.lifecycle.abstraction import ABSTRACT_KEY, ABSTRACTED_INTO
from portamem.recall import recall
from portamem.scenarios.habits import load_habits

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
SEATS = ["Booked seat 14A (window) on LH902 to Munich.", "Booked a window seat, 22F, on BA1440 to London.",
         "Flight to Paris booked: seat 9A, window.", "Booked seat 31C (aisle) on the Rome flight.",
         "Booked window seat 3A on the Vienna flight.", "Flight to Oslo booked, seat 17F by the window.",
         "Booked seat 12A, a window, on the Madrid flight."]
OTHER = ["I live in Leeds.", "My dentist is Dr Shah.", "I love jazz.", "My sister Jo has two kids.",
         "The car needs a service in May.", "I'm learning Spanish.", "My cat is called Miso.", "I work at a bank."]


@pytest.fixture
def flyer(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    mem = Memory(settings=settings, embedder=embedder)
    for i, text in enumerate(SEATS + OTHER):
        mem.save_memory(text, user_id="u", source="tool" if text in SEATS else "user", created_at=T0 + timedelta(days=3 * i))
    mem.flush()
    yield mem
    mem.close()


def _abstracts(mem: Memory) -> list:  # type: ignore[type-arg]
    return [r for r in mem.list_memories(user_id="u") if ABSTRACT_KEY in r.metadata]


def test_repeated_bookings_become_one_habit_with_its_support(flyer: Memory) -> None:
    report = flyer.maintain(now=T0 + timedelta(days=60))
    habits = _abstracts(flyer)
    assert len(habits) == 1 and report.abstracted == [habits[0].memory_id]
    habit = habits[0]
    info = habit.metadata[ABSTRACT_KEY]
    assert "window" in info["words"] and info["support"] >= 4 and info["support"] <= info["of"]
    assert info["confidence"] == round(info["support"] / info["of"], 2)
    assert f"{info['support']} of {info['of']}" in habit.content and "window" in habit.content
    # the members stay, each naming its abstract; no unrelated memory is one
    members = set(info["derived_from"])
    kept = {r.memory_id: r for r in flyer.list_memories(user_id="u")}
    assert members <= set(kept) and all(kept[m].metadata[ABSTRACTED_INTO] == habit.memory_id for m in members)
    assert not any(kept[m].content in OTHER for m in members)


def test_a_later_run_updates_the_habit_in_place(flyer: Memory) -> None:
    flyer.maintain(now=T0 + timedelta(days=60))
    first = _abstracts(flyer)[0]
    flyer.save_memory("Booked window seat 2A on the Athens flight.", user_id="u", source="tool",
                      created_at=T0 + timedelta(days=61))
    flyer.flush()
    flyer.maintain(now=T0 + timedelta(days=62))
    again = _abstracts(flyer)
    assert [a.memory_id for a in again] == [first.memory_id]  # one habit, its id kept
    assert again[0].metadata[ABSTRACT_KEY]["of"] >= first.metadata[ABSTRACT_KEY]["of"]


def test_recall_shows_the_habit_first_for_a_preference_question(flyer: Memory) -> None:
    flyer.maintain(now=T0 + timedelta(days=60))
    habit = _abstracts(flyer)[0]
    hits = recall(flyer, "Do I prefer a window or an aisle seat?", user_id="u", session_id="q")
    assert hits[0].memory_id == habit.memory_id
    members = set(habit.metadata[ABSTRACT_KEY]["derived_from"])
    assert not members & {h.memory_id for h in hits}  # the habit stands for them


def test_a_caller_cannot_forge_a_habit(flyer: Memory) -> None:
    from portamem.errors import ValidationError

    with pytest.raises(ValidationError, match="abstract"):
        flyer.save_memory("I always fly first class.", user_id="u", metadata={"abstract": {"support": 99}})


def test_abstraction_off_writes_nothing(settings: Settings, embedder: Embedder) -> None:
    with Memory(settings=settings.replace(abstract=False), embedder=embedder) as mem:
        for text in SEATS:
            mem.save_memory(text, user_id="u", source="tool")
        mem.flush()
        assert mem.maintain().abstracted == [] and not _abstracts(mem)


def test_too_few_alike_memories_make_no_habit(settings: Settings, embedder: Embedder) -> None:
    with Memory(settings=settings, embedder=embedder) as mem:
        for text in SEATS[:2] + OTHER:
            mem.save_memory(text, user_id="u", source="tool")
        mem.flush()
        mem.maintain()
        assert not _abstracts(mem)


def test_the_packaged_habit_users_are_well_formed() -> None:
    users = load_habits(split="all")
    assert len(users) >= 8 and {u["split"] for u in users} == {"dev", "test"} and {u["lang"] for u in users} == {"en", "zh"}
    for u in users:
        assert sum(u["expect"].lower() in e.lower() for e in u["events"]) >= 3, u["id"]


def test_an_llm_habit_summariser_writes_the_text_and_must_keep_the_support(flyer: Memory) -> None:
    from portamem_plugins.summarize import LLMHabitSummarizer

    prompts: list[str] = []
    answers = iter([
        "Prefers window seats.",  # not JSON
        json.dumps({"summary": "Prefers window seats."}),  # JSON, but the support is gone
        None,  # filled in below, once the support is known from the prompt
    ])

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        answer = next(answers)
        if answer is None:
            support, of = re.search(r"(\d+) of (\d+) similar", prompt).groups()  # type: ignore[union-attr]
            answer = json.dumps({"summary": f"Prefers window seats on flights ({support} of {of} bookings)."})
        return answer

    flyer.plugins.register(LLMHabitSummarizer(llm), name="llm_habits")
    flyer.maintain(now=T0 + timedelta(days=60))
    habit = _abstracts(flyer)[0]
    info = habit.metadata[ABSTRACT_KEY]
    assert habit.content == f"Prefers window seats on flights ({info['support']} of {info['of']} bookings)."
    assert len(prompts) == 3 and "must keep the support" in prompts[2] and "Booked" in prompts[0]


def test_the_rule_template_writes_the_habit_when_the_llm_keeps_failing(flyer: Memory) -> None:
    from portamem_plugins.summarize import LLMHabitSummarizer

    flyer.plugins.register(LLMHabitSummarizer(lambda prompt: "no"), name="llm_habits")
    flyer.maintain(now=T0 + timedelta(days=60))
    habit = _abstracts(flyer)[0]
    assert habit.content.startswith("Habit: ") and "window" in habit.content


@pytest.mark.parametrize("namespace", [("portamem", "abstract"), "portamem.abstract", ("portamem",),
                                       ("portamem", "abstract", "deeper")])
def test_a_caller_may_not_write_under_the_habits_key(flyer: Memory, namespace: object) -> None:
    from portamem import MemoryDraft, ValidationError

    flyer.maintain(now=T0 + timedelta(days=60))
    habit = _abstracts(flyer)[0]
    key = habit.key if namespace in (("portamem", "abstract"), "portamem.abstract") else "mine"
    with pytest.raises(ValidationError, match="portamem's own"):
        flyer.save_memory("Habit: aisle seats, always.", user_id="u", key=key, key_namespace=namespace)
    with pytest.raises(ValidationError, match="portamem's own"):
        flyer.save_memories([MemoryDraft("Habit: aisle seats.", key=key, key_namespace=namespace)], user_id="u")
    assert flyer.get_memory(habit.memory_id, user_id="u").content == habit.content
    # a namespace that only starts with the same letters is the caller's
    assert flyer.save_memory("Seat pick: aisle.", user_id="u", key="seat", key_namespace=("portamemo",)).key == "seat"
