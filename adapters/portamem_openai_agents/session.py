"""portamem as an Agents SDK ``Session``: the conversation of ``Runner.run(..., session=...)`` in the working window."""

from __future__ import annotations

from typing import Any

from ._framework import require

require()

from agents.items import TResponseInputItem  # noqa: E402
from agents.memory import SessionSettings  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402
from portamem.messages import Message, aadd_messages, apop_message, awindow_messages  # noqa: E402

from .items import from_item, to_item, to_items  # noqa: E402

__all__ = ["PortamemSession"]


class PortamemSession:
    """One user's session, kept as portamem turns so any adapter reads it::

        session = PortamemSession(Memory("./mem"), user_id="alice", session_id="chat-1")
        result = await Runner.run(agent, "Hi", session=session)

    The window stores whole turns (a user message through the final reply). The runner adds the
    items of a run as they come (the input first, then each model step), so the items of a turn in
    progress wait in this object until the reply arrives; turns that leave the window become
    episodic memory and drop out of ``get_items``.

    A session is short-term history, as the SDK's own sessions are; long-term recall is
    ``PortamemInstructions`` (automatic) or ``PortamemTools`` (the model asks).
    """

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        session_id: str = "default",
        tenant_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError(f"session_id must be a non-empty string, got {session_id!r}")
        self.memory = memory
        self.user_id = user_id
        #: the SDK's name for the conversation is portamem's session
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.session_settings = session_settings
        self._open_turn: list[Message] = []

    def _scope(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_id": self.session_id, "tenant_id": self.tenant_id}

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit`` of them."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValidationError(f"limit must be None or a non-negative int, got {limit!r}")
        stored = await awindow_messages(self.memory, **self._scope())
        items = to_items([*stored, *self._open_turn])
        return items if limit is None else items[-limit:] if limit else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items; each turn they finish goes to the window (and through the write path)."""
        if not isinstance(items, list):
            raise ValidationError(f"items must be a list of input items, got {type(items).__name__}")
        converted = [from_item(i) for i in items]  # all checked before any is written
        self._open_turn = await aadd_messages(self.memory, [*self._open_turn, *converted], **self._scope())

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item out (the SDK rewinds a retried run this way); None when there is none.

        Popping into a stored turn takes that turn out of the window; its other items wait here as
        the turn in progress, until the runner adds the items that finish it again.
        """
        hidden: list[Message] = []  # another framework's tool traffic, which get_items does not show either
        while True:
            message, self._open_turn = await apop_message(self.memory, self._open_turn, **self._scope())
            item = None if message is None else to_item(message)
            if message is None or item is not None:
                self._open_turn.extend(reversed(hidden))  # kept, in order, after what is left of the turn
                return item
            hidden.append(message)

    async def clear_session(self) -> None:
        """Drop the session's window (no episodic memory is written) and the turn in progress."""
        self._open_turn = []
        await self.memory.aclear_context(**self._scope())
