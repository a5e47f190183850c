"""AgentScope 1.x ``Msg`` to and from portamem's neutral ``Message``, losing nothing on the way back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentscope.message import Msg

from portamem.messages import Message
from portamem.records import from_iso

__all__ = ["FRAMEWORK", "from_msg", "to_msg", "to_msgs", "conversation", "text_of"]

FRAMEWORK = "agentscope1"

#: ReActAgent's ``_MemoryMark.HINT``: hints it deletes after each reasoning step
HINT_MARK = "hint"
#: the sender name ReActAgent gives recalled long-term memory it puts into short-term memory
RECALL_NAME = "long_term_memory"


def text_of(msg: Msg) -> str:
    return msg.get_text_content() or ""


def _role(msg: Msg) -> str:
    # 1.x records tool results as a "system" message holding only tool_result blocks
    blocks = [] if isinstance(msg.content, str) else [b.get("type") for b in msg.content]
    return "tool" if blocks and all(t == "tool_result" for t in blocks) else msg.role


def from_msg(msg: Msg) -> Message:
    """The neutral form; ``to_dict()`` plus the invocation id ride along so 1.x rebuilds the message exactly."""
    native = msg.to_dict()
    native["invocation_id"] = msg.invocation_id
    return Message(
        role=_role(msg),
        text=text_of(msg),
        name=msg.name,
        id=msg.id,
        created_at=from_iso(msg.timestamp) if msg.timestamp else None,
        metadata=dict(msg.metadata or {}),
        calls_tools=msg.role == "assistant" and msg.has_content_blocks("tool_use"),
        framework=FRAMEWORK,
        native=native,
    )


def to_msg(message: Message) -> Msg | None:
    """The ``Msg`` back: exact when AgentScope 1.x wrote it, rebuilt from role, text, name and id otherwise.

    None for another framework's tool traffic, whose call ids 1.x does not know.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        return Msg.from_dict(message.native)
    if message.role == "tool" or message.calls_tools or not message.text.strip():
        return None
    stamp = message.created_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if message.created_at else None
    msg = Msg(message.name or message.role, message.text, message.role, metadata=dict(message.metadata) or None,
              timestamp=stamp)
    if message.id:
        msg.id = message.id
    return msg


def to_msgs(messages: Iterable[Message]) -> list[Msg]:
    return [m for m in (to_msg(x) for x in messages) if m is not None]


def conversation(msgs: Sequence[tuple[Msg, Sequence[str]]]) -> list[Message]:
    """What was said, in neutral form: without ReActAgent's transient hints and its recall notes."""
    return [from_msg(m) for m, marks in msgs if HINT_MARK not in marks and m.name != RECALL_NAME]
