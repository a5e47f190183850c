"""Vector index on Milvus (milvus-lite directory by default, a Milvus server by URI): exact FLAT search.

The index is derived data: it holds active records only and can always be rebuilt from the record store.
Filter expressions are built from integers only (scope keys are hashes of tenant and user), so no
caller-supplied string is ever pasted into a Milvus expression.

On a server (``http://host:19530[/database]``) collections are created with Strong consistency, so a
search sees every write acknowledged before it without a flush; flushing a Milvus server costs seconds
and only seals segments, so it happens on demand (:meth:`MilvusVectorIndex.flush`), never per write.
milvus-lite, embedded or served (``milvus-lite server``), converts its unflushed rows again on every
search (seconds at 20k), so it is flushed every ``FLUSH_EVERY`` writes.

An embedded milvus-lite index is written off the caller's path: ``upsert`` and ``delete`` note the
change and a background thread applies what accumulated in one batch (a milvus-lite write costs
about a millisecond of Python and gRPC whatever its size). Searches see the noted changes at once
(scored exactly beside the index's hits), ``flush``, ``count`` and ``ids`` apply them first, and a
marker file beside the index says changes were noted but not applied, so a store reopened after a
crash repairs the index from the records (``recovering``).

The embedded index runs in a child process by default (``process="child"``,
``portamem.storage.indexserver``): the store talks to it over loopback as to a Milvus server, and the
serving process holds none of its rows. If the child dies, reads and writes that need it raise
``IndexRestarting`` at once (vector reads fall back to the records, ``portamem.read.replica``; noted
writes wait), the supervisor starts it again, the index reconnects, applies what was noted, and the
indexer checks it against the records (``restarted``: ``portamem.background.upkeep.repair``).
``process="inline"`` keeps milvus-lite on threads of this process.

Users are spread over ``BUCKETS`` partitions by a hash of their scope (a search reads one bucket,
a batch of writes is one call per bucket); a partition per user made each new user's first write
rewrite milvus-lite's manifest of every partition (20 ms at 500 users, growing with them), each
batch one call per user, and a Milvus server caps a collection at 1,024 partitions. Collections
made before keep their partition per user.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

import numpy as np

from ..errors import StoreError, StoreLockedError, StoreOpenError, StoreUnreachableError
from ..filters import SearchFilters
from ..records import MemoryRecord, MemoryType, Source, Trust
from . import indexserver
from .quiet import LOCAL_CHANNEL_OPTIONS, lite_iteration

__all__ = ["MilvusVectorIndex", "is_server_uri", "IndexRestarting", "VectorHit", "scope_key", "index_row",
           "collection_name", "collection_schema", "opt_key"]

log = logging.getLogger(__name__)


class _UnimplementedCalls(logging.Filter):
    """Drops the gRPC server's report of a method milvus-lite does not implement: pymilvus asks the embedded
    server for ``AllocTimestamp`` on open, is told it is not implemented, and carries on; the report would be a
    NotImplementedError traceback in every app that configures logging. Any other report goes through."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NotImplementedError) and "Method not implemented" in str(exc))


logging.getLogger("grpc._server").addFilter(_UnimplementedCalls())

_TYPE_CODE = {t: i for i, t in enumerate(MemoryType)}
_SOURCE_CODE = {s: i for i, s in enumerate(Source)}
_TRUST_CODE = {t: i for i, t in enumerate(Trust)}


