"""The floor: the work of a save, a window turn and a search done the cheapest way this machine allows.

What portamem does per request, without its layers: raw ``sqlite3`` in WAL mode with
``synchronous=FULL`` committing a group of saves at once (the memory row with every column the
store writes, its keyword postings, its outbox flag and its audit row), the indexer's work as an
append to one numpy matrix per user with the review's nearest-neighbour lookup as one matrix
product and the outbox cleared by one UPDATE, and a search as an in-memory BM25 over dict postings,
an exact numpy cosine scan of the user's vectors and one SELECT of the hits' rows. Texts go through
portamem's own tokenizer and, when given, the same embedder as the measured figure.

``benchmarks/cpu.py`` measures these beside portamem's figures in the same run; alone:

    python benchmarks/floor.py                 # CPU ms per request, medians of 3
    python benchmarks/floor.py --group 1       # one fsync per save instead of a group commit
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from portamem.embedding.embedders import Embedder, get_embedder
from portamem.language.text import tokenize

__all__ = ["Floor", "measure", "OPS"]

#: the operations cpu.py measures, in its order
OPS = ("save", "add_turn", "search_cached", "search_unique")
TOPICS = ["coffee", "flight", "invoice", "dentist", "garden", "piano", "budget", "hotel", "museum", "bicycle"]
CITIES = ["Berlin", "Lyon", "Porto", "Osaka", "Hangzhou", "Quito", "Tartu", "Graz"]
K1, B = 1.2, 0.75
WINDOW = 8

_SCHEMA = """
CREATE TABLE memories (pk INTEGER PRIMARY KEY, memory_id TEXT UNIQUE NOT NULL, tenant_id TEXT, user_id TEXT,
  session_id TEXT, agent_id TEXT, type TEXT, kind TEXT, content TEXT, summary TEXT, entities TEXT, triples TEXT,
  embedding BLOB, embedding_model TEXT, embedding_version TEXT, importance REAL, importance_band INTEGER,
  half_life_days REAL, created_at REAL, updated_at REAL, last_accessed_at REAL, access_count INTEGER,
  frequency INTEGER, source TEXT, trust TEXT, status TEXT, supersedes TEXT, superseded_by TEXT, deleted_at REAL,
  metadata TEXT, indexed INTEGER, key_namespace TEXT, "key" TEXT);
CREATE INDEX ix_scope ON memories (tenant_id, user_id, status, type);
CREATE INDEX ix_unindexed ON memories (indexed);
CREATE TABLE postings (tenant_id TEXT, user_id TEXT, term TEXT, record INTEGER, tf INTEGER, doc_len INTEGER,
  PRIMARY KEY (tenant_id, user_id, term, record)) WITHOUT ROWID;
CREATE TABLE audit_log (pk INTEGER PRIMARY KEY, ts REAL, tenant_id TEXT, user_id TEXT, memory_id TEXT, action TEXT,
  actor TEXT, detail TEXT);
CREATE TABLE turns (pk INTEGER PRIMARY KEY, tenant_id TEXT, user_id TEXT, session_id TEXT, user_text TEXT,
  assistant_text TEXT, created_at REAL, metadata TEXT);
CREATE INDEX ix_turns ON turns (tenant_id, user_id, session_id, pk);
"""
_INSERT = ("INSERT INTO memories (memory_id, tenant_id, user_id, session_id, agent_id, type, kind, content, summary, "
           "entities, triples, embedding, embedding_model, embedding_version, importance, importance_band, "
           "half_life_days, created_at, updated_at, last_accessed_at, access_count, frequency, source, trust, status, "
           "supersedes, superseded_by, deleted_at, metadata, indexed, key_namespace, \"key\") "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING pk")


class _User:
    """One user's in-memory index: vectors as rows of a growing matrix, BM25 postings as dicts."""

    def __init__(self, dim: int) -> None:
        self.mat = np.zeros((16, dim), dtype=np.float32)
        self.pks: list[int] = []
        self.postings: dict[str, dict[int, int]] = defaultdict(dict)
        self.lengths: dict[int, int] = {}
        self.total = 0

    def add_vector(self, pk: int, vector: np.ndarray) -> None:
        if len(self.pks) == len(self.mat):
            self.mat = np.concatenate([self.mat, np.zeros_like(self.mat)])
        self.mat[len(self.pks)] = vector
        self.pks.append(pk)

    def add_text(self, pk: int, tokens: list[str], length: int) -> None:
        for term, tf in Counter(tokens).items():
            self.postings[term][pk] = tf
        self.lengths[pk] = length
        self.total += length


