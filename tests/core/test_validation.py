"""Bounds, text safety and argument order: every bad value gets a typed error before anything is touched."""

from __future__ import annotations

import tracemalloc

import pytest

from portamem import Memory, MemoryDraft, PortamemError, Settings, ValidationError
from portamem.storage.schema import audit_t, memories, turns_t

SURROGATE = "caf\udce9"  # what os.fsdecode makes of a Latin-1 byte: not valid Unicode


def _snapshot(mem: Memory) -> tuple[int, int, int, int]:
    import sqlalchemy as sa

    with mem.store.engine.connect() as conn:
        counts = [int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar() or 0)
                  for t in (memories, audit_t, turns_t)]
    return counts[0], counts[1], counts[2], mem.index.count()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(content=SURROGATE),
        dict(content="ok", summary=SURROGATE),
        dict(content="ok", entities=[SURROGATE]),
        dict(content="ok", entities=["a\x00b"]),
        dict(content="ok", metadata={"note": SURROGATE}),
        dict(content="ok", metadata={SURROGATE: "value"}),
        dict(content="ok", metadata={"nested": [{"deep": "nul\x00"}]}),
        dict(content="ok", metadata={"x": float("nan")}),
        dict(content="ok", metadata={1: "int key"}),
        dict(content="ok", session_id=SURROGATE),
        dict(content="ok", agent_id="a\x00"),
        dict(content="ok", user_id=SURROGATE),
        dict(content="ok", tenant_id=SURROGATE),
    ],
    ids=lambda kw: next(f"{k}" for k in reversed(list(kw))),
)
def test_unencodable_text_is_refused_everywhere_it_enters(memory: Memory, kwargs) -> None:
    memory.save_memory("A memory that was here before.", user_id="u")
    before = _snapshot(memory)
    kwargs = {"user_id": "u", **kwargs}
    with pytest.raises(ValidationError):
        memory.save_memory(**kwargs)
    assert _snapshot(memory) == before


def test_unencodable_text_in_turns_queries_and_updates(memory: Memory) -> None:
    rec = memory.save_memory("The shed key is under the mat.", user_id="u")
    before = _snapshot(memory)
    with pytest.raises(ValidationError):
        memory.add_turn(SURROGATE, "reply", user_id="u")
    with pytest.raises(ValidationError):
        memory.add_turn("hello", "reply", user_id="u", metadata={SURROGATE: 1})
    with pytest.raises(ValidationError):
        memory.add_turn("hello", "reply", user_id="u", session_id="s\x00")
    with pytest.raises(ValidationError):
        memory.search_memory(SURROGATE, user_id="u")
    with pytest.raises(ValidationError):
        memory.search_memory("key", user_id="u", filters={"session_id": SURROGATE})
    with pytest.raises(ValidationError):
        memory.update_memory(rec.memory_id, user_id="u", metadata={"k": SURROGATE})
    with pytest.raises(ValidationError):
        memory.get_memory(SURROGATE, user_id="u")
    assert _snapshot(memory) == before


def test_empty_tenant_is_refused_like_a_blank_one(memory: Memory, settings: Settings, embedder) -> None:
    for tenant in ("", " "):
        with pytest.raises(ValidationError):
            memory.save_memory("Tenant-less memory.", user_id="u", tenant_id=tenant)
        with pytest.raises(ValidationError):
            memory.list_memories(user_id="u", tenant_id=tenant)
        with pytest.raises(ValidationError):
            Memory(settings=settings.replace(path=settings.path + "-2"), embedder=embedder, tenant_id=tenant)
    assert memory.list_memories(user_id="u") == []


