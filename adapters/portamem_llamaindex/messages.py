"""LlamaIndex ``ChatMessage`` to and from portamem's neutral ``Message``, losing nothing on the way back."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

from portamem.messages import Message
from portamem.records import from_iso, utcnow

__all__ = ["FRAMEWORK", "from_chat_message", "to_chat_message", "to_chat_messages", "text_of"]

FRAMEWORK = "llamaindex"

#: LlamaIndex roles outside the neutral four, mapped to the closest one
_ROLES = {"function": "tool", "chatbot": "assistant", "model": "assistant", "developer": "system"}


def text_of(message: ChatMessage) -> str:
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def from_chat_message(message: ChatMessage) -> Message:
    """The neutral form; the whole ``ChatMessage`` rides along so LlamaIndex rebuilds it exactly."""
    role = message.role.value
    extra = message.additional_kwargs
    return Message(
        role=_ROLES.get(role, role),
        text=text_of(message),
        name=extra.get("name") if isinstance(extra.get("name"), str) else None,
        id=extra.get("id") if isinstance(extra.get("id"), str) else None,
        created_at=from_iso(extra["created_at"]) if isinstance(extra.get("created_at"), str) else utcnow(),
        calls_tools=any(isinstance(b, ToolCallBlock) for b in message.blocks) or bool(extra.get("tool_calls")),
        framework=FRAMEWORK,
        native=message.model_dump(mode="json"),
    )


def to_chat_message(message: Message) -> ChatMessage:
    """The ``ChatMessage`` back: exact when LlamaIndex wrote it, rebuilt from role, text and name otherwise.

    Only ``name`` goes into ``additional_kwargs`` of a rebuilt message: LLM integrations send those
    keys to the model API, which rejects unknown ones.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        return ChatMessage.model_validate(message.native)
    extra: dict[str, Any] = {"name": message.name} if message.name else {}
    return ChatMessage(role=MessageRole(message.role), content=message.text, additional_kwargs=extra)


def to_chat_messages(messages: list[Message]) -> list[ChatMessage]:
    """Messages for a LlamaIndex prompt. Another framework's tool calls and results are left out:
    without LlamaIndex's own call ids a model API would reject them, and the reply text carries the outcome."""
    return [
        to_chat_message(m) for m in messages
        if m.framework == FRAMEWORK or (m.role != "tool" and not m.calls_tools and m.text.strip())
    ]
