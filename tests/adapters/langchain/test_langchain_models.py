"""A LangChain chat model handed over to portamem's model stages: roles kept, the answer's JSON read out of
its fence, calls counted, and the plugins (summariser, extractor) driven by it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402

from portamem.models import ask_json  # noqa: E402
from portamem_langchain import as_chat_model  # noqa: E402
from portamem_plugins.summarize import LLMMerger  # noqa: E402


def test_roles_travel_and_a_fenced_answer_is_read() -> None:
    seen: list[list[BaseMessage]] = []

    def model(messages: list[BaseMessage]) -> AIMessage:
        seen.append(messages)
        return AIMessage(content=[{"type": "text", "text": '```json\n{"value": "Paris"}\n```'}])

    chat = as_chat_model(RunnableLambda(model))
    data = ask_json(chat, [{"role": "system", "content": "JSON only."}, {"role": "user", "content": "Where?"}],
                    validate=lambda d: None if isinstance(d, dict) and "value" in d else "no value")
    assert data == {"value": "Paris"}
    assert [type(m).__name__ for m in seen[0]] == ["SystemMessage", "HumanMessage"]
    assert chat.stats.snapshot()["outcomes"]["ok"] == 1


def test_a_plugin_takes_the_handed_over_model_and_retries_through_it() -> None:
    from portamem.config import Settings
    from portamem.pipeline import WriteContext
    from portamem.records import MemoryRecord

    model = GenericFakeChatModel(messages=iter([AIMessage(content="Budget is now 8000."),
                                                AIMessage(content=json.dumps({"statement": "Budget: 8000 (was 5000)."}))]))
    merger = LLMMerger(as_chat_model(model))
    ctx = WriteContext(tenant_id="default", user_id="u", settings=Settings())
    merged = merger.portamem_merge_statements(MemoryRecord(content="My budget is 5000.", user_id="u"),
                                              MemoryRecord(content="My budget is 8000.", user_id="u"), ctx)
    assert merged == "Budget: 8000 (was 5000)."
    snap = merger.model.stats.snapshot()
    assert snap["calls"] == 2 and snap["failures"]["invalid"] == 1 and snap["fallbacks"] == 0


def test_a_model_that_raises_falls_back_to_none() -> None:
    def broken(messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("model endpoint down")

    chat = as_chat_model(RunnableLambda(broken))
    assert ask_json(chat, [{"role": "user", "content": "x"}], retries=1) is None
    assert chat.stats.snapshot()["failures"]["error"] == 2 and chat.stats.fallbacks == 1
