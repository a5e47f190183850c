"""Quiet by default: a healthy store logs no repair, the Milvus client's noise about an embedded index is
not printed, and what a flush or the first scrape should show is there."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator

import pytest

from portamem import Memory, Settings
from portamem.background.indexer import Indexer
from portamem.storage.quiet import ITERATOR_LOGGER, LOCAL_CHANNEL_OPTIONS, lite_iteration

REPAIR = "vector index disagrees with the records"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def late_indexer(monkeypatch) -> Iterator[threading.Event]:  # type: ignore[no-untyped-def]
    """The indexer's thread starts working only once the event is set: the scheduling under which a
    fresh store's first save used to come before the thread looked at the index."""
    go = threading.Event()
    run = Indexer._run

    def late(self: Indexer) -> None:
        go.wait(30)
        run(self)

    monkeypatch.setattr(Indexer, "_run", late)
    yield go
    go.set()


def test_a_fresh_store_written_at_once_logs_no_repair(tmp_path, embedder, caplog, late_indexer) -> None:
    caplog.set_level(logging.WARNING, logger="portamem")
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder) as mem:
        saved = mem.save_memory("I moved to Lyon in March.", user_id="u")
        late_indexer.set()
        mem.flush(30)
        assert mem.index.count() == 1
        assert mem.search_memory("where do I live?", user_id="u")[0].memory_id == saved.memory_id
    assert not [r for r in caplog.records if REPAIR in r.getMessage()]


def test_a_lost_index_is_still_repaired_and_said(tmp_path, embedder, caplog) -> None:
    settings = Settings(path=str(tmp_path / "s"))
    with Memory(settings=settings, embedder=embedder) as mem:
        saved = mem.save_memories(["我住在杭州。", "My sister is called Ines."], user_id="u")
    shutil.rmtree(settings.resolved_vector_uri)
    caplog.set_level(logging.WARNING, logger="portamem")
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.flush(30)
        assert mem.index.count() == 2
        assert mem.search_memory("我住在哪里？", user_id="u")[0].memory_id == saved[0].memory_id
    assert [r for r in caplog.records if REPAIR in r.getMessage()]


def test_an_embedded_index_neither_pings_nor_warns_of_timestamps(memory: Memory) -> None:
    if memory.index.remote:
        pytest.skip("a Milvus server keeps the client's keepalive and reports its timestamps")
    # the in-process server refuses pings more often than every 5 minutes with GOAWAY too_many_pings
    assert memory.index.client._handler._grpc_options == LOCAL_CHANNEL_OPTIONS
    lines = _Lines()
    iterator_log = logging.getLogger(ITERATOR_LOGGER)  # pymilvus' loggers do not propagate
    iterator_log.addHandler(lines)
    try:
        memory.save_memory("The spare key is under the blue pot.", user_id="u", wait=True)
        assert len(memory.index.ids()) == 1  # a query iterator over milvus-lite
        assert not [line for line in lines.lines if "mvccTs" in line]
        # the same warning about any other Milvus goes through
        iterator_log.warning("failed to get mvccTs from milvus server, use client-side ts instead")
        with lite_iteration():
            iterator_log.warning("failed to get mvccTs from milvus server, use client-side ts instead")
        assert len([line for line in lines.lines if "mvccTs" in line]) == 1
    finally:
        iterator_log.removeHandler(lines)


def test_flush_writes_the_use_counts(memory: Memory) -> None:
    from portamem.recall import recall

    saved = memory.save_memory("I am allergic to hazelnuts.", user_id="u", wait=True)
    hits = recall(memory, "am I allergic to anything?", user_id="u")
    assert saved.memory_id in [h.memory_id for h in hits]
    memory.flush()
    # read back through a second store handle, as `portamem show` and /ui read what the server wrote
    from portamem.storage.sql import RecordStore

    other = RecordStore(memory.settings.resolved_db_url)
    try:
        record = other.get(memory.tenant_id, "u", [saved.memory_id])[saved.memory_id]
    finally:
        other.close()
    assert record.access_count == 1 and record.last_accessed_at is not None


async def test_the_first_scrape_counts_the_memories(memory: Memory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("prometheus_client")
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from portamem.server.app import ServerState, create_app
    from portamem.server.metrics import Metrics

    go = threading.Event()
    loop = Metrics._refresh_loop

    def late(self: Metrics) -> None:  # the refresher's thread has not run yet when the scrape comes
        go.wait(30)
        loop(self)

    monkeypatch.setattr(Metrics, "_refresh_loop", late)

    def memories(text: str) -> dict[tuple[str, str], float]:
        return {(s.labels["tenant"], s.labels["status"]): s.value for f in text_string_to_metric_families(text)
                for s in f.samples if s.name == "portamem_memories"}

    state = ServerState(memory, None, open_access=True)
    app = create_app(state)
    try:
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
                empty = await c.get("/metrics")
                assert empty.status_code == 200
                assert memories(empty.text) == {(memory.tenant_id, "active"): 0.0}
            go.set()
    finally:
        go.set()
    memory.save_memory("Our anniversary dinner is at Chez Marie.", user_id="u", wait=True)
    app = create_app(ServerState(memory, None, open_access=True))
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
            assert memories((await c.get("/metrics")).text) == {(memory.tenant_id, "active"): 1.0}
