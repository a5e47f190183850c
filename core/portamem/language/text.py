"""Multilingual tokenisation for keyword search: Latin words and numbers by regex, Chinese by jieba-rs."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["tokenize", "query_tokens", "normalize", "has_cjk", "clip", "same_passage", "STOPWORDS", "TOPICLESS"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: a Chinese run, or a Latin word or number; a number before Chinese ("7月8号入职") ends where the Chinese starts
_SEGMENT = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:[-'][^\W_{_CJK}]+)*", re.UNICODE)
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being
    am do does did have has had i me my we our you your he him his she her it its they them their
    this that these those there here what which who whom whose when where why how not no so than
    too very can could will would shall should may might must just also about into over after
    before up down out off again then once all any both each few more most other some such own
    same s t d ll m re ve y hey hi oh ok yeah yes really like got get
    的 了 是 在 和 与 就 都 而 及 着 或 一个 没有 我们 你们 他们 这 那 啊 吗 呢 吧 呀 哦 也 很 还 把 被 让 给""".split()
)


def normalize(text: str) -> str:
    """NFKC-fold (full-width digits and letters become ASCII) and lowercase."""
    return unicodedata.normalize("NFKC", text).lower()


_HAS_CJK = re.compile(f"[{_CJK}]")


def has_cjk(text: str) -> bool:
    return _HAS_CJK.search(text) is not None


def clip(text: str, limit: int) -> str:
    """The text on one line, cut to ``limit`` characters with an ellipsis when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def same_passage(a: str, b: str) -> bool:
    """One text holds the other, case, spaces and punctuation aside (a clause and the sentence it was
    read from, a captured sentence and the turn it came from); never when ``a`` holds no letter."""
    x, y = _letters(a), _letters(b)
    return bool(x) and (x in y or y in x)


@lru_cache(maxsize=1)
def _jieba():  # type: ignore[no-untyped-def]
    import rjieba

    return rjieba


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Split text into search tokens. Chinese runs are segmented for search (overlapping words)."""
    tokens: list[str] = []
    for match in _SEGMENT.finditer(normalize(text)):
        piece = match.group(0)
        if _CJK_RUN.match(piece):
            words = [w for w in _jieba().cut_for_search(piece) if w.strip()]
            # single characters carry meaning in Chinese names and short words; keep them
            tokens.extend(words or [piece])
        else:  # "dentist's" is the dentist, as "Biscuit’s" (a curly apostrophe ends the word) already is
            tokens.append(piece[:-2] if piece.endswith("'s") and len(piece) > 3 else piece)
    if keep_stopwords:
        return tokens
    return [t for t in tokens if t not in STOPWORDS]


#: words a question uses to ask for the current value, which say nothing of its topic: as keywords they
#: match whatever line happens to say "now" ("Where do I live now?" found "Mild dishes from now on.").
#: Not "recently" or "lately": a statement of a past event says them too ("I recently adopted a dog"),
#: and LoCoMo's questions lost them (MRR 0.474 -> 0.472)
TOPICLESS: frozenset[str] = frozenset(
    "now currently still nowadays anymore presently 现在 最近 目前 如今 当前 现今 眼下 还 仍然 依然 依旧".split())
_TOPICLESS_PHRASE = re.compile(r"\b(?:these days|at the moment|right now|any more|at present|for now)\b", re.I)


def query_tokens(text: str) -> list[str]:
    """A question's search tokens: ``tokenize`` without the words that only ask for the current value
    (``TOPICLESS``)."""
    return [t for t in tokenize(_TOPICLESS_PHRASE.sub(" ", text)) if t not in TOPICLESS]
