"""When two memories are the same memory: near in embedding space AND saying the same words.

The write path dedupes by this rule (``portamem.write.dedupe``), the read path collapses near-identical
hits by it and maintenance consolidates by it.

Cosine alone cannot tell "I like tea" from "I like coffee" (0.92 with multilingual-e5, and 0.95 for
Monday vs Tuesday with USE), so a duplicate must also agree on its content words, its numbers and
its negations. Paraphrases are kept as separate memories: losing a fact is worse than a duplicate.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .text import STOPWORDS, tokenize

__all__ = ["is_duplicate", "text_profile", "MIN_TOKEN_JACCARD"]

#: share of content words two texts must have in common to count as the same memory
MIN_TOKEN_JACCARD = 0.8

_FILLERS = frozenset(
    "i'm im i've i'd i'll it's that's really so very just please quite actually basically also too "
    "呢 啊 吧 呀 哦 嗯 了 的 很 非常 真的 其实".split()
)
_NEGATIONS = frozenset(
    "not no never nothing nobody none don't doesn't didn't won't can't cannot isn't aren't wasn't weren't "
    "shouldn't wouldn't couldn't haven't hasn't hadn't without 不 没 没有 别 不要 不是 不会 不能 从不 从来 无".split()
)
_DIGITS = re.compile(r"\d")


@lru_cache(maxsize=4096)
def text_profile(text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(content words, numbers, negations) of a text."""
    tokens = set(tokenize(text, keep_stopwords=True))
    negations = frozenset(t for t in tokens if t in _NEGATIONS or t.endswith("n't"))
    numbers = frozenset(t for t in tokens if _DIGITS.search(t))
    content = frozenset(t for t in tokens if t not in STOPWORDS and t not in _FILLERS and t not in negations)
    return content, numbers, negations


def is_duplicate(text_a: str, text_b: str, cosine: float, threshold: float) -> bool:
    """True when ``cosine >= threshold`` and the texts agree on content words, numbers and negation."""
    if cosine < threshold:
        return False
    words_a, numbers_a, neg_a = text_profile(text_a)
    words_b, numbers_b, neg_b = text_profile(text_b)
    if numbers_a != numbers_b or bool(neg_a) != bool(neg_b):
        return False
    union = words_a | words_b
    if not union:
        return text_a.strip().lower() == text_b.strip().lower()
    return len(words_a & words_b) / len(union) >= MIN_TOKEN_JACCARD
