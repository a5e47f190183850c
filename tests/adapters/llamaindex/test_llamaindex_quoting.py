"""A memory of low trust reaches LlamaIndex quoted and attributed: the retriever's nodes, and the memory's
and the tools' text (``format_memories``)."""

from __future__ import annotations

import portamem_llamaindex.memory as memory_module
import portamem_llamaindex.tools as tools_module
from portamem import SearchHit
from portamem.read import prompt
from portamem_llamaindex.retriever import hit_to_node


def test_a_web_pages_order_is_quoted_in_nodes_and_the_memory_block(web_hit: SearchHit, quoted_order: str) -> None:
    node = hit_to_node(web_hit).node
    assert node.get_content().startswith(quoted_order)
    assert memory_module.format_memories is prompt.format_memories is tools_module.format_memories
    assert quoted_order in memory_module.format_memories([web_hit])
