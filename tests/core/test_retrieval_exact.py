"""Filtered vector search is exact: it returns what numpy brute force over the stored embeddings returns.

milvus-lite's HNSW loses most neighbours under a selective filter; the index uses FLAT in one
partition per user, and this test holds it, and the in-memory read replica that serves users within
its budget, to the brute-force answer for several users and filters, also after writes and deletes.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from portamem import Memory, MemoryDraft, SearchFilters
from portamem.read.calibration import calibration_for, vector_score
from portamem.read.candidates import HUB_WEIGHT
from portamem.language.text import has_cjk

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

    # no relevance threshold: the read-path check below compares the whole top k with brute force
    mem = Memory(settings=Settings(path=str(tmp_path_factory.mktemp("exact") / "store"), dedupe=False,
                                   min_score=0.0),
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
    mem.flush()
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


def _hub_corrected(mem: Memory, user: str, qvec: np.ndarray, filters: SearchFilters, k: int) -> list[tuple[str, float]]:
    """The brute-force top k by the read path's cosine: less HUB_WEIGHT of each row's hubness."""
    records = mem.store.list(mem.tenant_id, user, filters)
    matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
    hubness = mem.retriever.hubness
    assert hubness is not None
    near = hubness.correction(matrix, [has_cjk(r.content) for r in records])
    scores = matrix @ qvec - HUB_WEIGHT * np.maximum(near, 0.0)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(records[i].memory_id, float(scores[i])) for i in order]


def _readers(mem: Memory, user: str, qvec: np.ndarray, filters: SearchFilters, k: int) -> dict[str, list[tuple[str, float]]]:
    replica = mem.vectors._resident((mem.tenant_id, user))
    assert replica is not None  # the corpus fits the default budget
    return {
        "index": [(h.memory_id, h.score) for h in mem.index.search(mem.tenant_id, user, qvec, k, filters)],
        "replica": [(h.memory_id, h.score) for h in replica.search(qvec[None, :], k, filters)[0]],
    }


def _assert_exact(mem: Memory, user: str, filters: SearchFilters, *, read_path: bool = True) -> None:
    for query in QUERIES:
        qvec = mem.embedder.embed([query], kind="query")[0]
        expected = _brute_force(mem, user, qvec, filters, 8)
        for name, got in _readers(mem, user, qvec, filters, 8).items():
            assert [m for m, _ in got] == [m for m, _ in expected], name
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-4), name
        if not read_path:
            continue
        # and the read path's pure-vector search scores exactly those of them above the model's
        # background of unrelated text (conflict marking may reorder them; the rest tie at zero),
        # each cosine less its share of hubness (``read.calibration.Hubness``)
        hits = mem.search_memory(query, user_id=user, filters=filters, top_k=8,
                                 sources=["vector"], weights={"vector": 1.0})
        calibration = calibration_for(mem.embedder.name)
        assert calibration is not None
        corrected = _hub_corrected(mem, user, qvec, filters, 8)
        relevant = {m for m, cos in corrected if vector_score(cos, calibration) > 0}
        assert {h.memory_id for h in hits if h.score > 0} == relevant
        assert len(hits) == len(expected)
        assert all(filters.admits(h.record) and h.record.user_id == user for h in hits)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("name", list(FILTERS))
def test_filtered_vector_search_equals_brute_force(corpus: Memory, user: str, name: str) -> None:
    filters = FILTERS[name]
    selected = corpus.store.count(corpus.tenant_id, user, filters)
    assert 8 < selected <= 36 and (selected < 36 or name == "none")  # each filter really selects
    _assert_exact(corpus, user, filters)


def test_replica_stays_exact_through_writes_and_deletes(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from portamem import Settings

    with Memory(settings=Settings(path=str(tmp_path / "s"), dedupe=False), embedder=embedder) as mem:
        sentences = [f"{p.capitalize()} {d} {w}." for p, d, w in itertools.product(PEOPLE, DOINGS, WHEN)]
        first = mem.save_memories([MemoryDraft(content=t, created_at=T0 + timedelta(days=i))
                                   for i, t in enumerate(sentences[:20])], user_id="ana", wait=True)
        mem.search_memory("pets", user_id="ana")  # loads the replica
        assert mem.vectors.resident_users() == 1
        later = mem.save_memories([MemoryDraft(content=t, type="episodic" if i % 2 else "semantic",
                                               created_at=T0 + timedelta(days=40 + 2 * i))
                                   for i, t in enumerate(sentences[20:40])], user_id="ana")
        mem.flush()
        mem.forget_memory([r.memory_id for r in first[::3]] + [later[0].memory_id], user_id="ana")
        mem.refresh_memory(first[1].memory_id, 0.3, user_id="ana")
        mem.update_memory(later[1].memory_id, content="My cousin from Lyon adopted a grey cat.", user_id="ana")
        for filters in FILTERS.values():
            _assert_exact(mem, "ana", filters, read_path=False)
        assert mem.stats().pending == 0


def test_a_user_over_the_budget_is_served_by_the_index(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from portamem import Settings

    with Memory(settings=Settings(path=str(tmp_path / "s"), replica_budget_mb=0.01), embedder=embedder) as mem:
        saved = mem.save_memories([f"{p.capitalize()} {d}." for p, d in itertools.product(PEOPLE, DOINGS)],
                                  user_id="ben", wait=True)
        hits = mem.search_memory("Who got a new pet?", user_id="ben", sources=["vector"], weights={"vector": 1.0})
        assert mem.vectors.resident_users() == 0 and hits
        qvec = mem.embedder.embed(["Who got a new pet?"], kind="query")[0]
        assert hits[0].memory_id == _brute_force(mem, "ben", qvec, SearchFilters(), 1)[0][0]
        assert {r.memory_id for r in saved} <= mem.index.ids()
