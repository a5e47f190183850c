"""A LangChain chat model handed to portamem's model stages (formation, summaries, the extractor).

``as_chat_model(ChatOpenAI(...))`` gives a ``portamem.models.ChatModel`` that sends the messages with
their roles through ``model.invoke`` and reads the answer's text; calls are counted in its ``stats``.
The JSON contract travels in the prompt and ``portamem.models.ask_json`` checks the answer, so any
``BaseChatModel`` works (for a server with a JSON schema mode, ``portamem.models.OpenAIChatModel`` holds
the model to the schema itself).
"""

from __future__ import annotations

from typing import Any

from portamem.models import CallableChatModel, ModelStats

from ._framework import require

require()

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage  # noqa: E402

__all__ = ["as_chat_model", "text_of"]

_ROLES = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text blocks of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content
                       if isinstance(b, str) or (isinstance(b, dict) and b.get("type", "text") == "text"))
    return str(content)


def as_chat_model(model: Any, *, stats: ModelStats | None = None) -> CallableChatModel:
    """``model`` (any LangChain ``BaseChatModel``, or a runnable taking messages) as a ``ChatModel``."""

    def invoke(messages: list[dict[str, str]]) -> str:
        converted: list[BaseMessage] = [_ROLES.get(m.get("role", "user"), HumanMessage)(content=m.get("content", ""))
                                        for m in messages]
        answer = model.invoke(converted)
        return text_of(getattr(answer, "content", answer))

    invoke.__qualname__ = f"langchain:{type(model).__name__}"
    return CallableChatModel(invoke, messages=True, stats=stats)
