"""LlamaIndex memories backed by portamem: a block for the new ``Memory``, and a ``BaseMemory`` of its own."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.memory import BaseMemory, BaseMemoryBlock

from portamem import Memory
from portamem.errors import ValidationError
from portamem.messages import Message, aarchive_messages, add_messages, window_messages
from portamem.recall import arecall, format_memories, recall

from .messages import from_chat_message, text_of, to_chat_messages

__all__ = ["PortamemMemory", "PortamemMemoryBlock"]


class _Scope(BaseModel):
    """Which store and whose memories: plain fields, so a serialised workflow ``Context`` reopens them."""

    path: Optional[str] = Field(default=None, description="store directory, reopened from here after Context.from_dict")
    user_id: str
    session_id: str = "default"
    tenant_id: Optional[str] = None
    agent_id: Optional[str] = Field(
        default=None, description="the agent (e.g. the agent's name): its private memories first, then the shared layer"
    )
    top_k: int = Field(default=5, ge=1, description="memories recalled per message")
    _memory: Optional[Memory] = PrivateAttr(default=None)

    def __init__(self, memory: Optional[Memory] = None, **data: Any) -> None:
        if isinstance(memory, Memory) and data.get("path") is None:  # a RemoteMemory has no path to reopen
            data["path"] = memory.settings.path
        super().__init__(**data)
        self._memory = memory

    @property
    def memory(self) -> Memory:
        """The open portamem ``Memory``; after a ``Context`` round trip it is reopened from ``path``."""
        if self._memory is None:
            if self.path is None:
                raise ValidationError(f"{type(self).__name__} has neither a Memory nor a path to open one from")
            self._memory = Memory(self.path, tenant_id=self.tenant_id)
        return self._memory


def _last_user_text(messages: List[ChatMessage]) -> str:
    return next((text_of(m) for m in reversed(messages) if m.role == MessageRole.USER and text_of(m).strip()), "")


class PortamemMemory(_Scope, BaseMemory):
    """Every turn kept in portamem's working window, with recalled memories put in front of the model.

    Pass it per run: ``agent.run(user_msg=..., memory=PortamemMemory(mem, user_id="alice"))``. Finished
    turns (a user message up to the final reply) go to the store at once; the messages of the turn in
    progress live in ``pending`` and travel with the workflow ``Context``.
    """

    pending: List[Dict[str, Any]] = Field(default_factory=list, description="messages of the unfinished turn")
    show_recall: bool = Field(default=True, description="put recalled long-term memories in front of the history")

    @classmethod
    def class_name(cls) -> str:
        return "PortamemMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls, memory: Optional[Memory] = None, *, user_id: str, session_id: str = "default", **kwargs: Any
    ) -> PortamemMemory:
        return cls(memory, user_id=user_id, session_id=session_id, **kwargs)

    def _history(self) -> List[ChatMessage]:
        stored = window_messages(self.memory, user_id=self.user_id, session_id=self.session_id,
                                 tenant_id=self.tenant_id)
        return to_chat_messages(stored + [Message.from_dict(m) for m in self.pending])

    def get(self, input: Optional[str] = None, **kwargs: Any) -> List[ChatMessage]:
        """The session's history, after a system message of memories recalled for ``input`` (or the last user message)."""
        history = self._history()
        query = input or _last_user_text(history)
        if not (self.show_recall and query.strip()):
            return history
        hits = recall(self.memory, query, user_id=self.user_id, session_id=self.session_id, top_k=self.top_k,
                      tenant_id=self.tenant_id, shown=[text_of(m) for m in history], agent_id=self.agent_id)
        note = format_memories(hits)
        return [ChatMessage(role=MessageRole.SYSTEM, content=note), *history] if note else history

    def get_all(self) -> List[ChatMessage]:
        return self._history()

    def put(self, message: ChatMessage) -> None:
        self.put_messages([message])

    def put_messages(self, messages: List[ChatMessage]) -> None:
        todo = [Message.from_dict(m) for m in self.pending] + [from_chat_message(m) for m in messages]
        rest = add_messages(self.memory, todo, user_id=self.user_id, session_id=self.session_id,
                            tenant_id=self.tenant_id)
        self.pending = [m.to_dict() for m in rest]

    def set(self, messages: List[ChatMessage]) -> None:
        """Replace the session's history (the window is cleared without writing episodic memory)."""
        self.reset()
        self.put_messages(messages)

    def reset(self) -> None:
        self.memory.clear_context(user_id=self.user_id, session_id=self.session_id, tenant_id=self.tenant_id)
        self.pending = []


class PortamemMemoryBlock(_Scope, BaseMemoryBlock[str]):
    """Long-term recall inside LlamaIndex's ``Memory``: ``Memory.from_defaults(memory_blocks=[block])``.

    Turns that ``Memory`` flushes out of its own window become episodic memories of ``session_id``.
    ``priority=0`` by default because ``Memory`` drops a whole block it has to truncate.
    """

    name: str = "portamem"
    description: Optional[str] = "Long-term memories about the user, recalled for the latest message."
    priority: int = 0

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        messages = messages or []
        query = _last_user_text(messages)
        if not query.strip():
            return ""
        hits = await arecall(self.memory, query, user_id=self.user_id, top_k=self.top_k, tenant_id=self.tenant_id,
                             shown=[text_of(m) for m in messages], agent_id=self.agent_id)
        return format_memories(hits, header=None)

    async def _aput(self, messages: List[ChatMessage]) -> None:
        # BaseMemoryBlock.aput tags each message with the session in place; take the tag off again
        tags = [m.additional_kwargs.pop("session_id", None) for m in messages]
        session_id = next((t for t in tags if isinstance(t, str) and t), self.session_id)
        await aarchive_messages(self.memory, [from_chat_message(m) for m in messages], user_id=self.user_id,
                                session_id=session_id, tenant_id=self.tenant_id)
