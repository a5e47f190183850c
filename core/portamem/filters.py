"""Hard filters of the read path, validated before any store sees them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from functools import cached_property
from datetime import datetime
from typing import Any, Mapping

from .errors import ValidationError
from .records import MemoryRecord, MemoryType, Source, Status, Tier, Trust, from_iso

__all__ = ["SearchFilters", "MetadataFilter", "MetadataCondition", "METADATA_OPERATORS", "for_agent"]

#: the operators of a metadata filter (a bare value means ``$eq``)
METADATA_OPERATORS: tuple[str, ...] = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists")
#: a key names a field this many levels deep at most ("a.b.c.d.e.f": a LangGraph store's value keys sit
#: under "langgraph.value"), and a filter holds this many conditions
METADATA_MAX_DEPTH = 6
METADATA_MAX_CONDITIONS = 64
#: the longest list ``$in`` / ``$nin`` take
METADATA_MAX_LIST = 1000
_MISSING = object()
_BAD_KEY = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


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


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(where: str, value: Any) -> bool:
    """Whether a number can be compared in every store (a 64-bit integer, a finite float); else an error."""
    if isinstance(value, int) and not -2**63 <= value < 2**63:
        raise ValidationError(f"metadata filter {where}: {value} does not fit in a 64-bit integer")
    return math.isfinite(value)


def _text(where: str, value: str) -> str:
    """A string operand that a stored value could equal: metadata never holds NUL or lone surrogates
    (``portamem.write.validation``), and neither can travel to every store's driver."""
    if _UNSAFE.search(value):
        raise ValidationError(f"metadata filter {where}: a string operand must not contain NUL characters or "
                              "lone surrogates (no stored metadata holds one)")
    return value


def _scalar(where: str, value: Any) -> Any:
    """An operand of ``$eq`` / ``$ne`` / ``$in`` / ``$nin``: a string, a finite number, a boolean or null."""
    if isinstance(value, str):
        return _text(where, value)
    if value is None or isinstance(value, bool):
        return value
    if _is_number(value):
        if not _finite(where, value):
            raise ValidationError(f"metadata filter {where}: {value!r} is not a finite number")
        return value
    raise ValidationError(f"metadata filter {where}: expected a string, number, boolean or null, "
                          f"got {type(value).__name__}")


@dataclass(frozen=True)
class MetadataCondition:
    """One test of one metadata field: ``path`` (the dotted key split), an operator of
    ``METADATA_OPERATORS`` and its operand (a tuple for ``$in`` / ``$nin``)."""

    path: tuple[str, ...]
    op: str
    value: Any

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def test(self, metadata: Mapping[str, Any]) -> bool:
        """This condition on one record's metadata: the semantics every store's SQL and the read
        replica's columns follow. Comparisons are typed: a number matches only numbers (``2`` equals
        ``2.0``; ``True`` is not ``1``), a string only strings (ordered by code point); ``$eq: None``
        matches null or missing, ``$ne`` and ``$nin`` match a missing field."""
        v: Any = metadata
        for part in self.path:
            if not isinstance(v, Mapping) or part not in v:
                v = _MISSING
                break
            v = v[part]
        op = self.op
        if op == "$exists":
            return (v is not _MISSING) == self.value
        if op in ("$eq", "$ne"):
            hit = _equal(v, self.value)
            return hit if op == "$eq" else not hit
        if op in ("$in", "$nin"):
            hit = self._among(v)
            return hit if op == "$in" else not hit
        x = self.value
        if _is_number(x):
            if not _is_number(v):
                return False
        elif not isinstance(v, str):
            return False
        return {"$gt": v > x, "$gte": v >= x, "$lt": v < x, "$lte": v <= x}[op]


    @cached_property
    def members(self) -> tuple[bool, frozenset[bool], frozenset[Any], frozenset[str]]:
        """An ``$in`` / ``$nin`` list by kind: whether it holds null, its booleans, its numbers, its
        strings (one lookup per kind in Python, the replica's columns and the store's SQL)."""
        null, flags, numbers, strings = False, set(), set(), set()
        for x in self.value:
            if isinstance(x, str):
                strings.add(x)
            elif x is None:
                null = True
            elif isinstance(x, bool):
                flags.add(x)
            else:
                numbers.add(x)
        return null, frozenset(flags), frozenset(numbers), frozenset(strings)

    def _among(self, v: Any) -> bool:
        null, flags, numbers, strings = self.members
        if v is _MISSING or v is None:
            return null
        if isinstance(v, bool):
            return v in flags
        if _is_number(v):
            return v in numbers
        return isinstance(v, str) and v in strings


def _equal(v: Any, x: Any) -> bool:
    if x is None:
        return v is _MISSING or v is None
    if isinstance(x, bool):
        return isinstance(v, bool) and v == x
    if _is_number(x):
        return _is_number(v) and v == x
    return isinstance(v, str) and v == x


