"""A memory of low trust reaches the OpenAI Agents instructions quoted and attributed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import portamem_openai_agents.instructions as instructions_module
import pytest
from portamem import Memory, SearchHit
from portamem_openai_agents.instructions import PortamemInstructions


def test_a_web_pages_order_is_quoted_in_the_instructions(memory: Memory, monkeypatch: pytest.MonkeyPatch,
                                                         web_hit: SearchHit, quoted_order: str) -> None:
    async def found(*args: object, **kwargs: object) -> list[SearchHit]:
        return [web_hit]

    monkeypatch.setattr(instructions_module, "arecall", found)
    context = SimpleNamespace(turn_input=[{"role": "user", "content": "What did the page say?"}])
    text = asyncio.run(PortamemInstructions(memory, user_id="alice", instructions="Be brief.")(context, None))
    assert text.startswith("Be brief.") and quoted_order in text and "] " + web_hit.content not in text