def _key(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def scope_key(tenant_id: str, user_id: str) -> int:
    """A 63-bit hash of tenant and user; results are checked against the records, so a collision cannot leak."""
    return _key("scope", tenant_id, user_id)


def opt_key(kind: str, value: str | None) -> int:
    return 0 if value is None else _key(kind, value)


def is_server_uri(uri: str) -> bool:
    """Whether ``uri`` names a Milvus server (else a milvus-lite file this process opens)."""
    return uri.startswith(("http://", "https://", "tcp://", "unix:"))


def collection_name(model: str, dim: int) -> str:
    """One collection per embedding model, so a query never meets vectors of another model."""
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", model).strip("_").lower()[:180]
    return f"portamem_{slug}_{dim}"


def collection_schema(dim: int) -> Any:
    """The fields of a collection: the vector and the filter columns a search narrows by."""
    from pymilvus import DataType, MilvusClient

    s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
    for name in ("scope", "type", "source", "trust", "session", "agent"):
        s.add_field(name, DataType.INT64)
    s.add_field("created_at", DataType.DOUBLE)
    s.add_field("importance", DataType.DOUBLE)
    return s


def index_row(record: MemoryRecord, dim: int, model: str) -> dict[str, Any]:
    """The columns a vector index keeps beside a record's vector, the ones its filters narrow by (each
    index adds the vector in its own form); a ``StoreError`` for a record without a ``dim``-d embedding."""
    if record.embedding is None or len(record.embedding) != dim:
        raise StoreError(f"record {record.memory_id} has no {dim}-d embedding for {model}")
    return {
        "id": record.memory_id,
        "scope": scope_key(record.tenant_id, record.user_id),
        "type": _TYPE_CODE[record.type],
        "source": _SOURCE_CODE[record.source],
        "trust": _TRUST_CODE[record.trust],
        "session": opt_key("session", record.session_id),
        "agent": opt_key("agent", record.agent_id),
        "created_at": record.created_at.timestamp(),
        "importance": float(record.importance),
    }


class IndexRestarting(StoreUnreachableError):
    """The embedded index's process is down or restarting: vector reads fall back to the records."""


#: how the embedded milvus-lite index runs: its own supervised process, or threads of this one
VECTOR_PROCESSES = ("child", "inline")


@dataclass(frozen=True)
class VectorHit:
    memory_id: str
    score: float


class MilvusVectorIndex:
    """Cosine search over one collection, users spread over partitions (milvus-lite prunes by partition)."""

    #: milvus-lite (embedded or served) converts unflushed rows again on every search: flush it after this many writes
    FLUSH_EVERY = 2000
    #: partitions the users are spread over: a write is one call per partition it touches (about a
    #: millisecond each, against 0.12 ms a row in a batch), a search of a user outside the read
    #: replica scans one bucket
    BUCKETS = 16
    #: an embedded index applies noted writes once this many wait, or after ``WRITE_DELAY_S``
    WRITE_BATCH = 2048
    WRITE_DELAY_S = 1.0
    #: how long an opener waits for the vector index of a collection another process is creating
    INDEX_WAIT_S = 10.0
    #: every query of every row ("" needs a limit on a server)
    _ALL = 'id != ""'
    #: the most hits one search asks of Milvus (its ``topk`` limit)
    MAX_LIMIT = 16384

    def __init__(
        self,
        uri: str,
        *,
        model: str,
        dim: int,
        token: str | None = None,
        partition_per_user: bool = True,
        process: str = "inline",
        local_server: bool = False,
    ) -> None:
        """``local_server``: ``uri`` is another process's embedded index (its child server), spoken to
        without keepalive pings as this process speaks to its own (``storage.quiet``)."""
        if process not in VECTOR_PROCESSES:
            raise StoreOpenError(f"process must be one of {VECTOR_PROCESSES}, got {process!r}")
        self.uri = uri
        self.dim = dim
        self.model = model
        self.name = collection_name(model, dim)
        self.partition_per_user = partition_per_user
        self._lock = threading.RLock()
        self._unflushed = 0
        self._closed = False
        self._client_closed = False
        self._local = not is_server_uri(uri)
        self.remote = not self._local
        #: writes noted and not yet applied (id -> (scope key, row; None for a delete)), and those in hand
        self._noted: dict[str, tuple[int | None, dict[str, Any] | None]] = {}
        self._applying: dict[str, tuple[int | None, dict[str, Any] | None]] = {}
        self._noted_cond = threading.Condition()
        self._noted_since = 0.0
        self._drain_asked = 0
        self._writer: threading.Thread | None = None
        self._write_error: str | None = None
        #: collections made before buckets keep a partition per user
        self._per_user = False
        self._consistency: dict[str, str] = {"consistency_level": "Strong"} if self.remote else {}
        #: the supervised child serving the embedded index (None: inline or a server's URI)
        self._server: indexserver.IndexServer | None = None
        #: the child's generation this index's client is connected to
        self._generation = 0
        #: restarts of the child this index reconnected after, and how many of them a repair covered
        self._restarts = 0
        self._repaired_restarts = 0
        if self._local:
            if not uri.endswith(".db"):
                raise StoreOpenError(f"a milvus-lite index path must end in .db, got {uri!r}")
            uri = self.uri = os.path.abspath(uri)
            # one process serves a directory one way: a second opener takes whatever the first started
            with _LOCAL_LOCK:
                inline_open = bool(_LOCAL_USERS.get(uri))
            if uri in indexserver.running() or (process == "child" and not inline_open):
                Path(uri).parent.mkdir(parents=True, exist_ok=True)
                if uri not in indexserver.running():
                    _check_not_locked(Path(uri))  # before a child is started only to find it locked
                try:
                    self._server = indexserver.acquire(uri)
                except StoreLockedError:
                    raise
                except (StoreOpenError, OSError) as exc:  # no interpreter to start, say: the store still opens
                    log.warning("cannot start the vector index process (%s); running it inline", exc)
            if self._server is not None:
                self._generation = self._server.generation
                uri = self._server.uri
            else:
                _acquire_local(uri)
        #: how this index runs: "child", "inline" or "server"
        self.process = "server" if self.remote else "child" if self._server is not None else "inline"
        #: the embedded index is written by a background thread (see the module docstring)
        self.deferred = self._local
        self._marker = Path(self.uri + ".pending") if self._local else None
        #: the last process noted writes it never applied: the records must repair the index
        self.recovering = self._marker is not None and self._marker.exists()
        try:
            from pymilvus import MilvusClient

            kwargs: dict[str, Any] = {"uri": uri}
            if token:
                kwargs["token"] = token
            if self._local or local_server:  # a milvus-lite server: no keepalive pings for it to refuse (``storage.quiet``)
                kwargs["grpc_options"] = dict(LOCAL_CHANNEL_OPTIONS)
            if self._server is not None:  # a channel of its own: pymilvus shares one per address, and a
                kwargs["dedicated"] = True  # restarted child may get the port of one that is gone
            try:
                self.client = MilvusClient(**kwargs)
            except Exception as exc:
                if self._local:
                    raise
                raise StoreUnreachableError(f"cannot reach the Milvus server at {uri}: {exc}", uri) from exc
            try:
                self._ensure_collection()
                #: flushed in batches (``FLUSH_EVERY``): milvus-lite here or behind the URI
                self.lite = self._local or "milvus_lite" in str(self.client.get_server_version())
            except Exception as exc:
                self.client.close()
                raise StoreOpenError(f"cannot prepare collection {self.name} in {uri}: {exc}") from exc
            if self._server is not None:
                self._server.listen(self._reconnect)
        except StoreOpenError:
            self._release()
            raise
        except Exception as exc:  # pymilvus raises its own hierarchy plus gRPC errors
            self._release()
            raise StoreOpenError(f"cannot open vector index {uri}: {exc}") from exc

    # ---------------------------------------------------------------- setup
    def _ensure_collection(self) -> None:
        c = self.client
        if not c.has_collection(self.name):
            try:
                c.create_collection(self.name, schema=collection_schema(self.dim), index_params=self._index_params(),
                                    **self._consistency)
            except Exception:
                if not c.has_collection(self.name):  # else another process on the server made it first
                    raise
        self._await_index()
        c.load_collection(self.name)
        self._partitions = set(c.list_partitions(self.name))
        self._per_user = any(len(p) == 17 and p.startswith("p") for p in self._partitions)

    def _index_params(self) -> Any:
        ip = self.client.prepare_index_params()
        # FLAT: exact. milvus-lite's HNSW loses most neighbours under a selective filter.
        ip.add_index(field_name="vec", index_type="FLAT", metric_type="COSINE")
        return ip

    def _await_index(self) -> None:
        """Wait for the vector index another process is building, or build it.

        On a server, creating a collection with its index is two calls: a process that
        finds the collection between them would load it before it has an index and be
        refused ("index not found"). It waits for the creator's index, and builds the
        FLAT index itself if none appears (the creator died between the calls).
        """
        if self._local:
            return  # one process holds a milvus-lite file: the collection came with its index
        c = self.client
        deadline = time.monotonic() + self.INDEX_WAIT_S
        while not c.list_indexes(self.name, field_name="vec"):
            if time.monotonic() >= deadline:
                try:
                    c.create_index(self.name, self._index_params())
                except Exception:
                    if not c.list_indexes(self.name, field_name="vec"):  # else the creator won the race
                        raise
                return
            time.sleep(0.05)

    # ---------------------------------------------------------------- the child process
    def _check_up(self) -> None:
        """Raise ``IndexRestarting`` while the child is down or this index has not reconnected to it yet."""
        server = self._server
        if server is not None and (not server.up or self._generation != server.generation):
            raise IndexRestarting(f"the vector index process for {self.uri} is restarting", self.uri)

    def _down(self, exc: BaseException) -> BaseException:
        """What a failed call raises: ``IndexRestarting`` when the child died under it (the supervisor
        notices within moments: waited for up to a second), else the error."""
        server = self._server
        if server is None:
            return exc
        deadline = time.monotonic() + 1.0
        while server.up and self._generation == server.generation:
            if time.monotonic() >= deadline:
                return exc
            time.sleep(0.02)
        return IndexRestarting(f"the vector index process for {self.uri} went down: {exc}", self.uri)

    def _reconnect(self, server: indexserver.IndexServer) -> None:
        """The child was started again (the supervisor's thread): connect to it, load the collection,
        then apply what was noted meanwhile and have the indexer check the index against the records."""
        from pymilvus import MilvusClient

        if self._client_closed:
            return
        client = MilvusClient(uri=server.uri, grpc_options=dict(LOCAL_CHANNEL_OPTIONS), dedicated=True)
        try:
            with self._lock:
                if self._client_closed:
                    raise StoreError("closed")
                old, self.client = self.client, client
                try:
                    self._ensure_collection()
                except BaseException:
                    self.client = old
                    raise
                self._generation = server.generation
                self._unflushed = 0
        except BaseException:
            client.close()
            if self._client_closed:
                return
            raise
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the channel to the dead child
            pass
        with self._noted_cond:
            self._restarts += 1
            self._noted_cond.notify_all()
        log.warning("reconnected to the restarted vector index process for %s; checking it against the records",
                    self.uri)

    @property
    def address(self) -> str | None:
        """The URI another process connects to for this index: the child's (current) address or the
        server's; None for an index inline in this process, which no other process can reach."""
        if self._server is not None:
            return self._server.uri if self._server.up else None
        return self.uri if self.remote else None

    @property
    def restarted(self) -> bool:
        """The child was restarted since the records last checked the index: the indexer repairs it."""
        return self._restarts != self._repaired_restarts

    @property
    def restart_mark(self) -> int:
        """Pass to ``repaired`` what a repair begun now covers."""
        return self._restarts

    @property
    def server_pid(self) -> int | None:
        """The pid of the child serving this index (None: inline or a server's URI)."""
        return None if self._server is None else self._server.pid

    def _partition(self, key: int) -> str:
        if not self.partition_per_user:
            return "_default"
        if self._per_user:
            return f"p{key & 0xFFFFFFFFFFFFFFFF:016x}"
        return f"b{(key & 0xFFFFFFFFFFFFFFFF) % self.BUCKETS:03d}"

    def _has_partition(self, name: str) -> bool:
        """Whether a partition exists; on a server another process may have made it since we looked."""
        if name in self._partitions:
            return True
        if self.remote and self.client.has_partition(self.name, name):
            self._partitions.add(name)
            return True
        return False

    def _ensure_partition(self, name: str) -> None:
        if name not in self._partitions:
            if not self.client.has_partition(self.name, name):
                try:
                    self.client.create_partition(self.name, name)
                except Exception:
                    if not self.client.has_partition(self.name, name):  # else made by another process
                        raise
            self._partitions.add(name)

    # ---------------------------------------------------------------- writes
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        rows: list[tuple[int, dict[str, Any]]] = []
        for r in records:
            row = index_row(r, self.dim, self.model)
            row["vec"] = np.asarray(r.embedding, dtype=np.float32)
            rows.append((row["scope"], row))
        if self.deferred:
            self._note([(row["id"], (key, row)) for key, row in rows])
        else:
            self._apply(dict((row["id"], (key, row)) for key, row in rows))

    def delete(self, memory_ids: Iterable[str]) -> None:
        ids = list(memory_ids)
        if not ids:
            return
        if self.deferred:
            self._note([(m, (None, None)) for m in ids])
        else:
            self._apply({m: (None, None) for m in ids})

    def _apply(self, changes: dict[str, tuple[int | None, dict[str, Any] | None]]) -> None:
        """Write changes to Milvus: upserts by partition, then deletes, in batches."""
        by_partition: dict[str, list[dict[str, Any]]] = {}
        gone: list[str] = []
        for memory_id, (key, row) in changes.items():
            if row is None:
                gone.append(memory_id)
            else:
                by_partition.setdefault(self._partition(int(key)), []).append(
                    {**row, "vec": row["vec"].tolist()})  # type: ignore[arg-type]
        with self._lock:
            self._check_up()
            try:
                for partition, rows in by_partition.items():
                    self._ensure_partition(partition)
                    self.client.upsert(self.name, rows, partition_name=partition)
                    self._unflushed += len(rows)
                for start in range(0, len(gone), 500):
                    self.client.delete(self.name, ids=gone[start:start + 500])
                self._unflushed += len(gone)
                self._maybe_flush()
            except Exception as exc:
                raise self._down(exc) from exc

    # ---------------------------------------------------------------- writes off the caller's path
    def _note(self, changes: list[tuple[str, tuple[int | None, dict[str, Any] | None]]]) -> None:
        with self._noted_cond:
            if self._closed:
                raise StoreError("the vector index is closed")
            if not self._noted and not self._applying:
                self._mark(True)
                self._noted_since = time.monotonic()
            self._noted.update(changes)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_loop, name="portamem-vector-writer", daemon=True)
                self._writer.start()
            self._noted_cond.notify_all()

    def _mark(self, pending: bool) -> None:
        """The marker file beside the index: present while noted writes are not applied (and, once
        found at open, until the records have repaired the index)."""
        if self._marker is None:
            return
        if pending:
            self._marker.touch()
        elif not self.recovering:
            self._marker.unlink(missing_ok=True)

    def repaired(self, mark: int | None = None) -> None:
        """The records have brought the index in line (``portamem.background.upkeep.repair``); ``mark``:
        ``restart_mark`` when the repair began (a restart since then needs another)."""
        with self._noted_cond:
            self.recovering = False
            self._repaired_restarts = self._restarts if mark is None else mark
            if not self._noted and not self._applying:
                self._mark(False)

    def _write_loop(self) -> None:
        while True:
            with self._noted_cond:
                while not self._noted or (
                        len(self._noted) < self.WRITE_BATCH and not self._drain_asked and not self._closed
                        and time.monotonic() - self._noted_since < self.WRITE_DELAY_S):
                    if self._closed and not self._noted:
                        return
                    wait = None if not self._noted else self.WRITE_DELAY_S - (time.monotonic() - self._noted_since)
                    self._noted_cond.wait(wait if wait is None else max(0.01, wait))
                self._applying, self._noted = self._noted, {}
                self._noted_since = time.monotonic()
            try:
                self._apply(self._applying)
                failed = None
            except IndexRestarting as exc:  # the supervisor restarts it: tried again after the reconnect
                failed = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # noqa: BLE001 - kept noted and tried again; searches still see them
                log.exception("vector index write failed; retrying")
                failed = f"{type(exc).__name__}: {exc}"
            with self._noted_cond:
                if failed is not None:  # newer notes of the same ids win
                    self._noted = {**self._applying, **self._noted}
                self._applying = {}
                self._write_error = failed
                if not self._noted:
                    self._mark(False)
                self._noted_cond.notify_all()
                if failed is not None:
                    if self._closed:  # the marker stays: the next open repairs the index from the records
                        return
                    self._noted_cond.wait(1.0)

    def drain(self, timeout: float | None = None) -> None:
        """Apply every noted write now (and wait for it)."""
        if self._writer is None:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._noted_cond:
            self._drain_asked += 1
            self._noted_cond.notify_all()
            try:
                while self._noted or self._applying:
                    if self._write_error is not None and not self._applying:
                        raise StoreError(f"the vector index cannot be written: {self._write_error}")
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise StoreError(f"the vector index still has {len(self._noted) + len(self._applying)} "
                                         f"writes to apply after {timeout} s")
                    self._noted_cond.wait(left)
            finally:
                self._drain_asked -= 1

    @property
    def noted(self) -> int:
        """Writes noted and not yet applied."""
        with self._noted_cond:
            return len(self._noted) + len(self._applying)

    def _overlay(self, key: int) -> tuple[set[str], list[dict[str, Any]]]:
        """Ids whose noted state overrides what the index holds, and the noted rows of one scope."""
        with self._noted_cond:
            changes = {**self._applying, **self._noted}
        return set(changes), [row for k, row in changes.values() if row is not None and k == key]

    def _maybe_flush(self) -> None:
        if self.lite and self._unflushed >= self.FLUSH_EVERY:
            self._flush_client()

    @property
    def unflushed(self) -> int:
        """Writes since the last flush."""
        return self._unflushed

    def flush(self) -> None:
        """Apply what is noted, then seal milvus's rows (its searches convert unflushed rows again)."""
        self.drain()
        self._flush_client()

    def _flush_client(self) -> None:
        with self._lock:
            if self._unflushed:
                self._check_up()
                self.client.flush(self.name)
                self._unflushed = 0

    def compact(self) -> None:
        """Ask the server to compact the collection: deleted rows leave its segments, not only its searches
        (an erasure). milvus-lite has no such call: its index is rebuilt instead."""
        self.drain()
        with self._lock:
            self._check_up()
            self.client.compact(self.name)

    def drop(self) -> None:
        with self._noted_cond:
            self._noted.clear()
        self.drain()
        with self._lock:
            self._check_up()
            if self.client.has_collection(self.name):
                self.client.drop_collection(self.name)
            self._unflushed = 0
            self._ensure_collection()

    # ---------------------------------------------------------------- reads
    def search(
        self, tenant_id: str, user_id: str, vector: np.ndarray, k: int, filters: SearchFilters,
        only: Collection[str] | None = None, depth: int | None = None,
    ) -> list[VectorHit]:
        """The k nearest within the scope the filters admit; ``only``: among these ids alone (what a
        filter the index cannot express admits, as the store found it). Then the index is asked for
        more hits, four times as many each time, until k of them are among ``only`` or the scope has
        no more (at most ``MAX_LIMIT``: the caller scores the ids itself when fewer come back).
        ``depth``: how many hits to ask for first (the caller's estimate of where k of ``only`` lie)."""
        return self._query(scope_key(tenant_id, user_id), [np.asarray(vector, dtype=np.float32).tolist()], k,
                           filters, only, depth)[0]

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3) -> dict[str, list[VectorHit]]:
        """For each record (by id), its k nearest active neighbours in its tenant+user, one call per scope."""
        by_scope: dict[int, list[MemoryRecord]] = {}
        for r in records:
            by_scope.setdefault(scope_key(r.tenant_id, r.user_id), []).append(r)
        out: dict[str, list[VectorHit]] = {}
        for key, group in by_scope.items():
            found = self._query(key, [[float(x) for x in r.embedding or ()] for r in group], k, SearchFilters())
            out.update((r.memory_id, hits) for r, hits in zip(group, found))
        return out

    def _query(
        self, key: int, vectors: list[list[float]], k: int, filters: SearchFilters,
        only: Collection[str] | None = None, depth: int | None = None,
    ) -> list[list[VectorHit]]:
        """The k nearest of each vector within one scope: the index's hits and the scope's noted
        writes, scored exactly beside them (a noted delete or newer version hides the index's row)."""
        hidden, noted = self._overlay(key) if self.deferred else (set(), [])
        partition = self._partition(key)
        found: list[list[VectorHit]] = [[] for _ in vectors]
        limit = min(max(k, depth or 0) + len(hidden), self.MAX_LIMIT)
        while self._has_partition(partition):
            with self._lock:
                self._check_up()
                try:
                    result = self.client.search(
                    self.name,
                        data=vectors,
                        anns_field="vec",
                        limit=limit,
                        filter=self._expression(key, filters),
                        partition_names=[partition],
                        search_params={"metric_type": "COSINE"},
                        output_fields=[],
                        **self._consistency,
                    )
                except Exception as exc:
                    raise self._down(exc) from exc
            found = [[VectorHit(str(h["id"]), float(h["distance"])) for h in hits
                      if str(h["id"]) not in hidden and (only is None or str(h["id"]) in only)]
                     for hits in result]
            if only is None or limit >= self.MAX_LIMIT or all(len(f) >= k for f in found) \
                    or all(len(hits) < limit for hits in result):
                break
            limit = min(limit * 4, self.MAX_LIMIT)
        noted = [row for row in noted if _admits(row, filters) and (only is None or row["id"] in only)]
        if not noted:
            return [hits[:k] for hits in found]
        mat = np.stack([row["vec"] for row in noted]).astype(np.float32)
        mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
        out = []
        for vec, hits in zip(vectors, found):
            q = np.asarray(vec, dtype=np.float32)
            scores = mat @ (q / max(float(np.linalg.norm(q)), 1e-12))
            merged = hits + [VectorHit(row["id"], float(s)) for row, s in zip(noted, scores)]
            out.append(sorted(merged, key=lambda h: -h.score)[:k])
        return out

    @staticmethod
    def _expression(key: int, f: SearchFilters) -> str:
        # every operand is an int or float produced here, never caller text
        parts = [f"scope == {int(key)}"]
        if f.types:
            parts.append(f"type in [{', '.join(str(_TYPE_CODE[t]) for t in f.types)}]")
        if f.sources:
            parts.append(f"source in [{', '.join(str(_SOURCE_CODE[s]) for s in f.sources)}]")
        if f.trusts:
            parts.append(f"trust in [{', '.join(str(_TRUST_CODE[t]) for t in f.trusts)}]")
        if f.session_id is not None:
            parts.append(f"session == {int(opt_key('session', f.session_id))}")
        if f.agent_id is not None:
            # the agent's own memories and the shared layer (key 0: no agent)
            parts.append(f"agent in [{int(opt_key('agent', f.agent_id))}, 0]")
        if f.created_after is not None:
            parts.append(f"created_at > {float(f.created_after.timestamp())!r}")
        if f.created_before is not None:
            parts.append(f"created_at <= {float(f.created_before.timestamp())!r}")
        if f.min_importance is not None:
            parts.append(f"importance >= {float(f.min_importance)!r}")
        return " and ".join(parts)

    def count(self) -> int:
        self.drain()
        # milvus-lite answers a filtered count by reading every matching row (12.5 s and +1.6 GB at 100k
        # rows); with no filter it reads its row count (0.1 s). A server wants the filter.
        with self._lock:
            self._check_up()
            rows = self.client.query(self.name, filter="" if self.lite else self._ALL, output_fields=["count(*)"],
                                     **self._consistency)
        return int(rows[0]["count(*)"])

    def ids(self) -> set[str]:
        self.drain()
        out: set[str] = set()
        with self._lock, lite_iteration() if self.lite else nullcontext():  # milvus-lite has no mvccTs to give
            self._check_up()
            it = self.client.query_iterator(self.name, batch_size=5000, filter=self._ALL, output_fields=["id"],
                                            **self._consistency)
            try:
                while batch := it.next():
                    out.update(str(r["id"]) for r in batch)
            finally:
                it.close()
        return out

    def close(self) -> None:
        """Apply what is noted, then release the client (and the embedded server when this was its
        last user). Idempotent."""
        try:
            self.drain()
        except StoreError:  # the marker stays: the next open repairs the index from the records
            log.exception("closing the vector index with writes not applied")
        with self._noted_cond:
            self._closed = True
            self._noted_cond.notify_all()
        if self._writer is not None:
            self._writer.join()
        if self._server is not None:
            self._server.unlisten(self._reconnect)
        with self._lock:
            if self._client_closed:
                return
            self._client_closed = True
            try:
                if self._local:  # a server keeps unsealed rows in its log: nothing is lost unflushed
                    self._flush_client()
            except IndexRestarting:  # its log holds what was applied; the marker covers what was not
                log.warning("closing the vector index while its process restarts")
            finally:
                try:
                    self.client.close()
                finally:
                    self._release()

    def _release(self) -> None:
        if self._local:
            self._local = False
            if self._server is not None:
                indexserver.release(self._server)
            else:
                _release_local(self.uri)


