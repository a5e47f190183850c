"""portamem_langchain through the whole conformance suite."""

from __future__ import annotations

import pytest
from portamem_conformance import ConformanceTests

from portamem.embedding.embedders import Embedder

pytest.importorskip("langchain.agents")

from portamem_langchain.conformance import LangChainDriver  # noqa: E402


class TestLangChainConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> LangChainDriver:
        return LangChainDriver(embedder=embedder)
