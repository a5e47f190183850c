"""The embedded vector index in its own supervised process (``Settings.vector_process = "child"``).

The other tests run the index inline (tests/conftest.py: a child costs about 0.8 s per store opened);
these open it as every user does by default: the child starts, is shared, stops with the store and
with a killed parent, and a child killed with -9 is restarted while searches still answer and no
acknowledged memory is lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder, get_embedder
from portamem.errors import StoreLockedError
from portamem.filters import SearchFilters
from portamem.storage import indexserver
from portamem.storage.vectors import IndexRestarting


@pytest.fixture(scope="module")
def hashed() -> Embedder:
    return get_embedder("null-hash", workers=0)


def _open(path: Path, embedder: Embedder, **changes: object) -> Memory:
    return Memory(settings=Settings(path=str(path), vector_process="child", **changes), embedder=embedder)


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def _await_restart(mem: Memory, pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    server = mem.index._server
    assert server is not None
    while time.monotonic() < deadline:
        if server.up and server.pid != pid and mem.index._generation == server.generation:
            return
        time.sleep(0.05)
    raise AssertionError("the vector index process was not restarted")


def test_child_starts_serves_and_stops(tmp_path: Path, hashed: Embedder) -> None:
    mem = _open(tmp_path / "s", hashed)
    pid = mem.index.server_pid
    assert mem.index.process == "child" and pid is not None and pid != os.getpid()
    assert psutil.Process(pid).ppid() == os.getpid()
    saved = mem.save_memory("the garden gate is painted green", user_id="u")
    mem.flush()
    assert mem.index.count() == 1
    assert mem.search_memory("garden gate", user_id="u")[0].memory_id == saved.memory_id
    mem.close()
    assert _gone(pid), "the child outlived the store"
    assert str((tmp_path / "s" / "vectors.db").resolve()) not in indexserver.running()
    again = _open(tmp_path / "s", hashed)  # its directory was closed: it opens again, with the row
    try:
        assert again.index.count() == 1
    finally:
        again.close()


def test_inline_keeps_the_index_in_this_process(tmp_path: Path, hashed: Embedder) -> None:
    mem = Memory(settings=Settings(path=str(tmp_path / "i"), vector_process="inline"), embedder=hashed)
    try:
        assert mem.index.process == "inline" and mem.index.server_pid is None
    finally:
        mem.close()


def test_the_environment_chooses_when_the_setting_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORTAMEM_VECTOR_PROCESS", "inline")
    assert Settings().resolved_vector_process == "inline"
    assert Settings(vector_process="child").resolved_vector_process == "child"
    monkeypatch.delenv("PORTAMEM_VECTOR_PROCESS")
    assert Settings().resolved_vector_process == "child"
    assert Settings.load(env={"PORTAMEM_VECTOR_PROCESS": "inline"}).vector_process == "inline"
    with pytest.raises(Exception, match="vector_process"):
        Settings(vector_process="thread")


def test_two_memories_share_one_child(tmp_path: Path, hashed: Embedder) -> None:
    first = _open(tmp_path / "s", hashed)
    second = _open(tmp_path / "s", hashed)
    pid = first.index.server_pid
    try:
        assert second.index.server_pid == pid
        first.save_memory("shared by both", user_id="u")
        first.flush()
        first.close()
        assert psutil.pid_exists(pid) and second.index.count() == 1  # the second still uses it
    finally:
        second.close()
    assert _gone(pid)


def test_another_process_gets_a_clear_error(tmp_path: Path, hashed: Embedder) -> None:
    mem = _open(tmp_path / "s", hashed)
    try:
        code = textwrap.dedent(f"""
            from portamem import Memory, Settings
            from portamem.embedding.embedders import get_embedder
            from portamem.errors import StoreLockedError
            try:
                Memory(settings=Settings(path={str(tmp_path / 's')!r}, vector_process="child"),
                       embedder=get_embedder("null-hash", workers=0))
            except StoreLockedError as exc:
                print("LOCKED", exc)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert "LOCKED" in out.stdout, out.stderr[-2000:]
    finally:
        mem.close()
    assert StoreLockedError  # the class the other process reports


