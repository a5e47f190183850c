"""The background indexer in a supervised worker process (``Settings.indexer_process = "child"``).

The worker drains the same outbox the indexer thread does, so what it decides is what the thread
decides (a duplicate merged, an older value superseded); these tests hold it to that, to this
process's copies staying current (the read replica), and to what a process of its own adds: it is
started again after ``kill -9`` with nothing acknowledged lost, follows the vector index process
when that restarts, stops with the store and with a killed parent.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from portamem import Memory, Settings
from portamem.background.process import IndexerProcess
from portamem.embedding.embedders import get_embedder
from portamem.errors import ConfigError
from portamem.plugins import get_plugin_manager


def _open(path: Path, **changes: object) -> Memory:
    return Memory(settings=Settings(path=str(path), vector_process="child", indexer_process="child",
                                    embedder="null-hash", embed_workers=0, **changes))


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """A store at ``tmp_path / "s"`` whose indexer runs in a worker process."""
    opened = _open(tmp_path / "s")
    yield opened
    opened.close()


def _worker(mem: Memory) -> IndexerProcess:
    assert isinstance(mem.indexer, IndexerProcess)
    return mem.indexer


def _gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def _restarted(indexer: IndexerProcess, old: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = indexer.pid
        if pid is not None and pid != old:
            return pid
        time.sleep(0.05)
    raise AssertionError("the indexer process was not started again")


def test_the_worker_reviews_as_the_thread_does(tmp_path: Path) -> None:
    mem = _open(tmp_path / "s")
    try:
        assert isinstance(mem.indexer, IndexerProcess)
        pid = mem.indexer.pid
        assert pid is not None and psutil.Process(pid).ppid() == os.getpid()
        first = mem.save_memory("I drink oolong tea every morning", user_id="u")
        again = mem.save_memory("I drink oolong tea every morning", user_id="u", wait=True)
        assert again.memory_id == first.memory_id and again.frequency == 2  # merged into the older
        budget = mem.save_memory("My budget is 1200 euros.", user_id="u", wait=True)
        newer = mem.save_memory("My budget is 3000 euros now.", user_id="u", wait=True)
        assert mem.get_memory(budget.memory_id, user_id="u").superseded_by == newer.memory_id
        found = [h.content for h in mem.search_memory("What is my budget?", user_id="u")]
        assert found[0] == "My budget is 3000 euros now." and "My budget is 1200 euros." not in found
        stats = mem.stats()
        assert stats.pending == 0 and stats.indexed_total >= 4 and stats.last_error is None
    finally:
        mem.close()
    assert _gone(pid), "the worker outlived its store"


def test_the_replica_here_follows_the_workers_batches(mem: Memory) -> None:
    kept = mem.save_memory("the spare key is under the blue flowerpot", user_id="u")
    mem.flush()
    mem.search_memory("spare key", user_id="u")  # loads the user's vectors here
    assert mem.vectors.holds("default", "u") and kept.memory_id in mem.vectors.loaded_ids("default", "u")
    later = [mem.save_memory(f"note {i}: the {w} is in the attic", user_id="u")
             for i, w in enumerate(("sledge", "tent", "lantern"))]
    duplicate = mem.save_memory("the spare key is under the blue flowerpot", user_id="u")
    mem.flush()
    loaded = mem.vectors.loaded_ids("default", "u")
    assert {r.memory_id for r in later} <= loaded
    assert duplicate.memory_id not in loaded  # retired into the older by the worker's review
    hits = mem.search_memory("the lantern is in the attic", user_id="u", sources=["vector"])
    assert hits and hits[0].memory_id == later[2].memory_id


def test_kill_9_of_the_worker_loses_nothing(mem: Memory) -> None:
    indexer = _worker(mem)
    before = [mem.save_memory(f"before {i}: the {w} is in the shed", user_id="u").memory_id
              for i, w in enumerate(("rake", "hose", "saw"))]
    pid = indexer.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    during = [mem.save_memory(f"during {i}: the {w} is in the car", user_id="u").memory_id
              for i, w in enumerate(("jack", "rope", "torch"))]
    mem.flush(timeout=60)  # asked of the dead worker, or of the next one: it drains either way
    _restarted(indexer, pid)
    assert mem.stats().pending == 0 and indexer.starts == 2
    assert set(before + during) <= mem.index.ids()
    for memory_id, word in zip(before + during, ("rake", "hose", "saw", "jack", "rope", "torch")):
        found = mem.search_memory(f"where is the {word}", user_id="u", sources=["vector"], top_k=3)
        assert memory_id in {h.memory_id for h in found}


def test_the_worker_follows_a_restarted_index_process(mem: Memory) -> None:
    indexer = _worker(mem)
    saved = mem.save_memory("the boat is moored at pier seven", user_id="u")
    mem.flush()
    worker, index_pid = indexer.pid, mem.index.server_pid
    assert worker is not None and index_pid is not None
    os.kill(index_pid, signal.SIGKILL)
    after = mem.save_memory("the canoe is in the boathouse", user_id="u")
    _restarted(indexer, worker)
    mem.flush(timeout=60)
    deadline = time.monotonic() + 60
    while mem.index.restarted and time.monotonic() < deadline:  # the worker's repair, reported here
        time.sleep(0.05)
    assert not mem.index.restarted
    assert mem.index.server_pid not in (None, index_pid)
    assert {saved.memory_id, after.memory_id} <= mem.index.ids()


def test_what_the_worker_cannot_take_is_refused_at_open(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="process of its own"):
        Memory(settings=Settings(path=str(tmp_path / "a"), vector_process="inline", indexer_process="child",
                                 embedder="null-hash", embed_workers=0))
    with pytest.raises(ConfigError, match="plugin"):
        Memory(settings=Settings(path=str(tmp_path / "b"), vector_process="child", indexer_process="child",
                                 embedder="null-hash", embed_workers=0), plugins=get_plugin_manager())
    with pytest.raises(ConfigError, match="embedder"):
        Memory(settings=Settings(path=str(tmp_path / "c"), vector_process="child", indexer_process="child"),
               embedder=get_embedder("null-hash", workers=0))
    with pytest.raises(ConfigError, match="indexer_process"):
        Settings(indexer_process="inline")
    # each refusal let its store go: the same directory opens
    _open(tmp_path / "b").close()


def test_the_environment_chooses_when_the_setting_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTAMEM_INDEXER_PROCESS", "child")
    assert Settings().resolved_indexer_process == "child"
    assert Settings(indexer_process="thread").resolved_indexer_process == "thread"
    monkeypatch.delenv("PORTAMEM_INDEXER_PROCESS")
    assert Settings().resolved_indexer_process == "thread"
    assert Settings.load(env={"PORTAMEM_INDEXER_PROCESS": "child"}).indexer_process == "child"


def test_the_worker_checkpoints_the_log_and_this_process_never_does(mem: Memory, tmp_path: Path) -> None:
    with mem.store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    db = tmp_path / "s" / "records.sqlite3"
    before = db.stat().st_size
    for lo in range(0, 600, 100):
        mem.save_memories([f"note {i}: a line about the {i % 7}th shelf of the archive" for i in range(lo, lo + 100)],
                          user_id="u")
    mem.flush()
    deadline = time.monotonic() + 30
    while db.stat().st_size <= before and time.monotonic() < deadline:  # copied back by the worker
        time.sleep(0.1)
    assert db.stat().st_size > before


def test_a_server_runs_its_indexer_in_a_worker_when_the_index_has_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from portamem.server.commands import serving

    monkeypatch.delenv("PORTAMEM_INDEXER_PROCESS", raising=False)
    assert serving(Settings(vector_process="child")).indexer_process == "child"
    assert serving(Settings(vector_uri="http://milvus:19530")).indexer_process == "child"
    assert serving(Settings(vector_process="inline")).indexer_process is None  # the worker could not reach it
    assert serving(Settings(vector_process="child", indexer_process="thread")).indexer_process == "thread"
    monkeypatch.setenv("PORTAMEM_INDEXER_PROCESS", "thread")
    assert serving(Settings(vector_process="child")).resolved_indexer_process == "thread"


def test_a_server_pays_its_first_search_costs_before_serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from portamem.read import calibration
    from portamem.server.commands import warm_up

    monkeypatch.setattr(calibration, "_hubness", {})  # as in a fresh process
    embedded: list[str] = []
    mem = Memory(settings=Settings(path=str(tmp_path / "s"), embedder="null-hash", embed_workers=0))
    try:
        inner = mem.embedder.embed

        def counting(texts: list[str], *, kind: str = "passage"):  # noqa: ANN202
            embedded.extend(texts)
            return inner(texts, kind=kind)

        monkeypatch.setattr(mem.embedder, "embed", counting)
        warm_up(mem)
        mem.save_memory("the kettle is descaled every month", user_id="u", wait=True)
        embedded.clear()
        mem.search_memory("how often is the kettle descaled", user_id="u")
        assert embedded == ["how often is the kettle descaled"]  # the query alone: the background set was embedded before
    finally:
        mem.close()


def test_what_a_search_embedded_is_not_embedded_again_by_the_worker(mem: Memory) -> None:
    indexer = _worker(mem)
    mem.save_memory("the kettle is descaled every month", user_id="u")
    mem.flush()
    mem.search_memory("kettle", user_id="u")  # the user's vectors loaded: a queued row is scored by the search
    mem.save_memories([f"backlog {i}: shelf {i % 13} of aisle {i % 7} holds item {i}" for i in range(400)],
                      user_id="other")  # the worker is busy with these when the search embeds the next
    saved = mem.save_memories([f"line {i}: the {w} goes back to the library on Friday"
                               for i, w in enumerate(("atlas", "novel", "cookbook"))], user_id="u")
    hits = mem.search_memory("which book goes back to the library", user_id="u", sources=["vector"])
    assert {h.memory_id for h in hits} >= {r.memory_id for r in saved}  # scored before the worker had them
    mem.flush()
    assert indexer.offered_total >= 1, "the worker embedded again what the search had embedded"
    assert {r.memory_id for r in saved} <= mem.index.ids()


def test_a_batch_this_process_cannot_refresh_still_settles(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while refreshing what this process keeps of a batch (once: a search's user moved in the
    replica under it) drops those copies instead of stopping the reader the worker writes to."""
    mem.save_memory("the spare key is under the blue flowerpot", user_id="u")
    mem.flush()
    mem.search_memory("spare key", user_id="u")
    assert mem.vectors.holds("default", "u")
    real = IndexerProcess._refresh
    failures = []

    def once(self: IndexerProcess, rows, keywords):  # noqa: ANN001, ANN202
        if not failures:
            failures.append(rows)
            raise RuntimeError("OrderedDict mutated during iteration")
        return real(self, rows, keywords)

    monkeypatch.setattr(IndexerProcess, "_refresh", once)
    first = mem.save_memory("the bicycle pump is in the cellar", user_id="u")
    mem.flush(timeout=30)
    assert failures and not mem.vectors.holds("default", "u")  # dropped: read again from the store
    later = mem.save_memory("the tent pegs are in the blue bag", user_id="u")
    mem.flush(timeout=30)  # the reader lives on: this batch settles too
    hits = {h.memory_id for h in mem.search_memory("where are the pump and the tent pegs", user_id="u",
                                                   sources=["vector"], top_k=5)}
    assert {first.memory_id, later.memory_id} <= hits


def test_closing_while_the_worker_is_started_again_leaves_no_worker(tmp_path: Path) -> None:
    mem = _open(tmp_path / "s")
    indexer = _worker(mem)
    kept = mem.save_memory("the fuse box is behind the coats", user_id="u")
    pid = indexer.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)  # the supervisor is starting the next worker now
    started = time.monotonic()
    mem.close()
    assert time.monotonic() - started < 60
    assert _gone(pid)
    assert not [p for p in psutil.Process().children(recursive=True)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and "portamem.background.worker" in " ".join(p.cmdline())]
    again = _open(tmp_path / "s")
    try:
        again.flush(timeout=60)
        assert kept.memory_id in again.index.ids()
    finally:
        again.close()
