"""portamem_adk through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("google.adk")

from portamem_adk.conformance import ADKDriver  # noqa: E402
from portamem_conformance import ConformanceTests  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestADKConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> ADKDriver:
        return ADKDriver(embedder=embedder)
