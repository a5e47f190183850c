"""portamem_agentscope (AgentScope 2.x) through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("agentscope.middleware", reason="needs AgentScope 2.x")

from portamem_agentscope.conformance import AgentScopeDriver  # noqa: E402
from portamem_conformance import ConformanceTests  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestAgentScopeConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> AgentScopeDriver:
        return AgentScopeDriver(embedder=embedder)
