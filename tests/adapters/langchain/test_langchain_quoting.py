"""A memory of low trust reaches LangChain quoted and attributed: the retriever's documents and the
middleware's block (``format_memories``)."""

from __future__ import annotations

import portamem_langchain.middleware as middleware
from portamem import SearchHit
from portamem.read import prompt
from portamem_langchain.retriever import hit_to_document


def test_a_web_pages_order_is_quoted_in_documents_and_the_block(web_hit: SearchHit, quoted_order: str) -> None:
    doc = hit_to_document(web_hit)
    assert doc.page_content.startswith(quoted_order) and doc.metadata["trust"] == "low"
    assert middleware.format_memories is prompt.format_memories
    assert quoted_order in middleware.format_memories([web_hit])
