"""Chat messages in a framework-neutral form, and how a stream of them folds into working-window turns."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .write.validation import check_datetime, check_flag, check_id, check_provenance, check_tenant, check_text
from .write.window import MESSAGES_KEY
from .records import MemoryRecord, Turn, from_iso, to_iso

if TYPE_CHECKING:
    from .memory import Memory

__all__ = [
    "Message",
    "ROLES",
    "split_turns",
    "turn_messages",
    "add_messages",
    "aadd_messages",
    "archive_messages",
    "aarchive_messages",
    "window_messages",
    "awindow_messages",
    "pop_message",
    "apop_message",
]

ROLES = ("user", "assistant", "system", "tool")

#: key of a turn's metadata that holds the messages it was folded from

#: text of a turn whose messages carry no text at all (images only, say)
NO_TEXT = "[no text]"


@dataclass
class Message:
    """One chat message as every adapter sees it.

    ``native`` keeps the framework's own JSON form so that framework rebuilds the message exactly
    (content blocks, ids, timestamps); any other framework rebuilds it from the neutral fields.
    """

    role: str
    text: str = ""
    name: str | None = None
    id: str | None = None
    created_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: an assistant message that asks for tools: the turn goes on until the final reply
    calls_tools: bool = False
    framework: str | None = None
    native: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or self.role not in ROLES:
            raise ValidationError(f"message role must be one of {list(ROLES)}, got {self.role!r}")
        check_text("message text", self.text, allow_blank=True)
        for name in ("name", "id", "framework"):
            if getattr(self, name) is not None:
                check_text(f"message {name}", getattr(self, name), allow_blank=True)
        check_datetime("message created_at", self.created_at)
        check_flag("message calls_tools", self.calls_tools)
        if not isinstance(self.metadata, dict) or not (self.native is None or isinstance(self.native, dict)):
            raise ValidationError("message metadata (and native, when given) must be dicts")

    @property
    def ends_turn(self) -> bool:
        return self.role == "assistant" and not self.calls_tools

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["created_at"] = to_iso(self.created_at)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["created_at"] = from_iso(kw.get("created_at"))
        return cls(**kw)


def split_turns(messages: Iterable[Message]) -> tuple[list[list[Message]], list[Message]]:
    """Group messages into turns, each closed by a final assistant reply; return them and the open rest."""
    turns: list[list[Message]] = []
    current: list[Message] = []
    for message in messages:
        current.append(message)
        if message.ends_turn:
            turns.append(current)
            current = []
    return turns, current


def _turn_texts(messages: Sequence[Message]) -> tuple[str, str]:
    user = "\n".join(m.text for m in messages if m.role == "user" and m.text.strip())
    replies = [m.text for m in messages if m.role == "assistant" and m.text.strip()]
    final = messages[-1].text if messages and messages[-1].ends_turn and messages[-1].text.strip() else ""
    assistant = final or "\n".join(replies)
    if not (user.strip() or assistant.strip()):
        assistant = NO_TEXT
    return user, assistant


def turn_messages(turn: Turn) -> list[Message]:
    """The messages a turn was folded from, or a user and an assistant message rebuilt from its text."""
    stored = turn.metadata.get(MESSAGES_KEY)
    if isinstance(stored, list) and stored:
        return [Message.from_dict(m) for m in stored]
    out = []
    if turn.user.strip():
        out.append(Message("user", turn.user, created_at=turn.created_at))
    if turn.assistant.strip():
        out.append(Message("assistant", turn.assistant, created_at=turn.created_at))
    return out


def _check_messages(
    memory: Memory, messages: Iterable[Message], user_id: Any, session_id: Any, tenant_id: Any
) -> tuple[list[Message], str]:
    """The messages as a list, once the scope is valid; and the tenant they go to."""
    check_id(memory.settings, "user_id", user_id)
    check_id(memory.settings, "session_id", session_id)
    tenant = check_tenant(memory.settings, tenant_id, memory.tenant_id)
    if isinstance(messages, (str, bytes, Mapping, Message)) or not isinstance(messages, Iterable):
        raise ValidationError(f"messages must be a list of portamem.messages.Message, got {type(messages).__name__}")
    items = list(messages)
    for m in items:
        if not isinstance(m, Message):
            raise ValidationError(f"expected portamem.messages.Message, got {type(m).__name__}")
        # a turn's and an episode's metadata quote the messages': portamem's own keys are refused there
        # as in a turn's metadata (add_turn, POST /v1/turns)
        check_provenance("message metadata", m.metadata)
    return items, tenant


def add_messages(
    memory: Memory,
    messages: Iterable[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> list[Message]:
    """Fold messages into turns and append the complete ones to the session's window.

    Messages up to the last one whose id the window already holds are skipped, so a caller may pass
    a whole transcript again. Returns the trailing messages of a turn not finished yet.
    """
    items, _ = _check_messages(memory, messages, user_id, session_id, tenant_id)
    known = {
        m.id
        for turn in memory.context(user_id=user_id, session_id=session_id, tenant_id=tenant_id)
        for m in turn_messages(turn)
        if m.id
    }
    last_known = max((i for i, m in enumerate(items) if m.id and m.id in known), default=-1)
    turns, rest = split_turns(items[last_known + 1:])
    for group in turns:
        turn = _as_turn(group)
        memory.add_turn(
            turn.user, turn.assistant, user_id=user_id, session_id=session_id, tenant_id=tenant_id,
            metadata=turn.metadata, created_at=turn.created_at,
        )
    return rest


def _as_turn(group: Sequence[Message]) -> Turn:
    user, assistant = _turn_texts(group)
    created = next((m.created_at for m in group if m.created_at is not None), None)
    turn = Turn(user, assistant, metadata={MESSAGES_KEY: [m.to_dict() for m in group]})
    if created is not None:
        turn.created_at = created
    return turn


def archive_messages(
    memory: Memory,
    messages: Iterable[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> MemoryRecord | None:
    """Compress messages that left a window the framework keeps itself into one episodic memory.

    The text comes from the turn summariser plugins, as for turns leaving portamem's own window;
    the messages themselves stay in the record's metadata. None when nothing was summarised.
    """
    items, tenant = _check_messages(memory, messages, user_id, session_id, tenant_id)
    served = getattr(memory, "archive_messages", None)
    if served is not None:  # a RemoteMemory: the server summarises with its own plugins
        return served(items, user_id=user_id, session_id=session_id, tenant_id=tenant_id)  # type: ignore[no-any-return]
    turns, rest = split_turns(items)
    groups = turns + ([rest] if rest else [])
    if not groups:
        return None
    return memory.archive_turns([_as_turn(g) for g in groups], user_id=user_id, session_id=session_id,
                                tenant_id=tenant)


def window_messages(
    memory: Memory, *, user_id: str, session_id: str = "default", tenant_id: str | None = None
) -> list[Message]:
    """Every message of the turns in the session's window, oldest first."""
    turns = memory.context(user_id=user_id, session_id=session_id, tenant_id=tenant_id)
    return [m for turn in turns for m in turn_messages(turn)]


