"""The memory record: one JSON-portable data model shared by every backend and adapter."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

__all__ = [
    "MemoryType",
    "Source",
    "Trust",
    "Status",
    "Tier",
    "MemoryRecord",
    "in_vector_index",
    "ScoreBreakdown",
    "SearchHit",
    "Turn",
    "new_memory_id",
    "as_trusted",
    "speaks_for_the_user",
    "ended_by",
    "utcnow",
    "to_iso",
    "from_iso",
    "importance_band",
    "DEFAULT_TRUST",
    "TRUST_RANK",
    "REPLACED_KEY",
    "OUTDATED_KEY",
    "EARLIER_KEY",
    "GUARD_KEY",
    "REDACTIONS_KEY",
    "VAULT_KEY",
    "TRUST_KEY",
    "TRIGGER_KEY",
    "PROMOTE_TO_KEY",
    "TURNS_KEY",
    "EPISODE_KEY",
    "COVERS_KEY",
    "TOOL_KEY",
    "PENDING_KEY",
    "IMPORTED_ID_KEY",
    "ABSTRACT_KEY",
    "ABSTRACTED_INTO",
    "SYSTEM_METADATA_KEYS",
    "SYSTEM_NAMESPACE",
    "system_key",
]

#: every metadata key portamem writes itself, with what it holds: a caller may set none of them
#: (``portamem.write.validation.check_provenance``), since the read path, ``explain`` and maintenance
#: take them as portamem's own word (a forged ``outdated`` hides the line it names from recall, a forged
#: ``guard`` reads as a real verdict). A key is declared with :func:`system_key`, which is the only way
#: to name one, so a new key is refused from callers the moment it exists.
_SYSTEM_KEYS: dict[str, str] = {}


def system_key(name: str, holds: str) -> str:
    """Declare ``name`` a metadata key portamem writes itself (what it ``holds``) and return it."""
    if name in _SYSTEM_KEYS:
        raise ValueError(f"metadata key {name!r} is declared twice")
    _SYSTEM_KEYS[name] = holds
    return name


#: metadata key of what a memory's statement replaced: {"memory_id", "value", "at", "part"?}
#: (written by ``portamem.write.supersession``, shown by ``portamem.read.prompt``)
REPLACED_KEY = system_key("replaced", "what the memory's statement replaced (write.supersession)")
#: metadata key of an older memory a newer statement outdated in part: {"by", "at"}
OUTDATED_KEY = system_key("outdated", "the newer memory that outdated this one in part (write.supersession)")
#: metadata key of an older memory that a newer statement about the same thing ended, kept active as the
#: history of that thing: {"by": the newer's id, "from": when it held, "until": when the newer was said,
#: "value": what the newer says in its place} (written by ``portamem.write.currency``, read by the read path)
EARLIER_KEY = system_key("earlier", "the newer memory about the same thing that ended this one's validity (write.currency)")
GUARD_KEY = system_key("guard", "the guard's verdict on the memory (write.save, write.trust)")
REDACTIONS_KEY = system_key("redactions", "the kinds of PII redacted out of it (write.privacy)")
VAULT_KEY = system_key("pii_vault", "the sealed originals of what was redacted (write.privacy)")
TRUST_KEY = system_key("trust", "the trust review's notes: pending, contradicts, confirmed_by (write.trust)")
TRIGGER_KEY = system_key("trigger", "why the window captured it (write.window)")
PROMOTE_TO_KEY = system_key("promote_to", "the type a working candidate becomes at promotion (write.window)")
TURNS_KEY = system_key("turns", "the turns an episode stands for (write.window)")
EPISODE_KEY = system_key("episode", "an episode's key facts, intent and outcome (write.window)")
COVERS_KEY = system_key("covers", "the captured memories an episode points at (write.window)")
TOOL_KEY = system_key("tool", "the tool a tool memory records (write.window)")
PENDING_KEY = system_key("merged_pending", "a merge waiting on a supersession (write.supersession)")
IMPORTED_ID_KEY = system_key("imported_id", "the memory's id in the file it was imported from (portable.transfer)")
ABSTRACT_KEY = system_key("abstract", "an abstract memory's support and sources (lifecycle.abstraction)")
ABSTRACTED_INTO = system_key("abstracted_into", "the abstract memory that stands for this one (lifecycle.abstraction)")

#: the keys above, and any declared later with :func:`system_key` (a live view, so none is missed)
SYSTEM_METADATA_KEYS = _SYSTEM_KEYS.keys()

#: the first label of every key namespace portamem writes under itself (the maintainer's habits,
#: ``("portamem", "abstract")``): a caller's keyed write there is refused like a system metadata key
#: (``portamem.write.validation.check_namespace``), since a write under a habit's key would replace it in place
SYSTEM_NAMESPACE = "portamem"


class MemoryType(str, Enum):
    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"


class Source(str, Enum):
    USER = "user"
    SYSTEM = "system"
    TOOL = "tool"
    WEB = "web"


class Trust(str, Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Status(str, Enum):
    ACTIVE = "active"
    PENDING = "pending"
    QUARANTINED = "quarantined"
    DELETED = "deleted"
    #: replaced by a newer value of the same attribute (``superseded_by``); kept as history, never recalled
    SUPERSEDED = "superseded"


class Tier(str, Enum):
    """Where a memory lives (``portamem.lifecycle.tiers``): hot in the vector index and the replica;
    warm in the keyword and entity indexes only, its vector on disk; cold out of the record store's
    tables, in the compressed archive, searched only on request."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


