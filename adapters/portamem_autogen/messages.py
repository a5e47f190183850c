"""AutoGen's ``LLMMessage`` to and from portamem's neutral ``Message``, losing nothing on the way back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._framework import require

require()

from autogen_core.models import (  # noqa: E402
    AssistantMessage,
    FunctionExecutionResultMessage,
    LLMMessage,
    SystemMessage,
    UserMessage,
)
from pydantic import BaseModel  # noqa: E402

from portamem.errors import ValidationError  # noqa: E402
from portamem.messages import Message  # noqa: E402
from portamem.records import utcnow  # noqa: E402

__all__ = ["FRAMEWORK", "from_llm_message", "to_llm_message", "to_llm_messages", "text_of"]

FRAMEWORK = "autogen"

#: the message classes by their ``type`` field, which their JSON form keeps
_TYPES: dict[str, type[BaseModel]] = {c.__name__: c for c in (SystemMessage, UserMessage, AssistantMessage,
                                                               FunctionExecutionResultMessage)}


def text_of(message: LLMMessage) -> str:
    """What a reader sees: the text parts of a message, a tool result's outputs; nothing of a tool call."""
    content: Any = message.content
    if isinstance(message, FunctionExecutionResultMessage):
        return "\n".join(r.content for r in message.content)
    if isinstance(content, str):
        return content
    return "\n".join(p for p in content if isinstance(p, str))  # images and function calls have no text


def from_llm_message(message: LLMMessage) -> Message:
    """The neutral form; the whole message rides along so AutoGen rebuilds it exactly.

    AutoGen's model messages carry no time or id, so ``created_at`` is when the message reaches portamem.
    """
    if isinstance(message, SystemMessage):
        role, name, calls = "system", None, False
    elif isinstance(message, UserMessage):
        role, name, calls = "user", message.source, False
    elif isinstance(message, AssistantMessage):
        role, name, calls = "assistant", message.source, not isinstance(message.content, str)
    elif isinstance(message, FunctionExecutionResultMessage):
        role, name, calls = "tool", None, False
    else:
        raise ValidationError(f"expected an AutoGen LLMMessage, got {type(message).__name__}")
    thought = getattr(message, "thought", None)
    return Message(role=role, text=text_of(message), name=name, created_at=utcnow(), calls_tools=calls,
                   metadata={"thought": thought} if thought else {}, framework=FRAMEWORK,
                   native=message.model_dump(mode="json"))


def to_llm_message(message: Message) -> LLMMessage | None:
    """The message back: exact when AutoGen wrote it, rebuilt from role, text and name otherwise.

    None for another framework's tool traffic: AutoGen pairs a call with its result by call id, and
    the reply text carries the outcome.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        return _TYPES[message.native["type"]].model_validate(message.native)  # type: ignore[return-value]
    if message.role == "tool" or message.calls_tools or not message.text.strip():
        return None
    if message.role == "system":
        return SystemMessage(content=message.text)
    factory = UserMessage if message.role == "user" else AssistantMessage
    return factory(content=message.text, source=message.name or message.role)


def to_llm_messages(messages: Iterable[Message]) -> list[LLMMessage]:
    return [m for m in (to_llm_message(x) for x in messages) if m is not None]
