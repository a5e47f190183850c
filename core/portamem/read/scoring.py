"""How a search scores its candidates: ``final = sum(weight * component)`` over the components every
candidate carries (vector, keyword, entity, recency, importance and any scorer plugin's), the priors
scaled by the query evidence, times the trust factor; then the threshold, the working window, twins
collapsed, conflicts marked (newest first) and top-k.

May import: the data model and the read path's candidates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from ..language.duplicates import is_duplicate
from ..records import EARLIER_KEY, OUTDATED_KEY, TRUST_RANK, MemoryRecord, ScoreBreakdown, SearchHit, Trust, speaks_for_the_user
from ..language.sameness import APART_S, READ_THRESHOLD, same_thing
from ..language.statements import triples_conflict
from ..language.text import tokenize
from .candidates import OWN_VECTOR, SOURCES, Candidate, ComponentScorer
from .trace import TraceEntry

__all__ = ["PRIORS", "STANDOUT_RATIO", "STANDOUT_FLOOR", "recency_score", "evidence_share", "combine", "rank"]

#: components that describe a memory, not its match to the query. They count in proportion to the
#: query evidence, so a fresh or important but unrelated memory gains almost nothing from them.
PRIORS: frozenset[str] = frozenset({"recency", "importance"})

#: two results this similar but not identical may state different values of one fact
_CONFLICT_COSINE = 0.8
_CONFLICT_WORDS = 0.6
#: share of a memory's words found in one window turn that makes it already in the prompt
_WINDOW_COVERAGE = 0.9
#: the best candidate stands out of the user's own scores for the query when the runner-up scores at
#: most this share of it: then it is kept below ``min_score``, down to ``STANDOUT_FLOOR`` times it. A
#: paraphrase shares no word with its answer and e5 puts the answer's cosine near its background
#: ("what can't she eat?" against "I'm allergic to hazelnuts.": 0.076), so an absolute floor alone cuts
#: the one match nothing else comes near; a question about nothing stored has no such match (its
#: runner-up scores 0.84-1.0 of its best). Chosen on the dev halves of ``portamem eval paraphrase`` and
#: the scenario suite: of the dev answers under 0.1, 5 of 6 stand out, no never-said question's best does.
#: Not for a question naming someone or something no memory holds (``Candidate.unknown_entities``): on
#: LoCoMo, questions asked of another conversation ("What is Caroline's job?") recalled nothing for 94.8 %
#: before, 85 % with the rule applied to them too
STANDOUT_RATIO = 0.75
STANDOUT_FLOOR = 0.5
#: a question written in Chinese recalls nothing when, its vector scored on the background of Chinese
#: text (``Calibration.cjk``), no hit reaches this share of ``min_score`` nor stands out: e5 puts two
#: unrelated Chinese texts near 0.83, so on the one background it ranks with, every memory of a user is
#: somewhat relevant to any Chinese question. Chosen on the paraphrase suite's dev half: never-said
#: Chinese questions empty 5 / 8 / 10 of 12 at 0.5 / 0.75 / 1.0, answers in the prompt 31 / 31 / 29 of 32
OWN_GATE = 0.75
#: a greeting and the user's name, nothing else ("Hi! I'm Lena.", "hey there, Tom here", "你好，我是周婷"): a hub
#: that stands out of a small pool for any first-person question ("What's my favourite film?"), so the
#: standout rule never keeps it below ``min_score``
_GREET = (r"(?:(?:hi|hello|hey|hiya|morning|good (?:morning|afternoon|evening)|你好呀?|您好|嗨|哈喽|早上好|早安)"
          r"(?:\s+there)?[\s,.!~:)，！。]*)")
_INTRODUCTION = re.compile(
    rf"^{_GREET}?(?:(?:i'm|i am|my name is|my name's|this is|call me|it's)\s+(?-i:[A-Z][\w-]*)(?:\s+(?-i:[A-Z][\w-]*))?|(?-i:[A-Z][\w-]*)\s+(?:here|speaking)"
    rf"|我叫\S{{1,4}}|我是\S{{1,4}}?(?=[，,。！!]|$))[\s,.!~:)，！。]*"
    rf"(?:nice to meet you|很高兴认识你|第一次用这个|请多关照)?[\s,.!~:)，！。]*$", re.I)

def recency_score(created_at: datetime, now: datetime, lam: float) -> float:
    """exp(-lam * age_hours); a memory from the future (clock skew) counts as new."""
    age_hours = max(0.0, (now - created_at).total_seconds() / 3600.0)
    return math.exp(-lam * age_hours)


def evidence_share(components: Mapping[str, Any], weights: Mapping[str, float]) -> Any:
    """The weighted query evidence as a share (0..1) of its most: how much the priors may count.

    Works on floats and, for the weight search, on numpy arrays of many candidates at once. With no
    evidence weight at all (a recency-only ranking, say) the priors count in full.
    """
    ceiling = sum(w for n, w in weights.items() if n not in PRIORS and w > 0)
    if ceiling <= 0:
        return 1.0
    return sum(weights.get(n, 0.0) * v for n, v in components.items() if n not in PRIORS) / ceiling


def combine(components: Mapping[str, Any], weights: Mapping[str, float]) -> Any:
    """final = sum(weight * component), the priors (``PRIORS``) scaled by the evidence share."""
    share = evidence_share(components, weights)
    return sum(weights.get(n, 0.0) * v * (share if n in PRIORS else 1.0) for n, v in components.items())


# memories come back in search after search: tokenise each text once
@lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    return frozenset(tokenize(text, keep_stopwords=True))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _vector(cand: Candidate) -> tuple[np.ndarray | None, str | None]:
    """A candidate's vector and its model: the one read for the search, else the record's own."""
    if cand.vector is not None:
        return cand.vector, None
    rec = cand.record
    if rec is None or rec.embedding is None:
        return None, None
    return np.asarray(rec.embedding, dtype=np.float32), rec.embedding_model


def _pair_cosine(a: Candidate, b: Candidate) -> float:
    (va, ma), (vb, mb) = _vector(a), _vector(b)
    if va is None or vb is None or (ma is not None and mb is not None and ma != mb):
        return 0.0
    return float(np.dot(va, vb))


def _weighted(components: dict[str, float], weights: Mapping[str, float],
              scale_priors: dict[str, float] | None = None) -> float:
    """The weighted sum of ``components``, the priors counted in proportion to the query evidence;
    ``scale_priors``: the dict whose priors are scaled in place (the candidate's own, for its breakdown)."""
    share = evidence_share(components, weights)
    scaled = {n: v * share if n in PRIORS else v for n, v in components.items()}
    if scale_priors is not None:
        for name in PRIORS & scale_priors.keys():
            scale_priors[name] = scaled[name]
    return sum(weights.get(n, 0.0) * v for n, v in scaled.items())


def _stands_out(finals: Sequence[float], min_score: float) -> bool:
    """Whether the best of ``finals`` (best first) stands out of the rest (``STANDOUT_RATIO``), at no less
    than ``STANDOUT_FLOOR`` times ``min_score``."""
    runner_up = finals[1] if len(finals) > 1 else 0.0
    return bool(finals) and finals[0] >= STANDOUT_FLOOR * min_score and runner_up <= STANDOUT_RATIO * finals[0]


def _standout(entries: Sequence[TraceEntry], min_score: float) -> TraceEntry | None:
    """The best entry when it stands out of the rest and may be kept below ``min_score``: not a question's
    unknown name or thing, not the user's introduction alone."""
    if not _stands_out([e.final for e in entries], min_score):
        return None
    cand = entries[0].candidate
    assert cand.record is not None
    if cand.unknown_entities or cand.unknown_thing or _INTRODUCTION.match(cand.record.content.strip()):
        return None
    return entries[0]


def _factor(cand: Candidate, trust_factor: Mapping[Trust, float] | None, unknown_penalty: float,
            asked_penalty: float = 0.0, thing_penalty: float = 0.0) -> float:
    """What multiplies a candidate's weighted sum: its trust factor, less the unknown-entity,
    unknown-asked-identifier and unknown-thing penalties."""
    assert cand.record is not None
    trust = 1.0 if trust_factor is None else trust_factor.get(cand.record.trust, 1.0)
    return (trust * max(0.0, 1.0 - unknown_penalty * cand.unknown_entities)
            * max(0.0, 1.0 - asked_penalty * cand.unknown_asked)
            * max(0.0, 1.0 - thing_penalty * cand.unknown_thing))


def rank(
    query: str,
    candidates: dict[str, Candidate],
    *,
    weights: Mapping[str, float],
    now: datetime,
    top_k: int,
    min_score: float = 0.0,
    scorers: Sequence[ComponentScorer] | Mapping[str, ComponentScorer] = (),
    settings: Any = None,
    trust_factor: Mapping[Trust, float] | None = None,
    window: Sequence[str] = (),
    duplicate_cosine: float = 0.92,
    trace: list[TraceEntry] | None = None,
    unknown_entity_penalty: float = 0.0,
    unknown_asked_penalty: float = 0.0,
    unknown_thing_penalty: float = 0.0,
    dedupe: bool = True,
) -> list[SearchHit]:
    """Score, threshold, drop what ``window`` (texts already in the prompt) holds, collapse
    near-identical results (the most trusted, then the newest stays), mark conflicts (the most
    trusted, then the newest first), cut to top-k. ``trust_factor`` multiplies each final score,
    and ties go to the more trusted memory. ``unknown_entity_penalty`` times the share of the query's
    entities no memory holds (``Candidate.unknown_entities``) is taken off each final score, and
    ``unknown_asked_penalty`` times the share of the things whose identifier it asks for that no memory
    mentions (``Candidate.unknown_asked``); ``unknown_thing_penalty`` likewise for the things of the user's it
    names that no memory mentions (``Candidate.unknown_thing``).

    ``dedupe``: the store merges duplicates on write (``Settings.dedupe``), so of near-identical hits
    still queued for its indexer the one it will keep stands for both.

    ``trace``, when given, receives one entry per candidate with its fate, for debugging.
    """
    live = [c for c in candidates.values() if c.record is not None]
    for scorer in scorers.values() if isinstance(scorers, Mapping) else scorers:
        scorer(query, live, now, settings)
    entries = []
    own: list[float] = []  # each final with the vector scored on the question's own language's background
    for cand in live:
        assert cand.record is not None
        factor = _factor(cand, trust_factor, unknown_entity_penalty, unknown_asked_penalty, unknown_thing_penalty)
        if OWN_VECTOR in cand.raw:
            own.append(_weighted({**cand.components, "vector": cand.raw[OWN_VECTOR]}, weights) * factor)
        for name in PRIORS & cand.components.keys():
            # the breakdown shows what each prior added, so that it sums to the final score
            cand.raw[name] = cand.components[name]
        final = _weighted(cand.components, weights, cand.components) * factor
        entries.append(TraceEntry(cand, final))
    entries.sort(key=lambda e: (-e.final, -TRUST_RANK[e.candidate.record.trust],  # type: ignore[union-attr]
                                -e.candidate.record.created_at.timestamp(), e.candidate.memory_id))  # type: ignore[union-attr]
    if trace is not None:
        trace.extend(entries)
    window_words = [w for w in (_words(t) for t in window) if w]
    # the one match nothing else comes near is not cut by the absolute floor (``STANDOUT_RATIO``)
    standout = _standout(entries, min_score)
    own.sort(reverse=True)
    gate = OWN_GATE * min_score
    if own and len(own) == len(entries) and own[0] < gate and (standout is None or not _stands_out(own, gate)):
        # against its own language's background nothing is relevant: a question about nothing stored
        for entry in entries:
            entry.fate = "nothing above its language's background"
        return []
    kept: list[TraceEntry] = []
    kept_words: list[frozenset[str]] = []
    for entry in entries:
        if len(kept) >= top_k:
            entry.fate = "below top-k"
            continue
        if entry.final < min_score and entry is not standout:
            entry.fate = f"below min_score {min_score:g}"
            continue
        record = entry.candidate.record
        assert record is not None
        words = _words(record.content)
        if words and any(len(words & w) >= _WINDOW_COVERAGE * len(words) for w in window_words):
            entry.fate = "already in the working window"
            continue
        twin = next(
            (i for i, other in enumerate(kept) if _same(entry.candidate, words, other.candidate, kept_words[i],
                                                             duplicate_cosine)),
            None,
        )
        if twin is not None:
            other = kept[twin]
            if _keeps(entry.candidate, other.candidate, dedupe):
                kept[twin], kept_words[twin] = entry, words
                other.fate = f"near-identical to more trusted, newer or more precise {record.memory_id}"
            else:
                entry.fate = f"near-identical to more trusted, newer or more precise {other.candidate.memory_id}"
            continue
        kept.append(entry)
        kept_words.append(words)
    hits = [_hit(e, weights, _factor(e.candidate, trust_factor, unknown_entity_penalty,
                                     unknown_asked_penalty, unknown_thing_penalty)) for e in kept]
    hits = _mark_conflicts(hits, kept_words, [e.candidate for e in kept])
    for i, hit in enumerate(hits, 1):
        next(e for e in kept if e.candidate.memory_id == hit.memory_id).rank = i
    return hits

def _same(ca: Candidate, a_words: frozenset[str], cb: Candidate, b_words: frozenset[str],
          threshold: float) -> bool:
    a, b = ca.record, cb.record
    assert a is not None
    if b is None or a.key is not None or b.key is not None:  # a keyed memory is its own entry (portamem.portable.keys)
        return False
    if " ".join(a.content.split()).casefold() == " ".join(b.content.split()).casefold():
        return True
    # an episode and a statement captured from one of its turns hold the same memory
    if a.memory_id in b.metadata.get("covers", ()) or b.memory_id in a.metadata.get("covers", ()):
        return True
    # one rule for "the same memory" on write and on read: words, numbers and negation must agree
    return is_duplicate(a.content, b.content, _pair_cosine(ca, cb), threshold)

def _keeps(a: Candidate, b: Candidate, dedupe: bool) -> bool:
    """Of two near-identical hits, whether ``a`` says it best: the memory an episode covers over the
    episode; while either is queued for the indexer, the one its dedupe will keep (the reviewed one,
    else the older); else the more trusted, then the newest."""
    ra, rb = a.record, b.record
    assert ra is not None and rb is not None
    if _covers(rb, ra) or _covers(ra, rb):
        return _covers(rb, ra)
    if dedupe and (a.queued or b.queued):  # the indexer's dedupe will keep the reviewed one, else the older
        return not a.queued if a.queued != b.queued else ra.created_at < rb.created_at
    return (TRUST_RANK[ra.trust], ra.created_at) > (TRUST_RANK[rb.trust], rb.created_at)


def _covers(episode: MemoryRecord, record: MemoryRecord) -> bool:
    """The episode holds the memory captured from one of its turns: the memory says it more precisely."""
    return record.memory_id in episode.metadata.get("covers", ())


def _hit(entry: TraceEntry, weights: Mapping[str, float], factor: float = 1.0) -> SearchHit:
    cand = entry.candidate
    assert cand.record is not None
    if cand.record.embedding is None and cand.vector is not None:  # a hit carries its vector, as stored
        cand.record.embedding = cand.vector.tolist()
    # the weights shown include the trust and unknown-entity factors, so that they still sum to the final score
    used = {n: float(weights.get(n, 0.0)) * factor for n in cand.components}
    breakdown = ScoreBreakdown(final=entry.final, components=dict(cand.components), weights=used)
    return SearchHit(cand.record, entry.final, breakdown, tuple(s for s in SOURCES if s in cand.found_by)
                     + tuple(sorted(cand.found_by - set(SOURCES))))

def _changed(hits: list[SearchHit], cosines: list[list[float]], i: int, j: int) -> bool:
    """Two of the user's statements about the same thing, the newer giving another value
    (``portamem.language.sameness``), against the newer's cosines to the other hits as its background."""
    a, b = hits[i].record, hits[j].record
    if abs((a.created_at - b.created_at).total_seconds()) < APART_S \
            or not (speaks_for_the_user(a) and speaks_for_the_user(b)):
        return False
    older, newer = (i, j) if a.created_at < b.created_at else (j, i)
    ended = hits[older].record.metadata.get(EARLIER_KEY)
    if isinstance(ended, dict) and isinstance(ended.get("by"), str):
        # the write path found what ended the older, with the whole store to compare: no guess adds another
        return ended["by"] == hits[newer].memory_id
    if isinstance(hits[older].record.metadata.get(OUTDATED_KEY), dict):
        # a part of the older was replaced, the rest holds: the prompt shows the newer in its place for a
        # question about that part only (``portamem.read.prompt``), and no line is marked superseded
        return False
    pool = [cosines[newer][k] for k in range(len(hits)) if k not in (older, newer)]
    found = same_thing(hits[older].record.content, hits[newer].record.content, cosines[older][newer], pool,
                       threshold=READ_THRESHOLD)
    return found.same and found.differs


def _mark_conflicts(hits: list[SearchHit], words: list[frozenset[str]], cands: list[Candidate]) -> list[SearchHit]:
    """Pairs that state different values of one fact point at each other; the newer goes first.
    ``cands`` are the hits' candidates, in the same order (their vectors)."""
    n = len(hits)
    links: dict[int, set[int]] = {i: set() for i in range(n)}
    cosines = [[_pair_cosine(cands[i], cands[j]) if i != j else 1.0 for j in range(n)] for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            a, b = hits[i].record, hits[j].record
            if (
                a.superseded_by == b.memory_id or b.superseded_by == a.memory_id
                or triples_conflict(a, b)
                or (_jaccard(words[i], words[j]) >= _CONFLICT_WORDS and cosines[i][j] >= _CONFLICT_COSINE)
                or _changed(hits, cosines, i, j)
            ):
                links[i].add(j)
                links[j].add(i)
    for i, others in links.items():
        if others:
            hits[i].conflicts_with = tuple(hits[j].memory_id for j in sorted(others))
    order: list[int] = []
    placed: set[int] = set()
    for i in range(n):
        if i in placed:
            continue
        # an older memory waits behind every newer memory it conflicts with, unless it is more trusted
        group = sorted({i} | {j for j in links[i] if j not in placed},
                       key=lambda m: (-TRUST_RANK[hits[m].record.trust], -hits[m].record.created_at.timestamp(), m))
        order.extend(group)
        placed.update(group)
    return [hits[i] for i in order]


