"""Built-in decay eviction: retained = importance * 0.5 ** (days since last use / half_life) + access boost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from portamem import hookimpl
from portamem.records import MemoryRecord, MemoryType

__all__ = ["retained_value", "access_boost", "decay_policy", "EVICT_BELOW"]

#: records whose retained value falls below this are marked for eviction
EVICT_BELOW = 0.05


def access_boost(access_count: int) -> float:
    return min(access_count / 10.0, 0.3)


def retained_value(record: MemoryRecord, now: datetime) -> float:
    """Decay counts from the last use (a recall that reached the prompt), not from the writing."""
    since = max(record.created_at, record.last_accessed_at or record.created_at)
    age_days = max(0.0, (now - since).total_seconds() / 86400.0)
    return record.importance * 0.5 ** (age_days / record.half_life_days) + access_boost(record.access_count)


def decay_policy(records: Sequence[MemoryRecord], now: datetime, settings: Any) -> list[str]:
    """Ids of records that decayed below the threshold; semantic memory is never evicted automatically."""
    threshold = getattr(settings, "evict_below", EVICT_BELOW)
    return [
        r.memory_id
        for r in records
        if r.type is not MemoryType.SEMANTIC and retained_value(r, now) < threshold
    ]


@hookimpl(trylast=True)
def portamem_eviction_policy(records: Sequence[MemoryRecord], now: datetime, settings: Any) -> list[str] | None:
    return decay_policy(records, now, settings)


@hookimpl
def portamem_register_eviction_policies(register: Callable[[str, Callable[..., Sequence[str]]], None]) -> None:
    register("decay", decay_policy)
