"""``PortamemSessionService``: ADK sessions whose conversation lives in portamem's working window."""

from __future__ import annotations

from typing import Any, Optional

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session

from portamem import Memory
from portamem.messages import awindow_messages

from .events import foldable, to_events
from .memory_service import PortamemMemoryService

__all__ = ["PortamemSessionService"]


class PortamemSessionService(BaseSessionService):
    """Sessions kept by an ADK session service (``sessions``, in-process by default), with each finished
    turn also written to portamem, so a conversation goes on in another process or another framework.

    A session the wrapped service does not hold (a new process, a session another framework wrote) is
    rebuilt from portamem's window on ``get_session``/``create_session``; its events are marked restored
    and never written twice. Session state stays in the wrapped service: pass ADK's
    ``DatabaseSessionService`` as ``sessions`` to keep it across processes too; the window only replays
    the state deltas of the events it holds.

    ``assistant_author`` is the author given to replies another framework wrote: name the root agent
    so ADK reads them as its own turns rather than another agent's.
    """

    def __init__(self, memory: Memory, *, sessions: BaseSessionService | None = None,
                 tenant_id: str | None = None, assistant_author: str | None = None) -> None:
        self.memory_service = PortamemMemoryService(memory, tenant_id=tenant_id)
        self.sessions = sessions if sessions is not None else InMemorySessionService()
        self.assistant_author = assistant_author

    @property
    def memory(self) -> Memory:
        return self.memory_service.memory

    async def _restore(self, session: Session) -> None:
        messages = await awindow_messages(self.memory, user_id=session.user_id, session_id=session.id,
                                          tenant_id=self.memory_service.tenant(session.app_name))
        for event in to_events(messages, author=self.assistant_author):
            await self.sessions.append_event(session, event)

    async def create_session(self, *, app_name: str, user_id: str, state: Optional[dict[str, Any]] = None,
                             session_id: Optional[str] = None) -> Session:
        session = await self.sessions.create_session(app_name=app_name, user_id=user_id, state=state,
                                                     session_id=session_id)
        if session_id is not None:  # a chosen id may name a conversation portamem already holds
            await self._restore(session)
        return session

    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: Optional[GetSessionConfig] = None) -> Optional[Session]:
        found = await self.sessions.get_session(app_name=app_name, user_id=user_id, session_id=session_id,
                                                config=config)
        if found is not None:
            return found
        tenant = self.memory_service.tenant(app_name)
        if not await awindow_messages(self.memory, user_id=user_id, session_id=session_id, tenant_id=tenant):
            return None
        await self.create_session(app_name=app_name, user_id=user_id, session_id=session_id)
        return await self.sessions.get_session(app_name=app_name, user_id=user_id, session_id=session_id,
                                               config=config)

    async def list_sessions(self, *, app_name: str, user_id: Optional[str] = None) -> ListSessionsResponse:
        return await self.sessions.list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and clear its window (without writing episodic memory)."""
        await self.sessions.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)
        await self.memory.aclear_context(user_id=user_id, session_id=session_id,
                                         tenant_id=self.memory_service.tenant(app_name))

    async def append_event(self, session: Session, event: Event) -> Event:
        """Append through the wrapped service; once a reply finishes the turn, the turn goes to portamem."""
        event = await self.sessions.append_event(session, event)
        if foldable(event) and event.author != "user" and event.is_final_response():
            await self.memory_service.add_session_to_memory(session)
        return event

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self.sessions.get_user_state(app_name=app_name, user_id=user_id)

    async def flush(self) -> None:
        await self.sessions.flush()
