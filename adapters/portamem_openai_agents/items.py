"""The Agents SDK's input items to and from portamem's neutral ``Message``, losing nothing on the way back.

An item is a Responses API input item: a message (``{"role": ..., "content": ...}``), a function call,
its output, a reasoning item, a hosted tool's call. The item itself rides along as the message's
native form, so the SDK gets it back exactly; other frameworks read role and text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._framework import require

require()

from agents.items import TResponseInputItem  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from portamem.errors import ValidationError  # noqa: E402
from portamem.messages import Message  # noqa: E402
from portamem.records import utcnow  # noqa: E402

__all__ = ["FRAMEWORK", "from_item", "to_item", "to_items", "text_of"]

FRAMEWORK = "openai-agents"

#: Responses API roles outside the neutral four
_ROLES = {"developer": "system"}
#: content parts whose text the model reads
_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, BaseModel):  # an output item (ResponseOutputMessage, ...) handed in as it came
        return item.model_dump(mode="json", exclude_unset=True)
    if isinstance(item, Mapping):
        return dict(item)
    raise ValidationError(f"an Agents SDK input item is a dict, got {type(item).__name__}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p.get(_TEXT_PARTS[p.get("type", "")]) for p in content
             if isinstance(p, Mapping) and p.get("type") in _TEXT_PARTS]
    return "\n".join(t for t in parts if isinstance(t, str))


def text_of(item: Mapping[str, Any]) -> str:
    """What a reader sees of an item: a message's text, a tool output's text; empty for calls and reasoning."""
    if "role" in item:
        return _text(item.get("content"))
    if str(item.get("type", "")).endswith("_output"):
        return _text(item.get("output"))
    return ""


def from_item(item: TResponseInputItem | Mapping[str, Any]) -> Message:
    """The neutral form of one input item, with the item kept as its native form.

    Items carry no time, so ``created_at`` is when the item reaches portamem. An item that is not a
    message or a tool output (a function call, reasoning, a hosted tool's call) is the model's step
    towards its reply: it counts as an assistant message that keeps the turn open (``calls_tools``).
    The item's ``id`` stays in the native form only: the SDK's Chat Completions models give every
    output the same placeholder id, and the window skips a message whose id it already holds.
    """
    native = _as_dict(item)
    if "role" in native:
        role = _ROLES.get(native["role"], native["role"])
        if role not in ("user", "assistant", "system"):
            raise ValidationError(f"an input item's role must be user, assistant, system or developer, got {role!r}")
        calls = False
    elif str(native.get("type", "")).endswith("_output"):
        role, calls = "tool", False
    elif native.get("type"):
        role, calls = "assistant", True
    else:
        raise ValidationError(f"an input item has a role or a type, got keys {sorted(native)}")
    return Message(role=role, text=text_of(native), created_at=utcnow(), calls_tools=calls, framework=FRAMEWORK,
                   native=native)


def to_item(message: Message) -> TResponseInputItem | None:
    """The item back: exact when the SDK wrote it, a plain ``{"role", "content"}`` message otherwise.

    None for another framework's tool traffic: a Responses API call id must match its output's, and
    the reply text carries the outcome.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        return dict(message.native)  # type: ignore[return-value]
    if message.role == "tool" or message.calls_tools or not message.text.strip():
        return None
    return {"role": message.role, "content": message.text}  # type: ignore[return-value]


def to_items(messages: Iterable[Message]) -> list[TResponseInputItem]:
    return [i for i in (to_item(m) for m in messages) if i is not None]
