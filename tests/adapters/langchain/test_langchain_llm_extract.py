"""The LLM statement extractor driven by a LangChain chat model (LangChain's own fake model here; any
``BaseChatModel`` in production): asked by the formation worker once per user turn, never on the
acknowledged path, and the change the turn says retires the older value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402

from portamem import Memory, Settings  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.plugins import get_plugin_manager  # noqa: E402
from portamem.records import Status  # noqa: E402
from portamem_plugins.llm_extract import LLMExtractor  # noqa: E402


def _answer(attribute: str, value: str, text: str, previous: str | None = None) -> AIMessage:
    return AIMessage(content=json.dumps({"statements": [
        {"attribute": attribute, "value": value, "previous": previous, "polarity": True, "subject": "user",
         "kind": "fact", "qualifier": "kitchen renovation", "text": text}]}))


def test_a_chat_models_statements_supersede_through_the_extract_hook(tmp_path: Path, embedder: Embedder) -> None:
    model = GenericFakeChatModel(messages=iter([
        _answer("budget", "12000 euros", "We set aside 12000 euros for the kitchen renovation"),
        AIMessage(content="I think the budget is 15000"),  # prose, not the contract: asked again
        _answer("budget", "15000 euros", "the kitchen is going to take 15000 euros after all", previous="12000 euros"),
    ]))
    pm = get_plugin_manager()
    pm.register(LLMExtractor(lambda prompt: str(model.invoke(prompt).content)), name="llm_extract")
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        # the model is asked in the background, once per user turn (three scripted answers for two turns,
        # the prose one refused and asked again)
        old = mem.add_turn("We set aside 12000 euros for the kitchen renovation.", "Noted.", user_id="u")[0]
        mem.flush()
        new = mem.add_turn("Ugh, the kitchen is going to take 15000 euros after all.", "Oh no.", user_id="u")[0]
        mem.flush()
        assert mem.get_memory(old.memory_id, user_id="u").status is Status.SUPERSEDED
        assert mem.get_memory(new.memory_id, user_id="u").supersedes == old.memory_id
        assert [h.memory_id for h in mem.search_memory("kitchen budget", user_id="u")][:1] == [new.memory_id]
        assert mem.stats().formation.last_error is None
