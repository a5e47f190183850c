"""Who the audit rows written in this context name as their actor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["current_actor", "acting_as"]

#: "api" in-process, the API key id under ``portamem serve`` (threads started with
#: ``asyncio.to_thread`` inherit it)
current_actor: ContextVar[str] = ContextVar("portamem_actor", default="api")


@contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """Audit every row written inside the block with ``actor``."""
    token = current_actor.set(actor)
    try:
        yield
    finally:
        current_actor.reset(token)
