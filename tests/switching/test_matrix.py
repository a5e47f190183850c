"""The switching matrix over every ordered pair of the registered adapters (``BUILTIN_DRIVERS``, or the names
``PORTAMEM_SWITCHING_FRAMEWORKS`` lists): 72 pairs for loop, langchain, llamaindex, agentscope, openai-agents,
autogen, adk, crewai and agentscope1. The read-only contracts write one store per writer, which every other
framework reads; the conversation is relayed along chains that pass it over every pair once, a store per
chain. CrewAI and AgentScope 1.x cannot be installed beside the others: each runs in one child process, for
the whole session, with the interpreter of the tox env that has it (``PORTAMEM_FRAMEWORK_PYTHONS``,
``portamem_conformance.child``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from portamem_conformance import (
    BUILTIN_DRIVERS,
    MemoryDriver,
    RelaySwitchingTests,
    SharedStoreSwitchingTests,
    matrix_driver,
    matrix_drivers,
    matrix_frameworks,
    ordered_pairs,
    relay_chains,
)
from portamem_conformance.child import FrameworkProcesses

from portamem.embedding.embedders import Embedder

NAMES = matrix_frameworks()
PAIRS = ordered_pairs(NAMES)
CHAINS = relay_chains(NAMES)


@pytest.fixture(scope="session")
def framework_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FrameworkProcesses]:
    processes = FrameworkProcesses(tmp_path_factory.mktemp("framework-processes"))
    yield processes
    processes.stop()


def test_matrix_covers_every_ordered_pair() -> None:
    assert len(PAIRS) == len(NAMES) * (len(NAMES) - 1)
    assert set(PAIRS) == {(w, r) for w in NAMES for r in NAMES if w != r}
    assert set(NAMES) <= set(BUILTIN_DRIVERS)
    relayed = [(a, b) for chain in CHAINS for a, b in zip(chain, chain[1:])]
    assert sorted(relayed) == sorted(PAIRS)  # each pair exactly once


@pytest.mark.parametrize("writer_name", NAMES)
class TestWrittenOnceReadEverywhere(SharedStoreSwitchingTests):
    @pytest.fixture
    def writer(self, writer_name: str, embedder: Embedder, framework_processes: FrameworkProcesses) -> MemoryDriver:
        return matrix_driver(writer_name, framework_processes, embedder=embedder)

    @pytest.fixture
    def reachable(
        self, writer_name: str, embedder: Embedder, framework_processes: FrameworkProcesses
    ) -> tuple[dict[str, MemoryDriver], dict[str, str]]:
        return matrix_drivers([n for n in NAMES if n != writer_name], framework_processes, embedder=embedder)

    @pytest.fixture
    def readers(self, reachable: tuple[dict[str, MemoryDriver], dict[str, str]]) -> dict[str, MemoryDriver]:
        return reachable[0]

    @pytest.fixture
    def unreached(self, reachable: tuple[dict[str, MemoryDriver], dict[str, str]]) -> dict[str, str]:
        return reachable[1]


@pytest.mark.parametrize("names", CHAINS, ids=["->".join(chain) for chain in CHAINS])
class TestConversationRelay(RelaySwitchingTests):
    @pytest.fixture
    def chain(self, names: list[str], embedder: Embedder, framework_processes: FrameworkProcesses) -> list[MemoryDriver]:
        return [matrix_driver(name, framework_processes, embedder=embedder) for name in names]