#: trust a source gets when the caller does not say (DESIGN: system/tool high, user medium, web low)
DEFAULT_TRUST: dict[Source, Trust] = {
    Source.SYSTEM: Trust.HIGH,
    Source.TOOL: Trust.HIGH,
    Source.USER: Trust.MEDIUM,
    Source.WEB: Trust.LOW,
}

#: higher is more trusted: ranking breaks score ties by it, so low trust never outranks an equal high
TRUST_RANK: dict[Trust, int] = {Trust.LOW: 0, Trust.MEDIUM: 1, Trust.HIGH: 2}


def as_trusted(newer: MemoryRecord, older: MemoryRecord) -> bool:
    """Whether ``newer`` is at least as trusted as ``older``: only then may it replace or outdate it, on
    the write path and in the prompt alike (a web page's "it moved to Tuesday" never retires what the user
    or a tool said)."""
    return TRUST_RANK[newer.trust] >= TRUST_RANK[older.trust]


def ended_by(record: MemoryRecord) -> list[str]:
    """The ids of the newer memories that outdated a part of ``record`` (``OUTDATED_KEY``) or ended it as a
    statement about the same thing (``EARLIER_KEY``), in that order."""
    links = (record.metadata.get(key) for key in (OUTDATED_KEY, EARLIER_KEY))
    return [link["by"] for link in links if isinstance(link, dict) and isinstance(link.get("by"), str)]


def speaks_for_the_user(record: MemoryRecord) -> bool:
    """First-person statements are the user's own only in what the user or the application said; an
    episode states nothing itself (the statements captured from its turns do), and "I live in Berlin"
    on a web page or in a tool's output is someone else's."""
    return record.source in (Source.USER, Source.SYSTEM) and record.type is not MemoryType.EPISODIC


def new_memory_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat()


def from_iso(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        if isinstance(value, datetime) and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def importance_band(importance: float) -> int:
    """Map importance 0..1 to the 1-100 band scale (1-20 transient ... 81-100 identity)."""
    return max(1, min(100, int(round(importance * 100))))


@dataclass
class MemoryRecord:
    """One memory. ``to_dict``/``from_dict`` give the portable JSON form used by export/import."""

    content: str
    user_id: str
    tenant_id: str = "default"
    memory_id: str = field(default_factory=new_memory_id)
    session_id: str | None = None
    agent_id: str | None = None
    type: MemoryType = MemoryType.SEMANTIC
    kind: str | None = None
    summary: str | None = None
    entities: list[str] = field(default_factory=list)
    triples: list[list[str]] = field(default_factory=list)
    embedding: list[float] | None = None
    embedding_model: str | None = None
    embedding_version: str | None = None
    importance: float = 0.5
    importance_band: int = 50
    half_life_days: float = 90.0
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    last_accessed_at: datetime | None = None
    access_count: int = 0
    frequency: int = 1
    source: Source = Source.USER
    trust: Trust = Trust.MEDIUM
    status: Status = Status.ACTIVE
    supersedes: str | None = None
    superseded_by: str | None = None
    deleted_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: a keyed memory's namespace (labels joined by ".", "" for the root) and key; None for unkeyed ones
    key_namespace: str | None = None
    key: str | None = None
    #: its storage tier, and when it last moved there (None: hot since it was written)
    tier: Tier = Tier.HOT
    tiered_at: datetime | None = None

    def to_dict(self, *, include_embedding: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Enum):
                value = value.value
            elif isinstance(value, datetime):
                value = to_iso(value)
            out[f.name] = value
        if not include_embedding:
            out["embedding"] = None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise KeyError(f"unknown record fields: {sorted(unknown)}")
        kw = dict(data)
        for key in ("created_at", "updated_at", "last_accessed_at", "deleted_at", "tiered_at"):
            if key in kw:
                kw[key] = from_iso(kw[key])
        for key, enum in (("type", MemoryType), ("source", Source), ("trust", Trust), ("status", Status),
                           ("tier", Tier)):
            if key in kw:
                kw[key] = enum(kw[key])
        if kw.get("triples") is not None:
            kw["triples"] = [list(t) for t in kw["triples"]]
        return cls(**kw)


def in_vector_index(record: MemoryRecord) -> bool:
    """Whether the vector index and the read replica hold this record: active and hot."""
    return record.status is Status.ACTIVE and record.tier is Tier.HOT


@dataclass(frozen=True)
class ScoreBreakdown:
    """Component scores (each 0..1) and the weighted final score of one search hit."""

    final: float
    components: dict[str, float]
    weights: dict[str, float]


@dataclass
class SearchHit:
    """A recalled memory with its score breakdown and provenance (which retrievers found it)."""

    record: MemoryRecord
    score: float
    breakdown: ScoreBreakdown
    found_by: tuple[str, ...]
    conflicts_with: tuple[str, ...] = ()
    #: older memories this hit outdates in a prompt (``portamem.read.prompt.for_prompt``), each as
    #: (text, ISO date): their line gives way to this one, which says what it replaced
    replaces: tuple[tuple[str, str], ...] = ()

    @property
    def memory_id(self) -> str:
        return self.record.memory_id

    @property
    def content(self) -> str:
        return self.record.content


@dataclass
class Turn:
    """One turn of the working window: a user message plus the reply."""

    user: str
    assistant: str
    created_at: datetime = field(default_factory=utcnow)
    metadata: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
