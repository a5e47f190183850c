"""CrewAI's ``MemoryRecord`` to and from portamem's memories: scope and categories ride in the metadata."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from crewai.memory.types import MemoryRecord as CrewRecord

from portamem import MemoryRecord
from portamem.errors import ValidationError
from portamem.recall import prompt_text
from portamem.records import from_iso

__all__ = ["CREW_KEY", "draft_of", "record_of", "scope_filter", "category_filter", "under"]

#: key of a memory's metadata holding what of a CrewAI record portamem has no field for
CREW_KEY = "crewai"


def _segments(scope: str) -> list[str]:
    return [s for s in scope.strip().split("/") if s]


def _naive_utc(when: datetime) -> datetime:
    """CrewAI compares its times with ``datetime.utcnow()``: naive, in UTC."""
    return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def draft_of(record: CrewRecord, *, agent_id: str | None = None) -> dict[str, Any]:
    """A portamem draft of a CrewAI record. The scope is kept whole and as each of its prefixes
    (``path.1`` = ``/a``, ``path.2`` = ``/a/b``), so a prefix is one metadata equality."""
    if CREW_KEY in record.metadata:
        raise ValidationError(f"metadata key {CREW_KEY!r} is portamem_crewai's own; rename it")
    parts = _segments(record.scope)
    crew = {
        "scope": "/" + "/".join(parts),
        "path": {str(i): "/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)},
        "categories": list(record.categories),
        "tags": {c: True for c in record.categories},
        "private": record.private,
        **({"source": record.source} if record.source is not None else {}),
    }
    return {"content": record.content, "importance": record.importance, "created_at": from_iso(record.created_at),
            "metadata": {**record.metadata, CREW_KEY: crew}, "agent_id": agent_id}


def record_of(record: MemoryRecord, *, quote: bool = False) -> CrewRecord:
    """A portamem memory as CrewAI's record; one another framework wrote sits at the root scope ``/``. With
    ``quote`` (a search's results, which CrewAI puts into the prompt), a text of low trust is quoted and
    attributed (``prompt_text``)."""
    metadata = dict(record.metadata)
    crew = metadata.pop(CREW_KEY, None)
    crew = crew if isinstance(crew, dict) else {}
    return CrewRecord(
        id=record.memory_id,
        content=prompt_text(record) if quote else record.content,
        scope=crew.get("scope", "/"),
        categories=list(crew.get("categories", [])),
        metadata=metadata,
        importance=record.importance,
        created_at=_naive_utc(record.created_at),
        last_accessed=_naive_utc(record.last_accessed_at or record.created_at),
        source=crew.get("source"),
        private=bool(crew.get("private", False)),
    )


def under(record: CrewRecord, prefix: str | None) -> bool:
    """Whether ``record`` lies in scope ``prefix`` (itself or below it)."""
    want = _segments(prefix or "/")
    return _segments(record.scope)[: len(want)] == want


def scope_filter(prefix: str | None) -> dict[str, Any]:
    """The metadata condition of a scope prefix (none for the root)."""
    parts = _segments(prefix or "/")
    return {f"{CREW_KEY}.path.{len(parts)}": "/" + "/".join(parts)} if parts else {}


def category_filter(categories: list[str] | None) -> dict[str, Any]:
    """The metadata condition of a category. CrewAI's list means any of them, which one metadata filter
    (all conditions hold) cannot say for more than one: refused rather than narrowed silently."""
    if not categories:
        return {}
    if len(categories) > 1:
        raise ValidationError(f"portamem filters on one CrewAI category at a time, got {categories}; "
                              "recall once per category")
    [name] = categories
    if not isinstance(name, str) or not name or "." in name:
        raise ValidationError(f"a CrewAI category to filter on is a non-empty name without '.', got {name!r}")
    return {f"{CREW_KEY}.tags.{name}": True}
