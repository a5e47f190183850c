"""The background indexer in a worker process the store starts and supervises (``Settings.indexer_process``).

In a thread, the indexer's review (trust, dedupe, supersession: Python over each batch) shares the
serving process's GIL with the requests: an acknowledged save waited for it, about twice its own
CPU at the median while a backlog drained (``benchmarks/drain_save.py``). Here the same ``Indexer``
runs in ``python -m portamem.background.worker`` over the same outbox, and this process keeps only
the bookkeeping the write and read paths ask of an indexer (``IndexerProcess`` is one): which rows
wait, waits for them, flush, stats.

- The worker connects to the store's vector index process (``MilvusVectorIndex.address``), so the
  index must live in a process of its own (``vector_process`` "child" or a Milvus server).
- Rows are noted before their commit, as in a thread; the worker is told to look only once the commit
  is over (``RecordStore.committed``), so it never reads the outbox before the rows are in it.
- Each batch the worker commits comes back as a message: this process refreshes what it keeps of
  those rows (the read replica's vectors, the cached keyword postings of their users) before it marks
  them settled, so a search between the two finds them through the queue, then through the replica.
- A worker that dies (``kill -9``) is started again, with a doubling delay while it keeps dying; the
  batch it had not committed is still in the outbox, and replaying it decides the same (see
  ``background.indexer``). When the vector index process restarts, the worker is started again on its
  new address and repairs the index first, as the indexer thread does. On close the store flushes,
  then closes the worker's input: it stops after the batch in hand; one that does not is killed.

The review in the worker runs beside this process's synchronous changes (forget, update, tiers) as it
runs beside another process's on a shared PostgreSQL store: the store's lock no longer orders them.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import IO, Any

import numpy as np

from ..components import Components
from ..errors import StoreOpenError
from ..records import MemoryRecord, in_vector_index
from .indexer import Indexer
from .queued import HandOver

__all__ = ["IndexerProcess", "START_TIMEOUT_S", "handed_over"]

log = logging.getLogger(__name__)

#: how long a worker may take to open the store and the index and say it is ready
START_TIMEOUT_S = 120.0
#: the first delay before a worker that died is started again; it doubles to ``MAX_BACKOFF_S`` while
#: workers keep dying within ``STEADY_S`` of their start
RESTART_DELAY_S = 0.2
MAX_BACKOFF_S = 10.0
STEADY_S = 30.0
#: how long ``stop`` waits for the worker to finish its batch before it is killed
STOP_TIMEOUT_S = 30.0


class IndexerProcess(Indexer):
    """``Indexer``'s interface, with its thread's work done by a supervised worker process."""

    def __init__(self, parts: Components, *, batch: int, poll_s: float = 1.0) -> None:
        super().__init__(parts, batch=batch, poll_s=poll_s)
        #: what a search embeds of the queued rows goes on to the worker, which then embeds none of it again
        self.handover = _Forwarding(self._send)
        self._thread = threading.Thread(target=self._supervise, name="portamem-indexer-supervisor", daemon=True)
        self._signaller = threading.Thread(target=self._signal, name="portamem-indexer-signal", daemon=True)
        self._proc: subprocess.Popen[str] | None = None
        self._send_lock = threading.Lock()
        #: the index process's restarts the running worker was started after (it repairs the rest)
        self._mark = 0
        #: workers started, the first included
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running worker's process id."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    # ------------------------------------------------------------------ control
    def _launch(self) -> None:
        self._spawn(self._repair)  # at open: a worker that cannot start fails the open
        self._thread.start()
        self._signaller.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._end(self._proc)
        for thread in (self._thread, self._signaller):
            if thread.is_alive() and threading.current_thread() is not thread:
                thread.join()
        self._claims.close()

    def _end(self, proc: subprocess.Popen[str] | None) -> None:
        """Close the worker's input: it stops after the batch in hand; killed past ``STOP_TIMEOUT_S``."""
        if proc is None:
            return
        self._close_input(proc)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("the indexer process did not stop within %.0f s; killing it", STOP_TIMEOUT_S)
            proc.kill()
            proc.wait()

    def _ask(self, target: int) -> None:
        self._parts.store.committed()  # the worker reads the outbox after the commits that noted rows
        self._send(f"f {target}")

    # ------------------------------------------------------------------ the worker
    def _spawn(self, repair: bool) -> None:
        """Start a worker and wait for it to say it is ready; StoreOpenError when it cannot."""
        index = self._parts.index
        address = index.address
        if address is None:
            raise StoreOpenError("the vector index process is not up")
        mark = getattr(index, "restart_mark", 0)
        config = {"settings": dataclasses.asdict(self._parts.settings), "index_uri": address,
                  "index_local": getattr(index, "process", None) == "child", "parent": os.getpid(), "repair": repair}
        proc = subprocess.Popen([sys.executable, "-m", "portamem.background.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1,
                                env=_child_env())
        assert proc.stdin is not None and proc.stdout is not None
        message: dict[str, Any] = {}
        try:
            proc.stdin.write(json.dumps(config) + "\n")
            proc.stdin.flush()
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ({"ready", "failed"} & set(message)):  # what a library printed while importing is skipped
                line = _readline(proc.stdout, deadline - time.monotonic())
                if line is None:
                    break
                message = _parse(line)
        except (OSError, ValueError) as exc:
            log.warning("starting the indexer process failed: %s", exc)
        if "ready" not in message:
            exited = proc.poll()
            proc.kill()
            proc.wait()
            why = message.get("failed") or (f"it exited with {exited} before it was ready" if exited is not None
                                             else f"it was not ready within {START_TIMEOUT_S:.0f} s")
            raise StoreOpenError(f"cannot start the indexer process: {why}")
        self._proc = proc
        self._mark = mark
        self.starts += 1

    def _supervise(self) -> None:
        """Read the running worker's messages; start another when it dies, until ``stop``."""
        delay = RESTART_DELAY_S
        while True:
            proc = self._proc
            started = time.monotonic()
            if proc is not None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    try:
                        self._handle(_parse(line))
                    except Exception:  # noqa: BLE001 - the reader stops for nothing: the worker would block on it
                        log.exception("handling the indexer process's message failed: %r", line[:200])
                proc.wait()
            with self._cond:
                if self._stop:
                    return
                self._error = f"the indexer process exited with {proc.returncode if proc else None}; starting another"
                self._cond.notify_all()
            log.warning("%s", self._error)
            delay = RESTART_DELAY_S if time.monotonic() - started > STEADY_S else min(delay * 2, MAX_BACKOFF_S)
            while True:
                with self._cond:
                    if self._cond.wait_for(lambda: self._stop, delay):
                        return
                try:
                    self._spawn(repair=bool(getattr(self._parts.index, "restarted", False)))
                    break
                except (StoreOpenError, OSError) as exc:
                    log.warning("%s; trying again in %.1f s", exc, delay)
                    delay = min(delay * 2, MAX_BACKOFF_S)
            with self._cond:
                stopping = self._stop
                self._wake = True  # what was noted while no worker ran
                asked = self._requested if self._requested > self._drained else 0
                self._cond.notify_all()
            if stopping:  # ``stop`` came while this one started: it stops too
                self._end(self._proc)
                return
            if asked:  # a flush sent to the worker that died: the new one drains for it
                self._send(f"f {asked}")

    def _signal(self) -> None:
        """Tell the worker to look at the outbox once the commits that noted rows are over; start it
        again on the new address when the vector index process restarted."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or self._wake, 0.25)
                if self._stop:
                    return
                woken, self._wake = self._wake, False
            index = self._parts.index
            if getattr(index, "restarted", False) and getattr(index, "restart_mark", 0) != self._mark:
                proc = self._proc
                if proc is not None and proc.poll() is None:
                    log.warning("the vector index process restarted; starting the indexer process on its address")
                    self._mark = getattr(index, "restart_mark", 0)
                    proc.terminate()
                continue
            if woken:
                self._parts.store.committed()
                self._send("w")

    def _send(self, command: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        with self._send_lock:
            try:
                proc.stdin.write(command + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):  # it died: the supervisor starts another, which drains the outbox
                pass

    def _close_input(self, proc: subprocess.Popen[str]) -> None:
        with self._send_lock:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ its messages
    def _handle(self, message: dict[str, Any]) -> None:
        if "batch" in message:
            batch = message["batch"]
            rows = batch.get("rows") or []
            try:
                self._refresh(rows, batch.get("keywords", []))
            except Exception:  # noqa: BLE001 - what this process kept of them is dropped, read again when asked
                log.exception("refreshing the rows of an indexed batch failed; dropping what was kept of them")
                self._parts.store.forget_cached_keywords(None)
                for tenant_id, user_id, _ in rows:
                    self._parts.replica.drop_user(tenant_id, user_id)
            self.offered_total = int(batch.get("offered") or self.offered_total)
            self._batch_done(batch.get("done") or [], int(batch.get("written") or 0))
        elif "drained" in message:
            self._sweep()
            with self._cond:
                self._drained = max(self._drained, int(message["drained"]))
                self._cond.notify_all()
        elif "repaired" in message:
            index = self._parts.index
            if getattr(index, "recovering", False) or getattr(index, "restarted", False):
                index.repaired(self._mark)
        elif "error" in message:
            with self._cond:
                self._error = str(message["error"])
                self._cond.notify_all()

    def _refresh(self, rows: Sequence[Sequence[Any]], keywords: list[list[str]] | None) -> None:
        """Bring this process's copies of the rows a batch wrote in line with the store."""
        parts = self._parts
        parts.store.forget_cached_keywords(None if keywords is None else [(t, u) for t, u in keywords])
        replica = parts.replica
        for tenant_id, user_id, ids in rows:
            if not replica.holds(tenant_id, user_id):
                continue
            with parts.lock:
                found = parts.store.get(tenant_id, user_id, ids)
                keep = [r for r in found.values() if in_vector_index(r)]
                gone: list[Any] = [r for r in found.values() if not in_vector_index(r)]
                gone += [SimpleNamespace(memory_id=m, tenant_id=tenant_id, user_id=user_id) for m in ids if m not in found]
                replica.apply(keep, gone)


class _Forwarding(HandOver):
    """The hand-over cache of this process's searches, each vector put also sent to the worker's own
    (``v`` and a JSON line of [id, text, base64 float32 vector] triples), so the worker takes it
    instead of embedding the row again, as the indexer thread would."""

    def __init__(self, send: Callable[[str], None]) -> None:
        super().__init__()
        self._forward = send

    def put(self, records: Sequence[MemoryRecord], vectors: Sequence[np.ndarray]) -> None:
        super().put(records, vectors)
        items = [[r.memory_id, r.content, base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")]
                 for r, v in zip(records, vectors)]
        if items:
            self._forward("v " + json.dumps(items, ensure_ascii=False, separators=(",", ":")))


def handed_over(payload: str) -> tuple[list[Any], list[np.ndarray]]:
    """The rows and vectors of one ``v`` line (the worker's side of ``_Forwarding``)."""
    rows, vectors = [], []
    for memory_id, content, blob in json.loads(payload):
        rows.append(SimpleNamespace(memory_id=memory_id, content=content))
        vectors.append(np.frombuffer(base64.b64decode(blob), dtype="<f4").astype(np.float32))
    return rows, vectors


def _child_env() -> dict[str, str]:
    """The environment, with the folder this ``portamem`` was imported from first on the worker's path
    (a source checkout imports the same code as an installed package)."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above portamem/
    env["PYTHONPATH"] = os.pathsep.join([here, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _readline(stream: IO[str], timeout: float) -> str | None:
    """One line from ``stream`` within ``timeout`` seconds (None past it or at end of file)."""
    got: list[str | BaseException] = []

    def read() -> None:
        try:
            got.append(stream.readline())
        except BaseException as exc:  # noqa: BLE001 - said by the caller
            got.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, timeout))
    if got and isinstance(got[0], BaseException):
        log.warning("reading the indexer process failed: %r", got[0])
        return None
    return got[0] if got and got[0] else None  # type: ignore[return-value]


def _parse(line: str | None) -> dict[str, Any]:
    if not line:
        return {}
    try:
        message = json.loads(line)
    except ValueError:
        log.warning("the indexer process said something unexpected: %r", line[:200])
        return {}
    return message if isinstance(message, dict) else {}
