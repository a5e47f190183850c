"""A process killed with SIGKILL right after acknowledged saves, while the background indexer is behind,
loses none of them: reopening indexes what the outbox still holds.

Runs on the backend ``PORTAMEM_TEST_BACKEND`` names: the writer in its child process opens the test's store
through ``Settings.load`` (the fixtures point ``PORTAMEM_DB_URL``/``PORTAMEM_VECTOR_URI`` at it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from portamem import Memory, Settings, Status

WRITER = textwrap.dedent(
    """
    import sys
    from portamem import Memory, Settings, Status
    mem = Memory(settings=Settings.load(path=sys.argv[1]))
    print("ready", flush=True)
    i = 0
    while True:
        batch = int(sys.argv[2])
        if batch == 1:
            rec = mem.save_memory(f"Delivery slot {i} booked for parcel PCL-{100000 + i} at dock {i % 7}.",
                                  user_id="courier")
            print(mem.stats().pending, rec.memory_id, flush=True)
        else:
            recs = mem.save_memories([f"Invoice INV-{200000 + i + j} was paid by client {j} on day {i}."
                                      for j in range(batch)], user_id="accounts")
            print(mem.stats().pending, " ".join(r.memory_id for r in recs), flush=True)
        i += 1
    """
)


def _kill_after(path: str, acks_wanted: int, batch: int) -> tuple[list[str], int]:
    """Acknowledged ids, and how many of them the writer's indexer had not indexed at the last ack."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, path, str(batch)], stdout=subprocess.PIPE, text=True)
    acked: list[str] = []
    behind = 0
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        while len(acked) < acks_wanted or not behind:
            line = proc.stdout.readline()
            assert line, "writer died early"
            pending, *ids = line.split()
            acked.extend(ids)
            behind = int(pending)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return acked, behind


@pytest.mark.parametrize("batch", [1, 25])
def test_kill_9_loses_no_acknowledged_write(settings: Settings, embedder, batch: int) -> None:
    acked, behind = _kill_after(settings.path, 40, batch)
    assert behind > 0  # killed with acknowledged writes still queued for the vector index
    user = "courier" if batch == 1 else "accounts"
    with Memory(settings=settings, embedder=embedder) as mem:
        assert set(acked) <= {r.memory_id for r in mem.list_memories(user_id=user)}
        # the reopened indexer drains the outbox: each acknowledged record is in the vector index,
        # or merged into an older one that is (the writer's texts include word-for-word repeats)
        mem.flush()
        assert mem.stats().pending == 0 and mem.store.outbox_size() == 0
        stored = {r.memory_id: r for r in mem.list_memories(user_id=user)}
        indexed = mem.index.ids()
        assert set(stored) == indexed and all(r.embedding is not None for r in stored.values())
        for memory_id in acked:
            record = mem.get_memory(memory_id, user_id=user)
            assert memory_id in indexed or (record.status is Status.DELETED and record.superseded_by in indexed)
        acked = [m for m in acked if m in stored]
        for memory_id in acked[:: max(1, len(acked) // 8)]:
            hits = mem.search_memory(stored[memory_id].content, user_id=user, top_k=3)
            assert memory_id in [h.memory_id for h in hits]


def _lose_index(settings: Settings, embedder) -> None:
    """Delete the store's vector index entirely: milvus-lite's directory, the pgvector table, the Milvus collection."""
    import shutil

    import sqlalchemy as sa

    from portamem.storage.indexes import open_vector_index, vector_backend, vector_location
    from portamem.storage.pgvector import table_name

    kind = vector_backend(settings)
    if kind == "milvus-lite":
        shutil.rmtree(settings.resolved_vector_uri)
    elif kind == "pgvector":
        engine = sa.create_engine(vector_location(settings))
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP TABLE {table_name(embedder.name, embedder.dim)}")
        finally:
            engine.dispose()
    else:
        index = open_vector_index(settings, model=embedder.name, dim=embedder.dim)
        try:
            index.drop()
        finally:
            index.close()


def test_reopen_repairs_a_lost_index(settings: Settings, embedder) -> None:
    """The index is derived: deleting it entirely loses nothing."""
    with Memory(settings=settings, embedder=embedder) as mem:
        recs = mem.save_memories([f"Room {i} of the hotel has a sea view: {i % 2 == 0}." for i in range(12)],
                                 user_id="guest")
        mem.forget_memory([recs[0].memory_id], user_id="guest")
    _lose_index(settings, embedder)
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.flush()
        assert mem.index.count() == 11
        hit = mem.search_memory(recs[5].content, user_id="guest", top_k=1)[0]
        assert hit.memory_id == recs[5].memory_id
