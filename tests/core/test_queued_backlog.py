"""A backlog the indexer has not reached (as after a crash): a search by meaning covers every queued row of
its user, however many, embedding each once even when two searches ask at the same time."""

from __future__ import annotations

import threading
from collections import Counter

from portamem.background.queued import queued_vectors
from portamem.filters import SearchFilters

TOPICS = ["sailing", "violin lessons", "tax forms", "sourdough", "chess openings", "knee surgery", "bonsai"]


def test_every_queued_row_is_scored_and_embedded_once(stuck) -> None:  # type: ignore[no-untyped-def]
    mem, emb, gate = stuck
    n = 300  # more than the 256 a search used to score: the rest were invisible by meaning
    rows = [f"Entry {i} of the diary mentions {TOPICS[i % len(TOPICS)]}." for i in range(n)]
    rows[3] = "The lighthouse my grandmother kept in Brittany was painted bright green."
    for lo in range(0, n, 100):
        mem.save_memories(rows[lo:lo + 100], user_id="heavy")
    assert mem.stats().pending >= n

    found: list[list[str]] = []

    def search() -> None:
        hits = mem.search_memory("what colour was the lighthouse", user_id="heavy", sources=["vector"], top_k=1)
        found.append([h.content for h in hits])

    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert found == [[rows[3]], [rows[3]]]
    vectors = queued_vectors(mem.store, mem.indexer, mem.parts.embed, mem.embedder.name, mem.tenant_id, "heavy",
                             SearchFilters())
    assert len(vectors) == n
    counts = Counter(t for t in emb.passages() if t in set(rows))
    assert set(counts) == set(rows) and max(counts.values()) == 1  # two searches, each row embedded once
    gate.set()
    mem.flush(timeout=600)
    counts = Counter(t for t in emb.passages() if t in set(rows))
    assert max(counts.values()) == 1  # the indexer took the searches' vectors instead of embedding again


def test_a_budget_leaves_the_oldest_to_the_index(stuck) -> None:  # type: ignore[no-untyped-def]
    mem, emb, gate = stuck
    mem.save_memories([f"Old note {i} about {TOPICS[i % len(TOPICS)]}." for i in range(40)], user_id="b")
    vectors = queued_vectors(mem.store, mem.indexer, mem.parts.embed, mem.embedder.name, mem.tenant_id, "b",
                             SearchFilters(), budget_s=0)
    assert vectors == {}  # nothing embedded past a spent budget; keyword search still finds them
    hits = mem.search_memory("Old note 7", user_id="b", sources=["keyword"], top_k=3)
    assert any(h.content.startswith("Old note 7 ") for h in hits)
