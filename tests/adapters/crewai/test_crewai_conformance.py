"""portamem_crewai through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("crewai.memory.storage.backend")

from portamem_conformance import ConformanceTests  # noqa: E402
from portamem_crewai.conformance import CrewAIDriver  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestCrewAIConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> CrewAIDriver:
        return CrewAIDriver(embedder=embedder)
