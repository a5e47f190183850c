"""Rule-based entity extraction (ids, dates, amounts, e-mails, names, places), Chinese and English."""

from __future__ import annotations

import functools
import re

from .text import STOPWORDS, normalize

__all__ = ["extract_entities", "normalize_entity"]

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_PATTERNS: tuple[re.Pattern[str], ...] = (
    # identifiers with digits: ORD-2024-001, A12345, #88231, SKU_77
    re.compile(r"(?<![A-Za-z0-9_-])#?(?=[A-Za-z_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z#])[A-Za-z0-9][A-Za-z0-9_-]{3,}(?![A-Za-z0-9_-])"),
    re.compile(r"(?<![\d.,])(?:#\d{3,}|\d{5,})(?![\d.,])"),
    re.compile(r"\b[A-Z]{2,}[0-9]*\b"),
    re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b"),
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:,?\s+\d{{4}})?", re.I),
    re.compile(rf"\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?", re.I),
    re.compile(r"\d{2,4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"),
    re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:元|块钱|块|美元|欧元|dollars?|usd|eur|rmb|cny)\b", re.I),
)
_CAPITALISED = re.compile(r"\b[^\W\d_a-z][^\W\d_A-Z]+(?:\s+[^\W\d_a-z][^\W\d_A-Z]+)*\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)$")
#: jieba POS tags worth keeping as entities: person, place, organisation, other proper noun
_ZH_TAGS = {"nr", "nrfg", "nrt", "ns", "nt", "nz"}
_CJK = re.compile(r"[\u4e00-\u9fff]")
#: words jieba's dictionary tags as names or places that are everyday words in chat
_ZH_NAMED = re.compile(r"(?:名叫|叫做|名字(?:是|叫)|[，,]\s*叫|取名(?:叫)?|起名(?:叫)?)\s*([\u4e00-\u9fff]{2,4}?)(?=[了啊呀吧呢哦]?(?:[，。！？,.!?\s]|$|[^\u4e00-\u9fff]))")
_ZH_NOT_ENTITIES = frozenset("谢谢 拜拜 喝咖啡 喝茶 哈哈 呵呵 嘿嘿 老师 老板 宝贝 亲爱的 朋友 大家".split())


def normalize_entity(text: str) -> str:
    return re.sub(r"\s+", " ", normalize(text)).strip(" #")


def extract_entities(text: str) -> list[str]:
    """Entities in order of appearance, normalised (lowercase, NFKC), without duplicates."""
    return list(_entities(text))


@functools.lru_cache(maxsize=1024)  # one write reads a message several times (extractor, triggers)
def _entities(text: str) -> tuple[str, ...]:
    found: list[tuple[int, int, str]] = []
    for pattern in _PATTERNS:
        found.extend((m.start(), m.end(), m.group(0)) for m in pattern.finditer(text))
    for m in _CAPITALISED.finditer(text):
        words = m.group(0).split()
        if not all(w[0].isupper() for w in words):  # uncased scripts (Chinese) are handled by jieba below
            continue
        # a lone capitalised word at sentence start is usually just grammar, not a name
        if len(words) == 1 and _SENTENCE_START.search(text[: m.start()]):
            continue
        if words[0].lower() in STOPWORDS or words[0].lower() in {"i", "im"}:
            words = words[1:]
        if words:
            found.append((m.end() - len(" ".join(words)), m.end(), " ".join(words)))
    if _CJK.search(text):
        # a name the text gives ("一只橘猫，叫年糕", "名字叫小雨"): jieba tags everyday words used as names
        # (年糕 is a rice cake) as nouns
        found.extend((m.start(1), m.end(1), m.group(1)) for m in _ZH_NAMED.finditer(text))
        import rjieba

        pos = 0
        for word, tag in rjieba.tag(text):
            if tag in _ZH_TAGS and len(word) >= 2 and word not in _ZH_NOT_ENTITIES:
                found.append((pos, pos + len(word), word))
            pos += len(word)
    seen: set[str] = set()
    out: list[str] = []
    covered_until = -1
    # longest match first at each position; a match inside an accepted one is a fragment of it
    for begin, end, raw in sorted(found, key=lambda item: (item[0], -item[1])):
        if end <= covered_until:
            continue
        covered_until = max(covered_until, end)
        entity = normalize_entity(raw)
        if len(entity) >= 2 and entity not in seen:
            seen.add(entity)
            out.append(entity)
    return tuple(out)
