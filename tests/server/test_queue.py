"""The write queue: group commit, per-user arrival order, back-pressure, one answer per request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from portamem import Memory, MemoryDraft
from portamem.errors import OverloadedError, ValidationError
from portamem.server.app import ServerState, create_app
from portamem.server.queue import WriteQueue


@pytest.fixture
def queue(memory: Memory) -> Iterator[WriteQueue]:
    q = WriteQueue(memory, max_pending=64, max_batch=64)
    yield q
    q.stop()


async def test_waiting_saves_of_many_requests_commit_together(
        queue: WriteQueue, memory: Memory) -> None:
    # the writer is not started yet, so all twenty requests wait and are applied as one batch
    tasks = [asyncio.ensure_future(queue.save([MemoryDraft(content=f"fact {i} of user {i % 4}")],
                                              user_id=f"user{i % 4}", tenant_id="default")) for i in range(20)]
    await asyncio.sleep(0)
    assert queue.stats.pending == 20
    queue.start()
    results = await asyncio.gather(*tasks)
    assert [r[0].content for r in results] == [f"fact {i} of user {i % 4}" for i in range(20)]
    # one transaction for all of them with save_many, else one per user
    assert queue.stats.batches == 1
    assert queue.stats.transactions == (1 if hasattr(memory, "save_many") else 4)
    for u in range(4):
        assert [r.content for r in memory.list_memories(user_id=f"user{u}")] == [
            f"fact {i} of user {u}" for i in range(u, 20, 4)]


async def test_each_users_writes_apply_in_arrival_order(queue: WriteQueue, memory: Memory) -> None:
    first = memory.save_memory("The meeting room is A1.", user_id="alice")
    ops = []
    for i in range(12):  # alice's updates interleaved with saves of others and of alice herself
        ops.append(queue.run(lambda i=i: memory.update_memory(first.memory_id, user_id="alice",
                                                              content=f"The meeting room is B{i}."),
                             user=("default", "alice")))
        ops.append(queue.save([MemoryDraft(content=f"note {i}")], user_id="alice", tenant_id="default"))
        ops.append(queue.save([MemoryDraft(content=f"bob note {i}")], user_id="bob", tenant_id="default"))
    tasks = [asyncio.ensure_future(op) for op in ops]
    await asyncio.sleep(0)
    queue.start()
    await asyncio.gather(*tasks)
    assert memory.get_memory(first.memory_id, user_id="alice").content == "The meeting room is B11."
    updates = [h["detail"]["previous_content"] for h in memory.history(first.memory_id, user_id="alice")
               if h["action"] == "update"]
    assert updates == ["The meeting room is A1."] + [f"The meeting room is B{i}." for i in range(11)]
    notes = [r.content for r in memory.list_memories(user_id="alice")][1:]
    assert notes == [f"note {i}" for i in range(12)]


async def test_a_bad_draft_fails_only_its_own_request(queue: WriteQueue, memory: Memory) -> None:
    good = asyncio.ensure_future(queue.save([MemoryDraft(content="I speak Portuguese.")], user_id="u", tenant_id="default"))
    bad = asyncio.ensure_future(queue.save([MemoryDraft(content="   ")], user_id="u", tenant_id="default"))
    also = asyncio.ensure_future(queue.save([MemoryDraft(content="I play the cello.")], user_id="u", tenant_id="default"))
    await asyncio.sleep(0)
    queue.start()
    assert (await good)[0].content == "I speak Portuguese."
    assert (await also)[0].content == "I play the cello."
    with pytest.raises(ValidationError):
        await bad
    assert [r.content for r in memory.list_memories(user_id="u")] == ["I speak Portuguese.", "I play the cello."]


async def test_a_full_queue_refuses_at_once(memory: Memory) -> None:
    queue = WriteQueue(memory, max_pending=3)
    waiting = [asyncio.ensure_future(queue.save([MemoryDraft(content=f"item {i}")], user_id="u", tenant_id="default"))
               for i in range(3)]
    await asyncio.sleep(0)
    with pytest.raises(OverloadedError):
        await queue.save([MemoryDraft(content="one too many")], user_id="u", tenant_id="default")
    assert queue.stats.rejected == 1
    queue.start()
    try:
        assert len(await asyncio.gather(*waiting)) == 3
    finally:
        queue.stop()
    assert [r.content for r in memory.list_memories(user_id="u")] == ["item 0", "item 1", "item 2"]


async def test_back_pressure_is_http_429_with_retry_after(memory: Memory) -> None:
    state = ServerState(memory, None, open_access=True, max_pending=1)
    app = create_app(state)  # the writer is not started: the first save waits in the queue
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        first = asyncio.ensure_future(client.post("/v1/memories", json={"user_id": "u", "content": "first"}))
        while state.queue.stats.pending < 1:
            await asyncio.sleep(0.01)
        second = await client.post("/v1/memories", json={"user_id": "u", "content": "second"})
        assert second.status_code == 429
        assert second.headers["retry-after"] == "1"
        assert second.json()["error"]["type"] == "OverloadedError"
        state.queue.start()
        try:
            assert (await first).status_code == 201
        finally:
            state.queue.stop()
    assert [r.content for r in memory.list_memories(user_id="u")] == ["first"]


async def test_waiting_turns_of_many_users_commit_together(queue: WriteQueue, memory: Memory) -> None:
    from portamem.write.requests import TurnRequest

    tasks = [asyncio.ensure_future(queue.turn(TurnRequest(f"user{i}", f"Remember that my desk is D{i}.", "Noted."),
                                              tenant_id="default")) for i in range(10)]
    tasks.append(asyncio.ensure_future(queue.save([MemoryDraft(content="a fact")], user_id="user0",
                                                  tenant_id="default")))
    await asyncio.sleep(0)
    queue.start()
    results = await asyncio.gather(*tasks)
    assert queue.stats.batches == 1 and queue.stats.transactions == 1
    assert [r[0].content for r in results[:10]] == [f"Remember that my desk is D{i}." for i in range(10)]
    for i in range(10):
        assert [t.user for t in memory.context(user_id=f"user{i}")] == [f"Remember that my desk is D{i}."]
    # user0's save came after its turn: its row follows the captured one
    assert [r.content for r in memory.list_memories(user_id="user0")] == ["Remember that my desk is D0.", "a fact"]
