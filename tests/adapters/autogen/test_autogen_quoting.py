"""A memory of low trust reaches AutoGen quoted and attributed: query results and the context's message."""

from __future__ import annotations

import portamem_autogen.memory as memory_module
from portamem import SearchHit
from portamem.read import prompt
from portamem_autogen.memory import to_content


def test_a_web_pages_order_is_quoted_in_memory_content_and_the_context(web_hit: SearchHit, quoted_order: str) -> None:
    assert str(to_content(web_hit).content).startswith(quoted_order)
    assert to_content(web_hit, quote=False).content == web_hit.content
    assert memory_module.format_memories is prompt.format_memories
    assert quoted_order in memory_module.format_memories([web_hit])
