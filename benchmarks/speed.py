"""Speed, lag, memory and accuracy of the embedded default at N memories of one user, on real text.

The store is filled with LoCoMo turns (the dev file, every conversation, repeated with other names
and shifted numbers until N), plus other users beside it. Planted questions are LoCoMo's own
questions about the original copy: Recall@5 counts a question as found when one of its evidence
turns is in the top 5, so the repeated copies measure how accuracy decays with size.

Each figure is printed beside a baseline measured in the same run on the same machine:
- search: exact numpy brute force over the user's vectors plus the query embedding (the physical
  limit), and a LangChain EnsembleRetriever (BM25 + in-memory vector store, same embedder) when
  langchain-classic and rank-bm25 are installed (``pip install 'portamem[bench]'``);
- acknowledged save: the embedding of the same text alone (what a save that embeds cannot beat);
- batched writes: the embedder's own rate; index lag: measured at 80 % of that rate;
- RSS: the raw float32 vectors of the N memories; the vector index's own process
  (``Settings.vector_process``) apart (``benchmarks/memory.py`` compares it with the index inline).

Filling runs through the public import path with precomputed vectors; ``--vector-cache DIR`` keeps
them between runs (the default e5 embedder makes ~36 texts/s on 2 cores, ~45 min for 100k).

Every memory carries metadata (``project``: one of four, ``priority``: 0-4); the filtered search
figure asks each planted question again with ``filters={"metadata": {"project": "apollo",
"priority": {"$gte": 2}}}`` (15 % of the rows), beside the same search unfiltered, both with the
query's vector cached; ``--milvus-path`` also times both on a store whose replica budget is 0 (a user
the replica does not hold: Milvus searches, confined to the ids the store's SQL admits).
``--search-only`` skips the write figures.

    python benchmarks/speed.py --n 10000 --embedder use-multilingual-v3
    python benchmarks/speed.py --n 100000 --embedder use-multilingual-v3 --vector-cache .bench-vectors
    python benchmarks/speed.py --n 100000 --embedder null-hash --search-only --no-langchain --milvus-path
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import os
import re
import statistics
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder, get_embedder
from portamem.scenarios.locomo import LocomoConversation, load_locomo
from portamem.portable.transfer import export_lines
from portamem.records import MemoryRecord, MemoryType

#: the LoCoMo dev file in a ``shared/data`` folder beside (or above) the checkout
DEFAULT_DATA = next((p / "shared" / "data" / "locomo" / "locomo-dev.json" for p in Path(__file__).resolve().parents
                     if (p / "shared" / "data" / "locomo" / "locomo-dev.json").exists()), Path("locomo-dev.json"))
NAMES = ("Aiko Tanaka Bruno Silva Chloe Martin Dmitri Petrov Elif Kaya Farid Haddad Greta Lund Hugo Moreau "
         "Ines Duarte Jonas Weber Kavya Rao Liam Byrne Mei Chen Nadia Rossi Omar Aziz Priya Nair Quinn Hale "
         "Rosa Vidal Sven Berg Tariq Khan Uma Patel Viktor Horvat Wen Li Ximena Cruz Yusuf Demir Zoe Clarke").split()
_NUMBER = re.compile(r"\d+")
#: the metadata of row i (``fill``) and the filtered search's filter: it admits 3 rows in 20
PROJECTS = ("apollo", "gemini", "mercury", "vostok")
FILTER = {"metadata": {"project": "apollo", "priority": {"$gte": 2}}}


def _rss_mb(pid: int | None = None) -> float:
    """RSS of this process, or of ``pid`` (the vector index's own process; 0 when it runs inline)."""
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20 if pid or pid is None else 0.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# ---------------------------------------------------------------------- the corpus
def _variant(text: str, names: dict[str, str], copy: int) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return _NUMBER.sub(lambda m: str(int(m.group()) + copy) if len(m.group()) < 9 else m.group(), text) if copy else text


def corpus(convs: list[LocomoConversation], n: int) -> list[tuple[str, object, str, int]]:
    """n (text, created_at, dia key, copy) rows: copy 0 is the dev file as is, later copies rename the
    speakers and shift every number, a year later each."""
    rows: list[tuple[str, object, str, int]] = []
    copy = 0
    while len(rows) < n:
        for ci, conv in enumerate(convs):
            speakers = list(dict.fromkeys(t.speaker for t in conv.turns))
            names = {} if copy == 0 else {s: NAMES[(copy * 7 + ci * 3 + k) % len(NAMES)] for k, s in enumerate(speakers)}
            for t in conv.turns:
                rows.append((_variant(t.content, names, copy), t.created_at + timedelta(days=365 * copy),
                             f"{conv.sample_id}/{t.dia_id}", copy))
                if len(rows) == n:
                    return rows
        copy += 1
    return rows


class VectorCache:
    """Passage vectors by (model, text), kept in ``DIR/<model>.npz`` between runs."""

    def __init__(self, embedder: Embedder, folder: str | None) -> None:
        self.embedder = embedder
        self.path = Path(folder) / f"{re.sub(r'[^0-9A-Za-z]+', '_', embedder.name)}.npz" if folder else None
        self.vectors: dict[str, np.ndarray] = {}
        if self.path is not None and self.path.exists():
            data = np.load(self.path)
            self.vectors = dict(zip((str(k) for k in data["keys"]), data["vectors"]))

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if self._key(t) not in self.vectors))
        for lo in range(0, len(todo), 256):
            chunk = todo[lo:lo + 256]
            for t, v in zip(chunk, self.embedder.embed(chunk)):
                self.vectors[self._key(t)] = np.asarray(v, dtype=np.float32)
        if todo and self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(self.path, keys=np.array(list(self.vectors)), vectors=np.stack(list(self.vectors.values())))
        return np.stack([self.vectors[self._key(t)] for t in texts])


