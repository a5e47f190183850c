"""``PortamemChatMessageHistory``: a ``BaseChatMessageHistory`` over one session's working window (compat surface)."""

from __future__ import annotations

from collections.abc import Sequence

from ._framework import require

require()

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.messages import Message, aadd_messages, add_messages, awindow_messages, window_messages  # noqa: E402

from .messages import from_neutral_all, to_neutral_all  # noqa: E402

__all__ = ["PortamemChatMessageHistory"]


class PortamemChatMessageHistory(BaseChatMessageHistory):
    """The messages of one user's session, kept as portamem turns so any adapter can read them.

    The window stores whole turns (a user message through the final reply), so the messages of a
    turn still in progress, e.g. after ``add_user_message``, wait in this object until the reply is
    added. Turns that leave the window become episodic memory and drop out of ``messages``.
    """

    def __init__(self, memory: Memory, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> None:
        self.memory = memory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self._open_turn: list[Message] = []

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        stored = window_messages(self.memory, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id)
        return from_neutral_all([*stored, *self._open_turn])

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._open_turn = add_messages(
            self.memory, [*self._open_turn, *to_neutral_all(messages)],
            user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id,
        )

    def clear(self) -> None:
        self._open_turn = []
        self.memory.clear_context(user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id)

    async def aget_messages(self) -> list[BaseMessage]:
        stored = await awindow_messages(
            self.memory, user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id
        )
        return from_neutral_all([*stored, *self._open_turn])

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._open_turn = await aadd_messages(
            self.memory, [*self._open_turn, *to_neutral_all(messages)],
            user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id,
        )
