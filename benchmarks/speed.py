"""Speed and memory of the embedded default: save and search latency at N memories, encode rate.

Each figure is printed beside a baseline measured in the same run on the same machine:
- encode: the embedder alone (what a save cannot beat);
- search: exact numpy brute force over the user's vectors plus the query embedding (the physical limit);
- save: the embedding of the same text alone.

The store is filled through the public import path with random unit vectors labelled with the
current model, so filling 100k records takes minutes, not hours of embedding.

    python benchmarks/speed.py --n 10000
    python benchmarks/speed.py --n 100000 --embedder use-multilingual-v3
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone

import numpy as np

from portamem import Memory, Settings
from portamem.embeddings import get_embedder
from portamem.portable import export_lines
from portamem.records import MemoryRecord

WORDS = ("order invoice parcel coffee tea flight hotel meeting doctor school garden budget contract "
         "birthday allergy train museum recipe bicycle piano holiday").split()
CITIES = ["Berlin", "Lyon", "Graz", "Porto", "Osaka", "Hangzhou", "Quito", "Tartu"]
ZH = ["我喜欢喝乌龙茶", "明天去杭州出差", "订单已经确认", "周五下午开会", "孩子下个月开学"]


def _rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _text(rng: random.Random, i: int) -> str:
    if i % 5 == 0:
        return f"{rng.choice(ZH)}，编号 ZX-{i:06d}。"
    return (f"The {rng.choice(WORDS)} for {rng.choice(CITIES)} is ref ORD-{i:06d}, "
            f"about {rng.choice(WORDS)} and {rng.choice(WORDS)}.")


def _fill(mem: Memory, n: int, user: str, rng: random.Random) -> np.ndarray:
    """Import n records with random unit vectors of the current model; returns the vectors."""
    vectors = np.random.default_rng(0).standard_normal((n, mem.embedder.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    header = {"embedding_model": mem.embedder.name, "embedding_dim": mem.embedder.dim}
    start = datetime.now(timezone.utc) - timedelta(days=400)
    for lo in range(0, n, 5000):
        records = [MemoryRecord(content=_text(rng, i), user_id=user, embedding=vectors[i].tolist(),
                                embedding_model=mem.embedder.name, embedding_version=mem.embedder.version,
                                created_at=start + timedelta(minutes=5 * i)).to_dict()
                   for i in range(lo, min(n, lo + 5000))]
        mem.import_(io.StringIO("".join(export_lines(header, records))))
    mem.index.flush()
    return vectors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="memories of the searched user")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--saves", type=int, default=100)
    ap.add_argument("--embedder", default=Settings().embedder)
    args = ap.parse_args()
    rng = random.Random(7)
    embedder = get_embedder(args.embedder)
    rows: list[tuple[str, float, str, float, str]] = []

    sample = [_text(rng, i) for i in range(256)]
    t = time.perf_counter()
    embedder.embed(sample[:64])
    batch_rate = 64 / (time.perf_counter() - t)
    singles = []
    for text in sample[64:128]:
        t = time.perf_counter()
        embedder.embed([text], kind="query")
        singles.append((time.perf_counter() - t) * 1000)
    rows.append(("encode, batch 64 (texts/s)", batch_rate, "-", float("nan"), ""))
    rows.append(("encode, one query p50 (ms)", statistics.median(singles), "-", float("nan"), ""))

    with tempfile.TemporaryDirectory() as tmp:
        rss0 = _rss_mb()
        mem = Memory(settings=Settings(path=tmp, embedder=args.embedder), embedder=embedder)
        t = time.perf_counter()
        vectors = _fill(mem, args.n, "bench", rng)
        fill_s = time.perf_counter() - t
        rss1 = _rss_mb()
        for u in range(20):  # other users share the collection, as in production
            mem.save_memories([_text(rng, 10_000_000 + u * 10 + j) for j in range(5)], user_id=f"other{u}")

        queries = [f"{rng.choice(WORDS)} {rng.choice(CITIES)} ORD-{rng.randrange(args.n):06d}" for _ in range(args.queries)]
        lat, base = [], []
        for q in queries:
            t = time.perf_counter()
            mem.search_memory(q, user_id="bench", top_k=10)
            lat.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            qv = embedder.embed([q], kind="query")[0]
            top = np.argpartition(-(vectors @ qv), 10)[:10]
            base.append((time.perf_counter() - t) * 1000)
            assert len(top) == 10
        rows.append((f"search p50 at {args.n:,} (ms)", statistics.median(lat), "numpy brute force + embed",
                     statistics.median(base), "ms"))
        rows.append((f"search p99 at {args.n:,} (ms)", _pct(lat, 0.99), "numpy brute force + embed",
                     _pct(base, 0.99), "ms"))

        save_lat, emb_lat = [], []
        for i in range(args.saves):
            text = _text(rng, 20_000_000 + i)
            t = time.perf_counter()
            mem.save_memory(text, user_id="bench")
            save_lat.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            embedder.embed([text])
            emb_lat.append((time.perf_counter() - t) * 1000)
        rows.append(("save_memory p50 (ms)", statistics.median(save_lat), "embed alone", statistics.median(emb_lat), "ms"))
        rows.append(("save_memory p99 (ms)", _pct(save_lat, 0.99), "embed alone", _pct(emb_lat, 0.99), "ms"))

        texts = [_text(rng, 30_000_000 + i) for i in range(500)]
        t = time.perf_counter()
        for lo in range(0, len(texts), 100):
            mem.save_memories(texts[lo:lo + 100], user_id="batch")
        write_rate = len(texts) / (time.perf_counter() - t)
        t = time.perf_counter()
        for lo in range(0, len(texts), 100):
            embedder.embed(texts[lo:lo + 100])
        embed_rate = len(texts) / (time.perf_counter() - t)
        rows.append(("batched writes, 100/call (memories/s)", write_rate, "embed alone", embed_rate, "/s"))
        mem.close()

    print(f"portamem speed, embedder {embedder.name}, {os.cpu_count()} CPUs; store filled with "
          f"{args.n:,} records in {fill_s:.1f} s; RSS +{rss1 - rss0:.0f} MB "
          f"(~{(rss1 - rss0) * 100_000 / max(1, args.n):.0f} MB per 100k records)")
    print(f"{'figure':<40} {'portamem':>10}   {'baseline':<28} {'value':>9} {'ratio':>7}")
    for name, value, bname, bvalue, _ in rows:
        ratio = value / bvalue if bvalue == bvalue and bvalue else float("nan")
        bshown = "" if bvalue != bvalue else f"{bvalue:9.2f}"
        print(f"{name:<40} {value:10.2f}   {bname:<28} {bshown:>9} {ratio:7.2f}")


if __name__ == "__main__":
    main()
