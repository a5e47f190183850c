"""Request bodies of the HTTP API (pydantic models: they make the OpenAPI schema and the first check).

No body has a ``tenant_id``: the tenant comes from the API key, and an unknown field is refused.
Lists are bounded here (a batch save at ``MAX_BATCH`` memories, ``shown`` at ``MAX_SHOWN`` texts of
``MAX_TEXT_CHARS``), and every body by the server's size limit (``Settings.server_max_body_bytes``).
The memory rules themselves (content length, id form, filter values) are checked by ``Memory``,
whose ``ValidationError`` reaches the caller as HTTP 422 just like a schema failure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..records import MemoryType, Source, Tier, Trust

__all__ = [
    "Draft",
    "SaveRequest",
    "BatchSaveRequest",
    "FlushRequest",
    "SearchRequest",
    "ListRequest",
    "KeyedListRequest",
    "UserRequest",
    "ForgetRequest",
    "TierRequest",
    "RefreshRequest",
    "UpdateRequest",
    "TurnRequest",
    "SessionRequest",
    "ArchiveRequest",
    "AuditRequest",
    "MaintainRequest",
    "PurgeRequest",
]

#: a user id as the API takes it (Memory checks NUL characters and blank ones)
UserId = Field(min_length=1, max_length=256)
#: memories one batch save takes (one group commit of the write queue, ``portamem serve --max-batch``)
MAX_BATCH = 256
#: texts a search's ``shown`` takes, and the characters of each (a prompt's window is far smaller)
MAX_SHOWN = 200
MAX_TEXT_CHARS = 100_000
#: ids one forget takes, and messages one archive takes
MAX_IDS = 1000
MAX_MESSAGES = 2000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Draft(_Body):
    """One memory to save; the same fields as ``Memory.save_memory``."""

    content: str = Field(min_length=1, max_length=100_000)
    type: MemoryType = MemoryType.SEMANTIC
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    half_life_days: float | None = Field(default=None, gt=0.0, le=1e6)
    source: Source = Source.USER
    trust: Trust | None = None
    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    agent_id: str | None = Field(default=None, min_length=1, max_length=256)
    kind: str | None = Field(default=None, max_length=64)
    summary: str | None = Field(default=None, max_length=100_000)
    entities: list[str] | None = Field(default=None, max_length=1000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None
    #: a keyed write (``portamem.portable.keys``): an atomic upsert of (key_namespace, key)
    key: str | None = Field(default=None, min_length=1, max_length=256)
    key_namespace: str | list[str] = Field(default="", max_length=1024)


class SaveRequest(Draft):
    user_id: str = UserId
    #: answer once vector search sees it too (read-your-writes), not only once it is committed
    wait: bool = False


class BatchSaveRequest(_Body):
    user_id: str = UserId
    memories: list[Draft] = Field(min_length=1, max_length=MAX_BATCH)
    wait: bool = False


class FlushRequest(_Body):
    timeout: float | None = Field(default=None, gt=0.0, le=600.0)


#: what ``filters`` takes (``portamem.filters.SearchFilters``), for the API's readers
FILTERS_DOC = (
    "Hard filters applied before ranking: types, statuses, sources, trusts, session_id, agent_id, created_after, "
    "created_before, min_importance, tiers, and metadata: {key: value or {operator: operand}} with operators "
    "$eq $ne $in $nin $gt $gte $lt $lte $exists, every key ANDed, dotted keys for nested fields, e.g. "
    '{"metadata": {"project": "apollo", "priority": {"$gte": 2}}}. A bad filter answers 422 naming what was wrong.')


class SearchRequest(_Body):
    user_id: str = UserId
    query: str = Field(min_length=1, max_length=100_000)
    top_k: int | None = Field(default=None, ge=1, le=1000)
    filters: dict[str, Any] | None = Field(default=None, description=FILTERS_DOC)
    #: leave out what this session's working window already shows
    window_session: str | None = Field(default=None, min_length=1, max_length=256)
    #: texts the prompt already shows
    shown: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)]] = Field(default_factory=list, max_length=MAX_SHOWN)
    #: retrievers to ask (default: all) and weights to rank with (default: the server's)
    sources: list[Literal["vector", "keyword", "entity"]] | None = Field(default=None, min_length=1)
    weights: dict[str, float] | None = None
    #: count the hits as used (their prompt is built from them): access count and decay refresh
    touch: bool = False
    #: also answer every candidate's sources, scores and fate (``trace``); needs a key with the ``debug`` scope
    debug: bool = False
    #: storage tiers to search (default as ``Memory.search_memory``: hot and warm, the cold tier only when
    #: named); takes the place of ``filters["tiers"]``
    tiers: list[Tier] | None = Field(default=None, min_length=1, max_length=3)


class ListRequest(_Body):
    user_id: str = UserId
    filters: dict[str, Any] | None = Field(default=None, description=FILTERS_DOC)
    limit: int | None = Field(default=None, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0, le=2**53)


class KeyedListRequest(_Body):
    user_id: str = UserId
    key_namespace: str | list[str] = Field(default="", max_length=1024)
    filters: dict[str, Any] | None = None
    limit: int | None = Field(default=None, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0, le=2**53)


class UserRequest(_Body):
    user_id: str = UserId


class ForgetRequest(_Body):
    user_id: str = UserId
    memory_ids: list[str] = Field(min_length=1, max_length=MAX_IDS)


class TierRequest(_Body):
    """Memories to move to a storage tier (``Memory.set_tier``)."""

    user_id: str = UserId
    memory_ids: list[str] = Field(min_length=1, max_length=MAX_IDS)
    tier: Tier


class RefreshRequest(_Body):
    user_id: str = UserId
    delta: float = Field(default=0.1, ge=-1.0, le=1.0)


class UpdateRequest(_Body):
    user_id: str = UserId
    content: str | None = Field(default=None, min_length=1, max_length=100_000)
    metadata: dict[str, Any] | None = None


class TurnRequest(_Body):
    user_id: str = UserId
    session_id: str = Field(default="default", min_length=1, max_length=256)
    user: str = Field(max_length=100_000)
    assistant: str = Field(max_length=100_000)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None


class SessionRequest(_Body):
    """One session of one user (``POST /v1/turns/pop``)."""

    user_id: str = UserId
    session_id: str = Field(default="default", min_length=1, max_length=256)


class ArchiveRequest(_Body):
    """Messages that left a window the framework keeps itself (``portamem.messages.archive_messages``)."""

    user_id: str = UserId
    session_id: str = Field(default="default", min_length=1, max_length=256)
    messages: list[dict[str, Any]] = Field(max_length=MAX_MESSAGES)


class AuditRequest(_Body):
    user_id: str | None = Field(default=None, min_length=1, max_length=256)
    since: datetime | None = None
    window_hours: float = Field(default=24.0, gt=0.0, le=1e6)
    factor: float = Field(default=2.0, gt=1.0, le=1e6)
    include_quarantined: bool = False


class MaintainRequest(_Body):
    policy: str | None = Field(default=None, min_length=1, max_length=128)


class PurgeRequest(_Body):
    #: days a forgotten memory is kept before it may be purged (default: the store's grace period)
    older_than_days: float | None = Field(default=None, ge=0, le=36500)
