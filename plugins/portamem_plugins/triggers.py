"""Built-in write-trigger: remember turns that carry entities, decisions, strong emotion, an attribute's value
("my budget is 8000") or an explicit ask."""

from __future__ import annotations

from portamem import hookimpl
from portamem.entities import extract_entities
from portamem.pipeline import TriggerVote, WriteContext
from portamem.records import MemoryType

from .classify import classify_kind, has_decision, has_strong_emotion, is_explicit
from .extract import attribute_values


@hookimpl
def portamem_write_trigger(text: str, context: WriteContext) -> TriggerVote | None:
    reasons: list[str] = []
    strength = 0.0
    explicit = is_explicit(text)
    if explicit:
        reasons.append("explicit request to remember")
        strength = 1.0
    entities = extract_entities(text)
    if entities:
        reasons.append(f"entities: {', '.join(entities[:5])}")
        strength = max(strength, 0.6)
    if has_decision(text):
        reasons.append("a decision")
        strength = max(strength, 0.7)
    if has_strong_emotion(text):
        reasons.append("strong emotion")
        strength = max(strength, 0.6)
    if attribute_values(text):
        reasons.append("the value of an attribute")
        strength = max(strength, 0.6)
    kind = classify_kind(text)
    if kind in {"identity", "preference"}:
        reasons.append(f"{kind} statement")
        strength = max(strength, 0.8)
    if not reasons:
        return None
    mtype = MemoryType.EPISODIC if kind == "task" else MemoryType.SEMANTIC
    return TriggerVote(True, strength, mtype, kind, "; ".join(reasons), explicit)
