"""Per-user BM25 document frequencies stay exact through saves, updates and purges."""

from __future__ import annotations

from datetime import timedelta

from portamem import Memory
from portamem.records import utcnow
from portamem.language.text import tokenize


def _brute_df(mem: Memory, user: str, token: str) -> int:
    from portamem.filters import SearchFilters
    from portamem.records import Status
    from portamem.storage.schema import keyword_text

    records = mem.store.list("default", user, SearchFilters(statuses=tuple(Status)))
    return sum(token in set(tokenize(keyword_text(r))) for r in records)


def test_document_frequencies_follow_every_change(memory: Memory) -> None:
    a = memory.save_memory("The courier brings parcels to the back door.", user_id="u")
    memory.save_memory("Parcels for the office go to reception on floor 3.", user_id="u")
    memory.save_memory("Parcels, parcels everywhere.", user_id="other")
    tokens = ["parcels", "courier", "reception", "kiosk"]
    _, df = memory.store.keyword_stats("default", "u", tokens)
    assert df == {t: _brute_df(memory, "u", t) for t in tokens} == {"parcels": 2, "courier": 1, "reception": 1, "kiosk": 0}
    memory.update_memory(a.memory_id, user_id="u", content="The kiosk keeps parcels now.")
    _, df = memory.store.keyword_stats("default", "u", tokens)
    assert df == {"parcels": 2, "courier": 0, "reception": 1, "kiosk": 1}
    memory.forget_memory([a.memory_id], user_id="u")
    # the search's record count comes from the counters: deleted rows still count until purged
    assert memory.store.user_count("default", "u") == memory.store.count("default", "u") == 2
    memory.purge_deleted(now=utcnow() + timedelta(days=30))
    assert memory.store.user_count("default", "u") == memory.store.count("default", "u") == 1
    assert memory.store.user_count("default", "nobody") == 0
    _, df = memory.store.keyword_stats("default", "u", tokens)
    assert df == {t: _brute_df(memory, "u", t) for t in tokens} == {"parcels": 1, "courier": 0, "reception": 1, "kiosk": 0}
    assert memory.store.keyword_stats("default", "other", ["parcels"])[1] == {"parcels": 1}
