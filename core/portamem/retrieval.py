"""Hybrid retrieval: vector, BM25 and exact-entity candidates, merged with every component kept, then ranked."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from .calibration import Calibration, calibration_for, vector_score
from .dedupe import is_duplicate
from .entities import extract_entities, normalize_entity
from .errors import ValidationError
from .filters import SearchFilters
from .records import TRUST_RANK, MemoryRecord, ScoreBreakdown, SearchHit, Trust
from .storage.keywords import BM25_B, BM25_K1
from .storage.schema import keyword_text
from .storage.sql import RecordStore
from .supersession import single_valued
from .text import tokenize
from .storage.vectors import MilvusVectorIndex

__all__ = [
    "SOURCES",
    "PRIORS",
    "Candidate",
    "ComponentScorer",
    "TraceEntry",
    "Retriever",
    "bm25_idf",
    "combine",
    "evidence_share",
    "explain",
    "recency_score",
]

#: the candidate generators; each one's score is also computed for the candidates of the others
SOURCES: tuple[str, ...] = ("vector", "keyword", "entity")

#: components that describe a memory, not its match to the query. They count in proportion to the
#: query evidence, so a fresh or important but unrelated memory gains almost nothing from them.
PRIORS: frozenset[str] = frozenset({"recency", "importance"})

#: idf is computed as if this many more memories held none of the query's words: in a small pool
#: every word is "common" (one memory of one: idf 0), which would make a single unmatched word
#: outweigh all the matched ones; in a large pool it changes nothing
PRIOR_DOCS = 5
#: two results this similar but not identical may state different values of one fact
_CONFLICT_COSINE = 0.8
_CONFLICT_WORDS = 0.6
#: share of a memory's words found in one window turn that makes it already in the prompt
_WINDOW_COVERAGE = 0.9
#: BM25 statistics are cached for this many users, this many words each
_STATS_USERS = 256
_STATS_TOKENS = 20000
#: (likes, dislikes) exclude each other
_OPPOSITE = {"likes": "dislikes", "dislikes": "likes"}


@dataclass
class Candidate:
    """A record found by one or more retrievers, with every component score kept (each 0..1).

    ``found_by`` is the provenance (which retrievers returned it); ``raw`` keeps the unnormalised
    scores (cosine, bm25) for debugging.
    """

    memory_id: str
    components: dict[str, float] = field(default_factory=dict)
    found_by: set[str] = field(default_factory=set)
    record: MemoryRecord | None = None
    raw: dict[str, float] = field(default_factory=dict)
    #: share (0..1) of the query's entities that none of the user's memories holds: a question about
    #: someone or something never mentioned is probably about nothing stored (``Settings.unknown_entity_penalty``)
    unknown_entities: float = 0.0
    #: the record's vector of the index's model (float32), read from the replica rather than the row
    vector: np.ndarray | None = None


#: adds or changes named components of each candidate (a retrieval-scorer plugin):
#: scorer(query, candidates, now, settings)
ComponentScorer = Callable[[str, list[Candidate], datetime, Any], None]


@dataclass
class TraceEntry:
    """What ranking did with one candidate: its final score and its fate (kept, or why not)."""

    candidate: Candidate
    final: float
    fate: str = "kept"
    rank: int | None = None


def recency_score(created_at: datetime, now: datetime, lam: float) -> float:
    """exp(-lam * age_hours); a memory from the future (clock skew) counts as new."""
    age_hours = max(0.0, (now - created_at).total_seconds() / 3600.0)
    return math.exp(-lam * age_hours)


def bm25_idf(n_docs: int, df: int) -> float:
    """BM25's inverse document frequency, floored as SQLite FTS5's bm25() floors it."""
    idf = math.log((n_docs - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6


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


@lru_cache(maxsize=8192)
def _term_counts(text: str) -> Counter[str]:
    """Search-token counts of a text (shared by the cache: never mutate the result)."""
    return Counter(tokenize(text))


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


def _cosine(a: MemoryRecord, b: MemoryRecord) -> float:
    if a.embedding is None or b.embedding is None or a.embedding_model != b.embedding_model:
        return 0.0
    return float(np.dot(np.asarray(a.embedding, dtype=np.float32), np.asarray(b.embedding, dtype=np.float32)))


def _pair_cosine(a: Candidate, b: Candidate) -> float:
    (va, ma), (vb, mb) = _vector(a), _vector(b)
    if va is None or vb is None or (ma is not None and mb is not None and ma != mb):
        return 0.0
    return float(np.dot(va, vb))


def _triples_conflict(a: MemoryRecord, b: MemoryRecord) -> bool:
    for s1, r1, o1 in (t[:3] for t in a.triples if len(t) >= 3):
        for s2, r2, o2 in (t[:3] for t in b.triples if len(t) >= 3):
            if normalize_entity(s1) != normalize_entity(s2):
                continue
            same_object = normalize_entity(o1) == normalize_entity(o2)
            if r1 == r2 and single_valued(r1) and not same_object:
                return True
            if _OPPOSITE.get(r1) == r2 and same_object:
                return True
    return False


def _merge_queued(hits: list[tuple[str, float]], queued: Mapping[str, np.ndarray], qvec: np.ndarray,
                  k: int) -> list[tuple[str, float]]:
    """The top ``k`` of the index's hits and the queued rows' exact cosines (a queued row's own
    score wins over an older indexed version of it)."""
    ids = list(queued)
    scores = (np.stack([queued[m] for m in ids]) @ qvec).tolist()
    merged = {m: s for m, s in hits if m not in queued}
    merged.update(zip(ids, scores))
    return sorted(merged.items(), key=lambda item: -item[1])[:k]


def _factor(cand: Candidate, trust_factor: Mapping[Trust, float] | None, unknown_penalty: float) -> float:
    """What multiplies a candidate's weighted sum: its trust factor, less the unknown-entity penalty."""
    assert cand.record is not None
    trust = 1.0 if trust_factor is None else trust_factor.get(cand.record.trust, 1.0)
    return trust * max(0.0, 1.0 - unknown_penalty * cand.unknown_entities)


