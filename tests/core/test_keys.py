"""Keyed memories: a write with a key is an atomic upsert of that key, never merged by dedupe."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from portamem import Memory, MemoryDraft, Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import NotFoundError, ValidationError
from portamem.records import MemoryRecord, Status
from portamem.storage.schema import SCHEMA_VERSION
from portamem.storage.sql import RecordStore


def test_same_text_under_two_keys_keeps_both(memory: Memory) -> None:
    a = memory.save_memory("Feature A is active.", user_id="u", key="a", key_namespace=("features",))
    b = memory.save_memory("Feature A is active.", user_id="u", key="b", key_namespace=("features",))
    assert a.memory_id != b.memory_id
    assert memory.get_by_key("b", user_id="u", key_namespace=("features",)).memory_id == b.memory_id
    assert {r.key for r in memory.list_keyed(user_id="u", key_namespace="features")} == {"a", "b"}


def test_seven_namespaces_with_one_text_stay_seven(memory: Memory) -> None:
    for i in range(7):
        memory.save_memory("dummy", user_id="u", key="k", key_namespace=("ns", str(i)))
    assert len(memory.list_keyed(user_id="u", key_namespace=("ns",))) == 7


def test_unkeyed_duplicates_still_merge_but_never_into_a_keyed_memory(memory: Memory) -> None:
    keyed = memory.save_memory("Alice drinks jasmine green tea every morning.", user_id="u", key="tea")
    first = memory.save_memory("Alice drinks jasmine green tea every morning.", user_id="u", wait=True)
    again = memory.save_memory("Alice drinks jasmine green tea every morning.", user_id="u", wait=True)
    assert first.memory_id != keyed.memory_id and again.memory_id == first.memory_id
    assert memory.get_memory(first.memory_id, user_id="u").frequency == 2
    assert memory.get_by_key("tea", user_id="u").frequency == 1


def test_overwrite_keeps_the_row_and_moves_updated_at(memory: Memory) -> None:
    first = memory.save_memory("Alice works as a dentist.", user_id="u", key="job", metadata={"v": 1})
    time.sleep(0.01)
    second = memory.save_memory("Alice flies planes for a living.", user_id="u", key="job", metadata={"v": 2})
    assert second.memory_id == first.memory_id and second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    stored = memory.get_by_key("job", user_id="u")
    assert (stored.content, stored.metadata, stored.updated_at) == ("Alice flies planes for a living.", {"v": 2},
                                                                    second.updated_at)
    # the keyword index and the vectors follow the new text; the old words are gone
    assert [h.memory_id for h in memory.search_memory("planes", user_id="u")] == [first.memory_id]
    assert memory.search_memory("dentist", user_id="u", sources=("keyword",)) == []
    assert len(memory.list_memories(user_id="u")) == 1
    assert [e["detail"].get("overwrote") for e in memory.history(first.memory_id, user_id="u")] == [False, True]


def test_parallel_writes_to_one_key_leave_one_row(memory: Memory) -> None:
    texts = [f"The user's favourite number is {n}." for n in range(8)]
    barrier = threading.Barrier(len(texts))

    def put(text: str) -> MemoryRecord:
        barrier.wait()
        return memory.save_memory(text, user_id="u", key="fav")

    threads_out: list[MemoryRecord] = []
    threads = [threading.Thread(target=lambda t=t: threads_out.append(put(t))) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.memory_id for r in threads_out}) == 1
    rows = memory.list_keyed(user_id="u")
    assert len(rows) == 1 and rows[0].content in texts
    memory.forget_by_key("fav", user_id="u")
    with pytest.raises(NotFoundError):  # no stale value comes back after the delete
        memory.get_by_key("fav", user_id="u")


def test_two_connections_upserting_one_key_leave_one_row(tmp_path: Path) -> None:
    """The unique index decides, not the process's lock: two stores on one file race on one key."""
    url = f"sqlite:///{tmp_path / 'records.db'}"
    stores = [RecordStore(url), RecordStore(url)]
    barrier = threading.Barrier(2)

    def put(store: RecordStore, n: int) -> None:
        barrier.wait()
        for i in range(20):
            record = MemoryRecord(content=f"value {n}-{i}", user_id="u", key_namespace="ns", key="k")
            with store.transaction() as conn:
                store.upsert_keyed(conn, record)

    threads = [threading.Thread(target=put, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with sqlite3.connect(tmp_path / "records.db") as db:
        assert db.execute("SELECT count(*) FROM memories").fetchone() == (1,)
        assert db.execute("SELECT sum(n) FROM keyword_users").fetchone() == (1,)  # one keyword entry
    for s in stores:
        s.close()


def test_a_batch_writing_one_key_twice_keeps_the_last(memory: Memory) -> None:
    out = memory.save_memories([MemoryDraft("first value", key="k"), MemoryDraft("second value", key="k")],
                               user_id="u")
    assert out[0].memory_id == out[1].memory_id
    assert memory.get_by_key("k", user_id="u").content == "second value"
    assert [h.content for h in memory.search_memory("value", user_id="u")] == ["second value"]


def test_forget_by_key_then_a_write_revives_the_key(memory: Memory) -> None:
    first = memory.save_memory("Bob plays the cello.", user_id="u", key="music", key_namespace="hobbies")
    assert memory.forget_by_key("music", user_id="u", key_namespace="hobbies") == first.memory_id
    with pytest.raises(NotFoundError):
        memory.get_by_key("music", user_id="u", key_namespace="hobbies")
    with pytest.raises(NotFoundError):
        memory.forget_by_key("music", user_id="u", key_namespace="hobbies")
    assert memory.search_memory("cello", user_id="u") == []
    back = memory.save_memory("Bob plays the viola.", user_id="u", key="music", key_namespace="hobbies")
    assert back.memory_id == first.memory_id and back.status is Status.ACTIVE


def test_keys_are_scoped_by_user_and_tenant(memory: Memory) -> None:
    memory.save_memory("Alice's city is Oslo.", user_id="alice", key="city")
    memory.save_memory("Bob's city is Lima.", user_id="bob", key="city")
    memory.save_memory("Alice of acme: Rome.", user_id="alice", key="city", tenant_id="acme")
    assert memory.get_by_key("city", user_id="alice").content == "Alice's city is Oslo."
    assert memory.get_by_key("city", user_id="alice", tenant_id="acme").content == "Alice of acme: Rome."
    assert memory.list_keyed(user_id="carol") == []
    assert memory.user_ids() == ["alice", "bob"]


def test_namespace_prefix_matches_whole_labels(memory: Memory) -> None:
    for ns in ("prefs", "prefs.ui", "prefsx", "other"):
        memory.save_memory(f"a value in {ns}", user_id="u", key="k", key_namespace=ns)
    memory.save_memory("an unkeyed memory", user_id="u")
    assert [r.key_namespace for r in memory.list_keyed(user_id="u", key_namespace=("prefs",))] == ["prefs", "prefs.ui"]
    assert len(memory.list_keyed(user_id="u")) == 4
    assert [r.key_namespace for r in memory.list_keyed(user_id="u", key_namespace="prefs", limit=1, offset=1)] == [
        "prefs.ui"]


def test_chinese_keys_and_text(memory: Memory) -> None:
    memory.save_memory("用户喜欢喝绿茶。", user_id="用户", key="饮料", key_namespace=("偏好",))
    memory.save_memory("用户喜欢喝绿茶。", user_id="用户", key="早餐", key_namespace=("偏好",))
    assert [r.key for r in memory.list_keyed(user_id="用户", key_namespace="偏好")] == ["饮料", "早餐"]


@pytest.mark.parametrize(
    ("key", "namespace"),
    [(5, ()), ("", ()), ("a\x00b", ()), ("k", ("a.b",)), ("k", ("",)), ("k", "a..b"), ("k", 7), ("k", ("a", 1)),
     ("x" * 300, ())],
    ids=["int-key", "empty-key", "nul-key", "dotted-label", "empty-label", "empty-segment", "int-ns", "int-label",
         "long-key"],
)
def test_bad_keys_are_refused_and_nothing_is_written(memory: Memory, key: object, namespace: object) -> None:
    with pytest.raises(ValidationError):
        memory.save_memory("a fact", user_id="u", key=key, key_namespace=namespace)  # type: ignore[arg-type]
    assert memory.list_memories(user_id="u") == []
    with pytest.raises(ValidationError):
        memory.get_by_key(key, user_id="u", key_namespace=namespace)  # type: ignore[arg-type]


def test_update_memory_keeps_the_key(memory: Memory) -> None:
    record = memory.save_memory("Carol lives in Turku.", user_id="u", key="home")
    memory.update_memory(record.memory_id, user_id="u", content="Carol lives in Tampere.")
    assert memory.get_by_key("home", user_id="u").content == "Carol lives in Tampere."
    assert memory.save_memory("Carol lives in Oulu.", user_id="u", key="home").memory_id == record.memory_id


def test_keyed_memories_are_never_consolidated(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings(path=str(tmp_path / "s"), pool_capacity=1)
    with Memory(settings=settings, embedder=embedder) as memory:
        for key in ("a", "b", "c"):
            memory.save_memory("Dana takes the 8:15 train to work.", user_id="u", key=key)
        memory.maintain()
        assert len(memory.list_keyed(user_id="u")) == 3


def test_keys_survive_export_and_import(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "a", embedder=embedder) as memory:
        memory.save_memory("Erin's badge number is 4471.", user_id="u", key="badge", key_namespace=("work",))
        memory.export(tmp_path / "out.jsonl")
    with Memory(tmp_path / "b", embedder=embedder) as memory:
        memory.import_(tmp_path / "out.jsonl")
        assert memory.get_by_key("badge", user_id="u", key_namespace="work").content == "Erin's badge number is 4471."


def test_async_twins(memory: Memory) -> None:
    async def run() -> list[str]:
        await memory.asave_memory("Finn likes jazz.", user_id="u", key="music")
        got = await memory.aget_by_key("music", user_id="u")
        listed = await memory.alist_keyed(user_id="u")
        await memory.aforget_by_key("music", user_id="u")
        return [got.content, listed[0].key or ""]

    assert asyncio.run(run()) == ["Finn likes jazz.", "music"]


def test_a_schema_2_store_is_migrated_on_open(tmp_path: Path, embedder: Embedder) -> None:
    path = tmp_path / "old"
    with Memory(path, embedder=embedder) as memory:
        old = memory.save_memory("Gus keeps bees.", user_id="u")
    with sqlite3.connect(path / "records.sqlite3") as db:  # make it a store of the previous schema
        db.execute("DROP INDEX ux_memories_key")
        db.execute("ALTER TABLE memories DROP COLUMN key_namespace")
        db.execute('ALTER TABLE memories DROP COLUMN "key"')
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with Memory(path, embedder=embedder) as memory:
        assert memory.get_memory(old.memory_id, user_id="u").key is None
        a = memory.save_memory("Gus keeps bees.", user_id="u", key="hobby")
        b = memory.save_memory("Gus keeps wasps.", user_id="u", key="hobby")
        assert a.memory_id == b.memory_id and len(memory.list_memories(user_id="u")) == 2
    with sqlite3.connect(path / "records.sqlite3") as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


def test_search_returns_every_keyed_twin(memory: Memory) -> None:
    ids = {memory.save_memory("Alice is allergic to peanuts.", user_id="u", key=k).memory_id for k in ("a", "b")}
    twin = memory.save_memory("Alice is allergic to peanuts.", user_id="u").memory_id
    assert {h.memory_id for h in memory.search_memory("peanut allergy", user_id="u")} == ids | {twin}
