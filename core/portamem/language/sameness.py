"""Whether two of a user's statements are about the same thing, from what they are about rather than
how a change is worded.

"My manager is Priya Nair." and, weeks later, "Priya left the company; Tom Becker runs our team now."
share one name and nothing of their wording; "I take the 7:40 train to work every morning." and "These
days I cycle to work, the trains were always late." share two words and no value. What makes each pair
one thing said twice, with another value the second time, is:

- **their vectors, against the user's own**: how much nearer the older statement is to the newer one
  than the newer one's other neighbours among the user's memories are (an embedder's cosines mean
  nothing on their own: e5 puts unrelated texts of one user at 0.75-0.85);
- **what they share**: content words (stemmed) and entities (names, places, amounts, dates);
- **the same subject**: "my manager" and "my sister's manager" are two things, as are "我的老板" and
  "我姐的老板";
- **what differs**: a value of the older (a number, a name, a date) the newer does not give, a value the
  newer gives the older does not, the older's value named again beside a new one ("Priya left; Tom
  runs the team now").

``pair_features`` turns a pair into those figures and ``same_thing`` weighs them with a logistic model
fitted on the scenario suite's dev half only (``benchmarks/fit_sameness.py`` prints the fit and its
figures on the other splits); the write path (``portamem.write.currency``) and the read path
(``portamem.read.prompt``) both decide with it.

May import: the text helpers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .entities import extract_entities, normalize_entity
from .statements import content_words
from .text import has_cjk
from .vocabulary import value_kinds

__all__ = ["APART_S", "FEATURES", "WEIGHTS", "BIAS", "THRESHOLD", "READ_THRESHOLD", "Sameness", "pair_features",
           "probability", "same_thing", "subjects", "values_of", "named_again"]

#: the figures ``pair_features`` gives, in order
FEATURES = (
    "cosine",  # cos(older, newer)
    "above_pool",  # cos(older, newer) less the mean cosine of the newer to its other neighbours
    "nearest",  # 1 when the older is the newer's nearest neighbour among those compared
    "shared_words",  # content words in common, up to 3, as a share of 3
    "word_overlap",  # Jaccard of the two content word sets
    "shared_values",  # the older's value named again by the newer (a name, a number, a place)
    "new_value",  # the newer gives a value the older does not
    "old_value_gone",  # the older gives a value the newer does not
    "new_words",  # share of the newer's content words the older does not have
    "other_subject",  # the two are about different people's things ("my sister's manager")
    "older_covered",  # share of the older's content words the newer says again
    "replaced_value",  # the older gives a value the newer does not, and the newer one the older does not
    "older_size",  # the older's content words, up to 12, as a share of 12: a long memory holds more than one thing
    "older_clauses",  # the older's clauses beyond the first, up to 3, as a share of 3
    "same_kind_replaced",  # a value of the older the newer does not say again, and a new one of its kind
    "renamed",  # ... with one of the older's values named again beside it ("Priya left; Tom runs it now")
)

#: the logistic model over ``FEATURES`` (standardised by ``_MEAN``/``_SCALE``), fitted on the dev half
#: of the scenario suite by ``benchmarks/fit_sameness.py``
_MEAN = (0.8594, -0.0002, 0.2244, 0.0924, 0.0223, 0.0506, 0.7629, 0.7102, 0.9629, 0.0443, 0.0457, 0.5680, 0.5145, 0.2817, 0.3920, 0.0200)
_SCALE = (0.0497, 0.0286, 0.4172, 0.2202, 0.0575, 0.2191, 0.4253, 0.4537, 0.0914, 0.2057, 0.1173, 0.4954, 0.2031, 0.2570, 0.4882, 0.1401)
WEIGHTS = (0.1462, 0.6171, 0.2811, 0.7833, -0.1141, -0.1224, -0.6118, -0.5565, -0.3163, -0.3438, 0.3428, -0.2972, -0.4213, 0.1731, 1.3376, 0.1434)
BIAS = -1.2780
#: the probability above which two statements are about the same thing: chosen on dev for precision
#: (a wrong mark tells the model that a fact which still holds is earlier; a missed one leaves both lines
#: unmarked, in the search's order)
THRESHOLD = 0.97
#: the probability above which the read path takes two hits for one thing said twice: the newer goes
#: first and the older's line says a newer memory superseded it. A wrong link there costs an order and a
#: note on one prompt, not a mark on a memory, so it is lower; chosen on dev (``portamem eval scenarios
#: --split dev``: top-1 0.729 / 0.735 / 0.746 / 0.751 / 0.746 at 0.97 / 0.85 / 0.6 / 0.4 / 0.2; facts'
#: top-1 fell only at 0.2; at 0.4 one fact line in 55 is shown superseded)
READ_THRESHOLD = 0.4

#: seconds between two statements for the later to change the earlier: a change is said later, not in the
#: same breath (a batch of facts saved at once holds no change of one another)
APART_S = 60.0
#: where a statement's clauses end: not inside a number ("1,450", "3.5") or after a title ("Dr. Okafor")
_CLAUSES = re.compile(r"(?:(?<!\bDr)(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bSt)(?<!\bProf)\.(?!\d)|[;!?。；！？])+\s*"
                      r"|,(?!\d)\s*|，|、|\s+(?:and|but|so)\s+")
#: a number as compared ("7:40", "1,200", "3.5")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
#: whose thing a statement is about: "my sister's", "my sister Ana's", "her", "我姐的", "我妈妈的"
_POSSESSOR_EN = re.compile(r"\bmy\s+((?:[a-z]+\s+){0,2}?[a-z]+)['’]s\b|\b(his|her|their)\s+(?=[a-z])", re.I)
_POSSESSOR_ZH = re.compile(r"我(?:的)?([\u4e00-\u9fff]{1,3}?)的(?=[\u4e00-\u9fff])|(他|她|他们|她们)的")


@dataclass(frozen=True)
class Sameness:
    """What ``same_thing`` found: the probability that the two are about one thing, the decision at
    ``THRESHOLD``, and whether the newer gives another value of it (else it says the same again).

    ``same`` is about the older as a whole. When the older holds a clause the newer has nothing in common
    with ("I'm planning a trip to Lisbon with my sister, we fly on 14 June" against "the flight moved to
    12 June"), the newer changes a part of it at most: ``same`` is False and ``part`` holds the clauses
    the newer is about (the write path outdates those and keeps the rest current). In one clause, the
    part is the values the newer gives another of, when the older also names someone or somewhere the
    newer leaves alone (``_replaced_values``)."""

    probability: float
    same: bool
    differs: bool
    part: tuple[str, ...] = ()


@lru_cache(maxsize=4096)
def values_of(text: str) -> frozenset[str]:
    """The values a statement gives: entities (names, places, dates, amounts, ids) and numbers,
    normalised; for Chinese, jieba's proper nouns are among the entities."""
    out = {normalize_entity(e) for e in extract_entities(text)}
    out |= {n.replace(",", "") for n in _NUMBER.findall(text)}
    # a multi-word name also counts by its parts: "Priya" names "Priya Nair" again
    out |= {w for e in list(out) if " " in e for w in e.split() if len(w) >= 3 and not w.isdigit()}
    return frozenset(v for v in out if v)


@lru_cache(maxsize=4096)
def subjects(text: str) -> frozenset[str]:
    """Whose things a statement speaks of besides the user's own: the possessors it names ("my
    sister's" -> "sister", "her" -> "her", "我姐的" -> "姐")."""
    found = {(m.group(1) or m.group(2)).lower().split()[-1] for m in _POSSESSOR_EN.finditer(text)}
    if has_cjk(text):
        found |= {m.group(2) or m.group(1) for m in _POSSESSOR_ZH.finditer(text) if m.group(2) or _noun(m.group(1))}
    return frozenset(found)


def _noun(words: str) -> bool:
    """Whether a possessor read after 我 starts with a noun ("姐", "妈妈", "老板"), not a preposition, a verb
    or a time ("我在杭州的公司", "我买的车", "我现在的工作" are the user's own)."""
    import rjieba

    tags = rjieba.tag(words)
    return bool(tags) and tags[0][1].startswith("n")


def _words(text: str) -> frozenset[str]:
    return content_words(text)


def named_again(values: frozenset[str], text: str) -> bool:
    """Whether ``text`` names one of ``values`` again, as a whole word (a name at the start of a
    sentence is no entity to the extractor: "Priya left the company")."""
    low = normalize_entity(text)
    for v in values:
        if v.isdigit() or len(v) < 2:
            continue
        if has_cjk(v):
            if v in low:
                return True
        elif re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", low):
            return True
    return False


def _kind(value: str) -> str:
    """What kind of value: a date, time, weekday or amount (``value_kinds``), another number, a Chinese
    name or place, or a name."""
    if any(c.isdigit() for c in value):
        kinds = value_kinds(value)
        return min(kinds) if kinds else "number"
    return "zh" if has_cjk(value) else "name"


def pair_features(older: str, newer: str, cosine: float, pool: Sequence[float] = ()) -> list[float]:
    """The figures of ``FEATURES`` for an older and a newer statement of one user: ``cosine`` between
    their vectors and ``pool`` the cosines of the newer to the user's other memories it was compared
    with (its neighbours, or the other hits of a search)."""
    wo, wn = _words(older), _words(newer)
    vo, vn = values_of(older), values_of(newer)
    shared = len(wo & wn)
    others = list(pool)
    # with no other memory to compare, a typical neighbour's cosine in the fit stands for the user's own
    mean = sum(others) / len(others) if others else _MEAN[0] - _MEAN[1]
    so, sn = subjects(older), subjects(newer)
    gone = {_kind(v) for v in vo - vn if not named_again(frozenset({v}), newer)}
    replaced = bool(gone & {_kind(v) for v in vn - vo})
    return [
        cosine,
        cosine - mean,
        1.0 if not others or cosine >= max(others) else 0.0,
        min(shared, 3) / 3.0,
        shared / len(wo | wn) if wo | wn else 0.0,
        1.0 if vo & vn or named_again(vo, newer) else 0.0,
        1.0 if vn - vo else 0.0,
        1.0 if vo - vn else 0.0,
        len(wn - wo) / len(wn) if wn else 0.0,
        1.0 if so != sn else 0.0,
        shared / len(wo) if wo else 0.0,
        1.0 if vn - vo and vo - vn else 0.0,
        min(len(wo), 12) / 12.0,
        min(len([c for c in _CLAUSES.split(older) if c.strip()]) - 1, 3) / 3.0,
        1.0 if replaced else 0.0,
        1.0 if replaced and named_again(vo, newer) else 0.0,
    ]


def _untouched(older: str, newer: str) -> tuple[list[str], list[str]]:
    """The older statement's clauses the newer is about (a content word or a value in common), and those
    it has nothing in common with; with one clause, the older is about it whole."""
    shared = _words(newer) | values_of(newer)
    clauses = [c.strip() for c in _CLAUSES.split(older) if _words(c)]
    if len(clauses) < 2:
        return [older], []
    about = [c for c in clauses if (_words(c) | values_of(c)) & shared]
    return about, [c for c in clauses if c not in about]


def _replaced_values(older: str, newer: str) -> tuple[str, ...]:
    """In one clause, the older's values the newer gives another of, when the older also names someone or
    somewhere the newer neither names again nor replaces ("Biscuit's first vet check is on 2 June at
    Oakfield Vets" against "they had to bump Biscuit to 5 June": the date changed, the vets did not);
    empty when nothing of the older outlives the change."""
    vo, vn = values_of(older), values_of(newer)
    gone = [v for v in vo - vn if not named_again(frozenset({v}), newer)]
    new_kinds = {_kind(v) for v in vn - vo if not named_again(frozenset({v}), older)}
    kept = [v for v in gone if _kind(v) in ("name", "zh") and _kind(v) not in new_kinds]
    replaced = [v for v in gone if _kind(v) in new_kinds]
    if not kept or not replaced:
        return ()
    # the longest forms only ("2 June", not also "2"), as the older writes them
    longest = sorted(v for v in replaced if not any(v != w and v in w for w in replaced))
    return tuple(m.group(0) if (m := re.search(re.escape(v), older, re.I)) else v for v in longest)


def probability(features: Sequence[float]) -> float:
    z = BIAS + sum(w * (f - m) / s for w, f, m, s in zip(WEIGHTS, features, _MEAN, _SCALE))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def same_thing(older: str, newer: str, cosine: float, pool: Sequence[float] = (),
               threshold: float = THRESHOLD) -> Sameness:
    """Whether ``newer`` is about the same thing as ``older`` (``pair_features``, weighed by the fitted
    model, decided at ``threshold``: the write path's ``THRESHOLD``, the read path's ``READ_THRESHOLD``),
    and whether it gives another value of it: a value or a content word the older does not have, or the
    older's value gone. Two statements of different subjects are never the same thing."""
    features = pair_features(older, newer, cosine, pool)
    p = probability(features)
    wo, wn = _words(older), _words(newer)
    vo, vn = values_of(older), values_of(newer)
    differs = bool(vn - vo or vo - vn or wn - wo)
    if p < threshold or features[FEATURES.index("other_subject")]:
        return Sameness(p, False, differs)
    about, rest = _untouched(older, newer)
    if rest:
        return Sameness(p, False, differs, tuple(about))
    replaced = _replaced_values(older, newer)
    return Sameness(p, not replaced, differs, replaced)
