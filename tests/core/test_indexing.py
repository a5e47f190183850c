"""Durable writes with background indexing: what a save acknowledges at once, what the indexer adds,
the group commit of many users' saves, read-your-writes, the lag figures and the query cache."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from portamem import Memory, Settings, Status
from portamem.errors import IndexingTimeoutError, ValidationError
from portamem.write.requests import SaveRequest


class GatedEmbedder:
    """The real embedder, with passage embedding held until ``gate`` is set (the indexer falls behind)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.gate = threading.Event()
        self.calls: list[tuple[str, int]] = []

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        self.calls.append((kind, len(texts)))
        if kind == "passage":
            self.gate.wait()
        return self.inner.embed(texts, kind=kind)


@pytest.fixture
def gated(tmp_path, embedder):  # noqa: ANN001, ANN201
    emb = GatedEmbedder(embedder)
    mem = Memory(settings=Settings(path=str(tmp_path / "s"), search_wait_s=0.0, index_wait_s=5.0), embedder=emb)
    yield mem, emb
    emb.gate.set()
    mem.close()


def test_a_save_is_committed_and_keyword_searchable_before_it_is_embedded(gated) -> None:  # noqa: ANN001
    mem, emb = gated
    rec = mem.save_memory("The spare key is under the blue flower pot.", user_id="u")
    assert rec.embedding is None and mem.get_memory(rec.memory_id, user_id="u").status is Status.ACTIVE
    hits = mem.search_memory("spare key flower pot", user_id="u", sources=["keyword"], weights={"keyword": 1.0})
    assert [h.memory_id for h in hits] == [rec.memory_id]
    stats = mem.stats()
    assert stats.pending == 1 and stats.oldest_pending_s > 0 and mem.store.outbox_size() == 1
    assert rec.memory_id not in mem.index.ids()
    emb.gate.set()
    mem.flush()
    assert rec.memory_id in mem.index.ids() and mem.get_memory(rec.memory_id, user_id="u").embedding is not None
    after = mem.stats()
    assert after.pending == 0 and after.indexed_total == 1 and after.indexed_per_s > 0


def test_wait_true_times_out_with_a_typed_error_and_the_record_kept(gated) -> None:  # noqa: ANN001
    mem, emb = gated
    mem.settings = mem.settings.replace(index_wait_s=0.3)
    with pytest.raises(IndexingTimeoutError):
        mem.save_memory("The bins go out on Thursday evening.", user_id="u", wait=True)
    assert len(mem.list_memories(user_id="u")) == 1
    with pytest.raises(IndexingTimeoutError):
        mem.flush(timeout=0.2)
    emb.gate.set()
    mem.flush()
    assert mem.stats().pending == 0


def test_a_search_finds_the_users_queued_writes_by_meaning_without_waiting_for_the_indexer(stuck, embedder) -> None:  # noqa: ANN001,E501
    mem, emb, gate = stuck
    texts = [f"Flight LH{400 + i} to Lisbon boards at gate B{i}." for i in range(6)] + [
        "My dentist appointment moved to Friday at noon.", "我的牙医预约改到了星期五中午。"]
    saved = mem.save_memories(texts, user_id="u")
    started = time.perf_counter()
    hits = mem.search_memory("When do I see the dentist?", user_id="u", top_k=2,
                             sources=["vector"], weights={"vector": 1.0})
    assert time.perf_counter() - started < 5
    assert {h.memory_id for h in hits} == {saved[-2].memory_id, saved[-1].memory_id}  # by meaning, unindexed
    assert mem.stats().pending == len(texts) + 1
    zh = mem.search_memory("牙医什么时候？", user_id="u", top_k=1, sources=["vector"], weights={"vector": 1.0})
    assert zh[0].memory_id in {saved[-2].memory_id, saved[-1].memory_id}
    other = mem.search_memory("dentist", user_id="someone else", sources=["vector"])
    assert not {h.memory_id for h in other} & {r.memory_id for r in saved}  # never another user's rows
    gate.set()
    mem.flush(30)
    assert mem.stats().pending == 0
    embedded = emb.passages()
    assert all(embedded.count(t) == 1 for t in texts)  # handed over to the indexer, not embedded again
    stored = mem.get_memory(saved[-2].memory_id, user_id="u").embedding
    assert np.allclose(stored, embedder.embed([texts[-2]], kind="passage")[0], atol=1e-5)
    hits = mem.search_memory("When do I see the dentist?", user_id="u", top_k=1, sources=["vector"],
                             weights={"vector": 1.0})
    assert hits[0].memory_id in {saved[-2].memory_id, saved[-1].memory_id}


def test_a_search_set_to_wait_sees_the_review_of_the_users_writes(tmp_path, embedder) -> None:  # noqa: ANN001
    mem = Memory(settings=Settings(path=str(tmp_path / "s"), search_wait_s=10.0), embedder=embedder)
    with mem:
        mem.save_memory("My budget is 5000 euros.", user_id="u")
        mem.save_memory("My budget is 8000 euros.", user_id="u")
        hits = mem.search_memory("What is my budget?", user_id="u")
        assert [h.record.content for h in hits][:1] == ["My budget is 8000 euros."]
        assert mem.stats().pending == 0


