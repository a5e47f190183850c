"""Long-horizon scenarios: weeks of conversation with facts said once, updates, chit-chat, tool
results and time passing through ``maintain(now=...)``, judged as a person would judge the memory."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.recall import format_memories, recall
from portamem.records import Status

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
USER = "dana"

#: (day, user message, reply): said once each, never with "remember"
WEEKS = [
    (0, "My name is Dana Whitfield.", "Nice to meet you, Dana!"),
    (0, "What's the weather like for a walk later?", "Sunny and 18 degrees, good for a walk."),
    (1, "I'm allergic to peanuts.", "Noted, I'll keep that in mind for recipes."),
    (1, "Haha, that meme was funny.", "Glad you liked it!"),
    (3, "My budget is 5000 for the kitchen renovation.", "Got it, 5000."),
    (4, "Is it going to rain tomorrow?", "Light showers in the morning."),
    (6, "Thanks, talk later!", "Bye!"),
    (9, "Ok cool.", "See you."),
    (15, "Actually my budget is 8000 now.", "Updated: 8000."),
    (16, "How windy is it outside?", "A gentle breeze."),
    (20, "Lol.", ":)"),
    (22, "Good morning!", "Good morning, Dana."),
    (25, "What a lovely sunset tonight.", "It really is."),
]


@pytest.fixture
def lived(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    """Three weeks of conversation, a tool result, then maintenance on days 30, 60, 90 and 100."""
    mem = Memory(settings=settings.replace(window_turns=4), embedder=embedder)
    for day, user, reply in WEEKS:
        mem.add_turn(user, reply, user_id=USER, session_id=f"day-{day}", created_at=T0 + timedelta(days=day, hours=1))
    mem.save_memory("Flight LH-4411 to Lisbon booked for 12 May, seat 14C.", user_id=USER, source="tool",
                    created_at=T0 + timedelta(days=18))
    for day in (30, 60, 90, 100):
        mem.maintain(now=T0 + timedelta(days=day))
    yield mem
    mem.close()


LATER = T0 + timedelta(days=100)


def _recall(mem: Memory, query: str) -> list[str]:
    return [h.content for h in recall(mem, query, user_id=USER, now=LATER)]


def test_the_name_and_the_allergy_are_recalled_after_ninety_days(lived: Memory) -> None:
    assert _recall(lived, "What's my name?")[0] == "My name is Dana Whitfield."
    assert _recall(lived, "Is there any food I can't eat?")[0] == "I'm allergic to peanuts."


def test_the_current_budget_is_the_newest(lived: Memory) -> None:
    hits = _recall(lived, "What is my budget?")
    assert hits[0] == "Actually my budget is 8000 now." and not any("5000" in h for h in hits)
    old = [r for r in lived.list_memories(user_id=USER, filters={"statuses": ["superseded"]}) if "5000" in r.content]
    assert len(old) == 1 and old[0].superseded_by is not None  # kept as history


def test_the_weather_chat_is_gone(lived: Memory) -> None:
    left = [r.content for r in lived.list_memories(user_id=USER, filters={"statuses": ["active", "deleted"]})]
    assert not any(word in text for text in left for word in ("weather", "rain", "windy", "meme", "sunset"))
    assert not any(w in h for h in _recall(lived, "What was the weather like?") for w in ("weather", "rain", "sunny"))


def test_no_unrelated_memory_reaches_the_prompt(lived: Memory) -> None:
    for question in ("How tall is the Eiffel Tower?", "Recommend a good sci-fi novel.", "What's 17 times 23?"):
        assert _recall(lived, question) == []
    prompt = format_memories(recall(lived, "When is my flight to Lisbon?", user_id=USER, now=LATER), now=LATER)
    assert "LH-4411" in prompt and "tool, trust high" in prompt and "months ago" in prompt
    assert sum(line.startswith("- ") for line in prompt.splitlines()) == 1  # nothing else came along


def test_memories_that_reached_the_prompt_count_as_used(lived: Memory) -> None:
    _recall(lived, "What's my name?")
    lived.retrieval_log.flush()
    name = next(r for r in lived.list_memories(user_id=USER) if r.content == "My name is Dana Whitfield.")
    assert name.access_count == 1 and name.last_accessed_at == LATER
    assert name.status is Status.ACTIVE
