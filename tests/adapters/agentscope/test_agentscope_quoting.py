"""A memory of low trust reaches AgentScope's recall text quoted and attributed."""

from __future__ import annotations

import asyncio

import portamem_agentscope.scope as scope_module
import pytest
from portamem import Memory, SearchHit
from portamem_agentscope.scope import Scope


def test_a_web_pages_order_is_quoted_in_recall(memory: Memory, monkeypatch: pytest.MonkeyPatch, web_hit: SearchHit,
                                               quoted_order: str) -> None:
    async def found(*args: object, **kwargs: object) -> list[SearchHit]:
        return [web_hit]

    monkeypatch.setattr(scope_module, "arecall", found)
    text = asyncio.run(Scope(memory, "alice").recall("What did the page say?", top_k=3))
    assert quoted_order in text and "] " + web_hit.content not in text
