"""portamem_loop through the whole conformance suite."""

from __future__ import annotations

import pytest
from portamem_conformance import ConformanceTests
from portamem_loop.conformance import LoopDriver

from portamem.embedding.embedders import Embedder


class TestLoopConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> LoopDriver:
        return LoopDriver(embedder=embedder)