@pytest.mark.parametrize("indexer", ["thread", "child"])
def test_a_killed_parent_leaves_no_orphan(tmp_path: Path, indexer: str) -> None:
    """Neither the index process nor, with ``indexer_process="child"``, the indexer's worker outlives a
    store killed with -9 (``tests/core/test_indexer_process.py`` has the worker's other tests)."""
    settings = (f"path={str(tmp_path / 's')!r}, vector_process='child', indexer_process={indexer!r}, "
                "embedder='null-hash', embed_workers=0")
    code = textwrap.dedent(f"""
        import sys, time
        from portamem import Memory, Settings
        mem = Memory(settings=Settings({settings}))
        mem.save_memory("written before the kill", user_id="u")
        mem.flush()
        print(mem.index.server_pid, getattr(mem.indexer, "pid", ""), flush=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert parent.stdout is not None
        child, *worker = (int(pid) for pid in parent.stdout.readline().split())
        assert psutil.pid_exists(child) and len(worker) == (indexer == "child")
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        assert _gone(child), "the index process outlived its killed parent"
        for pid in worker:
            assert _gone(pid, timeout=30), "the indexer process outlived its killed store"
    finally:
        if parent.poll() is None:
            parent.kill()
    mem = Memory(settings=Settings(path=str(tmp_path / "s"), vector_process="child", indexer_process=indexer,
                                   embedder="null-hash", embed_workers=0))
    try:
        mem.flush()
        assert [h.content for h in mem.search_memory("written before", user_id="u")] == ["written before the kill"]
    finally:
        mem.close()


@pytest.mark.parametrize("budget", [0.0, 512.0], ids=["index", "replica"])
def test_kill_9_search_falls_back_and_the_index_catches_up(tmp_path: Path, hashed: Embedder, budget: float,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Save, kill -9 the child, search (it answers, from the records), save more, then after the restart
    every acknowledged memory is found by a vector search. Budget 0: every vector search goes to the index."""
    monkeypatch.setattr(indexserver.IndexServer, "RESTART_DELAY_S", 3.0)  # down while the test looks
    mem = _open(tmp_path / "s", hashed, replica_budget_mb=budget)
    try:
        before = [mem.save_memory(f"note {i}: the {w} is in the drawer", user_id="u").memory_id
                  for i, w in enumerate(("key", "map", "pen", "watch", "ring"))]
        mem.flush()
        mem.index.drain()  # in the child's log, not only noted
        query = "the pen is in the drawer"
        up = [h.memory_id for h in mem.search_memory(query, user_id="u", sources=["vector"])]
        assert before[2] in up
        pid = mem.index.server_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert _gone(pid)
        with pytest.raises(IndexRestarting):  # what the index says until the child is back
            mem.index.search("default", "u", hashed.embed(["pen"], kind="query")[0], 3, SearchFilters())
        assert [h.memory_id for h in mem.search_memory(query, user_id="u", sources=["vector"])] == up  # from the records
        after = [mem.save_memory(f"later {i}: the {w} is on the shelf", user_id="u").memory_id
                 for i, w in enumerate(("cup", "book", "lamp"))]
        _await_restart(mem, pid)
        mem.flush(timeout=60)
        deadline = time.monotonic() + 60
        while mem.index.restarted and time.monotonic() < deadline:  # the indexer's check against the records
            time.sleep(0.05)
        assert not mem.index.restarted
        assert mem.index.ids() == set(before + after)
        for memory_id, word in zip(before + after, ("key", "map", "pen", "watch", "ring", "cup", "book", "lamp")):
            found = mem.index.search("default", "u", hashed.embed([f"the {word}"], kind="query")[0], 8,
                                     SearchFilters())
            assert memory_id in {h.memory_id for h in found}
    finally:
        mem.close()
    assert _gone(pid)


def test_close_while_the_child_restarts(tmp_path: Path, hashed: Embedder) -> None:
    mem = _open(tmp_path / "s", hashed)
    saved = mem.save_memory("noted before the crash", user_id="u")
    mem.flush()
    server = mem.index._server
    assert server is not None
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    mem.save_memory("noted while it is down", user_id="u")
    t = time.monotonic()
    mem.close()
    assert time.monotonic() - t < 30
    assert _gone(pid)
    time.sleep(0.5)  # a restart under way is ended too
    assert server.proc is None or server.proc.poll() is not None
    again = _open(tmp_path / "s", hashed)
    try:
        again.flush(timeout=60)
        deadline = time.monotonic() + 60
        while again.indexer.stats().pending and time.monotonic() < deadline:
            time.sleep(0.05)
        found = {h.content for h in again.search_memory("noted", user_id="u", sources=["vector"], top_k=5)}
        assert {"noted before the crash", "noted while it is down"} <= found
        assert saved.memory_id in again.index.ids()
    finally:
        again.close()


def test_a_child_that_cannot_start_leaves_the_index_inline(tmp_path: Path, hashed: Embedder,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexserver, "CHILD", "raise SystemExit(5)")
    mem = _open(tmp_path / "s", hashed)
    try:
        assert mem.index.process == "inline"
        mem.save_memory("kept all the same", user_id="u")
        mem.flush()
        assert mem.index.count() == 1
    finally:
        mem.close()


def test_reopened_while_the_last_user_closes(tmp_path: Path, hashed: Embedder) -> None:
    """An open that meets the directory's child stopping waits for it to let the directory go."""
    import threading

    first = _open(tmp_path / "s", hashed)
    first.save_memory("still there", user_id="u")
    first.flush()
    closing = threading.Thread(target=first.close)
    closing.start()
    second = _open(tmp_path / "s", hashed)
    closing.join()
    try:
        assert second.index.count() == 1
    finally:
        second.close()


def test_a_fork_does_not_stop_its_parents_child(tmp_path: Path, hashed: Embedder) -> None:
    mem = _open(tmp_path / "s", hashed)
    try:
        pid = os.fork()
        if pid == 0:  # the fork exits through the interpreter's exit handlers
            try:
                indexserver._stop_all()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert mem.index._server is not None and mem.index._server.up
        mem.save_memory("after the fork", user_id="u")
        mem.flush()
        assert mem.index.count() == 1
    finally:
        mem.close()


def test_a_command_of_a_moment_opens_the_index_inline_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    from portamem.cli.connect import one_shot

    monkeypatch.delenv("PORTAMEM_VECTOR_PROCESS", raising=False)
    assert one_shot(Settings()).resolved_vector_process == "inline"
    assert one_shot(Settings(vector_process="child")).resolved_vector_process == "child"
    monkeypatch.setenv("PORTAMEM_VECTOR_PROCESS", "child")
    assert one_shot(Settings()).resolved_vector_process == "child"
