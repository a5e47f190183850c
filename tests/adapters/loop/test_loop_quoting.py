"""A memory of low trust reaches LoopMemory's prompt quoted and attributed, not as an order."""

from __future__ import annotations

from portamem import Memory, SearchHit
from portamem_loop import LoopMemory


def test_a_web_pages_order_is_quoted_in_the_prompt(memory: Memory, web_hit: SearchHit, quoted_order: str) -> None:
    prompt = LoopMemory(memory, user_id="alice")._prompt("What did the page say?", [web_hit], [])
    assert quoted_order in prompt
    assert "] " + web_hit.content not in prompt
