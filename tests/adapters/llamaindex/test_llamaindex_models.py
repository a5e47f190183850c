"""A LlamaIndex LLM handed over to portamem's model stages: roles kept, the answer's JSON read, calls counted."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402

from portamem.models import ask_json  # noqa: E402
from portamem_llamaindex import as_chat_model  # noqa: E402
from portamem_plugins.summarize import LLMHabitSummarizer  # noqa: E402


def test_roles_travel_and_the_answer_is_validated() -> None:
    seen: list[list[ChatMessage]] = []
    answers = iter(["Sure: {\"value\": 3}", 'Here: {"value": "三"}'])

    def respond(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append(list(messages))
        return ChatMessage(role="assistant", content=next(answers))

    chat = as_chat_model(MockFunctionCallingLLM(response_generator=respond))
    data = ask_json(chat, [{"role": "system", "content": "JSON only."}, {"role": "user", "content": "几？"}],
                    validate=lambda d: None if isinstance(d.get("value"), str) else "value must be text")
    assert data == {"value": "三"}
    assert [m.role for m in seen[0]] == [MessageRole.SYSTEM, MessageRole.USER]
    assert "value must be text" in (seen[1][-1].content or "")  # the retry said why
    assert chat.stats.snapshot()["failures"]["invalid"] == 1


def test_the_habit_summariser_takes_the_handed_over_llm() -> None:
    from datetime import datetime, timezone

    from portamem.config import Settings
    from portamem.pipeline import Habit, WriteContext

    respond = lambda messages, **kw: ChatMessage(role="assistant", content=(  # noqa: E731
        '```json\n{"summary": "Prefers tea in the morning (4 of 5 since 2026-01-02)."}\n```'))
    plugin = LLMHabitSummarizer(as_chat_model(MockFunctionCallingLLM(response_generator=respond)))
    habit = Habit(words=("tea", "morning"), support=4, of=5, since=datetime(2026, 1, 2, tzinfo=timezone.utc),
                  members=("tea this morning",) * 4)
    ctx = WriteContext(tenant_id="default", user_id="u", settings=Settings())
    assert plugin.portamem_summarize_habit(habit, ctx) == "Prefers tea in the morning (4 of 5 since 2026-01-02)."
