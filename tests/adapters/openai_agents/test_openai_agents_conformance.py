"""portamem_openai_agents through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("agents")

from portamem_conformance import ConformanceTests  # noqa: E402
from portamem_openai_agents.conformance import OpenAIAgentsDriver  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestOpenAIAgentsConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> OpenAIAgentsDriver:
        return OpenAIAgentsDriver(embedder=embedder)
