"""``PortamemMemoryService``: ADK's ``BaseMemoryService`` contract on portamem's operations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from portamem import Memory, MemoryRecord
from portamem.errors import ValidationError
from portamem.filters import for_agent
from portamem.messages import Message, aadd_messages
from portamem.recall import prompt_text
from portamem.records import from_iso

from .events import foldable, from_event, text_of

__all__ = ["PortamemMemoryService", "to_entry", "ENTRY_KEY", "DEFAULT_SESSION"]

#: key of a memory's metadata holding what of an ADK ``MemoryEntry`` portamem has no field for
ENTRY_KEY = "adk"
#: the portamem session of events ADK adds without a session id
DEFAULT_SESSION = "default"


def _entry_draft(entry: MemoryEntry, extra: Mapping[str, object] | None, agent_id: str | None) -> dict[str, Any]:
    adk = {"content": entry.content.model_dump(mode="json", exclude_none=True)}
    if entry.author is not None:
        adk["author"] = entry.author
    return {
        "content": text_of(entry.content),
        "metadata": {**dict(extra or {}), **entry.custom_metadata, ENTRY_KEY: adk},
        "created_at": from_iso(entry.timestamp),
        "agent_id": agent_id,
    }


def to_entry(record: MemoryRecord, *, quote: bool = False) -> MemoryEntry:
    """A memory as ADK's ``MemoryEntry``: the entry ADK wrote comes back as written, any other is built
    from the text (authored by ``user`` when the user said it). With ``quote`` (a search's results, which
    ADK puts into the prompt), a text of low trust is quoted and attributed instead (``prompt_text``)."""
    metadata = dict(record.metadata)
    adk = metadata.pop(ENTRY_KEY, None)
    adk = adk if isinstance(adk, dict) else {}
    content = types.Content.model_validate(adk["content"]) if "content" in adk else None
    if content is None or text_of(content) != record.content:  # edited since: the text is the truth
        content = types.Content(role="user", parts=[types.Part(text=record.content)])
    if quote and prompt_text(record) != record.content:
        content = types.Content(role="user", parts=[types.Part(text=prompt_text(record))])
    author = adk.get("author", "user" if record.source.value == "user" else None)
    return MemoryEntry(id=record.memory_id, content=content, author=author, custom_metadata=metadata,
                       timestamp=record.created_at.isoformat())


class PortamemMemoryService(BaseMemoryService):
    """ADK memory in portamem: ``Runner(..., memory_service=PortamemMemoryService(mem))``.

    Sessions and events go to the session's working window (turns leaving it become episodic memory,
    formation writes what they say as facts); ``search_memory`` is portamem's hybrid search, so ADK's
    ``load_memory`` and ``preload_memory`` tools read what any framework wrote for the user.

    The ADK app is the portamem tenant unless ``tenant_id`` names one for every app. ``agent_id`` keeps
    what ``add_memory`` writes private to one agent, which then recalls its own memories before the
    user's shared layer. ``top_k`` is how many memories a search returns (the store's default if None).
    """

    def __init__(self, memory: Memory, *, tenant_id: str | None = None, top_k: int | None = None,
                 agent_id: str | None = None) -> None:
        self.memory = memory
        self.tenant_id = tenant_id
        self.top_k = top_k
        self.agent_id = agent_id
        #: the unfinished turn of each (tenant, user, session) that ``add_events_to_memory`` was given
        self._open: dict[tuple[str, str, str], list[Message]] = {}

    def tenant(self, app_name: str) -> str:
        """The portamem tenant of an ADK app."""
        return self.tenant_id if self.tenant_id is not None else app_name

    async def add_session_to_memory(self, session: Session) -> None:
        """Fold the session's finished turns into its window; turns already there are skipped, so a
        session may be added again as it grows. An unfinished last turn waits for the next call."""
        await self._fold(session.app_name, session.user_id, session.id, session.events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Append a delta of events; a turn they leave open is finished by the next delta (in this process).
        ``custom_metadata`` is kept with each message."""
        key = (self.tenant(app_name), user_id, session_id or DEFAULT_SESSION)
        rest = await self._fold(app_name, user_id, key[2], events, custom_metadata, self._open.get(key, []))
        if rest:
            self._open[key] = rest
        else:
            self._open.pop(key, None)

    async def _fold(self, app_name: str, user_id: str, session_id: str, events: Sequence[Event],
                    custom_metadata: Mapping[str, object] | None = None,
                    before: Sequence[Message] = ()) -> list[Message]:
        extra = {"custom_metadata": dict(custom_metadata)} if custom_metadata else None
        messages = [*before, *(from_event(e, metadata=extra) for e in events if foldable(e))]
        return await aadd_messages(self.memory, messages, user_id=user_id, session_id=session_id,
                                   tenant_id=self.tenant(app_name))

    async def add_memory(  # type: ignore[override]
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> list[MemoryEntry]:
        """Save each entry's text as a long-term memory (all or none). Returns the entries as stored, their
        ``id`` what ``delete_memory`` takes (ADK's contract returns nothing; the ids cost nothing to give)."""
        drafts = [_entry_draft(e, custom_metadata, self.agent_id) for e in memories]
        records = await self.memory.asave_memories(drafts, user_id=user_id, tenant_id=self.tenant(app_name))
        return [to_entry(r) for r in records]

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's best memories for ``query``, best first (counted as used, as a prompt reads them)."""
        hits = await self.memory.asearch_memory(
            query, user_id=user_id, top_k=self.top_k, tenant_id=self.tenant(app_name),
            filters=for_agent(None, self.agent_id), touch=True,
        )
        return SearchMemoryResponse(memories=[to_entry(h.record, quote=True) for h in hits])

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Forget the memory whose ``MemoryEntry.id`` is ``memory_id``."""
        if memory_id is None:
            raise ValidationError("delete_memory needs the memory_id of a MemoryEntry from search_memory")
        await self.memory.aforget_memory([memory_id], user_id=user_id, tenant_id=self.tenant(app_name))
