"""The contracts every adapter meets, as base test classes split by capability."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from portamem.errors import PortamemError, ValidationError

from .driver import MemoryDriver
from .restart import run_in_subprocess

__all__ = [
    "FACTS",
    "TURNS",
    "CHANGE",
    "opened",
    "StoreTests",
    "DriverTests",
    "RoundTripTests",
    "TurnTests",
    "IsolationTests",
    "ForgetTests",
    "RestartTests",
    "AsyncTests",
    "ErrorTests",
    "ChangeTests",
    "ConformanceTests",
]

#: distinct facts (no PII, no near-duplicates), each with a question sharing a keyword with it only,
#: so the expected best match holds under any embedder (hybrid search weighs keywords too)
FACTS: dict[str, str] = {
    "My cat is called Tom and he sleeps on the piano.": "What is my cat like?",
    "I moved to Oslo in 2019 for a job at the harbour.": "When did I move to Oslo?",
    "My favourite drink is jasmine green tea, no sugar.": "Which tea do I drink?",
    "I am allergic to peanuts, so no satay for me.": "Can I eat peanuts?",
    "Wir fahren im Sommer mit dem Zug nach Wien 🚆.": "Wann fahren wir nach Wien?",
}

#: exchanges for the turn contracts: plain, multi-line, non-Latin and quoted text
TURNS: list[tuple[str, str]] = [
    ("Hello! Can you help me plan a trip?", "Of course. Where would you like to go?"),
    ("Somewhere warm,\nwith \"good\" food.", "Lisbon fits: mild winters and great seafood."),
    ("東京はどうですか？", "東京もいいですね。春の桜がおすすめです。"),
]

#: a value, then its change, said in two turns: the change retires the value (the review and formation
#: decide it in the background, after the acknowledgement)
CHANGE: list[tuple[str, str]] = [
    ("I live in Lyon, in a flat near the old town.", "Lovely city!"),
    ("Big news: I moved to Paris last month.", "Congratulations on the move!"),
]
CHANGE_QUESTION = "Where do I live?"


@contextmanager
def opened(driver: MemoryDriver, path: Path, **scope: str) -> Iterator[Any]:
    """A driver handle that is always closed, so the next one can open the same store."""
    handle = driver.open(path, **scope)
    try:
        yield handle
    finally:
        driver.close(handle)


def _pairs(turns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [m for u, a in turns for m in (("user", u), ("assistant", a))]


class StoreTests:
    """A fresh store directory per test."""

    @pytest.fixture
    def store_path(self, tmp_path: Path) -> Path:
        return tmp_path / "store"


class DriverTests(StoreTests):
    """Shared fixtures. A subclass overrides ``driver`` and nothing else."""

    @pytest.fixture
    def driver(self) -> MemoryDriver:
        raise NotImplementedError("override the `driver` fixture to return your adapter's MemoryDriver")

    def test_driver_matches_protocol(self, driver: MemoryDriver) -> None:
        assert isinstance(driver, MemoryDriver)
        assert isinstance(driver.name, str) and driver.name


class RoundTripTests(DriverTests):
    """What is remembered comes back, text unchanged, the best match first."""

    def test_remembered_text_comes_back_unchanged(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            for text in FACTS:
                driver.remember(h, text)
            for text, question in FACTS.items():
                assert text in driver.recall(h, question, k=len(FACTS))

    def test_best_match_is_ranked_first(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            for text in FACTS:
                driver.remember(h, text)
            for text, question in FACTS.items():
                assert driver.recall(h, question, k=3)[0] == text

    def test_recall_returns_at_most_k(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            for text in FACTS:
                driver.remember(h, text)
            # a question two memories answer; recall returns what matches, at most k of it
            question = "Is my cat Tom allergic to peanuts?"
            assert len(driver.recall(h, question, k=1)) == 1 and len(driver.recall(h, question, k=5)) >= 2

    def test_nothing_recalled_from_an_empty_store(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            assert driver.recall(h, "What is the name of my cat?", k=5) == []

    def test_nothing_recalled_about_what_was_never_said(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            for text in FACTS:
                driver.remember(h, text)
            assert driver.recall(h, "What is the capital of Peru?", k=5) == []


class TurnTests(DriverTests):
    """Turns come back in order, per session; long-term memory follows the user across sessions."""

    def test_turns_come_back_in_order(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            assert driver.history(h) == []
            for user_text, assistant_text in TURNS:
                driver.write_turn(h, user_text, assistant_text)
            assert driver.history(h) == _pairs(TURNS)

    def test_history_is_per_session(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice", session_id="s1") as h:
            driver.write_turn(h, *TURNS[0])
        with opened(driver, store_path, user_id="alice", session_id="s2") as h:
            driver.write_turn(h, *TURNS[1])
            assert driver.history(h) == _pairs(TURNS[1:2])
        with opened(driver, store_path, user_id="alice", session_id="s1") as h:
            assert driver.history(h) == _pairs(TURNS[:1])

    def test_memories_follow_the_user_across_sessions(self, driver: MemoryDriver, store_path: Path) -> None:
        fact = next(iter(FACTS))
        with opened(driver, store_path, user_id="alice", session_id="s1") as h:
            driver.remember(h, fact)
        with opened(driver, store_path, user_id="alice", session_id="s2") as h:
            assert driver.recall(h, FACTS[fact], k=1) == [fact]


class IsolationTests(DriverTests):
    """No memory or turn crosses a user or a tenant boundary, even with the same ids elsewhere."""

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ({"user_id": "alice"}, {"user_id": "bob"}),
            ({"user_id": "alice", "tenant_id": "acme"}, {"user_id": "alice", "tenant_id": "globex"}),
        ],
        ids=["user", "tenant"],
    )
    def test_scopes_do_not_see_each_other(
        self, driver: MemoryDriver, store_path: Path, first: dict[str, str], second: dict[str, str]
    ) -> None:
        texts = list(FACTS)
        with opened(driver, store_path, **first) as h:
            driver.remember(h, texts[0])
            driver.write_turn(h, *TURNS[0])
        with opened(driver, store_path, **second) as h:
            assert driver.recall(h, FACTS[texts[0]], k=5) == []
            assert driver.history(h) == []
            driver.remember(h, texts[1])
            driver.write_turn(h, *TURNS[1])
        with opened(driver, store_path, **first) as h:
            assert texts[0] in driver.recall(h, FACTS[texts[0]], k=5)
            # turns may be captured as memories by the write-triggers; the other scope's never are
            recalled = driver.recall(h, FACTS[texts[1]], k=5) + driver.recall(h, TURNS[1][0], k=5)
            assert not {texts[1], TURNS[1][0]} & set(recalled)
            assert driver.history(h) == _pairs(TURNS[:1])


class ForgetTests(DriverTests):
    """A forgotten memory is never recalled again, also after reopening."""

    def test_forgotten_memory_is_not_recalled(self, driver: MemoryDriver, store_path: Path) -> None:
        texts = list(FACTS)[:3]
        with opened(driver, store_path, user_id="alice") as h:
            refs = [driver.remember(h, t) for t in texts]
            driver.forget(h, refs[0])
            assert texts[0] not in driver.recall(h, FACTS[texts[0]], k=5)
        with opened(driver, store_path, user_id="alice") as h:
            assert texts[0] not in driver.recall(h, FACTS[texts[0]], k=5)
            for text in texts[1:]:
                assert text in driver.recall(h, FACTS[text], k=5)


class RestartTests(DriverTests):
    """Everything acknowledged survives reopening: from a new Memory, and from a new process."""

    def test_survives_reopening(self, driver: MemoryDriver, store_path: Path) -> None:
        question = "Which tea do I drink?"
        with opened(driver, store_path, user_id="alice") as h:
            for text in FACTS:
                driver.remember(h, text)
            for turn in TURNS:
                driver.write_turn(h, *turn)
            before = driver.recall(h, question, k=3)
        with opened(driver, store_path, user_id="alice") as h:
            assert driver.recall(h, question, k=3) == before
            assert driver.history(h) == _pairs(TURNS)

    def test_survives_a_new_process(self, driver: MemoryDriver, store_path: Path) -> None:
        scope = {"user_id": "alice", "session_id": "trip", "tenant_id": "acme"}
        question = "When did I move to Oslo?"
        child = run_in_subprocess(
            driver, store_path,
            {"scope": scope, "remember": list(FACTS), "turns": [list(t) for t in TURNS], "query": question, "k": 3},
        )
        assert child["recall"][0] == "I moved to Oslo in 2019 for a job at the harbour."
        with opened(driver, store_path, **scope) as h:
            assert driver.recall(h, question, k=3) == child["recall"]
            assert driver.history(h) == _pairs(TURNS) == [tuple(m) for m in child["history"]]


class AsyncTests(DriverTests):
    """The async entry points do what the sync ones do (needs ``supports_async``)."""

    def test_async_round_trip(self, driver: MemoryDriver, store_path: Path) -> None:
        if not driver.supports_async:
            pytest.skip(f"{driver.name} declares supports_async=False")

        async def scenario(h: Any) -> tuple[list[str], list[tuple[str, str]]]:
            for text in FACTS:
                await driver.aremember(h, text)
            await asyncio.gather(*(driver.arecall(h, q, k=1) for q in FACTS.values()))
            for turn in TURNS:
                await driver.awrite_turn(h, *turn)
            return await driver.arecall(h, "Can I eat peanuts?", k=3), await driver.ahistory(h)

        with opened(driver, store_path, user_id="alice") as h:
            recalled, history = asyncio.run(scenario(h))
            assert recalled[0] == "I am allergic to peanuts, so no satay for me."
            assert recalled == driver.recall(h, "Can I eat peanuts?", k=3)
            assert history == driver.history(h) == _pairs(TURNS)


class ErrorTests(DriverTests):
    """Bad input fails with portamem's typed errors, and writes nothing."""

    @pytest.mark.parametrize("text", ["", "   \n\t"], ids=["empty", "blank"])
    def test_blank_memory_is_a_validation_error(self, driver: MemoryDriver, store_path: Path, text: str) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            with pytest.raises(ValidationError) as info:
                driver.remember(h, text)
            assert isinstance(info.value, PortamemError)
            driver.remember(h, next(iter(FACTS)))
            assert driver.recall(h, "cat", k=5) == [next(iter(FACTS))]


class ChangeTests(DriverTests):
    """What the memory decided about what the user said (a value retired by its change) is what a
    reopened store recalls: the decision is stored, not recomputed by the adapter."""

    def test_a_changed_value_stays_changed_after_reopening(self, driver: MemoryDriver, store_path: Path) -> None:
        with opened(driver, store_path, user_id="alice") as h:
            for turn in CHANGE:
                driver.write_turn(h, *turn)
        with opened(driver, store_path, user_id="alice") as h:
            assert driver.recall(h, CHANGE_QUESTION, k=3) == [CHANGE[1][0]]


class ConformanceTests(
    RoundTripTests, TurnTests, IsolationTests, ForgetTests, RestartTests, AsyncTests, ErrorTests, ChangeTests
):
    """Every contract. An adapter's conformance test is one subclass overriding ``driver``."""
