"""A memory of low trust reaches ADK's ``load_memory`` results quoted and attributed."""

from __future__ import annotations

from portamem import SearchHit
from portamem_adk.events import text_of
from portamem_adk.memory_service import to_entry


def test_a_web_pages_order_is_quoted_in_search_results(web_hit: SearchHit, quoted_order: str) -> None:
    assert text_of(to_entry(web_hit.record, quote=True).content).startswith(quoted_order)
    assert text_of(to_entry(web_hit.record).content) == web_hit.content  # as stored, for what is not a prompt
