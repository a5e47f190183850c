"""Vector index on Milvus (milvus-lite directory by default, a Milvus server by URI): exact FLAT search.

The index is derived data: it holds active records only and can always be rebuilt from the record store.
Filter expressions are built from integers only (scope keys are hashes of tenant and user), so no
caller-supplied string is ever pasted into a Milvus expression.

On a server (``http://host:19530[/database]``) collections are created with Strong consistency, so a
search sees every write acknowledged before it without a flush; flushing a Milvus server costs seconds
and only seals segments, so it happens on demand (:meth:`MilvusVectorIndex.flush`), never per write.
milvus-lite, embedded or served (``milvus-lite server``), converts its unflushed rows again on every
search (seconds at 20k), so it is flushed every ``FLUSH_EVERY`` writes.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import StoreError, StoreLockedError, StoreOpenError, StoreUnreachableError
from ..filters import SearchFilters
from ..records import MemoryRecord, MemoryType, Source, Trust

__all__ = ["MilvusVectorIndex", "VectorHit", "scope_key", "collection_name", "opt_key"]

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


def collection_name(model: str, dim: int) -> str:
    """One collection per embedding model, so a query never meets vectors of another model."""
    slug = re.sub(r"[^0-9a-zA-Z]+", "_", model).strip("_").lower()[:180]
    return f"portamem_{slug}_{dim}"


@dataclass(frozen=True)
class VectorHit:
    memory_id: str
    score: float


class MilvusVectorIndex:
    """Cosine search over one collection, one partition per tenant+user (milvus-lite prunes by partition)."""

    #: milvus-lite (embedded or served) converts unflushed rows again on every search: flush it after this many writes
    FLUSH_EVERY = 2000
    #: every query of every row ("" needs a limit on a server)
    _ALL = 'id != ""'

    def __init__(
        self,
        uri: str,
        *,
        model: str,
        dim: int,
        token: str | None = None,
        partition_per_user: bool = True,
    ) -> None:
        self.uri = uri
        self.dim = dim
        self.model = model
        self.name = collection_name(model, dim)
        self.partition_per_user = partition_per_user
        self._lock = threading.RLock()
        self._unflushed = 0
        self._closed = False
        self._local = not uri.startswith(("http://", "https://", "tcp://", "unix:"))
        self.remote = not self._local
        self._consistency: dict[str, str] = {"consistency_level": "Strong"} if self.remote else {}
        if self._local:
            if not uri.endswith(".db"):
                raise StoreOpenError(f"a milvus-lite index path must end in .db, got {uri!r}")
            uri = self.uri = os.path.abspath(uri)
            _acquire_local(uri)
        try:
            from pymilvus import MilvusClient

            kwargs: dict[str, Any] = {"uri": uri}
            if token:
                kwargs["token"] = token
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
        except StoreOpenError:
            self._release()
            raise
        except Exception as exc:  # pymilvus raises its own hierarchy plus gRPC errors
            self._release()
            raise StoreOpenError(f"cannot open vector index {uri}: {exc}") from exc

    # ---------------------------------------------------------------- setup
    def _ensure_collection(self) -> None:
        from pymilvus import DataType, MilvusClient

        c = self.client
        if not c.has_collection(self.name):
            s = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
            s.add_field("vec", DataType.FLOAT_VECTOR, dim=self.dim)
            s.add_field("scope", DataType.INT64)
            s.add_field("type", DataType.INT64)
            s.add_field("source", DataType.INT64)
            s.add_field("trust", DataType.INT64)
            s.add_field("session", DataType.INT64)
            s.add_field("agent", DataType.INT64)
            s.add_field("created_at", DataType.DOUBLE)
            s.add_field("importance", DataType.DOUBLE)
            ip = c.prepare_index_params()
            # FLAT: exact. milvus-lite's HNSW loses most neighbours under a selective filter.
            ip.add_index(field_name="vec", index_type="FLAT", metric_type="COSINE")
            try:
                c.create_collection(self.name, schema=s, index_params=ip, **self._consistency)
            except Exception:
                if not c.has_collection(self.name):  # else another process on the server made it first
                    raise
        c.load_collection(self.name)
        self._partitions = set(c.list_partitions(self.name))

    def _partition(self, key: int) -> str:
        if not self.partition_per_user:
            return "_default"
        return f"p{key & 0xFFFFFFFFFFFFFFFF:016x}"

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
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            if r.embedding is None or len(r.embedding) != self.dim:
                raise StoreError(f"record {r.memory_id} has no {self.dim}-d embedding for {self.model}")
            key = scope_key(r.tenant_id, r.user_id)
            by_partition.setdefault(self._partition(key), []).append(
                {
                    "id": r.memory_id,
                    "vec": [float(x) for x in r.embedding],
                    "scope": key,
                    "type": _TYPE_CODE[r.type],
                    "source": _SOURCE_CODE[r.source],
                    "trust": _TRUST_CODE[r.trust],
                    "session": opt_key("session", r.session_id),
                    "agent": opt_key("agent", r.agent_id),
                    "created_at": r.created_at.timestamp(),
                    "importance": float(r.importance),
                }
            )
        with self._lock:
            for partition, rows in by_partition.items():
                self._ensure_partition(partition)
                self.client.upsert(self.name, rows, partition_name=partition)
                self._unflushed += len(rows)
            self._maybe_flush()

    def delete(self, memory_ids: Iterable[str]) -> None:
        ids = list(memory_ids)
        if not ids:
            return
        with self._lock:
            for start in range(0, len(ids), 500):
                self.client.delete(self.name, ids=ids[start:start + 500])
            self._unflushed += len(ids)
            self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.lite and self._unflushed >= self.FLUSH_EVERY:
            self.flush()

    @property
    def unflushed(self) -> int:
        """Writes since the last flush."""
        return self._unflushed

    def flush(self) -> None:
        with self._lock:
            if self._unflushed:
                self.client.flush(self.name)
                self._unflushed = 0

    def drop(self) -> None:
        with self._lock:
            if self.client.has_collection(self.name):
                self.client.drop_collection(self.name)
            self._unflushed = 0
            self._ensure_collection()

    # ---------------------------------------------------------------- reads
    def search(
        self, tenant_id: str, user_id: str, vector: np.ndarray, k: int, filters: SearchFilters
    ) -> list[VectorHit]:
        found = self._query(scope_key(tenant_id, user_id), [np.asarray(vector, dtype=np.float32).tolist()], k, filters)
        return [] if found is None else found[0]

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3) -> dict[str, list[VectorHit]]:
        """For each record (by id), its k nearest active neighbours in its tenant+user, one call per scope."""
        by_scope: dict[int, list[MemoryRecord]] = {}
        for r in records:
            by_scope.setdefault(scope_key(r.tenant_id, r.user_id), []).append(r)
        out: dict[str, list[VectorHit]] = {}
        for key, group in by_scope.items():
            found = self._query(key, [[float(x) for x in r.embedding or ()] for r in group], k, SearchFilters())
            if found is not None:
                out.update((r.memory_id, hits) for r, hits in zip(group, found))
        return out

    def _query(
        self, key: int, vectors: list[list[float]], k: int, filters: SearchFilters
    ) -> list[list[VectorHit]] | None:
        """The k nearest of each vector within one scope; None when the scope has no partition yet."""
        partition = self._partition(key)
        if not self._has_partition(partition):
            return None
        with self._lock:
            result = self.client.search(
                self.name,
                data=vectors,
                anns_field="vec",
                limit=k,
                filter=self._expression(key, filters),
                partition_names=[partition],
                search_params={"metric_type": "COSINE"},
                output_fields=[],
                **self._consistency,
            )
        return [[VectorHit(str(h["id"]), float(h["distance"])) for h in hits] for hits in result]

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
        with self._lock:
            rows = self.client.query(self.name, filter=self._ALL, output_fields=["count(*)"], **self._consistency)
        return int(rows[0]["count(*)"])

    def ids(self) -> set[str]:
        out: set[str] = set()
        with self._lock:
            it = self.client.query_iterator(self.name, batch_size=5000, filter=self._ALL, output_fields=["id"],
                                            **self._consistency)
            try:
                while batch := it.next():
                    out.update(str(r["id"]) for r in batch)
            finally:
                it.close()
        return out

    def close(self) -> None:
        """Release the client (and the embedded server when this was its last user). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._local:  # a server keeps unsealed rows in its log: nothing is lost unflushed
                    self.flush()
            finally:
                try:
                    self.client.close()
                finally:
                    self._release()

    def _release(self) -> None:
        if self._local:
            self._local = False
            _release_local(self.uri)


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