def test_save_many_commits_many_users_at_once_and_refuses_bad_requests_alone(memory: Memory) -> None:
    commits = []
    real = memory.store.transaction

    def counting():  # noqa: ANN202
        commits.append(1)
        return real()

    memory.store.transaction = counting  # type: ignore[method-assign]
    try:
        results = memory.save_many([
            SaveRequest("ana", ["Ana's library card expires in March.", "Ana takes the 7:40 bus."]),
            SaveRequest("ben", ["Ben's bike lock code is 3391."], tenant_id="acme"),
            SaveRequest("", ["no user"]),
            SaveRequest("ana", [{"content": "x", "importance": 7}]),
            SaveRequest("chen", ["陈先生对花生过敏。"]),
        ])
    finally:
        memory.store.transaction = real  # type: ignore[method-assign]
    assert len(commits) == 1  # one transaction for every valid request
    assert [r.ok for r in results] == [True, True, False, False, True]
    assert all(isinstance(r.error, ValidationError) for r in results if not r.ok)
    assert [len(r.records) for r in results] == [2, 1, 0, 0, 1]
    memory.flush()
    assert [r.content for r in memory.list_memories(user_id="ana")] == [
        "Ana's library card expires in March.", "Ana takes the 7:40 bus."]
    assert memory.list_memories(user_id="ben") == []  # another tenant
    assert len(memory.list_memories(user_id="ben", tenant_id="acme")) == 1
    hit = memory.search_memory("花生", user_id="chen")[0]
    assert hit.memory_id == results[4].records[0].memory_id and hit.record.embedding is not None
    with pytest.raises(ValidationError):
        memory.save_many("ana")  # type: ignore[arg-type]


def test_a_repeated_query_is_embedded_once(tmp_path, embedder) -> None:  # noqa: ANN001
    emb = GatedEmbedder(embedder)
    emb.gate.set()
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=emb) as mem:
        mem.save_memory("The gym closes at ten on Saturdays.", user_id="u", wait=True)
        for _ in range(3):
            assert mem.search_memory("When does the gym close?", user_id="u")
        assert [c for c in emb.calls if c[0] == "query"] == [("query", 1)]


class SlowQueries:
    """The real embedder; each query embedding takes a while and is counted (many users asking at once)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.queries: list[str] = []

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        if kind == "query":
            self.queries.extend(texts)
            time.sleep(0.2)
        return self.inner.embed(texts, kind=kind)


def test_the_same_new_question_asked_at_once_is_embedded_once(embedder) -> None:  # noqa: ANN001
    from portamem.embedding.embedders import QueryCache

    slow = SlowQueries(embedder)
    cache = QueryCache(slow, size=16)  # type: ignore[arg-type]
    got: list[tuple[str, np.ndarray]] = []
    threads = [threading.Thread(target=lambda q=q: got.append((q, cache.get(q))))
               for q in ["where is my hotel?"] * 8 + ["我的酒店在哪里？"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(slow.queries) == sorted(["where is my hotel?", "我的酒店在哪里？"])
    assert len(got) == 12 and cache.misses == 2 and cache.hits == 10
    for q, vec in got:
        assert np.allclose(vec, embedder.embed([q], kind="query")[0], atol=1e-5)


class SlowPassages:
    """The real embedder; each passage call takes a while, and every call is noted (threads asking at once)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        self.calls.append(list(texts))
        time.sleep(0.2)
        if "broken" in texts:
            raise RuntimeError("the model failed")
        return self.inner.embed(texts, kind=kind)


def test_passages_asked_for_at_once_go_to_the_embedder_in_one_call(embedder) -> None:  # noqa: ANN001
    from portamem.embedding.embedders import PassageBatcher

    slow = SlowPassages(embedder)
    batcher = PassageBatcher(slow, max_texts=64)  # type: ignore[arg-type]
    asks = [[f"note {i} about the garden"] * (1 + i % 3) for i in range(7)] + [["我的花园需要浇水。"]]
    got: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i, texts=texts: got.__setitem__(i, batcher.embed(texts)))
               for i, texts in enumerate(asks)]
    for t in threads:
        t.start()
        time.sleep(0.01)  # the first is embedding alone when the others arrive
    for t in threads:
        t.join()
    assert len(slow.calls) == 2 and slow.calls[0] == asks[0]  # the first alone, all the others together
    for i, texts in enumerate(asks):
        assert got[i].shape == (len(texts), embedder.dim)
        assert np.allclose(got[i], embedder.embed(texts, kind="passage"), atol=1e-5)
    errors: list[BaseException] = []

    def failing(texts: list[str]) -> None:
        try:
            batcher.embed(texts)
        except RuntimeError as exc:
            errors.append(exc)

    pair = [threading.Thread(target=failing, args=(texts,)) for texts in (["broken"], ["fine"])]
    for t in pair:
        t.start()
    for t in pair:
        t.join()
    assert len(errors) in (1, 2) and batcher.embed(["still works"]).shape == (1, embedder.dim)


