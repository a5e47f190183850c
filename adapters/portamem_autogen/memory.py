"""portamem as AutoGen's ``Memory``: what ``AssistantAgent(memory=[...])`` asks before each model call."""

from __future__ import annotations

import json
import os
from typing import Any

from ._framework import require

require()

from autogen_core import CancellationToken, Component  # noqa: E402
from autogen_core.memory import (  # noqa: E402
    Memory as AutoGenMemory,
)
from autogen_core.memory import (  # noqa: E402
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    UpdateContextResult,
)
from autogen_core.model_context import ChatCompletionContext  # noqa: E402
from autogen_core.models import SystemMessage, UserMessage  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402
from typing_extensions import Self  # noqa: E402

from portamem import Memory, MemoryRecord, SearchHit  # noqa: E402
from portamem.errors import UnsupportedContentError, ValidationError  # noqa: E402
from portamem.filters import for_agent  # noqa: E402
from portamem.recall import DEFAULT_HEADER, arecall, format_memories, prompt_text  # noqa: E402
from portamem.records import SYSTEM_METADATA_KEYS, to_iso  # noqa: E402

from .messages import text_of  # noqa: E402

__all__ = ["PortamemMemory", "PortamemMemoryConfig", "RecalledMemories", "to_content", "MIME_KEY", "PROVENANCE_KEY"]

#: the record's metadata key that keeps the content's MIME type, so a query gives the same type back
MIME_KEY = "autogen_mime_type"
#: the query result's metadata key holding portamem's provenance (id, score, time, trust), beside the caller's own
PROVENANCE_KEY = "portamem"

_TEXT_TYPES = {MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value}


class RecalledMemories(SystemMessage):
    """The system message ``update_context`` adds: a ``SystemMessage`` to the model, and one that
    ``PortamemChatCompletionContext`` shows for the turn in progress but does not keep as conversation."""


def _mime(content: MemoryContent) -> str:
    mime = content.mime_type
    return mime.value if isinstance(mime, MemoryMimeType) else str(mime)


def _text(content: MemoryContent) -> str:
    """The text a memory keeps: plain and Markdown as they are, JSON as its text; anything else refused."""
    mime = _mime(content)
    if mime in _TEXT_TYPES and isinstance(content.content, str):
        return content.content
    if mime == MemoryMimeType.JSON.value and isinstance(content.content, (dict, str)):
        if isinstance(content.content, str):
            try:
                json.loads(content.content)  # a JSON string must be JSON
            except ValueError as exc:
                raise ValidationError(f"application/json memory content is not JSON: {exc}") from exc
            return content.content
        return json.dumps(content.content, ensure_ascii=False)
    if mime in _TEXT_TYPES or mime == MemoryMimeType.JSON.value:
        raise ValidationError(f"{mime} memory content must be a str (or a dict for JSON), "
                              f"got {type(content.content).__name__}")
    raise UnsupportedContentError(
        f"portamem keeps text, Markdown and JSON memories, not {mime} ({type(content.content).__name__}); "
        "store a text description instead", mime)


def to_content(hit: SearchHit | MemoryRecord, *, score: float | None = None, quote: bool = True) -> MemoryContent:
    """A stored memory as AutoGen's ``MemoryContent``: its text (a dict for JSON), its MIME type, the
    caller's metadata as given, and portamem's provenance under ``metadata["portamem"]``. A text of low trust
    is quoted and attributed (``prompt_text``), as every prompt shows it, unless ``quote`` is false."""
    record = hit.record if isinstance(hit, SearchHit) else hit
    mime = str(record.metadata.get(MIME_KEY) or MemoryMimeType.TEXT.value)
    content: Any = prompt_text(record) if quote else record.content
    if mime == MemoryMimeType.JSON.value:
        try:
            content = json.loads(record.content)
        except ValueError:  # rewritten by a review into plain text since: give the text
            mime = MemoryMimeType.TEXT.value
    own = {k: v for k, v in record.metadata.items() if k not in SYSTEM_METADATA_KEYS and k != MIME_KEY}
    provenance = {"memory_id": record.memory_id, "created_at": to_iso(record.created_at), "type": record.type.value,
                  "source": record.source.value, "trust": record.trust.value,
                  "score": hit.score if isinstance(hit, SearchHit) else score}
    return MemoryContent(content=content, mime_type=mime, metadata={**own, PROVENANCE_KEY: provenance})


def _last_user_text(messages: list[Any]) -> str:
    return next((t for t in (text_of(m) for m in reversed(messages) if isinstance(m, UserMessage)) if t.strip()), "")


class PortamemMemoryConfig(BaseModel):
    """What ``dump_component`` keeps: the store's directory and whose memories, so ``load_component`` reopens them."""

    path: str
    user_id: str
    session_id: str | None = None
    tenant_id: str | None = None
    agent_id: str | None = None
    top_k: int | None = Field(default=None, ge=1)
    name: str = "portamem"


