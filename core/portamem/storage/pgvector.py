"""Vector index on pgvector: one table per embedding model in a PostgreSQL database (the records' own by
default), so a deployment needs PostgreSQL alone.

A search is an exact scan of the user's rows, found through a btree on the scope: ``ORDER BY`` the cosine
distance over those rows only, which returns what numpy brute force returns. pgvector's HNSW index loses
neighbours under a filter (its graph is walked for the whole table and the user's rows are a small part of
it), so it is used only when ``hnsw_above`` is set, a user holds at least that many rows and the search
narrows by the scope alone, with iterative scans in strict order; ``benchmarks/pgvector.py`` measures what
it agrees on.

Like the Milvus index it holds active records only, is rebuilt from the records when it disagrees with
them, and narrows by integers only: the scope, session and agent are the same 63-bit hashes
(``portamem.storage.vectors.scope_key``), and every operand is a bound parameter.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from ..errors import StoreError, StoreOpenError, ValidationError, VectorExtensionMissingError
from ..filters import SearchFilters
from ..records import MemoryRecord
from .dialect import open_engine, safe_url
from .vectors import _SOURCE_CODE, _TRUST_CODE, _TYPE_CODE, VectorHit, collection_name, index_row, opt_key, \
    scope_key

__all__ = ["PgVectorIndex", "table_name", "is_pgvector_uri", "PGVECTOR"]

log = logging.getLogger(__name__)

#: ``Settings.vector_uri`` word for a pgvector index in the records' own database
PGVECTOR = "pgvector"
#: advisory lock key held while the extension and tables are created (two processes at once fail otherwise)
_DDL_LOCK = 7_311_902_342
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def is_pgvector_uri(uri: str | None) -> bool:
    """Whether ``uri`` (``Settings.vector_uri``) names a pgvector index: the word ``pgvector`` (in the
    records' database) or a PostgreSQL URL (that database)."""
    return uri is not None and (uri == PGVECTOR or uri.startswith(("postgresql:", "postgresql+", "postgres:")))


def table_name(model: str, dim: int, half: bool = False) -> str:
    """The model's table (``collection_name``; ``_half`` after it for half-precision vectors), shortened
    with a hash to PostgreSQL's 63 characters."""
    tail = f"_{dim}_half" if half else f"_{dim}"
    name = collection_name(model, dim) + ("_half" if half else "")
    if len(name) <= 63:
        return name
    digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    return f"{name[:63 - len(digest) - len(tail) - 1]}_{digest}{tail}"


_FORMATS: dict[int, str] = {}


def _literal(vector: Any) -> str:
    """A vector as pgvector's text input. Nine significant digits read back as the same float32, and one
    format string for the whole vector is 2.7x faster than repr of each value (which was most of an upsert)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    fmt = _FORMATS.get(len(values))
    if fmt is None:
        fmt = _FORMATS[len(values)] = "[" + ",".join(["%.9g"] * len(values)) + "]"
    return fmt % tuple(values)


class PgVectorIndex:
    """Cosine search over one table of a PostgreSQL database with pgvector, scoped by tenant and user."""

    #: the writes are committed when ``upsert`` returns: nothing is noted, flushed or recovered
    deferred = False
    recovering = False
    restarted = False
    restart_mark = 0
    lite = False
    remote = True
    process = "server"
    server_pid = None
    noted = 0
    unflushed = 0
    #: rows written per statement batch
    BATCH = 500
    #: how long a user's row count is trusted when choosing between the exact scan and HNSW
    SIZE_TTL_S = 30.0

    def __init__(self, url: str, *, model: str, dim: int, hnsw_above: int | None = None,
                 ef_search: int = 200, max_scan_tuples: int = 200_000, half: bool = False) -> None:
        """``url``: a ``postgresql+psycopg://`` URL. ``hnsw_above``: users with at least this many rows
        are searched through an HNSW index (built when set); None: every search is exact. ``half``: the
        vectors stored as pgvector's ``halfvec`` (2 bytes a value, in a table of their own) instead of
        ``vector`` (4 bytes)."""
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 16000:
            raise StoreOpenError(f"a pgvector index needs a dimension from 1 to 16000, got {dim!r}")
        if hnsw_above is not None and (isinstance(hnsw_above, bool) or not isinstance(hnsw_above, int)
                                       or hnsw_above < 1):
            raise StoreOpenError(f"hnsw_above must be None or a positive integer, got {hnsw_above!r}")
        self.uri = url
        self.model = model
        self.dim = dim
        self.half = bool(half)
        #: pgvector's type of the stored vectors and of the query
        self.vtype = "halfvec" if self.half else "vector"
        self.name = table_name(model, dim, self.half)
        if not _IDENT.match(self.name):
            raise StoreOpenError(f"not a table name: {self.name!r}")
        self.hnsw_above = hnsw_above
        self.ef_search = int(ef_search)
        self.max_scan_tuples = int(max_scan_tuples)
        self._sizes: dict[int, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.engine = open_engine(url)
        if self.engine.dialect.name != "postgresql":
            self.engine.dispose()
            raise StoreOpenError(f"a pgvector index needs a PostgreSQL database, got {safe_url(url)}")
        try:
            self._ensure_table()
        except BaseException:
            self.engine.dispose()
            raise

    # ---------------------------------------------------------------- setup
    def _ensure_table(self) -> None:
        t, dim = self.name, self.dim
        with self.engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DDL_LOCK})
            has = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first()
            if has is None:
                try:
                    with conn.begin_nested():
                        conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS vector")
                except sa.exc.DBAPIError as exc:
                    raise VectorExtensionMissingError(
                        f"the PostgreSQL database at {safe_url(self.uri)} has no pgvector extension and it "
                        f"cannot be created ({str(exc.orig).strip().splitlines()[0]}): install pgvector on the "
                        "database server (https://github.com/pgvector/pgvector#installation; on Debian "
                        "`apt install postgresql-NN-pgvector`) and run `CREATE EXTENSION vector` there as a "
                        "superuser, or set vector_uri to a Milvus server (http://host:19530), or leave it unset "
                        "for the embedded milvus-lite index", safe_url(self.uri)) from exc
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {t} (id text PRIMARY KEY, scope bigint NOT NULL, "
                f"embedding {self.vtype}({dim}) NOT NULL, type smallint NOT NULL, source smallint NOT NULL, "
                "trust smallint NOT NULL, session bigint NOT NULL, agent bigint NOT NULL, "
                "created_at double precision NOT NULL, importance double precision NOT NULL)")
            conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {t}_scope ON {t} (scope)")
            if self.hnsw_above is not None:
                conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} "
                                     f"USING hnsw (embedding {self.vtype}_cosine_ops)")

    # ---------------------------------------------------------------- writes
    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        rows = [{**index_row(r, self.dim, self.model), "embedding": _literal(r.embedding)} for r in records]
        if not rows:
            return
        cols = ("scope", "embedding", "type", "source", "trust", "session", "agent", "created_at", "importance")
        stmt = sa.text(
            f"INSERT INTO {self.name} (id, {', '.join(cols)}) VALUES (:id, :scope, CAST(:embedding AS {self.vtype}), "
            ":type, :source, :trust, :session, :agent, :created_at, :importance) ON CONFLICT (id) DO UPDATE SET "
            + ", ".join(f"{c} = EXCLUDED.{c}" for c in cols))
        with self._begin() as conn:
            for start in range(0, len(rows), self.BATCH):
                conn.execute(stmt, rows[start:start + self.BATCH])
        self._sizes.clear()

    def delete(self, memory_ids: Iterable[str]) -> None:
        ids = list(memory_ids)
        if not ids:
            return
        with self._begin() as conn:
            for start in range(0, len(ids), 5000):
                conn.execute(sa.text(f"DELETE FROM {self.name} WHERE id = ANY(:ids)"), {"ids": ids[start:start + 5000]})
        self._sizes.clear()

    def flush(self) -> None:
        """Nothing to do: a write is committed when it returns."""

    def drain(self, timeout: float | None = None) -> None:
        """Nothing to do: no write waits to be applied."""

    def repaired(self, mark: int | None = None) -> None:
        """Nothing to note: this index is never left behind by a crash of the process that writes it."""

    def compact(self) -> None:
        """VACUUM the table: deleted rows leave its pages and its indexes, not only its searches (an erasure)."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql(f"VACUUM {self.name}")

    def drop(self) -> None:
        with self._begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self.name}")
        self._sizes.clear()
        self._ensure_table()

    # ---------------------------------------------------------------- reads
    def search(
        self, tenant_id: str, user_id: str, vector: np.ndarray, k: int, filters: SearchFilters,
        only: Collection[str] | None = None, depth: int | None = None,
    ) -> list[VectorHit]:
        """The k nearest within the scope the filters admit; ``only``: among these ids alone (what a filter
        the index cannot express admits, as the store found it). ``depth`` is accepted for the Milvus
        index's signature: the ids are a predicate here, so one search reaches k of them."""
        q = np.asarray(vector, dtype=np.float32).ravel()
        if q.shape[0] != self.dim or not np.isfinite(q).all():
            raise ValidationError(f"a query of the {self.dim}-d index {self.name} needs {self.dim} finite numbers, "
                                  f"got {q.shape[0]}")
        if k <= 0 or (only is not None and not only):
            return []
        key = scope_key(tenant_id, user_id)
        with self._begin() as conn:
            return self._search(conn, key, _literal(q), k, filters, only)

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3) -> dict[str, list[VectorHit]]:
        """For each record (by id), its k nearest active neighbours in its tenant+user."""
        out: dict[str, list[VectorHit]] = {}
        if not records:
            return out
        with self._begin() as conn:
            for r in records:
                if r.embedding is None or len(r.embedding) != self.dim:  # nothing to compare it with
                    out[r.memory_id] = []
                    continue
                out[r.memory_id] = self._search(conn, scope_key(r.tenant_id, r.user_id), _literal(r.embedding),
                                                k, SearchFilters(), None)
        return out

    def _search(self, conn: Any, key: int, q: str, k: int, f: SearchFilters,
                only: Collection[str] | None) -> list[VectorHit]:
        params = {"scope": key, "q": q, "k": int(k)}
        if self._walks_graph(conn, key, f, only):
            rows = conn.execute(self._statement(conn, f, only, params, hnsw=True), params).all()
            if len(rows) >= k:
                return [VectorHit(m, 1.0 - float(d)) for m, d in rows]
            # fewer than k: the walk stopped early, or the scope holds fewer; the exact scan says which
        rows = conn.execute(self._statement(conn, f, only, params, hnsw=False), params).all()
        return [VectorHit(m, 1.0 - float(d)) for m, d in rows]

    def walks_graph(self, tenant_id: str, user_id: str, filters: SearchFilters,
                    only: Collection[str] | None = None) -> bool:
        """Whether a search of this user with these filters takes the HNSW path (else the exact scan)."""
        with self._begin() as conn:
            return self._walks_graph(conn, scope_key(tenant_id, user_id), filters, only)

    def _walks_graph(self, conn: Any, key: int, f: SearchFilters, only: Collection[str] | None) -> bool:
        """The HNSW path is taken for a user of at least ``hnsw_above`` rows searched by the scope alone. An
        iterative scan in strict order found every neighbour an exact scan finds for the scope alone, at any
        share of the table measured (10-100 %), but lost some once a metadata filter narrowed the scope further
        (top-10 agreement 0.90-0.98 at ef_search 200, 0.60 for 20 users of 5,000: ``benchmarks/pgvector.py``);
        so a filtered search, or one among given ids, scans the user's rows exactly."""
        if self.hnsw_above is None or only is not None or self._where(f, None)[0]:
            return False
        return self._size(conn, key) >= self.hnsw_above

    def _statement(self, conn: Any, f: SearchFilters, only: Collection[str] | None, params: dict[str, Any],
                   hnsw: bool) -> Any:
        """The query of one search (its filters' operands added to ``params``); on the HNSW path this
        transaction's planner settings are made to walk the graph first."""
        where, operands = self._where(f, only)
        params.update(operands)
        if hnsw:
            # the scope is compared as an expression the btree cannot serve, and no sequential scan is
            # planned, so the HNSW graph is walked, visiting tuples until k pass the filters (strict
            # distance order) or max_scan_tuples were read
            conn.execute(sa.text("SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                                 "set_config('hnsw.ef_search', :ef, true), "
                                 "set_config('hnsw.max_scan_tuples', :mst, true), "
                                 "set_config('enable_seqscan', 'off', true)"),
                         {"ef": str(self.ef_search), "mst": str(self.max_scan_tuples)})
            return sa.text(f"SELECT id, embedding <=> CAST(:q AS {self.vtype}) AS d FROM {self.name} "
                           f"WHERE scope + 0 = :scope{where} ORDER BY embedding <=> CAST(:q AS {self.vtype}) LIMIT :k")
        # "d + 0": an ORDER BY the HNSW index cannot serve, so the btree finds the scope's rows and all are scored
        return sa.text(f"SELECT id, d FROM (SELECT id, embedding <=> CAST(:q AS {self.vtype}) AS d FROM {self.name} "
                       f"WHERE scope = :scope{where}) s ORDER BY d + 0, id LIMIT :k")

    def plan(self, tenant_id: str, user_id: str, vector: np.ndarray, k: int, filters: SearchFilters,
             hnsw: bool) -> str:
        """PostgreSQL's plan of a search on the exact path or the HNSW path (``EXPLAIN``)."""
        params: dict[str, Any] = {"scope": scope_key(tenant_id, user_id), "q": _literal(vector), "k": int(k)}
        with self._begin() as conn:
            stmt = self._statement(conn, filters, None, params, hnsw)
            return "\n".join(str(r) for (r,) in conn.execute(sa.text(f"EXPLAIN {stmt.text}"), params))

    def _size(self, conn: Any, key: int) -> int:
        """The scope's rows, counted at most every ``SIZE_TTL_S`` (a write of this index counts again)."""
        now = time.monotonic()
        known = self._sizes.get(key)
        if known is not None and now - known[1] < self.SIZE_TTL_S:
            return known[0]
        n = int(conn.execute(sa.text(f"SELECT count(*) FROM {self.name} WHERE scope = :s"), {"s": key}).scalar_one())
        self._sizes[key] = (n, now)
        return n

    @staticmethod
    def _where(f: SearchFilters, only: Collection[str] | None) -> tuple[str, dict[str, Any]]:
        """``MilvusVectorIndex._expression`` as SQL: every operand a bound parameter."""
        parts: list[str] = []
        params: dict[str, Any] = {}
        if f.types:
            parts.append("type = ANY(:types)")
            params["types"] = [_TYPE_CODE[t] for t in f.types]
        if f.sources:
            parts.append("source = ANY(:sources)")
            params["sources"] = [_SOURCE_CODE[s] for s in f.sources]
        if f.trusts:
            parts.append("trust = ANY(:trusts)")
            params["trusts"] = [_TRUST_CODE[t] for t in f.trusts]
        if f.session_id is not None:
            parts.append("session = :session")
            params["session"] = opt_key("session", f.session_id)
        if f.agent_id is not None:
            # the agent's own memories and the shared layer (key 0: no agent)
            parts.append("agent IN (:agent, 0)")
            params["agent"] = opt_key("agent", f.agent_id)
        if f.created_after is not None:
            parts.append("created_at > :after")
            params["after"] = float(f.created_after.timestamp())
        if f.created_before is not None:
            parts.append("created_at <= :before")
            params["before"] = float(f.created_before.timestamp())
        if f.min_importance is not None:
            parts.append("importance >= :importance")
            params["importance"] = float(f.min_importance)
        if only is not None:
            parts.append("id = ANY(:only)")
            params["only"] = list(only)
        return "".join(f" AND {p}" for p in parts), params

    def count(self) -> int:
        with self._begin() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {self.name}")).scalar_one())

    def ids(self) -> set[str]:
        with self._begin() as conn:
            return {str(m) for (m,) in conn.execute(sa.text(f"SELECT id FROM {self.name}"))}

    @property
    def address(self) -> str:
        """What another process (the indexer's worker) opens to reach this index: the database URL."""
        return self.uri

    def _begin(self) -> Any:
        if self._closed:
            raise StoreError("the vector index is closed")
        return self.engine.begin()

    def close(self) -> None:
        """Release the connections. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self.engine.dispose()
