"""Tenants and users never see each other's records, whatever the filter values."""

from __future__ import annotations

import pytest

from portamem import Memory, Settings, ValidationError

HOSTILE = [
    'alice" or user_id != "',
    "alice' OR '1'='1",
    "bob or 1==1",
    "x != y",
    "*",
    "%",
    ") or (scope > 0",
    "alice\" || true || \"",
    "alice; DROP TABLE memories;--",
    "用户\"或者\"",
]


@pytest.fixture
def two_users(memory: Memory) -> Memory:
    for user in ("alice", "bob"):
        memory.save_memory("My bank PIN hint is the name of my first dog, Rex.", user_id=user)
        memory.save_memory("Order ORD-1111 ships to the office.", user_id=user)
    memory.save_memory("My bank PIN hint is the name of my first dog, Rex.", user_id="alice", tenant_id="acme")
    return memory


def _owners(mem: Memory, query: str, **kw) -> set[tuple[str, str]]:
    return {(h.record.tenant_id, h.record.user_id) for h in mem.search_memory(query, **kw)}


def test_identical_content_stays_with_its_user(two_users: Memory) -> None:
    assert _owners(two_users, "PIN hint dog", user_id="alice") == {("default", "alice")}
    assert _owners(two_users, "PIN hint dog", user_id="bob") == {("default", "bob")}
    assert _owners(two_users, "PIN hint dog", user_id="alice", tenant_id="acme") == {("acme", "alice")}
    assert _owners(two_users, "PIN hint dog", user_id="bob", tenant_id="acme") == set()


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_user_ids_match_nobody(two_users: Memory, hostile: str) -> None:
    assert two_users.search_memory("PIN hint dog Rex ORD-1111", user_id=hostile) == []
    assert two_users.list_memories(user_id=hostile) == []


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_filter_values_never_widen_the_scope(two_users: Memory, hostile: str) -> None:
    two_users.save_memory("My bank PIN hint is the dog Rex, says the sales agent.", user_id="alice", agent_id="sales")
    assert two_users.search_memory("PIN hint dog", user_id="alice", filters={"session_id": hostile}) == []
    # an agent's scope is its own memories plus the user's shared layer: an unknown agent sees the shared only
    seen = two_users.search_memory("PIN hint dog", user_id="alice", filters={"agent_id": hostile})
    assert seen and all((h.record.tenant_id, h.record.user_id, h.record.agent_id) == ("default", "alice", None)
                        for h in seen)
    with pytest.raises(ValidationError):
        two_users.search_memory("PIN hint", user_id="alice", filters={"types": [hostile]})
    with pytest.raises(ValidationError):
        two_users.search_memory("PIN hint", user_id="alice", filters={"status": hostile})
    with pytest.raises(ValidationError):
        two_users.search_memory("PIN hint", user_id="alice", filters={"user_id": hostile})


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_queries_stay_in_scope(two_users: Memory, hostile: str) -> None:
    assert _owners(two_users, hostile, user_id="alice") <= {("default", "alice")}


def test_other_users_ids_are_not_found(two_users: Memory) -> None:
    bob_ids = [r.memory_id for r in two_users.list_memories(user_id="bob")]
    from portamem import NotFoundError

    with pytest.raises(NotFoundError):
        two_users.forget_memory(bob_ids, user_id="alice")
    with pytest.raises(NotFoundError):
        two_users.get_memory(bob_ids[0], user_id="alice")
    assert len(two_users.list_memories(user_id="bob")) == 2


def test_isolation_without_partitions(tmp_path, embedder) -> None:
    """The shared-partition layout (for a Milvus server with many users) isolates by scope key."""
    with Memory(settings=Settings(path=str(tmp_path / "np"), partition_per_user=False), embedder=embedder) as mem:
        mem.save_memory("The spare key is under the blue flowerpot.", user_id="alice")
        mem.save_memory("The spare key is under the blue flowerpot.", user_id="bob")
        assert _owners(mem, "where is the spare key", user_id="alice") == {("default", "alice")}
        assert mem.search_memory("where is the spare key", user_id='alice" or "1"=="1') == []
