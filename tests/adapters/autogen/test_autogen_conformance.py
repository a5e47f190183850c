"""portamem_autogen through the whole conformance suite."""

from __future__ import annotations

import pytest

pytest.importorskip("autogen_agentchat")
pytest.importorskip("autogen_ext.models.replay")

from portamem_autogen.conformance import AutoGenDriver  # noqa: E402
from portamem_conformance import ConformanceTests  # noqa: E402

from portamem.embedding.embedders import Embedder  # noqa: E402


class TestAutoGenConformance(ConformanceTests):
    @pytest.fixture
    def driver(self, embedder: Embedder) -> AutoGenDriver:
        return AutoGenDriver(embedder=embedder)
