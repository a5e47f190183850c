"""Hard filters of the read path, validated before any store sees them."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Mapping

from .errors import ValidationError
from .records import MemoryRecord, MemoryType, Source, Status, Tier, Trust, from_iso

__all__ = ["SearchFilters", "for_agent"]


def _enum_tuple(name: str, enum: type, value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, (str, enum)) else value
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise ValidationError(f"filter {name!r} must be a string or a list of strings, got {type(value).__name__}")
    try:
        return tuple(enum(v) for v in items)
    except ValueError as exc:
        allowed = [e.value for e in enum]  # type: ignore[attr-defined]
        raise ValidationError(f"filter {name!r}: {exc}; allowed: {allowed}") from exc


def _opt_str(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError(f"filter {name!r} must be a string, got {type(value).__name__}")


def _tiers(value: Any) -> tuple[Tier, ...] | None:
    tiers = _enum_tuple("tiers", Tier, value)
    if tiers == ():
        raise ValidationError("filter 'tiers' must name at least one tier (hot, warm, cold), or be left out")
    return None if tiers is None else tuple(dict.fromkeys(tiers))


@dataclass(frozen=True)
class SearchFilters:
    """Restrictions applied before ranking. Every value is checked; unknown keys are an error."""

    types: tuple[MemoryType, ...] | None = None
    statuses: tuple[Status, ...] = (Status.ACTIVE,)
    sources: tuple[Source, ...] | None = None
    trusts: tuple[Trust, ...] | None = None
    session_id: str | None = None
    #: an agent's scope: its own private memories plus the shared layer (``agent_id`` None)
    agent_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    min_importance: float | None = None
    #: storage tiers to search (``portamem.lifecycle.tiers``). None: the vector index's hot tier and
    #: the keyword and entity matches of hot and warm (the warm vectors on disk too when that evidence
    #: is thin); listing and maintenance read hot and warm. The cold tier is searched and listed only
    #: when named.
    tiers: tuple[Tier, ...] | None = None

    @classmethod
    def coerce(cls, value: SearchFilters | Mapping[str, Any] | None) -> SearchFilters:
        if value is None:
            return cls()
        if isinstance(value, SearchFilters):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError(f"filters must be a mapping or SearchFilters, got {type(value).__name__}")
        known = {f.name for f in fields(cls)} | {"type", "status", "source", "trust", "tier"}
        unknown = set(value) - known
        if unknown:
            raise ValidationError(f"unknown filter keys {sorted(unknown)}; known: {sorted(known)}")
        v = dict(value)
        for single, plural in (("type", "types"), ("status", "statuses"), ("source", "sources"), ("trust", "trusts"),
                               ("tier", "tiers")):
            if single in v:
                v[plural] = v.pop(single)
        try:
            created_after = from_iso(v.get("created_after"))
            created_before = from_iso(v.get("created_before"))
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"created_after/created_before must be ISO datetimes: {exc}") from exc
        min_imp = v.get("min_importance")
        if min_imp is not None and (isinstance(min_imp, bool) or not isinstance(min_imp, (int, float))):
            raise ValidationError("filter 'min_importance' must be a number")
        return cls(
            types=_enum_tuple("types", MemoryType, v.get("types")),
            statuses=_enum_tuple("statuses", Status, v.get("statuses")) or (Status.ACTIVE,),
            sources=_enum_tuple("sources", Source, v.get("sources")),
            trusts=_enum_tuple("trusts", Trust, v.get("trusts")),
            session_id=_opt_str("session_id", v.get("session_id")),
            agent_id=_opt_str("agent_id", v.get("agent_id")),
            created_after=created_after,
            created_before=created_before,
            min_importance=None if min_imp is None else float(min_imp),
            tiers=_tiers(v.get("tiers")),
        )

    def admits(self, record: MemoryRecord) -> bool:
        """The same test as the store's SQL, for records that came from elsewhere (the vector index)."""
        created = record.created_at.timestamp()
        return (
            record.status in self.statuses
            and (not self.types or record.type in self.types)
            and (not self.sources or record.source in self.sources)
            and (not self.trusts or record.trust in self.trusts)
            and (self.session_id is None or record.session_id == self.session_id)
            and (self.agent_id is None or record.agent_id in (self.agent_id, None))
            and (self.created_after is None or created > self.created_after.timestamp())
            and (self.created_before is None or created <= self.created_before.timestamp())
            and (self.min_importance is None or record.importance >= self.min_importance)
            and (self.tiers is None or record.tier in self.tiers)
        )

    @property
    def index_only_active(self) -> bool:
        """The vector index holds active records only; other statuses are searched in the store."""
        return self.statuses == (Status.ACTIVE,)


def for_agent(
    filters: SearchFilters | Mapping[str, Any] | None, agent_id: str | None
) -> SearchFilters | Mapping[str, Any] | None:
    """``filters`` narrowed to an agent's scope (its own memories, then the shared layer); unchanged for None.

    A mapping stays a mapping, so it still travels to a server as JSON.
    """
    if agent_id is None:
        return filters
    if isinstance(filters, SearchFilters):
        return replace(filters, agent_id=agent_id)
    return {**(filters or {}), "agent_id": agent_id}
