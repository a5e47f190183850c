"""Memory of the serving process and of the vector index's process, with the index inline or in a child.

For each ``vector_process`` ("inline": milvus-lite on threads of the serving process; "child": its own
supervised process), a fresh Python process opens an embedded store, fills one user with N memories
(12 words drawn from a Zipf vocabulary, ``null-hash`` vectors by default: RSS does not depend on the model) through the
public import path, then times acknowledged saves and searches. RSS is read after the fill and again
after the searches (the read replica loaded): the serving process's, the index process's (the same
process when inline) and their sum. Both modes run in the same invocation, on the same machine.

    python benchmarks/memory.py --n 20000
    python benchmarks/memory.py --n 100000 --modes child inline
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

#: a vocabulary of 20,000 made-up words drawn with Zipf's law (s = 1.1), so that keyword postings are as
#: long as in real text: a few common words, a long tail
VOCABULARY = ["".join("aeioukmnprstlbdg"[(i * 7 + j * 13 + (i >> j)) % 16] for j in range(3 + i % 6)) + str(i)
              for i in range(20000)]
_CUM: list[float] = []
for _rank in range(1, len(VOCABULARY) + 1):
    _CUM.append((_CUM[-1] if _CUM else 0.0) + 1.0 / _rank ** 1.1)


def _words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(VOCABULARY, cum_weights=_CUM, k=k))


def _rss_mb(pid: int | None = None) -> float:
    """RSS of this process, or of ``pid``."""
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def _index_mb(pid: int | None) -> float:
    """RSS of the index's process; 0 when it is this one (inline)."""
    return _rss_mb(pid) if pid else 0.0


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def one(n: int, mode: str, embedder_name: str, searches: int, saves: int) -> dict[str, object]:
    """Fill, save and search in this process; the figures as a dict."""
    from portamem import Memory, Settings
    from portamem.embedding.embedders import get_embedder
    from portamem.portable.transfer import export_lines
    from portamem.records import MemoryRecord, MemoryType

    rng = random.Random(7)
    emb = get_embedder(embedder_name, workers=0)
    path = tempfile.mkdtemp(prefix=f"pm-mem-{mode}-")
    t0 = time.perf_counter()
    mem = Memory(settings=Settings(path=path, vector_process=mode), embedder=emb)
    opened_s = time.perf_counter() - t0
    child = mem.index.server_pid
    rss0, child0 = _rss_mb(), _index_mb(child)
    header = {"embedding_model": emb.name, "embedding_dim": emb.dim}
    t0 = time.perf_counter()
    for lo in range(0, n, 5000):
        texts = [f"memory {i}: " + _words(rng, 12) for i in range(lo, min(n, lo + 5000))]
        vectors = emb.embed(texts)
        records = [MemoryRecord(content=t, user_id="u", type=MemoryType.EPISODIC, embedding=v.tolist(),
                                embedding_model=emb.name, embedding_version=emb.version).to_dict()
                   for t, v in zip(texts, vectors)]
        mem.import_(io.StringIO("".join(export_lines(header, records))), trusted=True)
    mem.index.flush()
    fill_s = time.perf_counter() - t0
    filled, child_filled = _rss_mb(), _index_mb(child)
    save_ms = []
    for i in range(saves):
        t = time.perf_counter()
        mem.save_memory(f"new note {i} about " + _words(rng, 8), user_id="u")
        save_ms.append((time.perf_counter() - t) * 1000)
    mem.flush()
    search_ms = []
    for i in range(searches):
        q = _words(rng, 4)
        t = time.perf_counter()
        mem.search_memory(q, user_id="u", top_k=10)
        search_ms.append((time.perf_counter() - t) * 1000)
    searched, child_searched = _rss_mb(), _index_mb(child)
    mem.close()
    return {
        "mode": mode, "n": n, "open_s": round(opened_s, 2), "fill_s": round(fill_s, 1),
        "serving_base_mb": round(rss0), "serving_filled_mb": round(filled), "serving_searched_mb": round(searched),
        "index_base_mb": round(child0), "index_filled_mb": round(child_filled), "index_searched_mb": round(child_searched),
        "sum_searched_mb": round(searched + child_searched),
        "save_p50_ms": round(statistics.median(save_ms), 2), "save_p99_ms": round(_pct(save_ms, 0.99), 2),
        "search_p50_ms": round(statistics.median(search_ms), 2), "search_p99_ms": round(_pct(search_ms, 0.99), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="memories of the one user")
    ap.add_argument("--modes", nargs="+", default=["inline", "child"], choices=["inline", "child"])
    ap.add_argument("--embedder", default="null-hash")
    ap.add_argument("--searches", type=int, default=300)
    ap.add_argument("--saves", type=int, default=300)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.n, args.modes[0], args.embedder, args.searches, args.saves)))
        return
    rows = []
    for mode in args.modes:  # each in a fresh process: RSS never shrinks back after a close
        out = subprocess.run([sys.executable, __file__, "--one", "--n", str(args.n), "--modes", mode,
                              "--embedder", args.embedder, "--searches", str(args.searches),
                              "--saves", str(args.saves)], check=True, capture_output=True, text=True,
                             env={**os.environ, "PORTAMEM_VECTOR_PROCESS": mode})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.n:,} memories, {args.embedder}; MB of RSS (serving process / index process / sum)")
    print("| mode | open s | filled | with the replica loaded | save p50/p99 ms | search p50/p99 ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['open_s']} | {r['serving_filled_mb']} / {r['index_filled_mb']} / "
              f"{r['serving_filled_mb'] + r['index_filled_mb']} | {r['serving_searched_mb']} / {r['index_searched_mb']} / "
              f"{r['sum_searched_mb']} | {r['save_p50_ms']} / {r['save_p99_ms']} | "
              f"{r['search_p50_ms']} / {r['search_p99_ms']} |")


if __name__ == "__main__":
    main()
