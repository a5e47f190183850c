"""A LlamaIndex LLM handed to portamem's model stages (formation, summaries, the extractor).

``as_chat_model(OpenAILike(...))`` gives a ``portamem.models.ChatModel`` that sends the messages with
their roles through ``llm.chat`` and reads the answer's text; calls are counted in its ``stats``. The
JSON contract travels in the prompt and ``portamem.models.ask_json`` checks the answer, so any LLM works.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from portamem.models import CallableChatModel, ModelStats

__all__ = ["as_chat_model"]

_ROLES = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}


def as_chat_model(llm: Any, *, stats: ModelStats | None = None) -> CallableChatModel:
    """``llm`` (any LlamaIndex ``LLM``) as a ``ChatModel``."""

    def chat(messages: list[dict[str, str]]) -> str:
        converted = [ChatMessage(role=_ROLES.get(m.get("role", "user"), MessageRole.USER), content=m.get("content", ""))
                     for m in messages]
        return llm.chat(converted).message.content or ""

    chat.__qualname__ = f"llamaindex:{type(llm).__name__}"
    return CallableChatModel(chat, messages=True, stats=stats)
