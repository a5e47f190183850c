"""One search after validation: candidates (``candidates``), the user's rows still queued for the
index scored beside them, scorer plugins, ranking (``scoring``), the reranker when one is named
(``rerank``), the agent's own memories before the shared layer, then the use of the hits logged (``usage``).

May import: the data model, ``portamem.components``, ``portamem.storage`` and the rest of the read path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import IO, Any

import numpy as np

from ..components import Components
from ..filters import SearchFilters
from ..pipeline import WriteContext
from ..records import SearchHit, Tier, Trust
from .calibration import fusion_weights
from .candidates import SOURCES, Candidate, CandidateFinder
from .prompt import format_memories
from .rerank import depth as rerank_depth
from .rerank import note, rerank
from .scoring import rank
from .trace import TraceEntry, explain
from .usage import RetrievalLog

__all__ = ["Retriever", "Search", "QueuedVectors"]

#: the vectors of one user's rows not in the index yet that the filters admit (``portamem.background.queued``)
QueuedVectors = Callable[[str, str, SearchFilters], Mapping[str, np.ndarray]]


class Retriever(CandidateFinder):
    """The read path over one record store and one vector index: candidates, then their ranking."""

    def rank(self, query: str, candidates: dict[str, Candidate], *, tenant_id: str, user_id: str,
             **options: Any) -> list[SearchHit]:
        """``portamem.read.scoring.rank`` over candidates whose records and vectors are fetched first
        (candidates built elsewhere), scoped by tenant and user."""
        missing = [m for m, c in candidates.items() if c.record is None]
        if missing and self.store is not None:
            records = self.store.get(tenant_id, user_id, missing)
            for memory_id in missing:
                candidates[memory_id].record = records.get(memory_id)
        live = [c for c in candidates.values() if c.record is not None]
        if self.store is not None:  # a retriever over candidates alone (tests, tuning) has no store
            self.attach_vectors(tenant_id, user_id, [c for c in live if c.record.embedding is None])  # type: ignore[union-attr]
        return rank(query, candidates, **options)


class Search:
    """Searches of one store: ``Memory.search_memory`` validates, then runs one here."""

    def __init__(self, parts: Components, retriever: Retriever, log: RetrievalLog, queued: QueuedVectors,
                 trust_factors: Mapping[Trust, float]) -> None:
        self.parts = parts
        self.retriever = retriever
        self.log = log
        self.queued = queued
        self.trust_factors = trust_factors

    def run(
        self,
        query: str,
        *,
        tenant_id: str,
        user_id: str,
        filters: SearchFilters,
        k: int,
        now: datetime,
        sources: Sequence[str] = SOURCES,
        weights: Mapping[str, float] | None = None,
        window_session: str | None = None,
        shown: Sequence[str] = (),
        debug: bool | IO[str] = False,
        trace: list[TraceEntry] | None = None,
        touch: bool = False,
    ) -> list[SearchHit]:
        s = self.parts.settings
        window = list(shown)
        if window_session is not None:
            for turn in self.parts.store.turns(tenant_id, user_id, window_session):
                window.append(f"{turn.user}\n{turn.assistant}")
        # read-your-writes: the user's rows not indexed yet are scored as they stand
        queued = self.queued(tenant_id, user_id, filters) if "vector" in sources else None
        # by default the vector index's hot tier and the keyword and entity matches of hot and warm;
        # the warm tier's vectors on disk only when that evidence is thin
        tiered = filters.tiers is None and s.tiers and "vector" in sources
        candidates = self.retriever.candidates(
            query, tenant_id=tenant_id, user_id=user_id, filters=filters, k=max(s.candidate_k, k), sources=sources,
            queued=queued,
        )
        registered = self.parts.hooks.scorers()
        if trace is None and debug:
            trace = []

        def ranked(found: dict[str, Candidate], trace: list[TraceEntry] | None) -> list[SearchHit]:
            return self.retriever.rank(
                query,
                found,
                tenant_id=tenant_id,
                user_id=user_id,
                weights=weights if weights is not None else {
                    **{n: r.weight for n, r in registered.items() if r.weight is not None},
                    **fusion_weights(s.weights, self.retriever.calibration)},
                now=now,
                top_k=rerank_depth(s, k),  # the reranker's candidates when one is named
                min_score=s.min_score,
                scorers=[r.fn for r in registered.values()],
                settings=s,
                window=window,
                duplicate_cosine=s.dedupe_threshold,
                trace=trace,
                trust_factor=self.trust_factors,
                unknown_entity_penalty=s.unknown_entity_penalty,
                unknown_asked_penalty=s.unknown_asked_penalty,
                unknown_thing_penalty=s.unknown_thing_penalty,
                dedupe=s.dedupe,
            )

        # a tiered search may rank again: the trace is kept for its last ranking
        hits = ranked(candidates, None if tiered else trace)
        if tiered:
            warm: dict[str, Candidate] = {}
            if not hits or hits[0].score < s.warm_below:
                warm = self.retriever.candidates(
                    query, tenant_id=tenant_id, user_id=user_id, filters=replace(filters, tiers=(Tier.WARM,)),
                    k=max(s.candidate_k, k), sources=sources, generate=["vector"],
                )
                warm = {m: c for m, c in warm.items() if m not in candidates}
                candidates = {**warm, **candidates}
            if warm or trace is not None:
                hits = ranked(candidates, trace)
        hits = rerank(self.parts.hooks, query, hits, k, s, getattr(self.parts.formation, "model", None))
        note(trace, hits, s)
        if filters.agent_id is not None:  # the agent's private memories before the shared layer
            hits.sort(key=lambda h: h.record.agent_id is None)
        self.log.record(query, hits, WriteContext(tenant_id=tenant_id, user_id=user_id, settings=s),
                        touch=touch, now=now)
        if debug:
            assert trace is not None
            # printed, the table ends up in logs: its query is redacted as the retrieval log keeps it
            shown_query, _ = self.parts.hooks.redact(
                query, WriteContext(tenant_id=tenant_id, user_id=user_id, settings=s))
            print(explain(shown_query, trace, format_memories(hits)), file=sys.stderr if debug is True else debug)
        return hits