def fill(mem: Memory, rows: list[tuple[str, object, str, int]], vectors: np.ndarray,
         user: str) -> tuple[list[str], dict[str, str]]:
    """Import the rows with their vectors through the public import path (a trusted restore); returns
    the ids in row order and dia key -> memory id of copy 0 (the planted questions' evidence)."""
    header = {"embedding_model": mem.embedder.name, "embedding_dim": mem.embedder.dim}
    evidence: dict[str, str] = {}
    ids: list[str] = []
    for lo in range(0, len(rows), 5000):
        records = []
        for i in range(lo, min(len(rows), lo + 5000)):
            text, created, key, copy = rows[i]
            rec = MemoryRecord(content=text, user_id=user, type=MemoryType.EPISODIC, embedding=vectors[i].tolist(),
                               embedding_model=mem.embedder.name, embedding_version=mem.embedder.version,
                               created_at=created,  # type: ignore[arg-type]
                               metadata={"project": PROJECTS[i % 4], "priority": i % 5})
            ids.append(rec.memory_id)
            if copy == 0:
                evidence[key] = rec.memory_id
            records.append(rec.to_dict())
        mem.import_(io.StringIO("".join(export_lines(header, records))), trusted=True)
    mem.index.flush()
    return ids, evidence


# ---------------------------------------------------------------------- baselines
def ensemble(texts: list[str], ids: list[str], vectors: np.ndarray, embedder: Embedder):  # noqa: ANN201
    """LangChain's EnsembleRetriever over BM25 and an in-memory vector store on the same embedder and
    vectors, or None when langchain-classic / rank-bm25 are not installed."""
    try:
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_core.documents import Document
        from langchain_core.embeddings import Embeddings
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.vectorstores import InMemoryVectorStore
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    from portamem.language.text import tokenize

    class Same(Embeddings):
        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            return embedder.embed(docs).tolist()

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed([text], kind="query")[0].tolist()

    class BM25(BaseRetriever):  # what langchain_community's BM25Retriever does, without that package
        index: object
        docs: list
        k: int = 10

        def _get_relevant_documents(self, query: str, *, run_manager=None):  # noqa: ANN001, ANN202
            scores = self.index.get_scores(tokenize(query))  # type: ignore[attr-defined]
            return [self.docs[i] for i in np.argsort(-scores)[: self.k]]

    docs = [Document(page_content=t, id=i, metadata={"id": i}) for t, i in zip(texts, ids)]
    store = InMemoryVectorStore(Same())
    store.store = {i: {"id": i, "vector": v.tolist(), "text": t, "metadata": {"id": i}}
                   for t, i, v in zip(texts, ids, vectors)}
    bm25 = BM25(index=BM25Okapi([tokenize(t) or ["_"] for t in texts]), docs=docs)
    return EnsembleRetriever(retrievers=[bm25, store.as_retriever(search_kwargs={"k": 10})], weights=[0.5, 0.5])


