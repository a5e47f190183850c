"""The switching matrix: memory written through one framework is read, unchanged and equally ranked, through another."""

from __future__ import annotations

import importlib
import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from .contracts import CHANGE, CHANGE_QUESTION, FACTS, TURNS, StoreTests, opened
from .driver import MemoryDriver

__all__ = ["BUILTIN_DRIVERS", "STRICT_ENV", "load_driver", "ordered_pairs", "SwitchingTests"]

#: adapter name -> ``module:Class`` of its driver; each adapter ships ``portamem_<name>.conformance``
BUILTIN_DRIVERS: dict[str, str] = {
    "loop": "portamem_loop.conformance:LoopDriver",
    "langchain": "portamem_langchain.conformance:LangChainDriver",
    "llamaindex": "portamem_llamaindex.conformance:LlamaIndexDriver",
    "agentscope": "portamem_agentscope.conformance:AgentScopeDriver",
}

#: set (as the ``switching`` tox env does) to fail instead of skip when an adapter cannot be imported
STRICT_ENV = "PORTAMEM_CONFORMANCE_STRICT"

QUESTIONS = ["What is my cat like?", "Can I eat peanuts?", "Wann fahren wir nach Wien?"]


def load_driver(locator: str, **kwargs: Any) -> MemoryDriver:
    """Build the driver named by ``module:Class``; skip the test when its adapter or framework is not installed.

    An adapter whose framework is missing raises ``FrameworkNotInstalledError`` (an ``ImportError``),
    so the skip message names the extra to install. With ``PORTAMEM_CONFORMANCE_STRICT`` set, it fails instead.
    """
    module, _, name = locator.partition(":")
    loaded = importlib.import_module(module) if os.environ.get(STRICT_ENV) else pytest.importorskip(module)
    driver: MemoryDriver = getattr(loaded, name)(**kwargs)
    return driver


def ordered_pairs(names: list[str] | None = None) -> list[tuple[str, str]]:
    """Every (writer, reader) pair of distinct adapters: 12 for the four built-ins."""
    return list(itertools.permutations(names or list(BUILTIN_DRIVERS), 2))


class SwitchingTests(StoreTests):
    """Write through ``writer``, close, reopen the same store through ``reader``. Override both fixtures."""

    @pytest.fixture
    def writer(self) -> MemoryDriver:
        raise NotImplementedError("override `writer`")

    @pytest.fixture
    def reader(self) -> MemoryDriver:
        raise NotImplementedError("override `reader`")

    def test_memories_rank_the_same_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        scope = {"user_id": "alice", "session_id": "s1", "tenant_id": "acme"}
        with opened(writer, store_path, **scope) as h:
            for text in FACTS:
                writer.remember(h, text)
            written = {q: writer.recall(h, q, k=3) for q in QUESTIONS}
        with opened(reader, store_path, **scope) as h:
            assert {q: reader.recall(h, q, k=3) for q in QUESTIONS} == written
        assert written[QUESTIONS[0]][0] == "My cat is called Tom and he sleeps on the piano."

    def test_conversation_continues_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        scope = {"user_id": "alice", "session_id": "s1", "tenant_id": "acme"}
        expected = [m for u, a in TURNS for m in (("user", u), ("assistant", a))]
        with opened(writer, store_path, **scope) as h:
            for turn in TURNS[:2]:
                writer.write_turn(h, *turn)
            assert writer.history(h) == expected[:4]
        with opened(reader, store_path, **scope) as h:
            assert reader.history(h) == expected[:4]
            reader.write_turn(h, *TURNS[2])
            reader.remember(h, next(iter(FACTS)))
        with opened(writer, store_path, **scope) as h:
            assert writer.history(h) == expected
            assert writer.recall(h, "What is my cat like?", k=1) == [next(iter(FACTS))]

    def test_a_changed_value_stays_changed_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        """The value the writer's turns retired is retired for the reader: formation's decisions are in
        the store, whichever framework wrote the turns."""
        scope = {"user_id": "alice", "session_id": "s1", "tenant_id": "acme"}
        with opened(writer, store_path, **scope) as h:
            for turn in CHANGE:
                writer.write_turn(h, *turn)
        with opened(reader, store_path, **scope) as h:
            assert reader.recall(h, CHANGE_QUESTION, k=3) == [CHANGE[1][0]]
