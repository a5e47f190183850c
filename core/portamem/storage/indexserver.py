"""The embedded vector index in its own process: a milvus-lite server the store starts and supervises.

Run inside the serving process, milvus-lite is a gRPC server on threads that share its GIL and hold the
index's rows (about 510 MB per 100k) beside the read replica. By default (``Settings.vector_process``,
``"child"``) the store runs it instead as a child process bound to 127.0.0.1 on a free port, and talks
to it as to any Milvus server: the serving process keeps only the replica.

- One child per data directory and process: every index opened on that directory shares it
  (``acquire`` / ``release`` count the users); the last ``release`` stops it, and so does the
  interpreter's exit. The child flushes and closes its directory (fsyncing its log) when its stdin
  reaches end of file, on SIGTERM, and when its parent is gone (it checks its parent's pid each
  second), so a parent killed with ``kill -9`` leaves no orphan.
- milvus-lite locks its directory (``<dir>/LOCK``): a second process opening the same directory gets
  ``StoreLockedError``, as it does with the inline index.
- A child that dies is started again (after ``RESTART_DELAY_S``, doubling to at most ``MAX_BACKOFF_S``
  while it keeps dying); ``generation`` counts the starts and the listeners are told the new address once it answers,
  so the index reconnects and has its rows checked against the records (``MilvusVectorIndex``). While
  it is down, ``up`` is False and vector reads fall back to the records (``portamem.read.replica``).

May import: the errors (the storage layer's own helpers).
"""

from __future__ import annotations

import atexit
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from ..errors import StoreLockedError, StoreOpenError

__all__ = ["IndexServer", "acquire", "release", "running"]

log = logging.getLogger(__name__)

#: the child: milvus-lite's gRPC server on a free loopback port, its port printed on one line of stdout,
#: stopped (its directory flushed and closed) when stdin ends, on SIGTERM or when the parent is gone.
#: It imports only milvus-lite, never portamem.
CHILD = r'''
import os, signal, sys, threading
data_dir, parent = sys.argv[1], int(sys.argv[2])
signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    from milvus_lite.adapter.grpc.server import start_server_in_thread
    server, db, port = start_server_in_thread(data_dir, host="127.0.0.1", port=0)
except BaseException as exc:
    print("ERROR", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
    raise SystemExit(3)
print("PORT", port, flush=True)
sys.stdout = sys.stderr
done = threading.Event()

def stdin_closed():
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    done.set()

threading.Thread(target=stdin_closed, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: done.set())
while not done.wait(1.0):
    if os.getppid() != parent:
        break
try:
    server.stop(grace=2).wait(5)
finally:
    db.close()
    os._exit(0)
'''