def _admits(row: dict[str, Any], f: SearchFilters) -> bool:
    """``MilvusVectorIndex._expression`` applied to one row (the scope is checked by the caller)."""
    if f.types and row["type"] not in {_TYPE_CODE[t] for t in f.types}:
        return False
    if f.sources and row["source"] not in {_SOURCE_CODE[x] for x in f.sources}:
        return False
    if f.trusts and row["trust"] not in {_TRUST_CODE[t] for t in f.trusts}:
        return False
    if f.session_id is not None and row["session"] != opt_key("session", f.session_id):
        return False
    if f.agent_id is not None and row["agent"] not in (opt_key("agent", f.agent_id), 0):
        return False
    if f.created_after is not None and not row["created_at"] > f.created_after.timestamp():
        return False
    if f.created_before is not None and not row["created_at"] <= f.created_before.timestamp():
        return False
    return f.min_importance is None or row["importance"] >= f.min_importance


# milvus-lite serves each .db directory from one in-process server that outlives its clients;
# count our users per directory and stop the server (fsyncing its WAL) when the last one closes.
_LOCAL_USERS: dict[str, int] = {}
_LOCAL_LOCK = threading.Lock()


def _acquire_local(path: str) -> None:
    with _LOCAL_LOCK:
        if not _LOCAL_USERS.get(path):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            _check_not_locked(Path(path))
        _LOCAL_USERS[path] = _LOCAL_USERS.get(path, 0) + 1


def _release_local(path: str) -> None:
    with _LOCAL_LOCK:
        _LOCAL_USERS[path] -= 1
        if _LOCAL_USERS[path] > 0:
            return
        del _LOCAL_USERS[path]
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(path)


def _check_not_locked(path: Path) -> None:
    """milvus-lite holds an flock on <dir>/LOCK; fail with a clear error instead of its opaque one."""
    lock = path / "LOCK"
    if not lock.exists():
        return
    import fcntl

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise StoreLockedError(
                f"{path} is open in another process; close it there, or run a Milvus server "
                "(`milvus-lite server --data-dir ...`) and point vector_uri at it"
            ) from exc
        raise
    finally:
        os.close(fd)
