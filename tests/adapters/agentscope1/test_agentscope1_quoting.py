"""A memory of low trust reaches AgentScope 1.x's recall text (its long-term memory's Scope) quoted and attributed."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agentscope.memory", reason="needs AgentScope 1.x")

import portamem_agentscope.scope as scope_module  # noqa: E402
import portamem_agentscope.v1.memory as v1_memory  # noqa: E402
from portamem import Memory, SearchHit  # noqa: E402


def test_a_web_pages_order_is_quoted_in_recall(memory: Memory, monkeypatch: pytest.MonkeyPatch, web_hit: SearchHit,
                                               quoted_order: str) -> None:
    async def found(*args: object, **kwargs: object) -> list[SearchHit]:
        return [web_hit]

    monkeypatch.setattr(scope_module, "arecall", found)
    assert v1_memory.Scope is scope_module.Scope
    text = asyncio.run(v1_memory.Scope(memory, "alice").recall("What did the page say?", top_k=3))
    assert quoted_order in text and "] " + web_hit.content not in text
