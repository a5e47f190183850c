"""LangChain messages to and from portamem's neutral ``Message``: the native dict rides along for an exact rebuild."""

from __future__ import annotations

from collections.abc import Iterable

from ._framework import require

require()

from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from portamem.messages import Message  # noqa: E402

__all__ = ["FRAMEWORK", "to_neutral", "from_neutral", "to_neutral_all", "from_neutral_all", "last_user_text"]

FRAMEWORK = "langchain"

_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
_CHAT_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system", "tool": "tool"}


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return _CHAT_ROLES.get(message.role, "user")
    return _ROLE_OF_TYPE.get(message.type.removesuffix("MessageChunk").lower(), "user")


def to_neutral(message: BaseMessage) -> Message:
    """The neutral form: role and text for every framework, the native dict for LangChain itself."""
    native = message_to_dict(message)
    meta = {k: v for k, v in (("additional_kwargs", message.additional_kwargs),
                              ("response_metadata", message.response_metadata)) if v}
    return Message(
        role=_role(message),
        text=message.text,
        name=message.name,
        id=message.id,
        metadata=meta,
        calls_tools=bool(getattr(message, "tool_calls", None)),
        framework=FRAMEWORK,
        native=native,
    )


def from_neutral(message: Message) -> BaseMessage:
    """The LangChain message: rebuilt exactly when LangChain wrote it, from role and text otherwise."""
    if message.framework == FRAMEWORK and message.native:
        return messages_from_dict([message.native])[0]
    kw = {"content": message.text, "name": message.name, "id": message.id}
    if message.role == "assistant":
        return AIMessage(**kw)
    if message.role == "system":
        return SystemMessage(**kw)
    if message.role == "tool":
        return ToolMessage(**kw, tool_call_id=str(message.metadata.get("tool_call_id", "")))
    return HumanMessage(**kw)


def to_neutral_all(messages: Iterable[BaseMessage]) -> list[Message]:
    return [to_neutral(m) for m in messages]


def from_neutral_all(messages: Iterable[Message]) -> list[BaseMessage]:
    return [from_neutral(m) for m in messages]


def last_user_text(messages: Iterable[BaseMessage]) -> str:
    """The text of the newest human message: what recall searches for."""
    return next((m.text for m in reversed(list(messages)) if _role(m) == "user" and m.text.strip()), "")
