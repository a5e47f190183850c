"""Bad input gets a typed error and leaves the store exactly as it was."""

from __future__ import annotations

import os

import pytest

from portamem import (
    ContentTooLongError,
    Memory,
    NotFoundError,
    PortamemError,
    Settings,
    StoreLockedError,
    StoreOpenError,
    ValidationError,
)
from portamem.storage.schema import audit_t, memories


def _snapshot(mem: Memory) -> tuple[int, int, int]:
    import sqlalchemy as sa

    with mem.store.engine.connect() as conn:
        rows = conn.execute(sa.select(sa.func.count()).select_from(memories)).scalar()
        audits = conn.execute(sa.select(sa.func.count()).select_from(audit_t)).scalar()
    return int(rows), int(audits), mem.index.count()


BAD_SAVES = [
    (dict(content=""), ValidationError),
    (dict(content="   \n\t "), ValidationError),
    (dict(content=None), ValidationError),
    (dict(content=42), ValidationError),
    (dict(content=["a list"]), ValidationError),
    (dict(content="x" * 8001), ContentTooLongError),
    (dict(content="ok", user_id=""), ValidationError),
    (dict(content="ok", user_id=7), ValidationError),
    (dict(content="ok", user_id="u" * 300), ValidationError),
    (dict(content="ok", type="longterm"), ValidationError),
    (dict(content="ok", importance=1.5), ValidationError),
    (dict(content="ok", importance="high"), ValidationError),
    (dict(content="ok", importance=True), ValidationError),
    (dict(content="ok", source="internet"), ValidationError),
    (dict(content="ok", half_life_days=-3), ValidationError),
    (dict(content="ok", kind="mood"), ValidationError),
    (dict(content="ok", metadata={"when": object()}), ValidationError),
    (dict(content="ok", metadata="not a mapping"), ValidationError),
    (dict(content="nul\x00byte"), ValidationError),
    (dict(content="ok", entities="not-a-list"), ValidationError),
]


@pytest.mark.parametrize("kwargs,error", BAD_SAVES, ids=[f"{i}" for i in range(len(BAD_SAVES))])
def test_bad_saves_raise_typed_errors_and_change_nothing(memory: Memory, kwargs, error) -> None:
    memory.save_memory("An existing memory about the garden shed.", user_id="u")
    before = _snapshot(memory)
    kwargs = {"user_id": "u", **kwargs}
    with pytest.raises(error) as info:
        memory.save_memory(**kwargs)
    assert isinstance(info.value, PortamemError) and str(info.value)
    assert _snapshot(memory) == before


def test_a_bad_item_refuses_the_whole_batch(memory: Memory) -> None:
    before = _snapshot(memory)
    with pytest.raises(ValidationError):
        memory.save_memories(["fine one", {"content": ""}, "another fine one"], user_id="u")
    with pytest.raises(ValidationError):
        memory.save_memories(["fine", {"content": "x", "colour": "red"}], user_id="u")
    assert _snapshot(memory) == before


def test_unknown_ids(memory: Memory) -> None:
    # settled first: a forget waits for the indexer on the ids it names, so an unsettled save would be
    # indexed during the calls below whatever they do
    rec = memory.save_memory("The wifi password is on the fridge.", user_id="u", wait=True)
    before = _snapshot(memory)
    with pytest.raises(NotFoundError):
        memory.get_memory("0" * 32, user_id="u")
    with pytest.raises(NotFoundError):
        memory.forget_memory([rec.memory_id, "0" * 32], user_id="u")  # one unknown id: nothing forgotten
    with pytest.raises(NotFoundError):
        memory.refresh_memory("0" * 32, 0.1, user_id="u")
    with pytest.raises(ValidationError):
        memory.forget_memory(12345, user_id="u")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        memory.refresh_memory(rec.memory_id, 5.0, user_id="u")
    assert _snapshot(memory) == before
    assert memory.get_memory(rec.memory_id, user_id="u").status.value == "active"


@pytest.mark.parametrize(
    "kwargs",
    [dict(query=""), dict(query=None), dict(query="ok", top_k=0), dict(query="ok", top_k="5"),
     dict(query="ok", filters="type=semantic"), dict(query="ok", filters={"colour": "red"}),
     dict(query="ok", filters={"created_after": "yesterday"}), dict(query="x" * 9000)],
)
def test_bad_searches(memory: Memory, kwargs) -> None:
    with pytest.raises(ValidationError):
        memory.search_memory(user_id="u", **kwargs)


def test_store_that_cannot_be_opened(tmp_path, embedder) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreOpenError):
        Memory(settings=Settings(path=str(blocker / "store")), embedder=embedder)
    with pytest.raises(StoreOpenError):
        Memory(settings=Settings(path=str(tmp_path / "ok"), vector_uri=str(tmp_path / "vectors.milvus")),
               embedder=embedder)
    with pytest.raises(StoreOpenError):
        Memory(settings=Settings(path=str(tmp_path / "ok2"), db_url="postgresql+nosuchdriver://x/y"),
               embedder=embedder)


def test_store_held_by_another_process(tmp_path, embedder) -> None:
    import subprocess
    import sys

    path = tmp_path / "shared"
    with Memory(settings=Settings(path=str(path)), embedder=embedder):
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom portamem import Memory, Settings\n"
         f"m = Memory(settings=Settings(path={str(path)!r}))\n"
         "print('open', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreLockedError, match="another process"):
            Memory(settings=Settings(path=str(path)), embedder=embedder)
    finally:
        holder.kill()
        holder.wait()
