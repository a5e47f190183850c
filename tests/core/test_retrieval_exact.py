"""Filtered vector search is exact: it returns what numpy brute force over the stored embeddings returns.

milvus-lite's HNSW loses most neighbours under a selective filter; the index uses FLAT in one
partition per user, and this test holds it to the brute-force answer for several users and filters.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from portamem import Memory, MemoryDraft, SearchFilters

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
PEOPLE = ["my sister", "our neighbour", "the new manager", "my old teacher", "a cousin from Lyon"]
DOINGS = ["bought a red bicycle", "started learning the cello", "moved to a flat by the river",
          "booked a trip to Norway", "adopted a grey cat", "opened a bakery"]
WHEN = ["last spring", "in November"]
USERS = ("ana", "ben", "chen")
QUERIES = ["Who got a new pet?", "musical instrument lessons", "travel plans to Scandinavia", "a shop that sells bread"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder) -> Memory:  # type: ignore[no-untyped-def]
    from portamem import Settings

    mem = Memory(settings=Settings(path=str(tmp_path_factory.mktemp("exact") / "store"), dedupe=False),
                 embedder=embedder)
    sentences = [f"{p.capitalize()} {d} {w}." for p, d, w in itertools.product(PEOPLE, DOINGS, WHEN)]
    for u, user in enumerate(USERS):
        # each user holds an overlapping but different slice, so another user's rows would show
        mine = sentences[u * 7:u * 7 + 36]
        mem.save_memories(
            [MemoryDraft(content=t, type="episodic" if i % 3 == 0 else "semantic",
                         created_at=T0 + timedelta(days=5 * i + u)) for i, t in enumerate(mine)],
            user_id=user,
        )
    yield mem
    mem.close()


FILTERS = {
    "none": SearchFilters(),
    "episodic": SearchFilters.coerce({"types": ["episodic"]}),
    "window": SearchFilters.coerce({"created_after": (T0 + timedelta(days=30)).isoformat(),
                                    "created_before": (T0 + timedelta(days=120)).isoformat()}),
    "semantic+after": SearchFilters.coerce({"types": ["semantic"], "created_after": (T0 + timedelta(days=60)).isoformat()}),
}


def _brute_force(mem: Memory, user: str, qvec: np.ndarray, filters: SearchFilters, k: int) -> list[tuple[str, float]]:
    records = mem.store.list(mem.tenant_id, user, filters)
    matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
    scores = matrix @ qvec
    order = np.argsort(-scores, kind="stable")[:k]
    return [(records[i].memory_id, float(scores[i])) for i in order]


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("name", list(FILTERS))
def test_filtered_vector_search_equals_brute_force(corpus: Memory, user: str, name: str) -> None:
    filters = FILTERS[name]
    selected = corpus.store.count(corpus.tenant_id, user, filters)
    assert 8 < selected <= 36 and (selected < 36 or name == "none")  # each filter really selects
    for query in QUERIES:
        qvec = corpus.embedder.embed([query], kind="query")[0]
        expected = _brute_force(corpus, user, qvec, filters, 8)
        got = [(h.memory_id, h.score) for h in corpus.index.search(corpus.tenant_id, user, qvec, 8, filters)]
        assert [m for m, _ in got] == [m for m, _ in expected]
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-4)
        # and the read path's pure-vector search returns those memories (conflict marking may reorder them)
        hits = corpus.search_memory(query, user_id=user, filters=filters, top_k=8,
                                    sources=["vector"], weights={"vector": 1.0})
        assert {h.memory_id for h in hits} == {m for m, _ in expected}
        assert all(filters.admits(h.record) and h.record.user_id == user for h in hits)
