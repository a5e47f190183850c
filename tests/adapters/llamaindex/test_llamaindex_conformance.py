"""portamem_llamaindex through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from portamem_conformance import ConformanceTests  # noqa: E402
from portamem_llamaindex.conformance import LlamaIndexDriver  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestLlamaIndexConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> LlamaIndexDriver:
        return LlamaIndexDriver(embedder=embedder)