class IndexServer:
    """One supervised milvus-lite child serving the directory ``path``."""

    #: how long a child may take to answer before its start fails
    START_TIMEOUT_S = 120.0
    #: how long a stopping child may take to close its directory before it is killed
    STOP_TIMEOUT_S = 30.0
    #: the wait before a dead child is started again, doubled while it keeps dying, up to ``MAX_BACKOFF_S``
    RESTART_DELAY_S = 0.2
    MAX_BACKOFF_S = 30.0

    def __init__(self, path: str) -> None:
        self.path = path
        self.users = 0
        #: how many children were started (1 after the first start)
        self.generation = 0
        self.restarts = 0
        self.uri = ""
        self.proc: subprocess.Popen[bytes] | None = None
        #: the child that answered (``proc`` while it starts is not it)
        self._answered: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._listeners: list[Callable[[IndexServer], None]] = []
        self._monitor: threading.Thread | None = None
        #: the process that started the child (a forked copy of this object must not stop it)
        self._owner = os.getpid()
        #: set once the child has stopped for good
        self.stopped = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the child and wait until it answers; the monitor restarts it if it dies."""
        self._spawn()
        self._monitor = threading.Thread(target=self._watch, name="portamem-index-supervisor", daemon=True)
        self._monitor.start()

    def _spawn(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, self.path, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,  # no terminal Ctrl-C
        )
        with self._lock:
            self.proc = proc
            stopping = self._stopping
        if stopping:
            self._end(proc)
            raise StoreOpenError(f"the vector index of {self.path} was closed while it started")
        assert proc.stdout is not None
        line = _read_line(proc.stdout.fileno(), self.START_TIMEOUT_S)
        proc.stdout.close()
        if not line.startswith("PORT "):
            self._end(proc)
            if "DataDirLockedError" in line:
                raise StoreLockedError(
                    f"{self.path} is open in another process; close it there, or run a Milvus server "
                    "(`milvus-lite server --data-dir ...`) and point vector_uri at it")
            raise StoreOpenError(f"the vector index process for {self.path} did not start: "
                                 f"{line.strip() or f'exit status {proc.poll()}'}")
        with self._lock:
            self.uri = f"http://127.0.0.1:{int(line.split()[1])}"
            self.generation += 1
            self._answered = proc

    @property
    def up(self) -> bool:
        """Whether the child of the current generation answered and is running (``returncode``, set by the
        supervisor's wait: ``poll`` from another thread answers None while that wait reaps the child)."""
        proc = self._answered
        return proc is not None and proc is self.proc and proc.returncode is None and not self._stopping

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return None if proc is None else proc.pid

    def listen(self, callback: Callable[[IndexServer], None]) -> None:
        """Call ``callback(self)`` from the supervisor's thread after each restart (the new ``uri``)."""
        with self._lock:
            self._listeners.append(callback)

    def unlisten(self, callback: Callable[[IndexServer], None]) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    def _watch(self) -> None:
        backoff = self.RESTART_DELAY_S
        while True:
            proc = self.proc
            assert proc is not None
            proc.wait()
            with self._lock:
                if self._answered is proc:
                    self._answered = None
            if self._stopping:
                return
            log.warning("the vector index process for %s exited (status %s); restarting it",
                        self.path, proc.returncode)
            while True:
                started = time.monotonic()
                time.sleep(backoff)
                if self._stopping:
                    return
                try:
                    self._spawn()
                    break
                except Exception:  # noqa: BLE001 - keeps trying; the index serves from the records meanwhile
                    if self._stopping:
                        return
                    log.exception("restarting the vector index process for %s failed", self.path)
                    backoff = min(backoff * 2, self.MAX_BACKOFF_S)
            self.restarts += 1
            with self._lock:
                listeners = list(self._listeners)
            for callback in listeners:
                try:
                    callback(self)
                except Exception:  # noqa: BLE001 - that index retries on its own
                    log.exception("reconnecting to the restarted vector index failed")
            if time.monotonic() - started > 60:
                backoff = self.RESTART_DELAY_S

    def stop(self) -> None:
        """Stop the child (it flushes and closes the directory) and its supervision. Idempotent."""
        if os.getpid() != self._owner:  # a fork of the process that started it: not ours to stop
            self.stopped.set()
            return
        with self._lock:
            self._stopping = True
            proc = self.proc
        if proc is not None:
            self._end(proc)
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(self.STOP_TIMEOUT_S)
        self.stopped.set()

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        """Close the child's stdin (it stops cleanly), then terminate and kill it if it lingers."""
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        for step in (lambda: None, proc.terminate, proc.kill):
            try:
                step()
                proc.wait(self.STOP_TIMEOUT_S if step is not proc.kill else None)
                return
            except subprocess.TimeoutExpired:
                log.warning("the vector index process %s for %s did not stop; ending it", proc.pid, self.path)
            except OSError:
                return


def _read_line(fd: int, timeout: float) -> str:
    """One line the child prints (or what it printed before exiting), within ``timeout`` seconds."""
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            return f"ERROR timeout: no answer within {timeout:.0f} s"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8", "replace").split("\n", 1)[0]


# ---------------------------------------------------------------------- one child per directory
_SERVERS: dict[str, IndexServer] = {}
#: children being stopped: a new child of the same directory waits for its lock to be let go
_CLOSING: dict[str, IndexServer] = {}
_LOCK = threading.Lock()


def acquire(path: str) -> IndexServer:
    """The running child of the directory ``path`` (an absolute path), started on its first user."""
    while True:
        with _LOCK:
            closing = _CLOSING.get(path)
            if closing is None:
                server = _SERVERS.get(path)
                if server is None:
                    server = IndexServer(path)
                    server.start()
                    _SERVERS[path] = server
                server.users += 1
                return server
        closing.stopped.wait(IndexServer.STOP_TIMEOUT_S)
        with _LOCK:
            if _CLOSING.get(path) is closing:
                del _CLOSING[path]


def release(server: IndexServer) -> None:
    """One user fewer; the last stops the child."""
    with _LOCK:
        server.users -= 1
        if server.users > 0:
            return
        if _SERVERS.get(server.path) is server:
            del _SERVERS[server.path]
        _CLOSING[server.path] = server
    try:
        server.stop()
    finally:
        with _LOCK:
            if _CLOSING.get(server.path) is server:
                del _CLOSING[server.path]


def running() -> dict[str, IndexServer]:
    """The children of this process, by directory."""
    with _LOCK:
        return dict(_SERVERS)


@atexit.register
def _stop_all() -> None:
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - at exit: the child stops on its own when our pipe closes
            pass

