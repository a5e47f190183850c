"""Hybrid retrieval: candidates from vector, BM25 keyword and exact-entity search, merged and scored."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .entities import extract_entities
from .filters import SearchFilters
from .records import MemoryRecord, ScoreBreakdown, SearchHit, Trust
from .store import RecordStore
from .vectors import MilvusVectorIndex

__all__ = ["Candidate", "Retriever", "ComponentScorer", "recency_score"]


@dataclass
class Candidate:
    """A record found by one or more retrievers, with every component score kept (each 0..1)."""

    memory_id: str
    components: dict[str, float] = field(default_factory=dict)
    found_by: set[str] = field(default_factory=set)
    record: MemoryRecord | None = None


#: adds or changes named components of each candidate (a retrieval-scorer plugin):
#: scorer(query, candidates, now, settings)
ComponentScorer = Callable[[str, list[Candidate], datetime, Any], None]


def recency_score(created_at: datetime, now: datetime, lam: float) -> float:
    age_hours = max(0.0, (now - created_at).total_seconds() / 3600.0)
    return math.exp(-lam * age_hours)


class Retriever:
    """Runs the read path over one record store and one vector index."""

    def __init__(self, store: RecordStore, index: MilvusVectorIndex, embed_query: Callable[[str], np.ndarray]) -> None:
        self.store = store
        self.index = index
        self.embed_query = embed_query

    def candidates(
        self,
        query: str,
        *,
        tenant_id: str,
        user_id: str,
        filters: SearchFilters,
        k: int,
        sources: Sequence[str] = ("vector", "keyword", "entity"),
    ) -> dict[str, Candidate]:
        found: dict[str, Candidate] = {}

        def add(memory_id: str, name: str, score: float) -> None:
            cand = found.setdefault(memory_id, Candidate(memory_id))
            cand.components[name] = max(cand.components.get(name, 0.0), score)
            cand.found_by.add(name)

        if "vector" in sources:
            qvec = self.embed_query(query)
            if filters.index_only_active:
                for hit in self.index.search(tenant_id, user_id, qvec, k, filters):
                    add(hit.memory_id, "vector", max(0.0, hit.score))
            else:  # statuses the index does not hold: exact scan of the stored vectors
                for memory_id, score in self._scan(qvec, tenant_id, user_id, filters, k):
                    add(memory_id, "vector", max(0.0, score))
        if "keyword" in sources:
            hits = self.store.keyword_search(tenant_id, user_id, query, filters, k)
            top = max((s for _, s in hits), default=0.0)
            for memory_id, score in hits:
                add(memory_id, "keyword", score / top if top > 0 else 0.0)
        if "entity" in sources:
            query_entities = extract_entities(query)
            for memory_id, n in self.store.entity_search(tenant_id, user_id, query_entities, filters, k):
                add(memory_id, "entity", n / len(query_entities))
        return found

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
        scorers: Sequence[ComponentScorer] = (),
        settings: Any = None,
        trust_factor: Mapping[Trust, float] | None = None,
    ) -> list[SearchHit]:
        # the store re-checks tenant, user and status: the index is never trusted for isolation
        records = self.store.get(tenant_id, user_id, list(candidates))
        live = []
        for memory_id, cand in candidates.items():
            record = records.get(memory_id)
            if record is None:
                continue
            cand.record = record
            # an exact entity match is keyword evidence: keep whichever is stronger
            cand.components["keyword"] = max(cand.components.get("keyword", 0.0), cand.components.pop("entity", 0.0))
            cand.components.setdefault("vector", 0.0)
            live.append(cand)
        for scorer in scorers:
            scorer(query, live, now, settings)
        hits = []
        for cand in live:
            assert cand.record is not None
            final = sum(weights.get(name, 0.0) * value for name, value in cand.components.items())
            if trust_factor is not None:
                final *= trust_factor.get(cand.record.trust, 1.0)
            if final < min_score:
                continue
            breakdown = ScoreBreakdown(final=final, components=dict(cand.components), weights=dict(weights))
            hits.append(SearchHit(cand.record, final, breakdown, tuple(sorted(cand.found_by))))
        hits.sort(key=lambda h: (-h.score, -h.record.created_at.timestamp(), h.record.memory_id))
        return hits[:top_k]
