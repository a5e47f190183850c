"""Storage backends side by side: SQLite + milvus-lite, PostgreSQL + milvus-lite server, PostgreSQL + Milvus 2.3.5.

For one user holding ``--n`` memories (synthetic texts of a skewed vocabulary, a seventh of them
Chinese, with precomputed random unit vectors so that embedding cost does not hide the stores):

- write throughput: the bulk load as the indexer writes it, in batches of 500 records committed to
  the record store (with their keyword and entity rows) and upserted into the vector index;
- save latency: single ``Memory.save_memory`` calls on the loaded store (the whole write path), p50/p99;
- search latency: the first hybrid search (it loads the user's read replica) alone, then hybrid
  ``Memory.search_memory`` (vector + BM25 + entities) p50/p99 over the queries, and the
  keyword and vector searches of the stores alone;
- keyword agreement: share of the store's keyword top 10 that exact BM25, computed here in Python
  over the same texts, also ranks in its top 10 (a tie with the tenth counts as in it).

Servers are started for the run (``portamem_conformance.servers``) unless their URLs are given. The
Milvus server runs with 10 ms time ticks (``MILVUS_TEST_CONFIG``): a Strong search waits for the next tick.

    python benchmarks/backends.py --n 20000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance_tests"))

from portamem import Memory, MemoryDraft, Settings  # noqa: E402
from portamem.filters import SearchFilters  # noqa: E402
from portamem.records import MemoryRecord  # noqa: E402
from portamem.language.text import tokenize  # noqa: E402
from portamem_conformance import servers  # noqa: E402

DIM = 384
WORDS = [f"w{i}" for i in range(5000)] + "tea coffee parcel courier kiosk garden bicycle river cello bakery".split()
ZH = ["我喜欢在早上喝黑咖啡", "咖啡机昨天坏了", "用户住在北京", "北京的冬天很冷", "周末去公园骑自行车", "茶比咖啡更健康"]


class PrecomputedEmbedder:
    """Vectors looked up by text (random unit vectors for unseen texts): the stores, not a model, are measured."""

    name = "precomputed-random-384"
    version = "1"
    dim = DIM

    def __init__(self) -> None:
        self.table: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            if t not in self.table:
                v = np.random.default_rng(abs(hash(t)) % (1 << 32)).standard_normal(DIM).astype(np.float32)
                self.table[t] = v / np.linalg.norm(v)
            out[i] = self.table[t]
        return out


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    out = []
    for i in range(n):
        words = " ".join(rng.choices(WORDS, weights, k=rng.randint(6, 24)))
        out.append(f"{rng.choice(ZH)} {words} #{i}" if i % 7 == 3 else f"Note {i}: {words}.")
    return out


class ExactBM25:
    """Okapi BM25 over one user's texts with an inverted index (the reference the stores must match)."""

    def __init__(self, docs: dict[str, str]) -> None:
        self.postings: dict[str, list[tuple[str, int]]] = defaultdict(list)
        self.length = {}
        for mid, text in docs.items():
            self.length[mid] = len(text)
            for term, tf in Counter(tokenize(text)).items():
                self.postings[term].append((mid, tf))
        self.n = len(docs)
        self.avgdl = sum(self.length.values()) / self.n

    def scores(self, query: str) -> dict[str, float]:
        scores: dict[str, float] = defaultdict(float)
        for term in set(tokenize(query)):
            plist = self.postings.get(term, [])
            idf = max(math.log((self.n - len(plist) + 0.5) / (len(plist) + 0.5)), 1e-6)
            for mid, tf in plist:
                scores[mid] += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.length[mid] / self.avgdl))
        return scores

    def agreement(self, query: str, got: list[str], k: int = 10) -> float:
        """Share of ``got`` that scores at least the exact k-th best score (ties count as agreeing)."""
        scores = self.scores(query)
        if not scores:
            return 1.0 if not got else 0.0
        kth = sorted(scores.values(), reverse=True)[:k][-1]
        want = min(k, len(scores))
        return sum(1 for m in got if scores.get(m, 0.0) >= kth * (1 - 1e-9)) / want


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


@contextmanager
def backend(name: str, root: Path, args: argparse.Namespace, stack: ExitStack) -> Iterator[Settings]:
    if name == "sqlite+milvus-lite":
        yield Settings(path=str(root / "embedded"), dedupe=False)
        return
    pg = args.postgres_url or stack.enter_context(_server(servers.start_postgres)).url
    if name == "postgres+milvus-lite-server":
        vec = args.milvus_lite_uri or stack.enter_context(_server(servers.start_milvus_lite)).url
    else:
        vec = args.milvus_uri or stack.enter_context(_server(servers.start_milvus)).url
    with servers.fresh_database(pg) as db, servers.fresh_milvus_database(vec) as vu:
        yield Settings(path=str(root / name), db_url=db, vector_uri=vu, dedupe=False, partition_per_user=False)