def test_vector_index_writes_not_yet_applied_are_searched_and_survive_a_kill(tmp_path, embedder,
                                                                               monkeypatch) -> None:  # noqa: ANN001
    """The embedded index is written off the indexer's path: a user served by the index (not the
    replica) finds noted writes at once, a forget hides them at once, and a process killed before
    they were applied leaves a marker that makes the next open repair the index from the records."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    from portamem.storage.vectors import MilvusVectorIndex

    monkeypatch.setattr(MilvusVectorIndex, "WRITE_DELAY_S", 3600.0)
    monkeypatch.setattr(MilvusVectorIndex, "WRITE_BATCH", 10**6)
    settings = Settings(path=str(tmp_path / "s"), replica_budget_mb=0)  # every vector search asks the index
    with Memory(settings=settings, embedder=embedder) as mem:
        kept, gone = mem.save_memories(["The spare key is under the blue flowerpot.",
                                        "The wifi password is on the fridge."], user_id="u")
        mem.flush()
        assert mem.index.noted == 2 and mem.index.recovering is False
        hits = mem.search_memory("where is the spare key?", user_id="u", top_k=1, sources=["vector"])
        assert [h.memory_id for h in hits] == [kept.memory_id]
        mem.forget_memory([gone.memory_id], user_id="u")
        hits = mem.search_memory("the wifi password", user_id="u", top_k=2, sources=["vector"])
        assert gone.memory_id not in [h.memory_id for h in hits]
    with Memory(settings=settings, embedder=embedder) as mem:  # closing applied them
        assert mem.index.ids() == {kept.memory_id} and not os.path.exists(mem.index.uri + ".pending")

    writer = textwrap.dedent("""
        import sys
        from portamem import Memory, Settings
        from portamem.storage.vectors import MilvusVectorIndex
        MilvusVectorIndex.WRITE_DELAY_S = 3600.0
        MilvusVectorIndex.WRITE_BATCH = 10**6
        mem = Memory(settings=Settings(path=sys.argv[1]))
        old = mem.save_memories([f"Shelf {i} holds the cookbooks of member {i}." for i in range(6)], user_id="v")
        mem.flush()
        mem.index.flush()  # applied
        mem.forget_memory([r.memory_id for r in old], user_id="v")
        recs = mem.save_memories([f"Locker {i} holds the tennis racket of member {i}." for i in range(6)], user_id="v")
        mem.flush()  # the index holds as many rows as the records say, the wrong ones: only the marker tells
        print(mem.index.noted, " ".join(r.memory_id for r in recs), flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", writer, settings.path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        noted, *ids = proc.stdout.readline().split()  # type: ignore[union-attr]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert int(noted) == 12
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.flush()
        assert mem.index.ids() == {kept.memory_id, *ids} and mem.index.recovering is False
        assert not os.path.exists(mem.index.uri + ".pending")


def test_the_vector_writer_seals_milvus_lite_by_itself(tmp_path, embedder, monkeypatch) -> None:  # noqa: ANN001
    """The background writer flushes milvus-lite every FLUSH_EVERY writes on its own thread (it once
    waited there for its own batch)."""
    from portamem.storage.vectors import MilvusVectorIndex

    monkeypatch.setattr(MilvusVectorIndex, "FLUSH_EVERY", 3)
    monkeypatch.setattr(MilvusVectorIndex, "WRITE_DELAY_S", 0.05)
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder) as mem:
        mem.save_memories([f"Parcel {i} waits at locker {i + 10}." for i in range(8)], user_id="u")
        mem.flush()
        mem.index.drain(timeout=30)
        assert mem.index.unflushed < 3 and mem.index.count() == 8


def test_the_outbox_is_read_by_its_index_not_by_walking_the_table(memory: Memory) -> None:
    """The indexer reads its outbox every round: by the outbox's own index, never a walk of every row
    after a key (which the planner chose to spare the sort, the whole table on each round)."""
    import sqlalchemy as sa

    for i in range(40):
        memory.save_memory(f"My thing {i} is kept in box {i}.", user_id="u1")
    memory.flush()
    seen: list[str] = []

    def trace(dbapi_conn, record, proxy) -> None:
        dbapi_conn.set_trace_callback(seen.append)

    sa.event.listen(memory.store.engine, "checkout", trace)
    try:
        assert memory.store.outbox(16, after=0) == []
    finally:
        sa.event.remove(memory.store.engine, "checkout", trace)
    with memory.store.engine.connect() as conn:
        db = conn.connection.dbapi_connection
        db.set_trace_callback(None)
        plans = [row[3] for sql in seen if sql.lstrip().upper().startswith("SELECT")
                 for row in db.execute("EXPLAIN QUERY PLAN " + sql).fetchall()]
    assert plans and any("ix_memories_unindexed" in p for p in plans), plans
    assert not any(p.startswith("SCAN memories") or "PRIMARY KEY (rowid>?)" in p for p in plans), plans
