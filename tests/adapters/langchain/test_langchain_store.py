"""``PortamemStore`` keeps LangGraph's store contract: keys, LangMem's layout, atomic puts, paging, scope."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp  # noqa: E402
from portamem_langchain import PortamemStore  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402

ALICE = ("memories", "alice")


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(tmp_path / "store", embedder=embedder) as mem:
        yield mem


def test_put_get_search_delete(memory: Memory) -> None:
    store = PortamemStore(memory)
    store.put(ALICE, "tea", {"content": "Alice drinks jasmine green tea.", "tags": ["drink"]})
    store.put(ALICE, "city", {"text": "Alice moved to Oslo in 2019."})
    store.put(("prefs", "alice", "ui"), "theme", {"theme": "dark"})
    item = store.get(ALICE, "tea")
    assert item is not None and item.value == {"content": "Alice drinks jasmine green tea.", "tags": ["drink"]}
    assert (item.namespace, item.key) == (ALICE, "tea") and isinstance(item.created_at, datetime)
    hits = store.search(ALICE, query="Which tea?", limit=2)
    assert hits[0].key == "tea" and hits[0].score is not None and len(hits) == 2
    assert [i.key for i in store.search(ALICE, filter={"tags": ["drink"]})] == ["tea"]
    assert [i.key for i in store.search(("prefs", "alice"))] == ["theme"]
    assert store.list_namespaces(prefix=("memories", "alice")) == [ALICE]
    assert store.list_namespaces(prefix=("prefs", "alice"), max_depth=2) == [("prefs", "alice")]
    store.delete(ALICE, "tea")
    assert store.get(ALICE, "tea") is None
    assert "Alice drinks jasmine green tea." not in [h.content for h in memory.search_memory("tea", user_id="alice")]


def test_the_default_layout_is_langmems(memory: Memory) -> None:
    """LangMem's namespace is ("memories", "{user_id}"): each LangMem user is a portamem user."""
    store = PortamemStore(memory)
    store.put(("memories", "alice"), "k1", {"content": "The team meets on Mondays."})
    store.put(("memories", "bob"), "k2", {"content": "The team meets on Mondays."})
    assert store.get(("memories", "bob"), "k2") is not None and store.get(("memories", "alice"), "k1") is not None
    assert memory.user_ids() == ["alice", "bob"]
    assert store.get(("memories", "bob"), "k1") is None


def test_a_put_is_never_merged_into_another_item(memory: Memory) -> None:
    store = PortamemStore(memory)
    store.put(ALICE, "a", {"active": True, "name": "Feature A"})
    store.put(ALICE, "c", {"active": True, "name": "Feature C"})
    for i in range(7):
        store.put(("memories", "alice", f"ns{i}"), "doc", {"content": "dummy"})
    memory.save_memory("dummy", user_id="alice")  # and one written by another adapter
    assert store.get(ALICE, "c") is not None and store.get(ALICE, "c").value["name"] == "Feature C"
    assert all(store.get(("memories", "alice", f"ns{i}"), "doc") is not None for i in range(7))
    assert len(store.list_namespaces(prefix=ALICE)) == 8


def test_parallel_puts_to_one_key_leave_one_item(memory: Memory) -> None:
    store = PortamemStore(memory)
    barrier = threading.Barrier(8)

    def put(n: int) -> None:
        barrier.wait()
        store.put(ALICE, "fav", {"content": f"Alice's favourite number is {n}."})

    threads = [threading.Thread(target=put, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [i.key for i in store.search(ALICE)] == ["fav"]
    store.delete(ALICE, "fav")
    assert store.get(ALICE, "fav") is None and store.search(ALICE) == []


def test_query_pages_are_slices_of_one_ranking(memory: Memory) -> None:
    store = PortamemStore(memory)
    for i in range(12):
        store.put(ALICE, f"trip{i}", {"content": f"Alice took trip number {i} to a city by the sea."})
    full = store.search(ALICE, query="trips to the sea", limit=12)
    paged = [i for offset in range(0, 12, 4) for i in store.search(ALICE, query="trips to the sea", limit=4,
                                                                  offset=offset)]
    assert [i.key for i in paged] == [i.key for i in full] and len({i.key for i in paged}) == 12
    scores = [i.score for i in paged]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_overwrite_keeps_created_at_and_moves_updated_at(memory: Memory) -> None:
    store = PortamemStore(memory)
    store.put(ALICE, "job", {"content": "Alice works as a dentist."})
    first = store.get(ALICE, "job")
    time.sleep(0.01)
    store.put(ALICE, "job", {"content": "Alice works as a pilot now."})
    second = store.get(ALICE, "job")
    assert first is not None and second is not None
    assert second.value == {"content": "Alice works as a pilot now."}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert [i.value["content"] for i in store.search(ALICE)] == ["Alice works as a pilot now."]


def test_index_false_items_are_listed_never_scored(memory: Memory) -> None:
    store = PortamemStore(memory)
    store.put(ALICE, "secret", {"content": "Alice's locker code is about bicycles."}, index=False)
    store.put(ALICE, "bike", {"content": "Alice rides a bicycle to work."})
    hits = store.search(ALICE, query="bicycle", limit=5)
    assert [(h.key, h.score is None) for h in hits] == [("bike", False), ("secret", True)]
    assert [h.key for h in store.search(ALICE, query="bicycle", limit=1)] == ["bike"]
    assert store.get(ALICE, "secret") is not None


def test_batch_runs_ops_in_order_and_none_deletes(memory: Memory) -> None:
    store = PortamemStore(memory)
    ns = ("memories", "bob")
    results = asyncio.run(store.abatch([
        PutOp(ns, "k", {"content": "Bob plays the cello."}),
        GetOp(ns, "k"),
        PutOp(ns, "k", None),
        GetOp(ns, "k"),
        SearchOp(ns, query="cello"),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns),)),
    ]))
    assert results[0] is None and results[1].value == {"content": "Bob plays the cello."}
    assert results[2] is None and results[3] is None and results[4] == [] and results[5] == []


