"""What a caller asks the write path to store: drafts of memories, one user's save, one window turn,
and the outcome of each in a group commit (``Memory.save_many``).

May import: the data model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import PortamemError, ValidationError
from ..records import MemoryRecord, MemoryType, Source, Trust

__all__ = ["MemoryDraft", "SaveRequest", "TurnRequest", "SaveResult", "as_drafts"]


@dataclass
class MemoryDraft:
    """One memory to save in a batch (``Memory.save_memories``); the same fields as ``save_memory``."""

    content: str
    type: MemoryType | str = MemoryType.SEMANTIC
    importance: float | None = None
    half_life_days: float | None = None
    source: Source | str = Source.USER
    trust: Trust | str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    kind: str | None = None
    summary: str | None = None
    entities: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    #: a key makes the write an upsert of (key_namespace, key): see ``portamem.portable.keys``
    key: str | None = None
    key_namespace: str | tuple[str, ...] | list[str] = ()


def as_drafts(drafts: Iterable[MemoryDraft | Mapping[str, Any] | str]) -> list[MemoryDraft]:
    """The memories of a save call as drafts: a draft, a mapping of its fields, or a bare text."""
    if isinstance(drafts, (str, bytes, Mapping)) or not isinstance(drafts, Iterable):
        raise ValidationError(f"drafts must be a list of MemoryDraft, mappings or strings, got {type(drafts).__name__}")
    items: list[MemoryDraft] = []
    for d in drafts:
        if isinstance(d, MemoryDraft):
            items.append(d)
        elif isinstance(d, str):
            items.append(MemoryDraft(content=d))
        elif isinstance(d, Mapping):
            try:
                items.append(MemoryDraft(**d))
            except TypeError as exc:
                raise ValidationError(f"bad memory fields: {exc}") from exc
        else:
            raise ValidationError(f"each memory must be a MemoryDraft, mapping or string, got {type(d).__name__}")
    return items


@dataclass(frozen=True)
class SaveRequest:
    """One caller's save in a group commit (``Memory.save_many``): one user's memories, in order."""

    user_id: str
    memories: Sequence[MemoryDraft | Mapping[str, Any] | str]
    tenant_id: str | None = None


@dataclass(frozen=True)
class TurnRequest:
    """One turn for the working window in a group commit: the same fields as ``Memory.add_turn``."""

    user_id: str
    user: str
    assistant: str
    session_id: str = "default"
    metadata: Mapping[str, Any] | None = None
    tenant_id: str | None = None
    created_at: datetime | None = None


@dataclass
class SaveResult:
    """The outcome of one request of ``Memory.save_many``: its committed records (for a turn, the memories
    it wrote), or the typed error that refused it."""

    request: SaveRequest | TurnRequest
    records: list[MemoryRecord] = field(default_factory=list)
    error: PortamemError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
