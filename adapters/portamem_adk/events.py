"""ADK ``Event`` to and from portamem's neutral ``Message``, losing nothing on the way back."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from google.adk.events.event import Event
from google.genai import types

from portamem.messages import Message

__all__ = ["FRAMEWORK", "RESTORED", "from_event", "to_event", "to_events", "foldable", "text_of"]

FRAMEWORK = "adk"

#: key of ``Event.custom_metadata`` marking an event rebuilt from portamem: it is in the store already
RESTORED = "portamem_restored"


def text_of(content: types.Content | None) -> str:
    """The text parts of ``content`` (thoughts left out), one per line."""
    if content is None or not content.parts:
        return ""
    return "\n".join(p.text for p in content.parts if p.text is not None and not p.thought)


def _role(event: Event) -> str:
    if event.get_function_responses():
        return "tool"
    return "user" if event.author == "user" else "assistant"


def foldable(event: Event) -> bool:
    """Whether ``event`` belongs in portamem: a finished event with content that did not come from it."""
    return bool(event.content and event.content.parts) and not event.partial and not (
        event.custom_metadata and event.custom_metadata.get(RESTORED)
    )


def from_event(event: Event, *, metadata: dict[str, Any] | None = None) -> Message:
    """The neutral form; the whole ``Event`` rides along so ADK rebuilds it exactly (ids, actions, tool calls)."""
    return Message(
        role=_role(event),
        text=text_of(event.content),
        name=event.author or None,
        id=event.id or None,
        created_at=datetime.fromtimestamp(event.timestamp, tz=timezone.utc),
        metadata=dict(metadata or {}),
        calls_tools=bool(event.get_function_calls()),
        framework=FRAMEWORK,
        native=event.model_dump(mode="json", exclude_none=True),
    )


def to_event(message: Message, *, author: str | None = None) -> Event:
    """The ``Event`` back, marked as restored: exact when ADK wrote it, rebuilt from role and text otherwise.

    ``author`` names who said another framework's assistant messages (ADK reads a reply by an author
    other than the running agent as another agent's); their own ``name`` or ``"assistant"`` otherwise.
    """
    if message.framework == FRAMEWORK and message.native is not None:
        event = Event.model_validate(message.native)
    else:
        user = message.role == "user"
        event = Event(
            id=message.id or Event.new_id(),
            invocation_id=f"{RESTORED}-{message.id or 'turn'}",
            author="user" if user else (author or message.name or "assistant"),
            content=types.Content(role="user" if user else "model", parts=[types.Part(text=message.text)]),
            **({"timestamp": message.created_at.timestamp()} if message.created_at else {}),
        )
    event.custom_metadata = {**(event.custom_metadata or {}), RESTORED: True}
    return event


def to_events(messages: Iterable[Message], *, author: str | None = None) -> list[Event]:
    """Events for an ADK session. Another framework's tool calls and results and system messages are
    left out: without ADK's own call ids a model API would reject them, and the reply text carries the outcome."""
    return [
        to_event(m, author=author) for m in messages
        if m.framework == FRAMEWORK or (m.role in ("user", "assistant") and not m.calls_tools and m.text.strip())
    ]