def test_sees_memories_written_elsewhere_and_keeps_users_apart(memory: Memory) -> None:
    record = memory.save_memory("Alice's cat is called Tom.", user_id="alice")
    store = PortamemStore(memory)
    item = store.get(ALICE, record.memory_id)
    assert item is not None and item.value == {"content": "Alice's cat is called Tom."}
    assert [i.key for i in store.search(ALICE, query="cat")] == [record.memory_id]
    assert store.search(("memories", "bob"), query="cat") == []
    assert store.get(("memories", "bob"), record.memory_id) is None
    store.put(ALICE, record.memory_id, {"content": "Alice's cat is called Tim."})  # an edit, in place
    assert [r.content for r in memory.list_memories(user_id="alice")] == ["Alice's cat is called Tim."]


def test_user_label_zero_puts_the_user_first(memory: Memory) -> None:
    store = PortamemStore(memory, user_label=0)
    store.put(("carol", "notes"), "k", {"memory": "Carol is learning Finnish."})
    assert [h.content for h in memory.search_memory("Finnish", user_id="carol")] == ["Carol is learning Finnish."]
    assert store.search(("carol",), query="Finnish")[0].namespace == ("carol", "notes")


def test_tenant_wide_mode_lists_and_searches_every_user(memory: Memory) -> None:
    user_store = PortamemStore(memory)
    user_store.put(("memories", "alice"), "a", {"content": "Alice likes tea."})
    user_store.put(("memories", "bob", "work"), "b", {"content": "Bob likes coffee."})
    with pytest.raises(ValidationError):
        user_store.list_namespaces()
    with pytest.raises(ValidationError):
        user_store.search((), query="likes")
    admin = PortamemStore(memory, tenant_wide=True)
    assert admin.list_namespaces() == [("memories", "alice"), ("memories", "bob", "work")]
    assert admin.list_namespaces(suffix=("work",)) == [("memories", "bob", "work")]
    assert {i.key for i in admin.search(())} == {"a", "b"}
    assert {i.key for i in admin.search(("memories",), query="coffee")} == {"a", "b"}
    assert PortamemStore(memory, tenant_wide=True, tenant_id="other").list_namespaces() == []


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.put(ALICE, "k", {"content": "x"}, ttl=5), NotImplementedError),
        (lambda s: s.search(("memories",), query="x"), ValidationError),
        (lambda s: s.list_namespaces(), ValidationError),
        (lambda s: s.put(ALICE, "k", {"content": "  "}), ValidationError),
        (lambda s: s.put(("memories",), "k", {"content": "x"}), ValidationError),
        (lambda s: PortamemStore(s.memory, user_label=-1), ValidationError),
        (lambda s: PortamemStore(s.memory, search_depth=0), ValidationError),
    ],
    ids=["ttl", "no-user", "list-all-users", "blank-text", "short-namespace", "bad-label", "bad-depth"],
)
def test_rejects_what_it_cannot_honour(memory: Memory, call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call(PortamemStore(memory))  # type: ignore[operator]
    assert memory.list_memories(user_id="alice") == []


def test_a_filter_is_applied_before_ranking(memory: Memory) -> None:
    """LangGraph's ``filter`` is a portamem metadata filter on the item's value: the one item that
    matches is found by a query however many better matches it does not admit (a search ranks
    ``search_depth`` deep, so a check after the search would miss it), with the operators mapped."""
    store = PortamemStore(memory, search_depth=5)
    for i in range(12):
        store.put(ALICE, f"trip-{i}", {"content": f"Packing list for the ski trip, version {i}", "year": 2020 + i % 3,
                                      "owner": {"team": "ops"}})
    store.put(ALICE, "dentist", {"content": "Packing list for the dentist visit", "year": 2031, "owner": {"team": "core"}})
    hits = store.search(ALICE, query="packing list for the ski trip", filter={"year": 2031}, limit=3)
    assert [h.key for h in hits] == ["dentist"] and hits[0].score  # ranked, not appended unscored
    assert [h.key for h in store.search(ALICE, query="ski trip", filter={"owner": {"team": "core"}})] == ["dentist"]
    assert store.search(ALICE, query="ski trip", filter={"owner.team": "core"}) == []  # a literal key, as LangGraph's
    assert {h.key for h in store.search(ALICE, filter={"year": {"$gte": 2022, "$lt": 2031}}, limit=20)} \
        == {f"trip-{i}" for i in range(2, 12, 3)}
    assert {h.key for h in store.search(ALICE, filter={"year": {"$ne": 2020}}, query="trip", limit=20)} \
        == {f"trip-{i}" for i in range(12) if i % 3} | {"dentist"}
    # a list to equal is LangGraph's exact match, checked on the items found
    store.put(ALICE, "tea", {"content": "Alice drinks jasmine tea.", "tags": ["drink", "tea"]})
    assert [h.key for h in store.search(ALICE, filter={"tags": ["drink", "tea"]})] == ["tea"]
    assert store.search(ALICE, filter={"tags": ["tea"]}) == []


#: items whose keys hold dots, nest, or both; and filters naming them every way
DOTTED_ITEMS = {
    "flat": {"content": "Dotted keys, flat", "owner.team": "core", "v": 1},
    "nested": {"content": "Dotted keys, nested", "owner": {"team": "core"}, "v": 2},
    "both": {"content": "Dotted keys, both", "owner.team": "ops", "owner": {"team": "core", "a.b": 3}, "v": 3},
    "deep": {"content": "Dotted keys, deep", "owner": {"team": {"name": "core"}}, "a.b": {"c": 1}},
}
DOTTED_FILTERS = [
    {"owner.team": "core"}, {"owner.team": "ops"}, {"owner": {"team": "core"}}, {"owner.team": {"$eq": "core"}},
    {"owner.team": {"$ne": "core"}}, {"owner": {"a.b": 3}}, {"a.b": {"c": 1}}, {"a.b.c": 1},
    {"owner.team.name": "core"}, {"owner": {"team": {"name": "core"}}}, {"v": 2}, {"owner.team": None},
]


@pytest.mark.parametrize("flt", DOTTED_FILTERS, ids=str)
def test_a_dotted_filter_key_means_what_it_means_in_langgraphs_own_store(memory: Memory, flt: dict) -> None:
    """A filter key is a literal key of the value in LangGraph's stores: ``{"owner.team": ...}`` matches
    an item whose value has the key ``"owner.team"``, never ``{"owner": {"team": ...}}``; the same
    items put into ``InMemoryStore`` and into ``PortamemStore`` answer every filter alike, with a query
    and without."""
    from langgraph.store.memory import InMemoryStore

    ours, theirs = PortamemStore(memory), InMemoryStore()
    for key, value in DOTTED_ITEMS.items():
        ours.put(ALICE, key, value)
        theirs.put(ALICE, key, value)
    want = sorted(h.key for h in theirs.search(ALICE, filter=flt, limit=20))
    assert sorted(h.key for h in ours.search(ALICE, filter=flt, limit=20)) == want
    assert sorted(h.key for h in ours.search(ALICE, query="dotted keys", filter=flt, limit=20)) == want


def test_the_largest_filter_the_validator_accepts_runs(memory: Memory) -> None:
    """An ``$in`` of 1000 values (the validator's maximum) reaches SQLite as one membership test: it
    raised 'Expression tree is too large' through the store, with a query and without."""
    store = PortamemStore(memory)
    store.put(ALICE, "a", {"content": "Project notes for apollo", "project": "p999"})
    store.put(ALICE, "b", {"content": "Project notes for gemini", "project": "x"})
    flt = {"project": {"$in": [f"p{i}" for i in range(1000)]}}
    assert [h.key for h in store.search(ALICE, filter=flt)] == ["a"]
    assert [h.key for h in store.search(ALICE, query="project notes", filter=flt)] == ["a"]


# a put under portamem's own key namespace (the maintainer's habits) is refused, as every write path refuses it
def test_a_put_under_the_habits_namespace_is_refused(memory: Memory) -> None:
    store = PortamemStore(memory)
    with pytest.raises(ValidationError, match="portamem's own"):
        store.put(("portamem", "alice", "abstract"), "habit-0123456789abcdef", {"content": "Habit: aisle seats."})
    assert memory.list_keyed(user_id="alice", key_namespace="portamem") == []
    store.put(("memories", "alice"), "seat", {"content": "Prefers aisle seats."})
    assert store.get(("memories", "alice"), "seat") is not None