# ---------------------------------------------------------------------- the run
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="memories of the searched user")
    ap.add_argument("--users", type=int, default=20, help="other users beside it (50 memories each)")
    ap.add_argument("--queries", type=int, default=200, help="planted LoCoMo questions asked")
    ap.add_argument("--saves", type=int, default=200, help="single acknowledged saves timed")
    ap.add_argument("--lag-seconds", type=float, default=20.0, help="how long writes are offered for the lag figure")
    ap.add_argument("--embedder", default=Settings().embedder)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo json (the dev file)")
    ap.add_argument("--vector-cache", default=None, help="folder keeping passage vectors between runs")
    ap.add_argument("--no-langchain", action="store_true", help="skip the EnsembleRetriever baseline")
    ap.add_argument("--search-only", action="store_true", help="skip the write, lag and RSS figures")
    ap.add_argument("--milvus-path", action="store_true",
                    help="also time the filtered search of a user the replica does not hold")
    args = ap.parse_args()
    embedder = get_embedder(args.embedder)
    cache = VectorCache(embedder, args.vector_cache)
    convs = load_locomo(args.data)
    rows = corpus(convs, args.n + args.users * 50 + args.saves + 4000)
    mine, others, spare = rows[:args.n], rows[args.n:args.n + args.users * 50], rows[args.n + args.users * 50:]
    t = time.perf_counter()
    vectors = cache.embed([r[0] for r in mine + others])
    embed_s = time.perf_counter() - t
    figures: list[tuple[str, float, str, float]] = []

    rate_texts = [r[0] + " (again)" for r in spare[:128]]
    t = time.perf_counter()
    for lo in range(0, 128, 64):
        embedder.embed(rate_texts[lo:lo + 64])
    embed_rate = 128 / (time.perf_counter() - t)

    with tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        rss0 = _rss_mb()
        mem = Memory(settings=Settings(path=tmp, embedder=args.embedder), embedder=embedder)
        t = time.perf_counter()
        store_ids, evidence = fill(mem, mine, vectors[:args.n], "bench")
        fill_s = time.perf_counter() - t
        for u in range(args.users):  # other users share the collection, as in production
            fill(mem, others[u * 50:(u + 1) * 50], vectors[args.n + u * 50:args.n + (u + 1) * 50], f"other{u}")
        mem.flush()
        gc.collect()
        rss_filled, index_filled = _rss_mb(), _rss_mb(mem.index.server_pid or 0)

        # ---- search: planted questions, each asked once (no query-cache hits)
        questions = [(q, [evidence[f"{c.sample_id}/{e}"] for e in q.evidence if f"{c.sample_id}/{e}" in evidence])
                     for c in convs for q in c.questions]
        questions = [(q, ev) for q, ev in questions if ev][: args.queries]
        matrix = vectors[:args.n]  # the same vectors the store holds
        mem.search_memory("warm up", user_id="bench")  # loads the read replica
        gc.collect()
        rss_searched, index_searched = _rss_mb(), _rss_mb(mem.index.server_pid or 0)
        lat, base, found, found_base = [], [], 0, 0
        for q, ev in questions:
            t = time.perf_counter()
            hits = mem.search_memory(q.question, user_id="bench", top_k=5)
            lat.append((time.perf_counter() - t) * 1000)
            found += any(h.memory_id in ev for h in hits)
            t = time.perf_counter()
            qv = embedder.embed([q.question], kind="query")[0]
            scores = matrix @ qv
            top = np.argpartition(-scores, 5)[:5]
            top = top[np.argsort(-scores[top])]
            base.append((time.perf_counter() - t) * 1000)
            found_base += any(store_ids[i] in ev for i in top)
        nq = len(questions)
        figures += [(f"search p50 at {args.n:,} (ms)", statistics.median(lat), "numpy brute force + embed",
                     statistics.median(base)),
                    (f"search p99 at {args.n:,} (ms)", _pct(lat, 0.99), "numpy brute force + embed", _pct(base, 0.99)),
                    (f"Recall@5, {nq} planted questions", found / nq, "numpy brute force (vector only)",
                     found_base / nq)]
        retriever = None if args.no_langchain else ensemble([r[0] for r in mine], store_ids, matrix, embedder)
        if retriever is not None:
            lc_lat, lc_found = [], 0
            for q, ev in questions:
                t = time.perf_counter()
                docs = retriever.invoke(q.question)
                lc_lat.append((time.perf_counter() - t) * 1000)
                lc_found += any(d.metadata["id"] in ev for d in docs[:5])
            figures += [(f"search p50 at {args.n:,} (ms)", statistics.median(lat), "LangChain EnsembleRetriever",
                         statistics.median(lc_lat)),
                        (f"search p99 at {args.n:,} (ms)", _pct(lat, 0.99), "LangChain EnsembleRetriever",
                         _pct(lc_lat, 0.99)),
                        (f"Recall@5, {nq} planted questions", found / nq, "LangChain EnsembleRetriever", lc_found / nq)]

        # ---- the same questions with a metadata filter, beside the same search unfiltered (vectors cached)
        figures += _filtered(mem, [q.question for q, _ in questions], args.n, "replica")
        if args.search_only:
            mem.close()
            if args.milvus_path:
                mem = Memory(settings=Settings(path=tmp, embedder=args.embedder, replica_budget_mb=0.0),
                             embedder=embedder)
                figures += _filtered(mem, [q.question for q, _ in questions], args.n, "Milvus")
                mem.close()
            _report(args, embedder, embed_s, fill_s, figures)
            return

        # ---- acknowledged single saves (the indexer embeds behind them)
        save_lat, emb_lat = [], []
        for text, *_ in spare[: args.saves]:
            t = time.perf_counter()
            mem.save_memory(text, user_id="bench")
            save_lat.append((time.perf_counter() - t) * 1000)
        for text, *_ in spare[: min(args.saves, 50)]:
            t = time.perf_counter()
            embedder.embed([text])
            emb_lat.append((time.perf_counter() - t) * 1000)
        figures += [("acknowledged save p50 (ms)", statistics.median(save_lat), "embed alone", statistics.median(emb_lat)),
                    ("acknowledged save p99 (ms)", _pct(save_lat, 0.99), "embed alone", _pct(emb_lat, 0.99))]
        mem.flush()
        # the same saves to a user of 50: a write's cost must not grow with its user's size
        small_lat = []
        for text, *_ in spare[: args.saves]:
            t = time.perf_counter()
            mem.save_memory(text + " (small)", user_id="other0")
            small_lat.append((time.perf_counter() - t) * 1000)
        figures += [(f"acknowledged save p50, user of {args.n:,} (ms)", statistics.median(save_lat),
                     "same, to a user of 50", statistics.median(small_lat)),
                    (f"acknowledged save p99, user of {args.n:,} (ms)", _pct(save_lat, 0.99),
                     "same, to a user of 50", _pct(small_lat, 0.99))]
        mem.flush()

        # ---- batched acknowledged writes, then index lag at 80 % of the embedder's rate
        texts = [r[0] + " (batch)" for r in spare[args.saves:args.saves + 2000]]
        t = time.perf_counter()
        for lo in range(0, len(texts), 100):
            mem.save_memories(texts[lo:lo + 100], user_id="batch")
        write_rate = len(texts) / (time.perf_counter() - t)
        figures.append(("batched writes, 100/call (acknowledged/s)", write_rate, "embedder alone (texts/s)", embed_rate))
        mem.flush()
        lags = _lag(mem, [r[0] + " (lag)" for r in spare], rate=0.8 * embed_rate, seconds=args.lag_seconds)
        figures += [("index lag p50 (s)", statistics.median(lags), "-", float("nan")),
                    ("index lag p99 (s)", _pct(lags, 0.99), "-", float("nan"))]
        mem.close()

    raw = args.n * embedder.dim * 4 / 2**20
    figures += [(f"RSS growth, store filled with {args.n:,} (MB)", rss_filled - rss0, "raw float32 vectors (MB)", raw),
                ("RSS growth with the replica loaded (MB)", rss_searched - rss0, "raw float32 vectors (MB)", raw),
                ("RSS of the index's own process, filled (MB)", index_filled, "-", float("nan")),
                ("RSS of the index's own process, searched (MB)", index_searched, "-", float("nan"))]
    _report(args, embedder, embed_s, fill_s, figures)


