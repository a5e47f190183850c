"""Four processes write and search one shared store on servers at once: no lock, nothing lost, order kept,
and their indexers, draining one outbox, never index a row twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from portamem_conformance.backends import exact_bm25
from portamem_conformance.fixtures import Backend

from portamem import Memory
from portamem.filters import SearchFilters
from portamem.records import Status
from portamem.storage.schema import keyword_text
from portamem.language.text import tokenize

PROCESSES = 4
WRITES = 12

_WRITER = r"""
import json, sys
from portamem import Memory, Settings
from portamem.embedding.embedders import get_embedder
worker, db_url, vector_uri, writes = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
settings = Settings(path=sys.argv[5], db_url=db_url, vector_uri=vector_uri, dedupe=False, partition_per_user=False)
seen = 0
with Memory(settings=settings, embedder=get_embedder("use-multilingual-v3")) as mem:
    print("open", flush=True)
    sys.stdin.readline()  # start together
    for i in range(writes):
        mem.save_memory(f"Worker {worker} note {i}: the parcel for desk {worker * 100 + i} waits at the kiosk.",
                        user_id=f"own-{worker}")
        # a user every worker writes to: its keyword counters are updated by four writers at once
        mem.save_memory(f"Shared ledger line {worker}-{i} about tea and parcels 共享账本", user_id="shared")
        seen += len(mem.search_memory("parcel kiosk", user_id=f"own-{worker}", top_k=3))
print(json.dumps({"worker": worker, "seen": seen, "indexed": mem.stats().indexed_total}))
"""


@pytest.mark.skipif(os.environ.get("PORTAMEM_TEST_BACKEND", "sqlite") == "sqlite",
                    reason="a shared store needs database and vector servers")
def test_four_processes_share_one_store(backend: Backend, tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    db_url, vector_uri = backend.urls(tmp_path / "shared")
    assert db_url and vector_uri
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(w), db_url, vector_uri, str(WRITES), str(tmp_path / "shared")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(PROCESSES)
    ]
    try:
        for p in procs:  # every process has opened (and created or found the schema) before any writes
            assert p.stdout is not None and p.stdout.readline().strip() == "open", p.stderr and p.stderr.read()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
    indexed = 0
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["seen"] > 0
        indexed += report["indexed"]

    from portamem import Settings

    settings = Settings(path=str(tmp_path / "shared"), db_url=db_url, vector_uri=vector_uri, partition_per_user=False)
    from portamem.embedding.embedders import get_embedder

    with Memory(settings=settings, embedder=get_embedder("use-multilingual-v3")) as mem:
        for w in range(PROCESSES):
            own = mem.store.list(mem.tenant_id, f"own-{w}")
            assert [r.content.split(":")[0] for r in own] == [f"Worker {w} note {i}" for i in range(WRITES)]
            assert [r.created_at for r in own] == sorted(r.created_at for r in own)
        shared = mem.store.list(mem.tenant_id, "shared")
        assert len(shared) == PROCESSES * WRITES
        for w in range(PROCESSES):  # each writer's lines in its order
            mine = [r.content for r in shared if r.content.startswith(f"Shared ledger line {w}-")]
            assert mine == [f"Shared ledger line {w}-{i} about tea and parcels 共享账本" for i in range(WRITES)]
        # counters written by four transactions at once are exact
        tokens = ["tea", "parcels", "共享", "ledger", "kiosk"]
        _, df = mem.store.keyword_stats(mem.tenant_id, "shared", tokens)
        assert df == {t: sum(t in set(tokenize(keyword_text(r))) for r in shared) for t in tokens}
        got = mem.store.keyword_search(mem.tenant_id, "shared", "tea 共享 line", SearchFilters(), 10)
        assert [s for _, s in got] == pytest.approx([s for _, s in exact_bm25(shared, "tea 共享 line", 10)], rel=1e-9)
        mem.flush()
        # each row was embedded and indexed by exactly one of the indexers (this one takes what is left)
        assert indexed + mem.stats().indexed_total == PROCESSES * WRITES * 2
        # every acknowledged write reached the vector index
        assert mem.index.count() == mem.store.count(filters=SearchFilters(statuses=(Status.ACTIVE,)))
        assert mem.index.ids() == mem.store.all_active_ids()


def _bare_collection(uri: str, name: str, dim: int) -> None:
    """The first of a creator's two calls: the collection, and not yet its vector index."""
    from pymilvus import MilvusClient

    from portamem.storage.vectors import collection_schema

    c = MilvusClient(uri=uri)
    c.create_collection(name, schema=collection_schema(dim), consistency_level="Strong")
    c.close()


@pytest.mark.skipif(os.environ.get("PORTAMEM_TEST_BACKEND", "sqlite") in ("sqlite", "postgres-pgvector"),
                    reason="needs a Milvus server that several processes open at once (pgvector creates its "
                           "table and indexes in one transaction)")
def test_a_collection_found_before_its_index_is_opened(backend: Backend, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that finds the collection between the creator's two calls waits for the index
    (or builds it, if the creator never does) instead of failing to load it."""
    import threading

    from portamem.storage.vectors import MilvusVectorIndex, collection_name

    _, vector_uri = backend.urls(tmp_path / "shared")
    assert vector_uri
    dim = 8
    name = collection_name("bare-test", dim)

    monkeypatch.setattr(MilvusVectorIndex, "INDEX_WAIT_S", 1.0)
    _bare_collection(vector_uri, name, dim)
    orphan = MilvusVectorIndex(vector_uri, model="bare-test", dim=dim, partition_per_user=False)
    try:  # the creator never built the index: the opener built it after waiting
        assert orphan.client.list_indexes(name, field_name="vec")
        assert orphan.search("t", "u", np.eye(dim, dtype=np.float32)[0], 3, SearchFilters()) == []
    finally:
        orphan.close()

    other = collection_name("bare-test-2", dim)
    _bare_collection(vector_uri, other, dim)
    from pymilvus import MilvusClient

    creator = MilvusClient(uri=vector_uri)

    def finish() -> None:
        ip = creator.prepare_index_params()
        ip.add_index(field_name="vec", index_type="FLAT", metric_type="COSINE")
        creator.create_index(other, ip)

    monkeypatch.setattr(MilvusVectorIndex, "INDEX_WAIT_S", 30.0)
    t = threading.Timer(0.5, finish)
    t.start()
    try:
        index = MilvusVectorIndex(vector_uri, model="bare-test-2", dim=dim, partition_per_user=False)
        t.join()
        assert [i for i in index.client.list_indexes(other, field_name="vec")]
        index.close()
    finally:
        t.cancel()
        creator.close()