@dataclass(frozen=True)
class MetadataFilter:
    """Conditions on a memory's ``metadata``, all of which must hold (AND across keys), applied
    before ranking like every other filter. Written as a mapping::

        {"project": "apollo", "priority": {"$gte": 2}, "owner.team": {"$in": ["core", "infra"]}}

    A bare value means ``$eq``; a dotted key reaches into nested objects (at most
    ``METADATA_MAX_DEPTH`` levels). Several operators under one key all apply."""

    conditions: tuple[MetadataCondition, ...]

    @classmethod
    def coerce(cls, value: MetadataFilter | Mapping[str, Any] | None) -> MetadataFilter | None:
        """The filter checked from its mapping form; None (and an empty mapping) is no filter."""
        if value is None or isinstance(value, MetadataFilter):
            return value or None
        if not isinstance(value, Mapping):
            raise ValidationError(f"filter 'metadata' must be a mapping of keys to values or operator objects, "
                                  f"got {type(value).__name__}")
        out: list[MetadataCondition] = []
        for key, spec in value.items():
            path = _metadata_path(key)
            if isinstance(spec, Mapping):
                if not spec:
                    raise ValidationError(f"metadata filter {key!r}: an empty operator object; use one of "
                                          f"{list(METADATA_OPERATORS)}")
                plain = [k for k in spec if not (isinstance(k, str) and k.startswith("$"))]
                if plain:
                    raise ValidationError(
                        f"metadata filter {key!r}: a nested object is not a value to match; name a nested "
                        f"field with a dotted key (e.g. '{key}.{plain[0]}') and use operators "
                        f"{list(METADATA_OPERATORS)}")
                out.extend(_condition(path, op, operand) for op, operand in spec.items())
            elif isinstance(spec, (list, tuple)):
                raise ValidationError(f"metadata filter {key!r}: a list is not a value to match; "
                                      f"to match any of several values write {{'{key}': {{'$in': [...]}}}}")
            else:
                out.append(_condition(path, "$eq", spec))
        if len(out) > METADATA_MAX_CONDITIONS:
            raise ValidationError(f"metadata filter has {len(out)} conditions; at most {METADATA_MAX_CONDITIONS}")
        return cls(tuple(out)) if out else None

    def admits(self, metadata: Mapping[str, Any] | None) -> bool:
        meta = metadata or {}
        return all(c.test(meta) for c in self.conditions)

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The mapping form (what ``coerce`` reads), for a filter that travels as JSON."""
        out: dict[str, dict[str, Any]] = {}
        for c in self.conditions:
            out.setdefault(c.key, {})[c.op] = list(c.value) if isinstance(c.value, tuple) else c.value
        return out


def _metadata_path(key: Any) -> tuple[str, ...]:
    if not isinstance(key, str) or not key:
        raise ValidationError(f"metadata filter keys must be non-empty strings, got {key!r}")
    if key.startswith("$"):
        raise ValidationError(f"metadata filter: {key!r} is not a key (operators go under a key: "
                              f"{{'priority': {{'$gte': 2}}}}); keys are ANDed, '$and' / '$or' are not supported")
    path = tuple(key.split("."))
    if len(path) > METADATA_MAX_DEPTH:
        raise ValidationError(f"metadata filter key {key!r} is {len(path)} levels deep; at most {METADATA_MAX_DEPTH}")
    if any(not p or _BAD_KEY.search(p) for p in path) or len(key) > 256:
        raise ValidationError(f"metadata filter key {key!r}: each dotted part must be non-empty, without quotes, "
                              "backslashes or control characters, and the key at most 256 characters")
    return path


def _condition(path: tuple[str, ...], op: Any, operand: Any) -> MetadataCondition:
    where = f"{'.'.join(path)!r} {op}"
    if op not in METADATA_OPERATORS:
        raise ValidationError(f"metadata filter {'.'.join(path)!r}: unknown operator {op!r}; "
                              f"known: {list(METADATA_OPERATORS)}")
    if op == "$exists":
        if not isinstance(operand, bool):
            raise ValidationError(f"metadata filter {where} takes true or false, got {operand!r}")
        return MetadataCondition(path, op, operand)
    if op in ("$in", "$nin"):
        if not isinstance(operand, (list, tuple)):
            raise ValidationError(f"metadata filter {where} takes a list of values, got {type(operand).__name__}")
        if len(operand) > METADATA_MAX_LIST:
            raise ValidationError(f"metadata filter {where} lists {len(operand)} values; at most {METADATA_MAX_LIST}")
        return MetadataCondition(path, op, tuple(_scalar(where, v) for v in operand))
    if op in ("$eq", "$ne"):
        return MetadataCondition(path, op, _scalar(where, operand))
    if isinstance(operand, str):
        return MetadataCondition(path, op, _text(where, operand))
    if _is_number(operand) and _finite(where, operand):
        return MetadataCondition(path, op, operand)
    raise ValidationError(f"metadata filter {where} compares with a finite number or a string, "
                          f"got {operand!r}")


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
    #: conditions on ``metadata`` (``MetadataFilter``), applied before ranking like the rest
    metadata: MetadataFilter | None = None

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
            metadata=MetadataFilter.coerce(v.get("metadata")),
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
            and (self.metadata is None or self.metadata.admits(record.metadata))
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