def _filtered(mem: Memory, questions: list[str], n: int, path: str) -> list[tuple[str, float, str, float]]:
    """Each question unfiltered then filtered (``FILTER``), alternately, after one untimed pass of each."""
    for q in questions[:20]:
        mem.search_memory(q, user_id="bench", top_k=5)
        mem.search_memory(q, user_id="bench", top_k=5, filters=FILTER)
    plain, filtered, admitted = [], [], 0
    for q in questions:
        t = time.perf_counter()
        mem.search_memory(q, user_id="bench", top_k=5)
        plain.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        hits = mem.search_memory(q, user_id="bench", top_k=5, filters=FILTER)
        filtered.append((time.perf_counter() - t) * 1000)
        admitted += all(h.record.metadata["project"] == "apollo" and h.record.metadata["priority"] >= 2 for h in hits)
    assert admitted == len(questions), "a filtered search returned a row the filter does not admit"
    return [(f"filtered search p50 at {n:,}, {path} (ms)", statistics.median(filtered), "same search unfiltered",
             statistics.median(plain)),
            (f"filtered search p99 at {n:,}, {path} (ms)", _pct(filtered, 0.99), "same search unfiltered",
             _pct(plain, 0.99))]


def _report(args: argparse.Namespace, embedder: Embedder, embed_s: float, fill_s: float,
            figures: list[tuple[str, float, str, float]]) -> None:
    print(f"portamem speed: embedder {embedder.name}, {os.cpu_count()} CPUs, {args.n:,} LoCoMo-derived memories of "
          f"one user + {args.users} other users; vectors {embed_s:.0f} s (cache: {args.vector_cache or 'none'}), "
          f"import {fill_s:.1f} s")
    print(f"{'figure':<44} {'portamem':>10}   {'baseline':<32} {'value':>9} {'ratio':>7}")
    for name, value, bname, bvalue in figures:
        ratio = value / bvalue if bvalue == bvalue and bvalue else float("nan")
        bshown = "" if bvalue != bvalue else f"{bvalue:9.3f}"
        print(f"{name:<44} {value:10.3f}   {bname:<32} {bshown:>9} {ratio:7.2f}")


def _lag(mem: Memory, texts: list[str], *, rate: float, seconds: float) -> list[float]:
    """Offer writes of 10 at ``rate`` per second for ``seconds``; each row's time from commit to indexed."""
    batches: list[tuple[float, list[str]]] = []
    lags: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set() or batches:
            done = []
            for i, (at, ids) in enumerate(list(batches)):
                if len(mem.store.indexed_ids(ids)) == len(ids):
                    lags.extend([time.perf_counter() - at] * len(ids))
                    done.append(i)
            for i in reversed(done):
                del batches[i]
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.perf_counter()
    i = 0
    while time.perf_counter() - start < seconds and i + 10 <= len(texts):
        recs = mem.save_memories(texts[i:i + 10], user_id="lag")
        batches.append((time.perf_counter(), [r.memory_id for r in recs]))
        i += 10
        time.sleep(max(0.0, start + i / rate - time.perf_counter()))
    mem.flush()
    stop.set()
    watcher.join()
    return lags or [float("nan")]


if __name__ == "__main__":
    main()