@contextmanager
def _server(start) -> Iterator[servers.Server]:  # type: ignore[no-untyped-def]
    s = start()
    try:
        yield s
    finally:
        s.stop()


def run_one(settings: Settings, corpus: list[str], queries: list[str], reference: ExactBM25,
            args: argparse.Namespace) -> dict[str, float]:
    emb = PrecomputedEmbedder()
    out: dict[str, float] = {}
    with Memory(settings=settings, embedder=emb) as mem:
        t = time.perf_counter()
        for start in range(0, len(corpus), 500):
            chunk = corpus[start:start + 500]
            records = [MemoryRecord(content=c, user_id="u", memory_id=f"m{start + i:08d}", embedding=v.tolist(),
                                    embedding_model=emb.name, entities=[c.split()[1]])
                       for i, (c, v) in enumerate(zip(chunk, emb.embed(chunk)))]
            with mem.store.transaction() as conn:
                mem.store.insert(conn, records)
            mem.index.upsert(records)
            mem.store.mark_indexed([r.memory_id for r in records])
        out["write_per_s"] = len(corpus) / (time.perf_counter() - t)
        t = time.perf_counter()  # the first search loads the user's read replica from the store
        mem.search_memory(queries[0], user_id="u", top_k=10)
        out["first_search_ms"] = (time.perf_counter() - t) * 1000
        hyb, kw, vec, agree = [], [], [], []
        for q in queries:
            t = time.perf_counter()
            mem.search_memory(q, user_id="u", top_k=10)
            hyb.append(time.perf_counter() - t)
            t = time.perf_counter()
            got = mem.store.keyword_search(mem.tenant_id, "u", q, SearchFilters(), 10)
            kw.append(time.perf_counter() - t)
            qv = emb.embed([q])[0]
            t = time.perf_counter()
            mem.index.search(mem.tenant_id, "u", qv, 10, SearchFilters())
            vec.append(time.perf_counter() - t)
            agree.append(reference.agreement(q, [m for m, _ in got]))
        out["search_p50_ms"], out["search_p99_ms"] = pct(hyb, 0.5), pct(hyb, 0.99)
        out["keyword_p50_ms"], out["keyword_p99_ms"] = pct(kw, 0.5), pct(kw, 0.99)
        out["vector_p50_ms"], out["vector_p99_ms"] = pct(vec, 0.5), pct(vec, 0.99)
        out["keyword_agreement"] = statistics.mean(agree)
        lat = []
        for i in range(args.saves):
            t = time.perf_counter()
            mem.save_memory(f"Fresh note {i} about the kiosk and parcel number {i * 7}.", user_id="u")
            lat.append(time.perf_counter() - t)
        out["save_p50_ms"], out["save_p99_ms"] = pct(lat, 0.5), pct(lat, 0.99)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="memories of the one user (default 100000)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--saves", type=int, default=300)
    ap.add_argument("--backends", default="sqlite+milvus-lite,postgres+milvus-lite-server,postgres+milvus")
    ap.add_argument("--postgres-url")
    ap.add_argument("--milvus-lite-uri")
    ap.add_argument("--milvus-uri")
    ap.add_argument("--out", default=str(HERE / "results" / "backends.json"))
    args = ap.parse_args()
    corpus = texts(args.n)
    rng = random.Random(3)
    queries = [" ".join(rng.sample(WORDS[:400], 2) + [rng.choice(WORDS)]) for _ in range(args.queries - args.queries // 5)]
    queries += [rng.choice(ZH)[:4] + " " + rng.choice(WORDS[:50]) for _ in range(args.queries // 5)]
    # searches run before the single saves, so the reference holds exactly the loaded texts
    reference = ExactBM25({f"m{i:08d}": t for i, t in enumerate(corpus)})
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        for name in args.backends.split(","):
            print(f"{name}: loading {args.n} memories ...", file=sys.stderr, flush=True)
            with backend(name, Path(tmp), args, stack) as settings:
                results[name] = run_one(settings, corpus, queries, reference, args)
            print(f"{name}: {json.dumps({k: round(v, 3) for k, v in results[name].items()})}", file=sys.stderr, flush=True)
    names = list(results)
    print(f"\n{args.n} memories of one user, {args.queries} queries, {args.saves} single saves\n")
    print(f"{'':22}" + "".join(f"{n:>30}" for n in names))
    for key in results[names[0]]:
        print(f"{key:22}" + "".join(f"{results[n][key]:>30.3f}" for n in names))
    base = names[0]
    for n in names[1:]:
        print(f"ratio {n} / {base}: save p50 {results[n]['save_p50_ms'] / results[base]['save_p50_ms']:.2f}, "
              f"search p50 {results[n]['search_p50_ms'] / results[base]['search_p50_ms']:.2f}, "
              f"write/s {results[n]['write_per_s'] / results[base]['write_per_s']:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"n": args.n, "queries": args.queries, "saves": args.saves, "results": results},
                                         indent=2))


if __name__ == "__main__":
    main()