def test_summary_metadata_and_entities_are_bounded(memory: Memory) -> None:
    s = memory.settings
    before = _snapshot(memory)
    with pytest.raises(ValidationError, match="max_summary_chars"):
        memory.save_memory("ok", user_id="u", summary="s" * (s.max_summary_chars + 1))
    with pytest.raises(ValidationError, match="max_metadata_bytes"):
        memory.save_memory("ok", user_id="u", metadata={"blob": "x" * s.max_metadata_bytes})
    deep: dict = {}
    node = deep
    for _ in range(s.max_metadata_depth):
        node["d"] = {}
        node = node["d"]
    with pytest.raises(ValidationError, match="max_metadata_depth"):
        memory.save_memory("ok", user_id="u", metadata=deep)
    with pytest.raises(ValidationError, match="max_entities"):
        memory.save_memory("ok", user_id="u", entities=[f"e{i}" for i in range(s.max_entities + 1)])
    with pytest.raises(ValidationError, match="max_entity_chars"):
        memory.save_memory("ok", user_id="u", entities=["e" * (s.max_entity_chars + 1)])
    with pytest.raises(ValidationError):
        memory.save_memories([MemoryDraft(content="ok", summary=7)], user_id="u")  # type: ignore[arg-type]
    assert _snapshot(memory) == before
    # at the bounds everything is accepted
    rec = memory.save_memory("ok at the bounds", user_id="u", summary="s" * s.max_summary_chars,
                             entities=[f"e{i}" for i in range(s.max_entities)])
    assert len(rec.summary or "") == s.max_summary_chars


def test_cyclic_metadata_is_refused_not_a_crash(memory: Memory) -> None:
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(ValidationError):
        memory.save_memory("ok", user_id="u", metadata=loop)


def test_huge_top_k_is_refused_without_allocating(memory: Memory) -> None:
    memory.save_memories(["Tea at four.", "Coffee at nine.", "Water all day."], user_id="u")
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError, match="top_k"):
            memory.search_memory("tea", user_id="u", top_k=10**8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20
    hits = memory.search_memory("tea", user_id="u", top_k=memory.settings.max_top_k)
    assert len(hits) <= 3


def test_bounds_are_settings(tmp_path, embedder) -> None:
    s = Settings(path=str(tmp_path / "s"), max_summary_chars=10, max_top_k=7, max_entities=1)
    with Memory(settings=s, embedder=embedder) as mem:
        with pytest.raises(ValidationError):
            mem.save_memory("ok", user_id="u", summary="eleven char")
        with pytest.raises(ValidationError):
            mem.search_memory("ok", user_id="u", top_k=8)
        with pytest.raises(ValidationError):
            mem.save_memory("ok", user_id="u", entities=["a", "b"])
    with pytest.raises(PortamemError):
        Settings(max_top_k=0)
    with pytest.raises(PortamemError):
        Settings(top_k=10, max_top_k=5)


class _Bar:
    def __init__(self, total: int, label: str) -> None:
        self.seen = 0

    def update(self, n: int) -> None:
        raise RuntimeError("a broken progress bar")

    def close(self) -> None:
        pass


def test_reindex_checks_its_arguments_before_dropping_the_index(memory: Memory) -> None:
    memory.save_memories(["The boiler is serviced in May.", "The car insurance renews in June."], user_id="u", wait=True)
    assert memory.index.count() == 2
    with pytest.raises(ValidationError):
        memory.reindex(progress="not callable")  # type: ignore[arg-type]
    assert memory.index.count() == 2

    def failing_factory(total: int, label: str) -> None:
        raise RuntimeError("cannot draw")

    with pytest.raises(ValidationError):
        memory.reindex(progress=failing_factory)
    assert memory.index.count() == 2
    assert memory.reindex(progress=_Bar) == 2  # a bar that fails later never stops the rebuild
    assert memory.index.count() == 2
    assert memory.search_memory("when is the boiler serviced", user_id="u")


def test_listing_bounds_beyond_sqlite_integers_are_refused(memory: Memory) -> None:
    memory.save_memory("A single memory.", user_id="u")
    for kwargs in (dict(offset=2**70), dict(limit=2**70), dict(offset=-1), dict(limit=True)):
        with pytest.raises(ValidationError):
            memory.list_memories(user_id="u", **kwargs)
        with pytest.raises(ValidationError):
            memory.list_keyed(user_id="u", **kwargs)
    assert len(memory.list_memories(user_id="u", limit=2**63 - 1)) == 1