class Floor:
    """A store doing portamem's work at its floor; ``save``, ``add_turn`` and ``search`` take one
    request each, ``commit`` ends a group (the group commit) and runs the indexer's part for it."""

    def __init__(self, path: Path, embedder: Embedder, *, group: int = 50) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.executescript("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;" + _SCHEMA)
        self.embedder = embedder
        self.group = group
        self.users: dict[str, _User] = {}
        self.turns: dict[str, list[int]] = defaultdict(list)
        self._open: list[tuple[str, int, str]] = []
        self._queries: dict[str, np.ndarray] = {}
        self._requests = 0
        self.db.execute("BEGIN")

    def _user(self, user: str) -> _User:
        u = self.users.get(user)
        if u is None:
            u = self.users[user] = _User(self.embedder.dim)
        return u

    def _memory(self, user: str, text: str) -> None:
        now = time.time()
        tokens = tokenize(text)
        pk = self.db.execute(_INSERT, (uuid.uuid4().hex, "default", user, "chat", None, "semantic", "fact", text,
                                       None, "[]", "[]", None, None, None, 0.5, 50, 90.0, now, now, None, 0, 1,
                                       "user", "high", "active", None, None, None, "{}", -1, None, None)).fetchone()[0]
        self.db.executemany("INSERT INTO postings VALUES (?,?,?,?,?,?)",
                            [("default", user, t, pk, tf, len(text)) for t, tf in Counter(tokens).items()])
        self.db.execute("INSERT INTO audit_log (ts, tenant_id, user_id, memory_id, action, actor, detail) "
                        "VALUES (?,?,?,?,?,?,?)", (now, "default", user, str(pk), "save", "api", '{"type":"semantic"}'))
        self._user(user).add_text(pk, tokens, len(text))
        self._open.append((user, pk, text))

    def save(self, user: str, text: str) -> None:
        self._memory(user, text)
        self._request()

    def _request(self) -> None:
        self._requests += 1
        if self._requests >= self.group:
            self.commit()

    def add_turn(self, user: str, said: str, answer: str) -> None:
        """A window turn, its user message captured as a memory (as portamem's triggers may), and the
        turn leaving the window folded into an episodic memory."""
        now = time.time()
        pk = self.db.execute("INSERT INTO turns (tenant_id, user_id, session_id, user_text, assistant_text, created_at, "
                             "metadata) VALUES (?,?,?,?,?,?,?) RETURNING pk",
                             ("default", user, "chat", said, answer, now, "{}")).fetchone()[0]
        self._memory(user, said)
        window = self.turns[user]
        window.append(pk)
        if len(window) > WINDOW:
            old = window.pop(0)
            row = self.db.execute("DELETE FROM turns WHERE pk = ? RETURNING user_text, assistant_text",
                                  (old,)).fetchone()
            self._memory(user, f"user: {row[0]}\nassistant: {row[1]}")
        self._request()

    def commit(self) -> None:
        """One fsync for the group, then the indexer's part: embed, review (nearest neighbours of
        each new row among its user's rows), append to the matrix, clear the outbox."""
        self.db.execute("COMMIT")
        self._requests = 0
        rows, self._open = self._open, []
        if rows:
            vectors = self.embedder.embed([t for _, _, t in rows])
            for (user, pk, _), v in zip(rows, vectors):
                u = self._user(user)
                n = len(u.pks)
                if n:
                    scores = u.mat[:n] @ v
                    np.argpartition(-scores, min(8, n) - 1)[:8]
                u.add_vector(pk, v)
            self.db.execute("BEGIN")
            self.db.executemany("UPDATE memories SET indexed = 1, embedding = ? WHERE pk = ?",
                                [(v.astype("<f4").tobytes(), pk) for (_, pk, _), v in zip(rows, vectors)])
            self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def search(self, user: str, query: str, k: int = 5, candidates: int = 50) -> list[tuple[str, float]]:
        u = self._user(user)
        qvec = self._queries.get(query)
        if qvec is None:
            qvec = self._queries[query] = self.embedder.embed([query], kind="query")[0]
        n = len(u.pks)
        found: dict[int, float] = {}
        if n:
            scores = u.mat[:n] @ qvec
            top = np.argpartition(-scores, min(candidates, n) - 1)[:candidates]
            found = {u.pks[i]: 0.5 * float(scores[i]) for i in top}
        docs = len(u.lengths)
        if docs:
            avgdl = u.total / docs
            bm25: dict[int, float] = defaultdict(float)
            for term in set(tokenize(query)):
                posting = u.postings.get(term)
                if not posting:
                    continue
                idf = max(math.log((docs - len(posting) + 0.5) / (len(posting) + 0.5)), 1e-6)
                for pk, tf in posting.items():
                    bm25[pk] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * u.lengths[pk] / avgdl))
            for pk, score in sorted(bm25.items(), key=lambda x: -x[1])[:candidates]:
                found[pk] = found.get(pk, 0.0) + 0.45 * score
        best = sorted(found.items(), key=lambda x: -x[1])[:k]
        if not best:
            return []
        marks = ",".join("?" * len(best))
        rows = dict(self.db.execute(f"SELECT pk, content FROM memories WHERE pk IN ({marks}) AND status = 'active'",
                                    [pk for pk, _ in best]).fetchall())
        return [(rows[pk], s) for pk, s in best if pk in rows]

    def close(self) -> None:
        self.db.execute("COMMIT")
        self.db.close()


