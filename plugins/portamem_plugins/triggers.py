"""Built-in write-trigger: remember turns that carry entities, numbers, decisions, strong emotion, an
attribute's value ("my budget is 8000"), a correction ("actually it's 2,000"), a change the user
reports ("we've moved her onto Lily's Kitchen", "改喂渴望了") or an explicit ask."""

from __future__ import annotations

import re

from portamem import hookimpl
from portamem.entities import extract_entities
from portamem.pipeline import TriggerVote, WriteContext
from portamem.records import MemoryType

from .classify import classify_kind, has_decision, has_strong_emotion, is_explicit
from .extract import attribute_values


#: a vote this strong keeps the sentence in long-term memory at once (``portamem.write.window``)
LASTING = 0.8
_NUMBER = re.compile(r"\d|[一二三四五六七八九十百千万两]+(?:块|元|万|千|百|号|点|岁|公斤|斤|个|人|天|晚|次|公里)")
#: a change the user reports: kept in long-term memory at once, like a correction
_CHANGED = re.compile(
    r"\b(?:switched|changed|swapped|upgraded|downgraded|cancell?ed|rescheduled|postponed|rebooked|quit|sold|"
    r"no longer|any ?more|instead of|gone off|moved (?:her|him|it|them|us|me) (?:on)?to|pushed (?:it )?back|"
    r"bumped (?:\w+ )?to|put (?:\w+ )?up to|crept (?:back )?up to|gone up to|went up to|down to|"
    r"is now|are now|now at)\b"
    r"|改[成为到用喂吃买]|换[成了到用]|不再|搬到|搬去|取消了|推迟|提前到|改期|戒了|退了|涨到|降到|减到|加到|砍到|挪到", re.I)
_CORRECTION = re.compile(r"\b(?:actually|scratch that|correction|i meant|not \S+ but|wait no|sorry,? (?:it's|i meant))\b"
                         r"|其实|更正|说错了|不是.{1,8}而是|应该是", re.I)


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
    if _NUMBER.search(text):
        reasons.append("a number")
        strength = max(strength, 0.6)
    if _CORRECTION.search(text):  # "actually it's 2,000", "scratch that": a value the user put right
        reasons.append("a correction")
        strength = max(strength, LASTING)
    if _CHANGED.search(text):  # "we've moved her onto Lily's Kitchen", "改喂渴望了": what held is replaced
        reasons.append("a change")
        strength = max(strength, LASTING)
    kind = classify_kind(text)
    if kind in {"identity", "preference"}:
        reasons.append(f"{kind} statement")
        strength = max(strength, 0.8)
    if not reasons:
        return None
    mtype = MemoryType.EPISODIC if kind == "task" else MemoryType.SEMANTIC
    return TriggerVote(True, strength, mtype, kind, "; ".join(reasons), explicit)