def pop_message(
    memory: Memory,
    open_turn: Sequence[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> tuple[Message | None, list[Message]]:
    """Take the session's newest message out: the last of ``open_turn`` (messages of a turn not finished
    yet, kept by the caller) when there is one, else the last of the window's newest turn, which leaves
    the window (``Memory.pop_turn``) and whose other messages become the open turn.

    Returns the message (None when the session holds none) and the open turn as it now stands.
    """
    rest = list(open_turn)
    if rest:
        return rest.pop(), rest
    turn = memory.pop_turn(user_id=user_id, session_id=session_id, tenant_id=tenant_id)
    rest = turn_messages(turn) if turn is not None else []
    return (rest.pop() if rest else None), rest


async def aadd_messages(
    memory: Memory,
    messages: Iterable[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> list[Message]:
    """Async twin of :func:`add_messages` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        add_messages, memory, list(messages), user_id=user_id, session_id=session_id, tenant_id=tenant_id
    )


async def aarchive_messages(
    memory: Memory,
    messages: Iterable[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> MemoryRecord | None:
    """Async twin of :func:`archive_messages` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        archive_messages, memory, list(messages), user_id=user_id, session_id=session_id, tenant_id=tenant_id
    )


async def awindow_messages(
    memory: Memory, *, user_id: str, session_id: str = "default", tenant_id: str | None = None
) -> list[Message]:
    """Async twin of :func:`window_messages` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        window_messages, memory, user_id=user_id, session_id=session_id, tenant_id=tenant_id
    )


async def apop_message(
    memory: Memory,
    open_turn: Sequence[Message],
    *,
    user_id: str,
    session_id: str = "default",
    tenant_id: str | None = None,
) -> tuple[Message | None, list[Message]]:
    """Async twin of :func:`pop_message` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        pop_message, memory, list(open_turn), user_id=user_id, session_id=session_id, tenant_id=tenant_id
    )
