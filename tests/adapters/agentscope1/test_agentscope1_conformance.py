"""portamem_agentscope.v1 (AgentScope 1.x) through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("agentscope.memory", reason="needs AgentScope 1.x")

from portamem_agentscope.v1.conformance import AgentScope1Driver  # noqa: E402
from portamem_conformance import ConformanceTests  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestAgentScope1Conformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> AgentScope1Driver:
        return AgentScope1Driver(embedder=embedder)
