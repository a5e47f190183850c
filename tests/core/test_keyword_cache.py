"""The in-memory keyword postings (``portamem.storage.termcache``) stay exactly what the store holds
while writers commit and searchers load terms at the same time."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from portamem_conformance.backends import QUERIES, corpus

from portamem import Memory, Settings
from portamem.filters import SearchFilters
from portamem.records import Status
from portamem.storage.sql import RecordStore
from portamem.language.text import tokenize

ALL = SearchFilters(statuses=tuple(Status))


def test_cached_postings_equal_the_store_after_concurrent_writes_and_searches(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'records.sqlite3'}"
    cached = RecordStore(url, keyword_cache_mb=64)
    errors: list[BaseException] = []
    stop = threading.Event()

    def write(user: str, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for batch in range(12):
                records = corpus(user, 15, seed=seed * 100 + batch)
                with cached.transaction() as conn:
                    cached.insert(conn, records)
                if batch % 3 == 2:  # drop some of what was written: the counts and postings shrink too
                    with cached.transaction() as conn:
                        cached.purge(conn, [r.memory_id for r in rng.sample(records, 5)], tenant_id="default")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def search(user: str) -> None:
        try:
            while not stop.is_set():
                for query in QUERIES:
                    cached.keyword_search("default", user, query, ALL, 10)
                    cached.keyword_stats("default", user, tokenize(query))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(u, s)) for u, s in (("ana", 1), ("ana", 2), ("ben", 3))]
    readers = [threading.Thread(target=search, args=(u,)) for u in ("ana", "ana", "ben")]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors
    assert cached.keywords.cache is not None and cached.keywords.cache.nbytes > 0

    plain = RecordStore(url)  # the same file, scored in SQL
    try:
        # two writers of 12 batches of 15 for ana, one for ben, each purging 5 of every third batch
        for user, n in (("ana", 2 * (12 * 15 - 4 * 5)), ("ben", 12 * 15 - 4 * 5)):
            assert cached.user_count("default", user) == plain.user_count("default", user) == n
            for query in QUERIES + ["tea coffee courier"]:
                assert cached.keyword_search("default", user, query, ALL, 10) == \
                       plain.keyword_search("default", user, query, ALL, 10), (user, query)
                assert cached.keyword_stats("default", user, tokenize(query)) == \
                       plain.keyword_stats("default", user, tokenize(query))
    finally:
        plain.close()
        cached.close()


def test_memory_scores_keywords_in_memory_on_sqlite_within_its_budget(tmp_path: Path, embedder) -> None:  # noqa: ANN001
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder) as mem:
        assert mem.store.keywords.cache is not None
        mem.save_memories(["The courier leaves parcels at the kiosk.", "Tea at the harbour kiosk."], user_id="u")
        assert [h.memory_id for h in mem.search_memory("kiosk parcels", user_id="u", sources=["keyword"])][:1] == \
               [mem.list_memories(user_id="u")[0].memory_id]
        assert mem.store.keywords.cache.nbytes > 0
        # a save after the search is found by it at once, from the cached postings
        later = mem.save_memory("Parcels now go to the kiosk by the harbour.", user_id="u")
        assert later.memory_id in {h.memory_id for h in mem.search_memory("kiosk parcels", user_id="u",
                                                                           sources=["keyword"])}
    with Memory(settings=Settings(path=str(tmp_path / "t"), keyword_cache_mb=0), embedder=embedder) as mem:
        assert mem.store.keywords.cache is None