class Retriever:
    """Runs the read path over one record store and one vector index."""

    def __init__(self, store: RecordStore, index: MilvusVectorIndex, embed_query: Callable[[str], np.ndarray],
                 calibration: Calibration | None = None) -> None:
        self.store = store
        self.index = index
        self.embed_query = embed_query
        #: the embedder's background cosine distribution (``portamem.calibration``); None: relative scale
        self.calibration = calibration if calibration is not None else calibration_for(getattr(index, "model", ""))
        self._stats: dict[tuple[str, str], tuple[int, float, dict[str, int]]] = {}
        self._stats_lock = threading.Lock()

    # ------------------------------------------------------------------ candidates
    def candidates(
        self,
        query: str,
        *,
        tenant_id: str,
        user_id: str,
        filters: SearchFilters,
        k: int,
        sources: Sequence[str] = SOURCES,
        queued: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, Candidate]:
        """The union of each source's top ``k``, every member scored by every requested source.

        A memory that one retriever found and another did not rank in its top ``k`` still gets that
        retriever's score, so the merge never mistakes "not in the list" for "no match". ``queued``:
        vectors of the user's rows not in the index yet (``portamem.fresh``), scored exactly beside it.
        """
        if isinstance(sources, str) or not sources or set(sources) - set(SOURCES):
            raise ValidationError(f"sources must be a non-empty list drawn from {list(SOURCES)}, got {sources!r}")
        found: dict[str, Candidate] = {}

        def add(memory_id: str, name: str) -> None:
            found.setdefault(memory_id, Candidate(memory_id)).found_by.add(name)

        qvec = None
        if "vector" in sources:
            qvec = np.asarray(self.embed_query(query), dtype=np.float32)
            if filters.index_only_active:
                vector_hits = [(h.memory_id, h.score) for h in self.index.search(tenant_id, user_id, qvec, k, filters)]
            else:  # statuses the index does not hold: exact scan of the stored vectors
                vector_hits = self._scan(qvec, tenant_id, user_id, filters, k)
            if queued:
                vector_hits = _merge_queued(vector_hits, queued, qvec, k)
            for memory_id, _ in vector_hits:
                add(memory_id, "vector")
        if "keyword" in sources:
            for memory_id, _ in self.store.keyword_search(tenant_id, user_id, query, filters, k):
                add(memory_id, "keyword")
        query_entities = extract_entities(query) if "entity" in sources else []
        n_user = self.store.user_count(tenant_id, user_id)
        entity_weights: dict[str, float] = {}
        unheld: list[str] = []
        if query_entities:
            df = self.store.entity_counts(tenant_id, user_id, query_entities)
            entity_weights = {e: bm25_idf(n_user + PRIOR_DOCS, df.get(e, 0)) for e in query_entities}
            unheld = [e for e in query_entities if not df.get(e)]
            # an entity held by more memories than we rank cannot single any of them out
            selective = [e for e in query_entities if 0 < df.get(e, 0) <= 4 * k]
            for memory_id, _ in self.store.entity_search(tenant_id, user_id, selective, filters, k):
                add(memory_id, "entity")
        if not found:
            return found
        # the store re-checks tenant, user and filters: the index is never trusted for isolation
        records = self.store.get(tenant_id, user_id, list(found), vectors=False)
        for memory_id in list(found):
            record = records.get(memory_id)
            if record is None or not filters.admits(record):
                del found[memory_id]
            else:
                found[memory_id].record = record
        for memory_id, vec in (queued or {}).items():
            if memory_id in found:
                found[memory_id].vector = vec
        self._attach_vectors(tenant_id, user_id, found.values())
        if qvec is not None:
            self._score_vector(qvec, found, [s for _, s in vector_hits])
        if "keyword" in sources:
            self._score_keyword(query, tenant_id, user_id, n_user, found)
        if "entity" in sources:
            self._score_entities(entity_weights, bm25_idf(n_user + PRIOR_DOCS, 1), found)
            unknown = self._unknown_share(query_entities, unheld, tenant_id, user_id, n_user)
            for cand in found.values():
                cand.unknown_entities = unknown
        return found

    def _unknown_share(self, entities: Sequence[str], unheld: Sequence[str], tenant_id: str, user_id: str,
                       n_user: int) -> float:
        """The share of the query's entities that no memory holds and none of whose words any memory
        contains ("Ghent Sunday" read as one name is known when a memory says "Ghent")."""
        if not unheld:
            return 0.0
        words = {e: tokenize(e) for e in unheld}
        _, df = self._keyword_stats(tenant_id, user_id, n_user, sorted({w for ws in words.values() for w in ws}))
        unknown = [e for e, ws in words.items() if not any(df.get(w) for w in ws)]
        return len(unknown) / len(entities)

    def _attach_vectors(self, tenant_id: str, user_id: str, cands: Iterable[Candidate]) -> None:
        """Give candidates their vectors of the index's model: from the read replica where the user is
        loaded, else only the vector column of their rows (never the rest of the row again)."""
        todo = [c for c in cands if c.vector is None]
        if not todo:
            return
        ids = [c.memory_id for c in todo]
        reader = getattr(self.index, "vectors", None)
        found = reader(tenant_id, user_id, ids) if reader is not None else \
            self.store.vectors(tenant_id, user_id, ids, self.index.model)
        for cand in todo:
            cand.vector = found.get(cand.memory_id)

    def _score_vector(self, qvec: np.ndarray, found: dict[str, Candidate], pool: list[float]) -> None:
        """Cosine against the embedder's measured background of unrelated pairs (``portamem.calibration``):
        the same cosine scores the same in any pool. A model nobody calibrated falls back to the
        cosine above this query's least similar neighbour, over the headroom left to 1."""
        floor = min(pool) if pool else 0.0
        with_vec = [c for c in found.values() if c.vector is not None]
        cosines = dict(zip((c.memory_id for c in with_vec),
                           (np.stack([c.vector for c in with_vec]) @ qvec).tolist())) if with_vec else {}
        for cand in found.values():
            cos = float(cosines.get(cand.memory_id, 0.0))
            cand.raw["cosine"] = cos
            if self.calibration is not None:
                cand.components["vector"] = float(vector_score(cos, self.calibration))
            else:
                cand.components["vector"] = max(0.0, (cos - floor) / (1.0 - floor)) if floor < 1.0 else 0.0

    def _score_keyword(self, query: str, tenant_id: str, user_id: str, n_docs: int, found: dict[str, Candidate]) -> None:
        """BM25 with this user's statistics, as a share of what a memory holding every query word once
        would score: query words no memory holds count against every match, and a match on common
        words alone stays weak (the share is of at least one word that only one memory holds)."""
        tokens = list(dict.fromkeys(tokenize(query)))
        if not tokens:
            for cand in found.values():
                cand.components["keyword"] = 0.0
            return
        mean_len, df = self._keyword_stats(tenant_id, user_id, n_docs, tokens)
        idf = {t: bm25_idf(n_docs + PRIOR_DOCS, df.get(t, 0)) for t in tokens}
        ceiling = max(sum(idf.values()), bm25_idf(n_docs + PRIOR_DOCS, 1))
        for cand in found.values():
            assert cand.record is not None
            text = keyword_text(cand.record)
            counts = _term_counts(text)
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * len(text) / mean_len) if mean_len > 0 else BM25_K1
            bm25 = sum(idf[t] * counts[t] * (BM25_K1 + 1.0) / (counts[t] + norm) for t in tokens if counts[t])
            cand.raw["bm25"] = bm25
            cand.components["keyword"] = min(1.0, bm25 / ceiling)

    def _keyword_stats(self, tenant_id: str, user_id: str, n_docs: int, tokens: list[str]) -> tuple[float, dict[str, int]]:
        """The store's per-user BM25 statistics, kept until the user's record count changes: counting
        a common word's records is the dearest part of a search, and questions repeat their words."""
        key = (tenant_id, user_id)
        with self._stats_lock:
            cached = self._stats.pop(key, None)
        if cached is None or cached[0] != n_docs:
            cached = (n_docs, *self.store.keyword_stats(tenant_id, user_id, tokens))
        else:
            missing = [t for t in tokens if t not in cached[2]]
            if missing:
                cached[2].update(self.store.keyword_stats(tenant_id, user_id, missing)[1])
        if len(cached[2]) > _STATS_TOKENS:
            cached = (n_docs, cached[1], {t: cached[2][t] for t in tokens if t in cached[2]})
        with self._stats_lock:
            self._stats[key] = cached  # most recently used last
            while len(self._stats) > _STATS_USERS:
                del self._stats[next(iter(self._stats))]
        return cached[1], cached[2]

    @staticmethod
    def _score_entities(weights: Mapping[str, float], floor: float, found: dict[str, Candidate]) -> None:
        """The idf-weighted share of the query's entities a memory holds, of at least one entity held
        by a single memory: a name in half the memories says little, an order number says all."""
        total = max(sum(weights.values()), floor)
        for cand in found.values():
            assert cand.record is not None
            held = {normalize_entity(e) for e in cand.record.entities}
            matched = sum(w for e, w in weights.items() if e in held)
            cand.components["entity"] = matched / total if total > 0 else 0.0

    def _scan(
        self, qvec: np.ndarray, tenant_id: str, user_id: str, filters: SearchFilters, k: int
    ) -> list[tuple[str, float]]:
        records = [
            r for r in self.store.list(tenant_id, user_id, filters)
            if r.embedding is not None and r.embedding_model == self.index.model
        ]
        if not records:
            return []
        matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
        scores = matrix @ np.asarray(qvec, dtype=np.float32)
        order = np.argsort(-scores)[:k]
        return [(records[i].memory_id, float(scores[i])) for i in order]

    # ------------------------------------------------------------------ ranking
    def rank(
        self,
        query: str,
        candidates: dict[str, Candidate],
        *,
        tenant_id: str,
        user_id: str,
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
    ) -> list[SearchHit]:
        """Score, threshold, drop what ``window`` (texts already in the prompt) holds, collapse
        near-identical results (the most trusted, then the newest stays), mark conflicts (the most
        trusted, then the newest first), cut to top-k. ``trust_factor`` multiplies each final score,
        and ties go to the more trusted memory. ``unknown_entity_penalty`` times the share of the query's
        entities no memory holds (``Candidate.unknown_entities``) is taken off each final score.

        ``trace``, when given, receives one entry per candidate with its fate, for debugging.
        """
        missing = [m for m, c in candidates.items() if c.record is None]
        if missing:  # candidates built elsewhere: fetch them, scoped by tenant and user
            records = self.store.get(tenant_id, user_id, missing)
            for memory_id in missing:
                candidates[memory_id].record = records.get(memory_id)
        live = [c for c in candidates.values() if c.record is not None]
        if self.store is not None:
            self._attach_vectors(tenant_id, user_id, [c for c in live if c.record.embedding is None])  # type: ignore[union-attr]
        for scorer in scorers.values() if isinstance(scorers, Mapping) else scorers:
            scorer(query, live, now, settings)
        entries = []
        for cand in live:
            assert cand.record is not None
            share = evidence_share(cand.components, weights)
            for name in PRIORS & cand.components.keys():
                # the breakdown shows what each prior added, so that it sums to the final score
                cand.raw[name] = cand.components[name]
                cand.components[name] *= share
            final = sum(weights.get(n, 0.0) * v for n, v in cand.components.items())
            final *= _factor(cand, trust_factor, unknown_entity_penalty)
            entries.append(TraceEntry(cand, final))
        entries.sort(key=lambda e: (-e.final, -TRUST_RANK[e.candidate.record.trust],  # type: ignore[union-attr]
                                    -e.candidate.record.created_at.timestamp(), e.candidate.memory_id))  # type: ignore[union-attr]
        if trace is not None:
            trace.extend(entries)
        window_words = [w for w in (_words(t) for t in window) if w]
        kept: list[TraceEntry] = []
        kept_words: list[frozenset[str]] = []
        for entry in entries:
            if len(kept) >= top_k:
                entry.fate = "below top-k"
                continue
            if entry.final < min_score:
                entry.fate = f"below min_score {min_score:g}"
                continue
            record = entry.candidate.record
            assert record is not None
            words = _words(record.content)
            if words and any(len(words & w) >= _WINDOW_COVERAGE * len(words) for w in window_words):
                entry.fate = "already in the working window"
                continue
            twin = next(
                (i for i, other in enumerate(kept) if self._same(entry.candidate, words, other.candidate, kept_words[i],
                                                                 duplicate_cosine)),
                None,
            )
            if twin is not None:
                other = kept[twin]
                assert other.candidate.record is not None
                held = other.candidate.record
                # the more trusted says it best, then the newest
                if (TRUST_RANK[record.trust], record.created_at) > (TRUST_RANK[held.trust], held.created_at):
                    kept[twin], kept_words[twin] = entry, words
                    other.fate = f"near-identical to more trusted or newer {record.memory_id}"
                else:
                    entry.fate = f"near-identical to more trusted or newer {other.candidate.memory_id}"
                continue
            kept.append(entry)
            kept_words.append(words)
        hits = [self._hit(e, weights, _factor(e.candidate, trust_factor, unknown_entity_penalty)) for e in kept]
        hits = self._mark_conflicts(hits, kept_words, [e.candidate for e in kept])
        for i, hit in enumerate(hits, 1):
            next(e for e in kept if e.candidate.memory_id == hit.memory_id).rank = i
        return hits

    @staticmethod
    def _same(ca: Candidate, a_words: frozenset[str], cb: Candidate, b_words: frozenset[str],
              threshold: float) -> bool:
        a, b = ca.record, cb.record
        assert a is not None
        if b is None or a.key is not None or b.key is not None:  # a keyed memory is its own entry (portamem.keys)
            return False
        if " ".join(a.content.split()).casefold() == " ".join(b.content.split()).casefold():
            return True
        # an episode and a statement captured from one of its turns hold the same memory
        if a.memory_id in b.metadata.get("covers", ()) or b.memory_id in a.metadata.get("covers", ()):
            return True
        # one rule for "the same memory" on write and on read: words, numbers and negation must agree
        return is_duplicate(a.content, b.content, _pair_cosine(ca, cb), threshold)

    @staticmethod
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

    @staticmethod
    def _mark_conflicts(hits: list[SearchHit], words: list[frozenset[str]], cands: list[Candidate]) -> list[SearchHit]:
        """Pairs that state different values of one fact point at each other; the newer goes first.
        ``cands`` are the hits' candidates, in the same order (their vectors)."""
        n = len(hits)
        links: dict[int, set[int]] = {i: set() for i in range(n)}
        for i in range(n):
            for j in range(i + 1, n):
                a, b = hits[i].record, hits[j].record
                if (
                    a.superseded_by == b.memory_id or b.superseded_by == a.memory_id
                    or _triples_conflict(a, b)
                    or (_jaccard(words[i], words[j]) >= _CONFLICT_WORDS and _pair_cosine(cands[i], cands[j]) >= _CONFLICT_COSINE)
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


def explain(query: str, trace: Sequence[TraceEntry], prompt: str = "", *, limit: int = 30) -> str:
    """A readable account of one search: every candidate with its sources, components, final score
    and fate, then the prompt text the kept hits make. For ``search_memory(debug=True)``."""
    names = sorted({n for e in trace for n in e.candidate.components}, key=lambda n: (n not in SOURCES, n))
    lines = [f"query: {query!r}  ({len(trace)} candidates)"]
    lines.append("  rank  final   " + " ".join(f"{n[:8]:>8}" for n in names) + "  found by          fate / content")
    for entry in list(trace)[:limit]:
        cand = entry.candidate
        record = cand.record
        text = " ".join(record.content.split())[:70] if record is not None else "?"
        comps = " ".join(f"{cand.components[n]:8.3f}" if n in cand.components else f"{'-':>8}" for n in names)
        raw = ", ".join(f"{k} {v:.3f}" for k, v in cand.raw.items())
        lines.append(f"  {entry.rank or '':>4}  {entry.final:.3f}  {comps}  {'+'.join(sorted(cand.found_by)):<16}  "
                     f"{entry.fate}: {text}")
        if raw:
            lines.append(f"{'':14}raw: {raw}")
    if len(trace) > limit:
        lines.append(f"  ... {len(trace) - limit} more candidates")
    lines.append("prompt:")
    lines.append(prompt or "  (nothing recalled)")
    return "\n".join(lines)
