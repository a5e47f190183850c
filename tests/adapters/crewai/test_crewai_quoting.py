"""A memory of low trust reaches CrewAI's recall quoted and attributed."""

from __future__ import annotations

import pytest

pytest.importorskip("crewai.memory.storage.backend")

from portamem import SearchHit  # noqa: E402
from portamem_crewai.records import record_of  # noqa: E402


def test_a_web_pages_order_is_quoted_in_search_results(web_hit: SearchHit, quoted_order: str) -> None:
    assert record_of(web_hit.record, quote=True).content.startswith(quoted_order)
    assert record_of(web_hit.record).content == web_hit.content  # as stored: what CrewAI updates
