"""The driver protocol: the small object through which the conformance suite drives one adapter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["MemoryDriver", "ROLES", "AsyncFirstDriver"]

#: the neutral roles ``history`` reports, whatever the framework calls them
ROLES = ("user", "assistant")


@runtime_checkable
class MemoryDriver(Protocol):
    """How the suite reaches portamem *through an adapter's own framework surfaces*.

    A driver translates five neutral actions into the calls a user of the framework
    would make (e.g. a LangGraph ``BaseStore.put``, a chat history's ``add_messages``),
    so the contracts test the adapter, not core. It holds no memory logic.

    Rules every driver follows:

    * ``open`` builds a fresh ``portamem.Memory`` on ``path`` (one per handle) and
      wraps it in the adapter; ``close`` closes that Memory, releasing the store,
      so another handle (another driver, another process) can open it next.
    * The class is importable and constructible with no arguments: the
      process-restart contract rebuilds it in a fresh interpreter. Any
      argument (e.g. a shared ``embedder`` to save loading time) is optional.
    * Memory texts and turn texts come back exactly as given.
    * ``remember`` returns a reference that the same driver's ``forget`` accepts.
    * Errors for bad input are the ``portamem.errors`` ones, raised unchanged.
    """

    #: short name used in test ids, e.g. ``"langchain"``
    name: str
    #: True when the ``a*`` twins are real async entry points of the adapter
    supports_async: bool

    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> Any:
        """Open the store at ``path`` for one user and session; return an opaque handle."""
        ...

    def close(self, handle: Any) -> None:
        """Release everything ``open`` acquired (idempotent)."""
        ...

    def remember(self, handle: Any, text: str) -> str:
        """Save ``text`` as a long-term memory; return a reference for ``forget``."""
        ...

    def recall(self, handle: Any, query: str, k: int) -> list[str]:
        """The texts of the best ``k`` memories for ``query``, best first."""
        ...

    def forget(self, handle: Any, ref: str) -> None:
        """Remove the memory ``remember`` returned ``ref`` for."""
        ...

    def write_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        """Record one exchange (a user message and the reply) in the session."""
        ...

    def history(self, handle: Any) -> list[tuple[str, str]]:
        """The session's recent messages, oldest first, as ``(role, text)`` with roles from ``ROLES``."""
        ...

    async def aremember(self, handle: Any, text: str) -> str:
        """Async twin of ``remember`` (used only when ``supports_async``)."""
        ...

    async def arecall(self, handle: Any, query: str, k: int) -> list[str]:
        """Async twin of ``recall``."""
        ...

    async def awrite_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        """Async twin of ``write_turn``."""
        ...

    async def ahistory(self, handle: Any) -> list[tuple[str, str]]:
        """Async twin of ``history``."""
        ...


class AsyncFirstDriver:
    """Base of a driver for an async-only framework: each sync action runs its async twin.

    A subclass sets ``name``, writes ``open``, ``close``, the ``a*`` actions and ``aforget``.
    """

    supports_async = True

    def remember(self, handle: Any, text: str) -> str:
        return asyncio.run(self.aremember(handle, text))

    def recall(self, handle: Any, query: str, k: int) -> list[str]:
        return asyncio.run(self.arecall(handle, query, k))

    def forget(self, handle: Any, ref: str) -> None:
        asyncio.run(self.aforget(handle, ref))

    def write_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        asyncio.run(self.awrite_turn(handle, user_text, assistant_text))

    def history(self, handle: Any) -> list[tuple[str, str]]:
        return asyncio.run(self.ahistory(handle))

    async def aremember(self, handle: Any, text: str) -> str:
        raise NotImplementedError

    async def arecall(self, handle: Any, query: str, k: int) -> list[str]:
        raise NotImplementedError

    async def aforget(self, handle: Any, ref: str) -> None:
        raise NotImplementedError

    async def awrite_turn(self, handle: Any, user_text: str, assistant_text: str) -> None:
        raise NotImplementedError

    async def ahistory(self, handle: Any) -> list[tuple[str, str]]:
        raise NotImplementedError
