"""Built-in importance scorer on the 1-100 bands, from the memory's kind and its signals."""

from __future__ import annotations

from portamem import hookimpl
from portamem.pipeline import WriteContext
from portamem.records import MemoryRecord, MemoryType

from .classify import KIND_BANDS, classify_kind, has_decision, has_strong_emotion, is_explicit


def score(record: MemoryRecord) -> int:
    kind = record.kind or ("episodic" if record.type is MemoryType.EPISODIC else classify_kind(record.content))
    band = KIND_BANDS.get(kind, KIND_BANDS["fact"])
    ceiling = {"task": 20, "episodic": 50, "fact": 50, "preference": 80, "identity": 100}.get(kind, 50)
    # signals move a memory up within its band, never out of it
    if is_explicit(record.content):
        band += 10
    if has_decision(record.content):
        band += 5
    if has_strong_emotion(record.content):
        band += 5
    if record.entities:
        band += min(5, len(record.entities))
    return max(1, min(ceiling, band))


@hookimpl
def portamem_score_importance(record: MemoryRecord, context: WriteContext) -> int | None:
    return score(record)