def bodies(op: str, users: int) -> Callable[[int], dict[str, Any]]:
    """The i-th request body of an operation, as cpu.py and its wrk script make them: 500 users in
    turn, every text unique but ``search_cached``'s 80 questions."""
    def body(i: int) -> dict[str, Any]:
        user = f"user{i % users:04d}"
        topic, city = TOPICS[(i // users + i) % len(TOPICS)], CITIES[(i * 7) % len(CITIES)]
        if op == "save":
            return {"user_id": user, "content": f"My {topic} appointment {i} is in {city} on day {i % 28 + 1}."}
        if op == "add_turn":
            return {"user_id": user, "session_id": "chat",
                    "user": f"Can you help with my {topic} in {city}? It is about item {i}.",
                    "assistant": f"Sure, I noted the {topic} in {city}."}
        if op == "search_cached":
            return {"user_id": user, "query": f"when is my {topic} in {city}?", "top_k": 5}
        return {"user_id": user, "query": f"when is my {topic} {i} in {city}?", "top_k": 5}

    return body


def measure(embedder: Embedder, *, requests: int = 1000, users: int = 500, group: int = 50,
            folder: str | None = None) -> dict[str, float]:
    """CPU ms per request of each operation at the floor (one run): saves (group commits, their
    indexing included), window turns, then searches over what those wrote."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        floor = Floor(Path(tmp) / "floor.sqlite3", embedder, group=group)
        try:
            for op in OPS:
                body = bodies(op, users)
                t = time.process_time()
                for i in range(requests):
                    b = body(i)
                    if op == "save":
                        floor.save(b["user_id"], b["content"])
                    elif op == "add_turn":
                        floor.add_turn(b["user_id"], b["user"], b["assistant"])
                    else:
                        floor.search(b["user_id"], b["query"], b["top_k"])
                if op in ("save", "add_turn"):
                    floor.commit()
                out[op] = (time.process_time() - t) * 1000 / requests
        finally:
            floor.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="null-hash")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--group", type=int, default=50, help="saves per commit (1: one fsync each)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    embedder = get_embedder(args.embedder)
    runs = [measure(embedder, requests=args.requests, users=args.users, group=args.group) for _ in range(args.repeats)]
    med = {op: statistics.median(r[op] for r in runs) for op in OPS}
    if args.json:
        print(json.dumps(med))
        return
    print(f"floor: embedder {embedder.name}, {args.requests} requests per operation, {args.users} users, "
          f"group commit of {args.group}, medians of {args.repeats}; load {os.getloadavg()[0]:.1f}")
    print(f"{'operation':<16} {'CPU ms/request':>15}")
    for op in OPS:
        print(f"{op:<16} {med[op]:15.3f}")


if __name__ == "__main__":
    main()
