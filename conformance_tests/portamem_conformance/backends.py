"""Abstract backend tests: every record store and vector index runs these unchanged.

Subclass :class:`RecordStoreTests` and override ``record_store`` (a factory that opens a fresh, empty
store and may be called again to reopen it), and :class:`VectorIndexTests` overriding ``vector_index``
(a factory taking ``partition_per_user``). The answers are checked against brute force: exact per-user
BM25 computed here from the texts, and numpy cosine over the stored vectors.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from portamem.filters import SearchFilters
from portamem.records import MemoryRecord, MemoryType, Status
from portamem.language.text import tokenize

__all__ = ["RecordStoreTests", "VectorIndexTests", "exact_bm25", "corpus"]

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
_WORDS = ("tea coffee parcel courier kiosk garden bicycle river cello bakery harbour ferry winter lamp "
          "violin orchard market ticket museum tram").split()
_ZH = ["我喜欢在早上喝黑咖啡", "咖啡机昨天坏了", "用户住在北京", "北京的冬天很冷", "周末去公园骑自行车", "茶比咖啡更健康"]


def corpus(user_id: str, n: int, seed: int, tenant_id: str = "default", dim: int = 16) -> list[MemoryRecord]:
    """Deterministic records of skewed vocabulary (some words common, most rare), some Chinese."""
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(_WORDS))]
    out = []
    for i in range(n):
        if i % 7 == 3:
            text = rng.choice(_ZH) + f" {rng.choice(_WORDS)}"
        else:
            text = " ".join(rng.choices(_WORDS, weights, k=rng.randint(3, 12)))
        vec = np.random.default_rng(seed * 1000 + i).standard_normal(dim).astype(np.float32)
        out.append(MemoryRecord(
            content=text.capitalize() + ".", user_id=user_id, tenant_id=tenant_id,
            type=MemoryType.EPISODIC if i % 3 == 0 else MemoryType.SEMANTIC,
            summary="a note" if i % 5 == 0 else None, importance=round(rng.random(), 3),
            created_at=T0 + timedelta(hours=i), updated_at=T0 + timedelta(hours=i),
            embedding=(vec / np.linalg.norm(vec)).tolist(), embedding_model="test-model",
            entities=[_WORDS[i % 5]], metadata={"i": i, "tag": "標籤"},
        ))
    return out


def _text(r: MemoryRecord) -> str:
    return r.content if not r.summary else f"{r.content}\n{r.summary}"


def exact_bm25(records: Sequence[MemoryRecord], query: str, k: int, k1: float = 1.2, b: float = 0.75) -> list[tuple[str, float]]:
    """Okapi BM25 over exactly these records (one user's), the idf floored at 1e-6; best first."""
    docs = {r.memory_id: (Counter(tokenize(_text(r))), len(_text(r))) for r in records}
    n = len(docs)
    avgdl = sum(length for _, length in docs.values()) / n
    terms = set(tokenize(query))
    df = {t: sum(1 for c, _ in docs.values() if t in c) for t in terms}
    idf = {t: max(math.log((n - df[t] + 0.5) / (df[t] + 0.5)), 1e-6) for t in terms}
    scores = {}
    for mid, (counts, length) in docs.items():
        s = sum(idf[t] * counts[t] * (k1 + 1) / (counts[t] + k1 * (1 - b + b * length / avgdl)) for t in terms if counts[t])
        if s > 0:
            scores[mid] = s
    return sorted(scores.items(), key=lambda kv: -kv[1])[:k]


QUERIES = ["tea", "courier parcel", "violin museum tram", "咖啡", "北京 winter", "ferry ticket harbour lamp"]


class RecordStoreTests:
    """The record store's contract: records round-trip, everything is scoped, keyword search is exact BM25."""

    @pytest.fixture
    def record_store(self) -> Callable[[], Any]:
        raise NotImplementedError("override `record_store` with a factory opening the store under test")

    def _insert(self, store: Any, records: Sequence[MemoryRecord]) -> None:
        with store.transaction() as conn:
            store.insert(conn, records)

    def test_records_round_trip_unchanged(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        records = corpus("ana", 12, seed=1)
        self._insert(store, records)
        got = store.get("default", "ana", [r.memory_id for r in records])
        for r in records:
            g = got[r.memory_id]
            assert (g.content, g.summary, g.type, g.metadata, g.entities, g.created_at) == \
                   (r.content, r.summary, r.type, r.metadata, r.entities, r.created_at)
            assert g.embedding == pytest.approx(r.embedding, abs=1e-6)
        assert [r.memory_id for r in store.list("default", "ana")] == [r.memory_id for r in records]

    def test_reads_are_scoped_by_tenant_and_user(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        mine, theirs, other_tenant = corpus("ana", 5, 1), corpus("ben", 4, 2), corpus("ana", 3, 3, tenant_id="acme")
        self._insert(store, mine + theirs + other_tenant)
        assert store.get("default", "ana", [r.memory_id for r in theirs + other_tenant]) == {}
        assert (store.count("default", "ana"), store.count("default", "ben"), store.count("acme", "ana")) == (5, 4, 3)
        assert store.user_ids("default") == ["ana", "ben"]
        hits = store.keyword_search("default", "ana", " ".join(_WORDS), SearchFilters(), 50)
        assert {m for m, _ in hits} <= {r.memory_id for r in mine}

    def test_keyword_search_is_exact_per_user_bm25(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        mine = corpus("ana", 80, seed=4)
        self._insert(store, mine + corpus("ben", 60, seed=5))  # ben's words must not shift ana's statistics
        for query in QUERIES:
            expected = exact_bm25(mine, query, 10)
            got = store.keyword_search("default", "ana", query, SearchFilters(), 10)
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9), query
            # ids agree up to the order of exactly tied scores
            assert {m for m, _ in got} == {m for m, _ in expected} or \
                   sorted(s for _, s in got) == pytest.approx(sorted(s for _, s in expected), rel=1e-9)

    def test_keyword_search_applies_filters_before_ranking(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        mine = corpus("ana", 60, seed=6)
        self._insert(store, mine)
        # a filter most of the best matches pass, and one that passes only the oldest few of them
        for f in (SearchFilters.coerce({"types": ["episodic"], "created_after": (T0 + timedelta(hours=10)).isoformat()}),
                  SearchFilters.coerce({"created_before": (T0 + timedelta(hours=8)).isoformat()})):
            admitted = {r.memory_id for r in mine if f.admits(r)}
            for query in QUERIES:
                expected = [(m, s) for m, s in exact_bm25(mine, query, 100) if m in admitted][:5]
                got = store.keyword_search("default", "ana", query, f, 5)
                assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)
                assert {m for m, _ in got} <= admitted

    def test_keyword_statistics_follow_every_change(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        records = corpus("ana", 30, seed=7)
        self._insert(store, records)
        changed = records[0]
        changed.content = "The kiosk keeps parcels now, 咖啡 too."
        with store.transaction() as conn:
            store.replace(conn, changed)
            store.purge(conn, [records[1].memory_id, records[2].memory_id], tenant_id="default")
        alive = [changed] + records[3:]
        tokens = ["parcel", "kiosk", "咖啡", "tea", "absent"]
        mean_len, df = store.keyword_stats("default", "ana", tokens)
        assert df == {t: sum(t in set(tokenize(_text(r))) for r in alive) for t in tokens}
        assert mean_len == pytest.approx(sum(len(_text(r)) for r in alive) / len(alive))
        for query in QUERIES + ["kiosk"]:
            got = store.keyword_search("default", "ana", query, SearchFilters(statuses=tuple(Status)), 10)
            assert [s for _, s in got] == pytest.approx([s for _, s in exact_bm25(alive, query, 10)], rel=1e-9)

    def test_keyword_search_stays_exact_when_changes_follow_searches(self, record_store: Callable[[], Any]) -> None:
        """Searches first, then inserts, rewrites and purges: whatever a store keeps of its postings
        between searches (a cache) follows every committed change, and a rolled-back one leaves no trace."""
        store = record_store()
        alive = corpus("ana", 50, seed=11)
        self._insert(store, alive + corpus("ben", 30, seed=12))
        tokens = sorted({t for q in QUERIES for t in tokenize(q)})

        def check() -> None:
            for query in QUERIES:
                got = store.keyword_search("default", "ana", query, SearchFilters(statuses=tuple(Status)), 10)
                assert [s for _, s in got] == pytest.approx([s for _, s in exact_bm25(alive, query, 10)], rel=1e-9), query
            mean_len, df = store.keyword_stats("default", "ana", tokens)
            assert df == {t: sum(t in set(tokenize(_text(r))) for r in alive) for t in tokens}
            assert mean_len == pytest.approx(sum(len(_text(r)) for r in alive) / len(alive))
            assert store.user_count("default", "ana") == len(alive)

        check()
        more = corpus("ana", 70, seed=13)[50:]
        self._insert(store, more)
        alive += more
        check()
        changed = alive[3]
        changed.content = "Tea at the ferry kiosk, 咖啡 for the courier."
        with store.transaction() as conn:
            store.replace(conn, changed)
            store.purge(conn, [alive[5].memory_id, alive[60].memory_id], tenant_id="default")
        alive = [r for i, r in enumerate(alive) if i not in (5, 60)]
        check()
        with pytest.raises(RuntimeError), store.transaction() as conn:
            store.insert(conn, corpus("ana", 5, seed=14))
            raise RuntimeError("rolled back")
        check()

    def test_acknowledged_writes_survive_reopening(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        records = corpus("ana", 10, seed=8)
        self._insert(store, records)
        with store.transaction() as conn:
            store.set_meta(conn, "embedder", "a")
            store.set_meta(conn, "embedder", "b")
        store.close()
        again = record_store()
        assert again.count("default", "ana") == 10 and again.get_meta("embedder") == "b"
        assert {m for m, _ in again.keyword_search("default", "ana", "tea coffee", SearchFilters(), 50)} == \
               {m for m, _ in exact_bm25(records, "tea coffee", 50)}

    def test_outbox_lists_unindexed_records_until_marked(self, record_store: Callable[[], Any]) -> None:
        store = record_store()
        records = corpus("ana", 6, seed=9)
        self._insert(store, records)
        assert [r.memory_id for _, r in store.unindexed()] == [r.memory_id for r in records]
        store.mark_indexed([r.memory_id for r in records[:4]])
        assert [r.memory_id for _, r in store.unindexed()] == [r.memory_id for r in records[4:]]


def _brute(records: Sequence[MemoryRecord], q: np.ndarray, f: SearchFilters, k: int) -> list[str]:
    admitted = [r for r in records if f.admits(r)]
    scores = np.asarray([r.embedding for r in admitted], dtype=np.float32) @ q
    return [admitted[i].memory_id for i in np.argsort(-scores, kind="stable")[:k]]


FILTERS = [
    SearchFilters(),
    SearchFilters.coerce({"types": ["episodic"]}),
    SearchFilters.coerce({"created_after": (T0 + timedelta(hours=5)).isoformat(),
                          "created_before": (T0 + timedelta(hours=30)).isoformat()}),
    SearchFilters(min_importance=0.5),
]


class VectorIndexTests:
    """The vector index's contract: exact filtered search per scope, writes visible at once, no flush needed."""

    DIM = 16

    @pytest.fixture
    def vector_index(self) -> Callable[..., Any]:
        raise NotImplementedError("override `vector_index` with a factory(partition_per_user=...) of the index")

    @pytest.mark.parametrize("partition_per_user", [True, False], ids=["partitions", "filters"])
    def test_filtered_search_equals_brute_force(self, vector_index: Callable[..., Any], partition_per_user: bool) -> None:
        index = vector_index(partition_per_user=partition_per_user)
        users = {u: corpus(u, 40, seed=s) for s, u in enumerate(["ana", "ben", "chen"], start=20)}
        index.upsert([r for rs in users.values() for r in rs])
        rng = np.random.default_rng(0)
        for user, records in users.items():
            for f in FILTERS:
                q = rng.standard_normal(self.DIM).astype(np.float32)
                q /= np.linalg.norm(q)
                got = [h.memory_id for h in index.search("default", user, q, 8, f)]
                assert got == _brute(records, q, f, 8)

    def test_writes_and_deletes_are_visible_at_once(self, vector_index: Callable[..., Any]) -> None:
        index = vector_index()
        records = corpus("ana", 10, seed=30)
        index.upsert(records)
        q = np.asarray(records[3].embedding, dtype=np.float32)
        assert index.search("default", "ana", q, 1, SearchFilters())[0].memory_id == records[3].memory_id
        index.delete([records[3].memory_id])
        assert records[3].memory_id not in {h.memory_id for h in index.search("default", "ana", q, 10, SearchFilters())}
        assert index.count() == 9 and index.ids() == {r.memory_id for r in records} - {records[3].memory_id}
        moved = records[4]
        moved.embedding = records[3].embedding  # an upsert replaces the vector
        index.upsert([moved])
        assert index.search("default", "ana", q, 1, SearchFilters())[0].memory_id == moved.memory_id
        assert index.count() == 9

    def test_many_users_without_partitions_see_only_their_own(self, vector_index: Callable[..., Any]) -> None:
        index = vector_index(partition_per_user=False)
        users = {f"user-{i}": corpus(f"user-{i}", 3, seed=100 + i) for i in range(40)}
        index.upsert([r for rs in users.values() for r in rs])
        for user, records in list(users.items())[::7]:
            q = np.asarray(records[0].embedding, dtype=np.float32)
            hits = index.search("default", user, q, 10, SearchFilters())
            assert [h.memory_id for h in hits] == _brute(records, q, SearchFilters(), 10)
        near = index.nearest(users["user-1"] + users["user-2"], k=2)
        assert all({h.memory_id for h in near[r.memory_id]} <= {x.memory_id for x in users[r.user_id]}
                   for r in users["user-1"] + users["user-2"])

    def test_milvus_lite_is_flushed_in_batches(self, vector_index: Callable[..., Any]) -> None:
        index = vector_index()
        if not index.lite:
            pytest.skip("a Milvus server seals its segments itself; a flush there costs seconds")
        records = corpus("ana", index.FLUSH_EVERY + 10, seed=50)
        for start in range(0, len(records), 500):
            index.upsert(records[start:start + 500])
        # unflushed rows are converted again on every search: they must not pile up
        assert index.unflushed < index.FLUSH_EVERY and index.count() == len(records)

    def test_index_survives_reopening(self, vector_index: Callable[..., Any]) -> None:
        index = vector_index()
        records = corpus("ana", 12, seed=40)
        index.upsert(records)
        index.close()
        again = vector_index()
        assert again.count() == 12
        q = np.asarray(records[5].embedding, dtype=np.float32)
        assert again.search("default", "ana", q, 1, SearchFilters())[0].memory_id == records[5].memory_id
