"""Built-in rule extractor: entities, simple subject-relation-object triples, a one-line summary, the kind."""

from __future__ import annotations

import re

from portamem import hookimpl
from portamem.entities import extract_entities
from portamem.pipeline import Extraction, WriteContext

from .classify import classify_kind

_TRIPLES = (
    (re.compile(r"\bmy name is ([\w' -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "name"),
    (re.compile(r"\bi live in ([\w' -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "lives_in"),
    (re.compile(r"\bi work (?:at|for) ([\w'& -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "works_at"),
    (re.compile(r"\bi(?: really)? (?:like|love|prefer|enjoy) ([\w' -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "likes"),
    (re.compile(r"\bi (?:hate|dislike|don't like) ([\w' -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "dislikes"),
    (re.compile(r"\bi(?:'m| am) allergic to ([\w' -]{2,40}?)(?=\s+(?:and|but|so|because)\s|[.,;!?]|$)", re.I), "user", "allergic_to"),
    (re.compile(r"我叫([\u4e00-\u9fff]{2,4})"), "user", "name"),
    (re.compile(r"我住在([\u4e00-\u9fff]{2,12}?)(?=[，。,.!！?？]|$)"), "user", "lives_in"),
    (re.compile(r"我(?:很|特别|最)?喜欢([\u4e00-\u9fff\w]{1,12}?)(?=[，。,.!！?？]|$)"), "user", "likes"),
    (re.compile(r"我(?:不喜欢|讨厌)([\u4e00-\u9fff\w]{1,12}?)(?=[，。,.!！?？]|$)"), "user", "dislikes"),
    (re.compile(r"我对([\u4e00-\u9fff\w]{1,10})过敏"), "user", "allergic_to"),
)
#: "my budget is 8000", "我的预算是8000": the value of an attribute, which holds one value at a time
#: (``portamem.write.supersession``): the relation is named after the attribute
_ATTRIBUTE = (
    re.compile(r"\bmy (?!name\b)((?:[a-z]+ ){0,2}[a-z]+) (?:is|was) (?:now |still |actually )?"
               r"((?:[\w$€£¥'/-]|(?<=\d)[.,](?=\d))+(?: (?:[\w$€£¥'/-]|(?<=\d)[.,](?=\d))+){0,4}?)"
               r"(?=[.,;!?]|\s+(?:and|but|so|because)\s|$)", re.I),
    re.compile(r"我的([\u4e00-\u9fff]{1,6}?)(?:是|为|改成了?|变成了?)([\u4e00-\u9fff\w$¥.]{1,20}?)(?=[，。,.!！?？；;]|$)"),
)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")


def attribute_values(text: str) -> list[list[str]]:
    """("user", "my <attribute>", value) for each "my <attribute> is <value>" / "我的<属性>是<值>"."""
    return [["user", prefix + m.group(1).strip().casefold(), m.group(2).strip(" .,")]
            for pattern, prefix in zip(_ATTRIBUTE, ("my ", "我的")) for m in pattern.finditer(text)]


def extract(text: str) -> Extraction:
    triples = [[subj, rel, m.group(1).strip()] for pattern, subj, rel in _TRIPLES for m in pattern.finditer(text)]
    triples.extend(attribute_values(text))
    first = _SENTENCE.split(text.strip(), maxsplit=1)[0]
    summary = first if len(first) < len(text.strip()) else None
    return Extraction(entities=extract_entities(text), triples=triples, summary=summary, kind=classify_kind(text))


@hookimpl(trylast=True)
def portamem_extract(text: str, context: WriteContext) -> Extraction | None:
    return extract(text)