class PortamemMemory(AutoGenMemory, Component[PortamemMemoryConfig]):
    """One user's portamem memories as an AutoGen ``Memory``::

        memory = PortamemMemory(Memory("./mem"), user_id="alice")
        agent = AssistantAgent("assistant", model_client=..., memory=[memory])

    ``add`` saves a text, Markdown or JSON ``MemoryContent`` (its metadata kept); images and binary
    content raise ``UnsupportedContentError``. ``query`` runs portamem's hybrid search, best first.
    ``update_context`` recalls for the newest user message in the model context and adds the memories
    as one ``RecalledMemories`` system message, leaving out what the context already shows.
    ``clear`` forgets the user's memories (the agent's own with ``agent_id``; restorable until purged).
    ``close`` closes the store only when this object opened it (``from path``, ``load_component``).
    """

    component_type = "memory"
    component_provider_override = "portamem_autogen.PortamemMemory"
    component_config_schema = PortamemMemoryConfig

    def __init__(
        self,
        memory: Memory | str | os.PathLike[str],
        *,
        user_id: str,
        session_id: str | None = None,
        tenant_id: str | None = None,
        agent_id: str | None = None,
        top_k: int | None = None,
        name: str = "portamem",
        header: str | None = DEFAULT_HEADER,
    ) -> None:
        """``memory`` is an open ``Memory`` (or ``RemoteMemory``) or a store directory to open. ``agent_id`` names the agent (e.g.
        the agent's name): what it adds is private to it, and it recalls its own memories first, then the
        user's shared layer. ``top_k`` None takes ``Settings``'."""
        self._owned = isinstance(memory, (str, os.PathLike))
        self.memory = Memory(memory, tenant_id=tenant_id) if self._owned else memory  # a Memory or a RemoteMemory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id
        self.agent_id = agent_id
        self.top_k = top_k
        self.name = name
        self.header = header

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        await self.save(content)

    async def save(self, content: MemoryContent) -> MemoryRecord:
        """``add``, returning the record written (its ``memory_id`` is what ``forget`` takes)."""
        if not isinstance(content, MemoryContent):
            raise ValidationError(f"expected an AutoGen MemoryContent, got {type(content).__name__}")
        text = _text(content)
        metadata = {**(content.metadata or {}), MIME_KEY: _mime(content)}
        return await self.memory.asave_memory(text, user_id=self.user_id, session_id=self.session_id,
                                              tenant_id=self.tenant_id, agent_id=self.agent_id, metadata=metadata)

    async def query(self, query: str | MemoryContent = "", cancellation_token: CancellationToken | None = None,
                    **kwargs: Any) -> MemoryQueryResult:
        """The memories best matching ``query``, best first; ``top_k=`` bounds them."""
        text = query if isinstance(query, str) else _text(query)
        hits = await self.memory.asearch_memory(text, user_id=self.user_id, tenant_id=self.tenant_id,
                                                top_k=kwargs.get("top_k", self.top_k),
                                                filters=for_agent(None, self.agent_id), touch=True)
        return MemoryQueryResult(results=[to_content(h) for h in hits])

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        messages = await model_context.get_messages()
        query = _last_user_text(messages)
        hits = await arecall(self.memory, query, user_id=self.user_id, session_id=self.session_id, top_k=self.top_k,
                             tenant_id=self.tenant_id, agent_id=self.agent_id,
                             shown=[text_of(m) for m in messages]) if query else []
        if hits:
            await model_context.add_message(RecalledMemories(content=format_memories(hits, header=self.header)))
        return UpdateContextResult(memories=MemoryQueryResult(results=[to_content(h) for h in hits]))

    async def forget(self, memory_id: str) -> None:
        """Forget one memory by the id ``query`` results carry in ``metadata["portamem"]["memory_id"]``."""
        await self.memory.aforget_memory([memory_id], user_id=self.user_id, tenant_id=self.tenant_id)

    async def clear(self) -> None:
        scope = None if self.agent_id is None else {"agent_id": self.agent_id}
        records = await self.memory.alist_memories(user_id=self.user_id, tenant_id=self.tenant_id, filters=scope)
        if records:
            await self.memory.aforget_memory([r.memory_id for r in records], user_id=self.user_id,
                                             tenant_id=self.tenant_id)

    async def close(self) -> None:
        if self._owned:
            self.memory.close()

    def _to_config(self) -> PortamemMemoryConfig:
        path = getattr(getattr(self.memory, "settings", None), "path", None)
        if not path:
            raise ValidationError("only a PortamemMemory over a local store (a path) can be dumped as a component")
        return PortamemMemoryConfig(path=str(path), user_id=self.user_id, session_id=self.session_id,
                                    tenant_id=self.tenant_id, agent_id=self.agent_id, top_k=self.top_k, name=self.name)

    @classmethod
    def _from_config(cls, config: PortamemMemoryConfig) -> Self:
        return cls(config.path, user_id=config.user_id, session_id=config.session_id, tenant_id=config.tenant_id,
                   agent_id=config.agent_id, top_k=config.top_k, name=config.name)
