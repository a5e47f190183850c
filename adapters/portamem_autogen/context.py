"""portamem as AutoGen's ``ChatCompletionContext``: the conversation an ``AssistantAgent`` keeps, in the working window."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._framework import require

require()

from autogen_core import Component  # noqa: E402
from autogen_core.model_context import ChatCompletionContext  # noqa: E402
from autogen_core.models import LLMMessage  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from typing_extensions import Self  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402
from portamem.messages import Message, aadd_messages, awindow_messages  # noqa: E402

from .memory import RecalledMemories  # noqa: E402
from .messages import from_llm_message, to_llm_messages  # noqa: E402

__all__ = ["PortamemChatCompletionContext", "PortamemChatCompletionContextConfig"]


class PortamemChatCompletionContextConfig(BaseModel):
    """What ``dump_component`` keeps: the store's directory and whose conversation."""

    path: str
    user_id: str
    session_id: str = "default"
    tenant_id: str | None = None


class PortamemChatCompletionContext(ChatCompletionContext, Component[PortamemChatCompletionContextConfig]):
    """``AssistantAgent(..., model_context=PortamemChatCompletionContext(memory, user_id="alice"))``.

    Every message the agent adds goes to the session's working window as whole turns (a user message
    through the final reply), so a restarted agent, or another framework, continues the conversation.
    The messages of the turn in progress wait in this object (and in ``save_state``) until the reply.
    A ``RecalledMemories`` message (what ``PortamemMemory.update_context`` adds) is shown for the turn
    in progress only: it is recall, not conversation.

    An ``AssistantAgent`` that answers with a tool call and no reflection ends its run without a final
    reply, so that turn stays open and is stored with the next one.
    """

    component_type = "chat_completion_context"
    component_provider_override = "portamem_autogen.PortamemChatCompletionContext"
    component_config_schema = PortamemChatCompletionContextConfig

    def __init__(self, memory: Memory | str | os.PathLike[str], *, user_id: str, session_id: str = "default",
                 tenant_id: str | None = None) -> None:
        """``memory`` is an open ``Memory`` (or ``RemoteMemory``) or a store directory to open."""
        super().__init__()
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError(f"session_id must be a non-empty string, got {session_id!r}")
        self.memory = Memory(memory, tenant_id=tenant_id) if isinstance(memory, (str, os.PathLike)) else memory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self._open_turn: list[Message] = []
        #: recall notes of the turn in progress, each with the number of its messages before it
        self._notes: list[tuple[int, RecalledMemories]] = []

    def _scope(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_id": self.session_id, "tenant_id": self.tenant_id}

    async def add_message(self, message: LLMMessage) -> None:
        if isinstance(message, RecalledMemories):
            self._notes.append((len(self._open_turn), message))
            return
        todo = [*self._open_turn, from_llm_message(message)]
        self._open_turn = await aadd_messages(self.memory, todo, **self._scope())
        if len(self._open_turn) < len(todo):  # the turn was stored: its recall notes go with it
            self._notes = []

    async def get_messages(self) -> list[LLMMessage]:
        stored = to_llm_messages(await awindow_messages(self.memory, **self._scope()))
        current: list[LLMMessage] = to_llm_messages(self._open_turn)
        for at, note in reversed(self._notes):
            current.insert(min(at, len(current)), note)
        return [*stored, *current]

    async def clear(self) -> None:
        """Drop the session's window (no episodic memory is written) and the turn in progress."""
        self._open_turn, self._notes = [], []
        await self.memory.aclear_context(**self._scope())

    async def save_state(self) -> Mapping[str, Any]:
        """The turn in progress (the stored turns are in portamem already)."""
        return {"open_turn": [m.to_dict() for m in self._open_turn],
                "notes": [[at, note.content] for at, note in self._notes]}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        try:
            self._open_turn = [Message.from_dict(m) for m in state.get("open_turn", [])]
            self._notes = [(int(at), RecalledMemories(content=str(text))) for at, text in state.get("notes", [])]
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValidationError(f"not a PortamemChatCompletionContext state: {exc}") from exc

    def _to_config(self) -> PortamemChatCompletionContextConfig:
        path = getattr(getattr(self.memory, "settings", None), "path", None)
        if not path:
            raise ValidationError("only a context over a local store (a path) can be dumped as a component")
        return PortamemChatCompletionContextConfig(path=str(path), **self._scope())

    @classmethod
    def _from_config(cls, config: PortamemChatCompletionContextConfig) -> Self:
        return cls(config.path, user_id=config.user_id, session_id=config.session_id, tenant_id=config.tenant_id)
