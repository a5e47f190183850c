"""An acknowledged write survives kill -9 of the server, and the store reopens under a new server.

Runs on the backend ``PORTAMEM_TEST_BACKEND`` names: the server opens the test's store through its
environment (the fixtures point ``PORTAMEM_DB_URL``/``PORTAMEM_VECTOR_URI`` at it)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from portamem import Memory, RemoteMemory, Settings, Status
from portamem.client import SERVER_FILE, discover
from portamem_conformance.remote import ServerProcess


def test_every_acknowledged_write_survives_kill_9(tmp_path: Path, embedder) -> None:
    path = tmp_path / "store"
    server = ServerProcess(path)
    key = server.key("acme")
    headers = {"Authorization": f"Bearer {key}"}
    acked: list[tuple[str, str]] = []
    lock = threading.Lock()
    enough = threading.Event()

    def client(n: int) -> None:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as c:
            for i in range(1000):
                text = f"Writer {n} note {i}: the parcel goes to dock {n * 1000 + i}."
                try:
                    r = c.post("/v1/memories", json={"user_id": f"user{n}", "content": text})
                except httpx.HTTPError:
                    return  # the server died under us: this write was never acknowledged
                if r.status_code == 201:
                    with lock:
                        acked.append((f"user{n}", r.json()["memory_id"]))
                        if len(acked) >= 40:
                            enough.set()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    try:
        for t in threads:
            t.start()
        assert enough.wait(240), server.output[-20:]
        server.kill()  # SIGKILL while writes are in flight: no shutdown, no flush
        for t in threads:
            t.join(60)
        assert discover(path) is None  # the pid in server.json is dead
    finally:
        server.kill()
    assert (path / SERVER_FILE).exists()

    again = ServerProcess(path)
    try:
        with RemoteMemory(again.url, key) as mem:
            for user_id, memory_id in acked:
                assert mem.get_memory(memory_id, user_id=user_id).memory_id == memory_id
            some_user, some_id = acked[0]
            text = mem.get_memory(some_id, user_id=some_user).content
            assert some_id in [h.memory_id for h in mem.search_memory(text, user_id=some_user, top_k=3)]
    finally:
        again.stop()
    assert not (path / SERVER_FILE).exists()
    # and each acknowledged write reached the vector index (the new server's indexer drained the outbox),
    # or was merged into a record that did
    with Memory(settings=Settings.load(path=str(path), tenant_id="acme"), embedder=embedder) as mem:
        mem.flush()
        assert mem.store.outbox_size() == 0
        indexed = mem.index.ids()
        for user_id, memory_id in acked:
            record = mem.get_memory(memory_id, user_id=user_id)
            assert memory_id in indexed or (record.status is Status.DELETED and record.superseded_by in indexed)


def test_a_server_whose_indexer_worker_is_killed_loses_nothing(tmp_path: Path) -> None:
    """With the index in its own process, ``portamem serve`` runs the indexer in a worker process: kill -9
    of that worker under acknowledged writes loses none of them, and stopping the server leaves no process."""
    import os
    import signal
    import time

    import psutil

    server = ServerProcess(tmp_path / "store", env={"PORTAMEM_VECTOR_PROCESS": "child"})
    try:
        def workers() -> list[psutil.Process]:
            found = []
            for p in psutil.Process(server.proc.pid).children():
                try:
                    if "portamem.background.worker" in " ".join(p.cmdline()):
                        found.append(p)
                except psutil.Error:  # a killed one not reaped yet
                    pass
            return found

        first = workers()
        assert len(first) == 1, "serve with the index in a child runs its indexer in a worker process"
        family = psutil.Process(server.proc.pid).children(recursive=True)
        key = server.key("acme")
        with RemoteMemory(server.url, key) as mem:
            before = [mem.save_memory(f"before {i}: the {w} is in the shed", user_id="u").memory_id
                      for i, w in enumerate(("rake", "hose", "saw"))]
            os.kill(first[0].pid, signal.SIGKILL)
            during = [mem.save_memory(f"during {i}: the {w} is in the car", user_id="u").memory_id
                      for i, w in enumerate(("jack", "rope", "torch"))]
            deadline = time.monotonic() + 60
            while not (workers() and workers()[0].pid != first[0].pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            mem.flush()
            for memory_id, word in zip(before + during, ("rake", "hose", "saw", "jack", "rope", "torch")):
                found = mem.search_memory(f"where is the {word}", user_id="u", top_k=3)
                assert memory_id in [h.memory_id for h in found], word
        family = psutil.Process(server.proc.pid).children(recursive=True)
    finally:
        server.stop()
    deadline = time.monotonic() + 30
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
