"""AgentScope 2.x ``Msg`` to and from portamem's neutral ``Message``, losing nothing on the way back."""

from __future__ import annotations

from collections.abc import Iterable

from ._framework import require

require(2)

from agentscope.message import AssistantMsg, Msg, SystemMsg, UserMsg  # noqa: E402

from portamem.messages import Message  # noqa: E402
from portamem.records import from_iso  # noqa: E402

__all__ = ["FRAMEWORK", "from_msg", "to_msg", "to_msgs", "text_of"]

FRAMEWORK = "agentscope"


def text_of(msg: Msg) -> str:
    return msg.get_text_content() or ""


def _open_calls(msg: Msg) -> bool:
    """Whether ``msg`` asks for tools it holds no results for (2.x keeps both in the reply message)."""
    done = {b.id for b in msg.get_content_blocks("tool_result")}
    return any(b.id not in done for b in msg.get_content_blocks("tool_call"))


def from_msg(msg: Msg) -> Message:
    """The neutral form; the whole ``Msg`` rides along so AgentScope rebuilds it exactly."""
    return Message(
        role=msg.role,
        text=text_of(msg),
        name=msg.name,
        id=msg.id,
        created_at=from_iso(msg.created_at) if msg.created_at else None,
        metadata=dict(msg.metadata or {}),
        calls_tools=msg.role == "assistant" and _open_calls(msg),
        framework=FRAMEWORK,
        native=msg.model_dump(mode="json"),
    )


def to_msg(message: Message) -> Msg | None:
    """The ``Msg`` back: exact when AgentScope 2.x wrote it, rebuilt from role, text, name and id otherwise.

    None for another framework's tool traffic: a 2.x context holds tool calls inside the reply message,
    with ids of its own, and the reply text carries the outcome.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        return Msg.model_validate(message.native)
    if message.role == "tool" or message.calls_tools or not message.text.strip():
        return None
    factory = {"user": UserMsg, "assistant": AssistantMsg, "system": SystemMsg}[message.role]
    kw = {"id": message.id} if message.id else {}
    if message.created_at is not None:
        kw["created_at"] = message.created_at.isoformat()
    return factory(message.name or message.role, message.text, metadata=dict(message.metadata), **kw)


def to_msgs(messages: Iterable[Message]) -> list[Msg]:
    return [m for m in (to_msg(x) for x in messages) if m is not None]
