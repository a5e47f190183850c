"""Predictive preload (the ``portamem_preload`` hook and its built-in rules): a message that opens a task gets what the task will need in its first prompt, by
one more search, marked as preloaded, and the session's next turns reuse it without searching again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from portamem import Memory, Settings, hookimpl
from portamem.embedding.embedders import Embedder
from portamem.errors import PluginError
from portamem.pipeline import Need, Preload
from portamem.plugins import get_plugin_manager
from portamem.read.preload import PRELOAD
from portamem.recall import format_memories, recall
from portamem.scenarios.preload import load_tasks
from portamem_plugins.preload import opened_task

PROFILE = ["I live in Leeds.", "I always take an aisle seat on flights.", "My Avios number is 4417-2208.",
           "My dentist is Dr Shah.", "I love jazz.", "Our budget for work trips is 900 pounds.",
           "My sister Jo has two kids."]


@pytest.mark.parametrize(("message", "task"), [
    ("Can you help me plan my business trip to Madrid next week?", "travel"),
    ("下周去成都出差，帮我安排一下行程", "travel"),
    ("I want to buy a new pair of running shoes.", "purchase"),
    ("想买个新手机，帮我看看", "purchase"),
    ("Can you set up a meeting with the Berlin team next month?", "scheduling"),
    ("帮我约一下和新加坡团队开会的时间", "scheduling"),
    ("Where should I go for lunch with a client tomorrow?", "meal"),
    ("周六想和朋友聚餐，推荐个餐厅吧", "meal"),
    # a question about what the user said before asks memory for one thing: no task opens
    ("When do we fly to Lisbon?", None),
    ("What's my travel budget?", None),
    ("我哪天去成都？", None),
    ("I love jazz.", None),
])
def test_the_task_a_message_opens(message: str, task: str | None) -> None:
    plan = opened_task(message)
    assert (plan.task if plan else None) == task
    if plan is not None:  # the one search asks in the message's language
        assert ("我" in plan.query) == ("我" in message or "帮" in message or "想" in message or "周" in message)


class _Counting:
    def __init__(self, memory: Memory) -> None:
        self.memory, self.queries = memory, []

    def search_memory(self, query: str, **kwargs: Any) -> Any:
        self.queries.append(query)
        return self.memory.search_memory(query, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)


@pytest.fixture
def profiled(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    mem = Memory(settings=settings.replace(preload=True), embedder=embedder)
    for text in PROFILE:
        mem.save_memory(text, user_id="dana")
    mem.flush()
    yield mem
    mem.close()


def test_a_task_gets_what_it_will_need_and_reuses_it(profiled: Memory) -> None:
    counted = _Counting(profiled)
    first = recall(counted, "Can you help me plan my business trip to Madrid next week?", user_id="dana",  # type: ignore[arg-type]
                   session_id="trip")
    assert len(counted.queries) == 2  # the question's own search and one for everything the task needs
    preloaded = [h.content for h in first if PRELOAD in h.found_by]
    assert {"I live in Leeds.", "I always take an aisle seat on flights.", "My Avios number is 4417-2208."} \
        <= set(preloaded)
    assert not {"My dentist is Dr Shah.", "I love jazz.", "My sister Jo has two kids."} & set(preloaded)
    assert len(preloaded) <= profiled.settings.preload_k
    assert "preloaded for the task" in format_memories(first)
    # the next turns of the task read the preloaded memories without searching for them again
    counted.queries.clear()
    later = recall(counted, "Which hotels are near the Prado?", user_id="dana", session_id="trip")  # type: ignore[arg-type]
    again = recall(counted, "What time should I leave for the airport?", user_id="dana", session_id="trip")  # type: ignore[arg-type]
    assert len(counted.queries) == 2  # one per message: the same task is not preloaded twice
    for hits in (later, again):
        assert set(preloaded) <= {h.content for h in hits}
    # another session has no open task
    other = recall(counted, "Which hotels are near the Prado?", user_id="dana", session_id="other")  # type: ignore[arg-type]
    assert not any(PRELOAD in h.found_by for h in other)


def test_the_reuse_ends_after_preload_turns(profiled: Memory) -> None:
    profiled.settings = profiled.settings.replace(preload_turns=1)
    first = recall(profiled, "Can you help me plan my business trip to Madrid next week?", user_id="dana",
                   session_id="s")
    preloaded = {h.memory_id for h in first if PRELOAD in h.found_by}
    assert preloaded
    second = recall(profiled, "Which hotels are near the Prado?", user_id="dana", session_id="s")
    assert preloaded <= {h.memory_id for h in second if PRELOAD in h.found_by}
    third = recall(profiled, "Which hotels are near the Prado?", user_id="dana", session_id="s")
    assert not any(PRELOAD in h.found_by for h in third)


def test_preload_off_is_one_search(profiled: Memory) -> None:
    profiled.settings = profiled.settings.replace(preload=False)
    counted = _Counting(profiled)
    hits = recall(counted, "Can you help me plan my business trip to Madrid next week?", user_id="dana",  # type: ignore[arg-type]
                  session_id="trip")
    assert len(counted.queries) == 1 and not any(PRELOAD in h.found_by for h in hits)


class PetRules:
    """A third party's rule: a vet visit needs the pet's name and its insurance."""

    @hookimpl
    def portamem_preload(self, message: str, settings: Settings) -> Preload | None:
        if "vet" not in message.lower():
            return None
        return Preload("pet care", (Need("pet", ("dog", "cat", "called", "named")), Need("insurance", ("insurance", "policy"))),
                       "my pet's name and pet insurance policy")


def test_a_plugin_adds_a_task(settings: Settings, embedder: Embedder) -> None:
    pm = get_plugin_manager()
    pm.register(PetRules(), name="pet_rules")
    with Memory(settings=settings.replace(preload=True), embedder=embedder, plugins=pm) as mem:
        for text in ("We have a beagle called Rolo.", "Rolo's insurance policy is with PetPlan, number PP-5521.",
                     "I love jazz."):
            mem.save_memory(text, user_id="dana")
        mem.flush()
        hits = recall(mem, "Can you book a vet appointment for next week?", user_id="dana", session_id="s")
        shown = [h.content for h in hits]  # the question's own search may find one of them first (unmarked)
        assert "We have a beagle called Rolo." in shown and any("PP-5521" in p for p in shown)
        assert any(PRELOAD in h.found_by for h in hits) and "I love jazz." not in shown


def test_a_plugin_that_answers_with_something_else_is_named(settings: Settings, embedder: Embedder) -> None:
    class Broken:
        @hookimpl
        def portamem_preload(self, message: str, settings: Settings) -> Any:
            return Preload("x", ("not a need",))  # type: ignore[arg-type]

    pm = get_plugin_manager()
    pm.register(Broken(), name="broken_rules")
    with Memory(settings=settings.replace(preload=True), embedder=embedder, plugins=pm) as mem:
        with pytest.raises(PluginError, match="broken_rules"):
            recall(mem, "anything", user_id="dana")


def test_the_packaged_task_openings_are_well_formed() -> None:
    tasks = load_tasks(split="all")
    assert len(tasks) >= 24 and {t.split for t in tasks} == {"dev", "test"} and {t.lang for t in tasks} == {"en", "zh"}
    for t in tasks:  # every need is in one of the task's memories, so a miss is the preload's, not the data's
        assert all(any(n in m for m in t.memories) for n in t.needs), t.id


def test_a_message_on_another_topic_ends_the_task(profiled: Memory) -> None:
    first = recall(profiled, "Can you help me plan my business trip to Madrid next week?", user_id="dana",
                   session_id="trip")
    assert any(PRELOAD in h.found_by for h in first)
    # a message about something else carries none of the task's lines, and the task is over
    assert not [h for h in recall(profiled, "What's the weather on Mars?", user_id="dana", session_id="trip")
                if PRELOAD in h.found_by]
    assert not [h for h in recall(profiled, "Which hotels are near the Prado?", user_id="dana", session_id="trip")
                if PRELOAD in h.found_by]


def test_preload_is_off_by_default() -> None:
    # on the test half of `portamem eval preload`, under 0.8 of the preloaded lines meet a need
    assert Settings().preload is False
