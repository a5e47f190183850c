"""The switching matrix over every ordered pair of installed adapters (12 for loop, langchain, llamaindex, agentscope)."""

from __future__ import annotations

import pytest
from portamem_conformance import BUILTIN_DRIVERS, MemoryDriver, SwitchingTests, load_driver, ordered_pairs

from portamem.embedding.embedders import Embedder

PAIRS = ordered_pairs()


def test_matrix_covers_every_ordered_pair() -> None:
    assert len(PAIRS) == 12
    assert {(w, r) for w, r in PAIRS} == {(w, r) for w in BUILTIN_DRIVERS for r in BUILTIN_DRIVERS if w != r}


@pytest.mark.parametrize(("writer_name", "reader_name"), PAIRS, ids=[f"{w}->{r}" for w, r in PAIRS])
class TestSwitching(SwitchingTests):
    @pytest.fixture
    def writer(self, writer_name: str, embedder: Embedder) -> MemoryDriver:
        return load_driver(BUILTIN_DRIVERS[writer_name], embedder=embedder)

    @pytest.fixture
    def reader(self, reader_name: str, embedder: Embedder) -> MemoryDriver:
        return load_driver(BUILTIN_DRIVERS[reader_name], embedder=embedder)
