"""Per-user in-memory read replica of the vector index: one float32 matrix per user, exact search.

milvus-lite scans every row of a partition in Python on each search (75-90 ms at 100k rows); the
same exact answer from one matrix product takes about a millisecond. A user's vectors are loaded
lazily from the record store (the source of truth) on their first search, kept current by the
indexer and the synchronous write paths (both under the store's lock), and bounded by
``Settings.replica_budget_mb`` with least-recently-used users dropped first. A user who does not fit,
and every user when the budget is 0, is served by the Milvus index, which stays the durable index.
While the index's own process restarts (``IndexRestarting``), such a user's vectors are read from the
record store for that search and scored here: the same exact answer, slower.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..filters import SearchFilters
from ..records import MemoryRecord, MemoryType, Source, Tier, Trust
from ..storage.sql import RecordStore
from ..storage.vectors import IndexRestarting, MilvusVectorIndex, VectorHit, opt_key
from .metacols import MetaColumns

__all__ = ["UserVectors", "VectorReader"]

Scope = tuple[str, str]
_TYPE = {t.value: i for i, t in enumerate(MemoryType)}
_SOURCE = {s.value: i for i, s in enumerate(Source)}
_TRUST = {t.value: i for i, t in enumerate(Trust)}
#: bytes per row beside the vector: id string and dict slot, the filter columns
_ROW_OVERHEAD = 160
#: a metadata-filtered search of a user outside the replica scores up to this many admitted rows itself
EXACT_ADMITTED = 2048


class UserVectors:
    """One user's active vectors and the fields filters need, as columns; rows are appended, and
    overwritten or tombstoned in place (compacted when a quarter are dead)."""

    def __init__(self, dim: int, rows: Sequence[Any] = ()) -> None:
        n = len(rows)
        self.dim = dim
        self.ids: list[str | None] = []
        self.pos: dict[str, int] = {}
        self._alloc(max(16, n))
        self.n = 0
        self.dead = 0
        self.lock = threading.Lock()
        #: each row's metadata, and columns of the keys a filter named (``read.metacols``)
        self.meta = MetaColumns()
        if n:
            self.mat[:n] = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(n, dim)
            for i, r in enumerate(rows):
                self._fields(i, r[0], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9] if len(r) > 9 else None)
            self.n = n

    def _alloc(self, cap: int) -> None:
        old = getattr(self, "mat", None)
        n = getattr(self, "n", 0)
        cols = {"mat": (np.float32, (cap, self.dim)), "type": (np.int8, cap), "source": (np.int8, cap),
                "trust": (np.int8, cap), "session": (np.int64, cap), "agent": (np.int64, cap),
                "created": (np.float64, cap), "importance": (np.float64, cap), "alive": (np.bool_, cap)}
        for name, (dtype, shape) in cols.items():
            fresh = np.zeros(shape, dtype=dtype)
            if old is not None:
                fresh[:n] = getattr(self, name)[:n]
            setattr(self, name, fresh)

    def _fields(self, i: int, memory_id: str, mtype: str, source: str, trust: str, session: str | None,
                agent: str | None, created: float, importance: float, metadata: Any = None) -> None:
        self.meta.set(i, metadata)
        if i == len(self.ids):
            self.ids.append(memory_id)
        else:
            self.ids[i] = memory_id
        self.pos[memory_id] = i
        self.type[i], self.source[i], self.trust[i] = _TYPE[mtype], _SOURCE[source], _TRUST[trust]
        self.session[i], self.agent[i] = opt_key("session", session), opt_key("agent", agent)
        self.created[i], self.importance[i], self.alive[i] = created, importance, True

    @property
    def nbytes(self) -> int:
        return int(self.mat.nbytes) + len(self.mat) * _ROW_OVERHEAD

    def upsert(self, records: Sequence[MemoryRecord]) -> None:
        with self.lock:
            for r in records:
                i = self.pos.get(r.memory_id)
                if i is None:
                    if self.n == len(self.mat):
                        self._alloc(2 * len(self.mat))
                    i = self.n
                    self.n += 1
                elif not self.alive[i]:
                    self.dead -= 1
                self.mat[i] = np.asarray(r.embedding, dtype=np.float32)
                self._fields(i, r.memory_id, r.type.value, r.source.value, r.trust.value, r.session_id, r.agent_id,
                             r.created_at.timestamp(), float(r.importance), r.metadata)

    def delete(self, memory_ids: Collection[str]) -> None:
        with self.lock:
            for m in memory_ids:
                i = self.pos.pop(m, None)
                if i is not None and self.alive[i]:
                    self.alive[i] = False
                    self.mat[i] = 0.0  # a forgotten memory's vector leaves memory now, not at the next compaction
                    self.ids[i] = None
                    self.meta.set(i, None)
                    self.dead += 1
            if self.dead > 64 and self.dead * 4 > self.n:
                self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[:self.n])
        for name in ("mat", "type", "source", "trust", "session", "agent", "created", "importance", "alive"):
            col = getattr(self, name)
            col[:len(keep)] = col[keep]
        self.ids = [self.ids[i] for i in keep]
        self.meta.reset([self.meta.rows[i] for i in keep])
        self.pos = {m: i for i, m in enumerate(self.ids) if m is not None}
        self.n, self.dead = len(keep), 0

    def _mask(self, f: SearchFilters) -> np.ndarray | None:
        n = self.n
        parts: list[np.ndarray] = []
        if self.dead:
            parts.append(self.alive[:n])
        if f.types:
            parts.append(np.isin(self.type[:n], [_TYPE[t.value] for t in f.types]))
        if f.sources:
            parts.append(np.isin(self.source[:n], [_SOURCE[s.value] for s in f.sources]))
        if f.trusts:
            parts.append(np.isin(self.trust[:n], [_TRUST[t.value] for t in f.trusts]))
        if f.session_id is not None:
            parts.append(self.session[:n] == opt_key("session", f.session_id))
        if f.agent_id is not None:  # the agent's own memories and the shared layer (key 0)
            parts.append(np.isin(self.agent[:n], [opt_key("agent", f.agent_id), 0]))
        if f.created_after is not None:
            parts.append(self.created[:n] > f.created_after.timestamp())
        if f.created_before is not None:
            parts.append(self.created[:n] <= f.created_before.timestamp())
        if f.min_importance is not None:
            parts.append(self.importance[:n] >= f.min_importance)
        if f.metadata is not None:
            parts.append(self.meta.mask(f.metadata, n))
        if not parts:
            return None
        mask = parts[0].copy()
        for p in parts[1:]:
            mask &= p
        return mask

    def take(self, memory_ids: Collection[str]) -> dict[str, np.ndarray]:
        """Copies of the rows of those ids this user holds."""
        with self.lock:
            pos = [(m, self.pos[m]) for m in memory_ids if m in self.pos]
            if not pos:
                return {}
            rows = self.mat[[i for _, i in pos]]
        return {m: rows[j] for j, (m, _) in enumerate(pos)}

    def search(self, queries: np.ndarray, k: int, filters: SearchFilters,
               exclude: Collection[str] = ()) -> list[list[VectorHit]]:
        """The exact top ``k`` by cosine for each query row, ties in insertion order."""
        with self.lock:
            n = self.n
            if n == 0:
                return [[] for _ in range(len(queries))]
            scores = np.asarray(queries, dtype=np.float32) @ self.mat[:n].T
            mask = self._mask(filters)
            if exclude:
                drop = [self.pos[m] for m in exclude if m in self.pos]
                if drop:
                    mask = np.ones(n, dtype=bool) if mask is None else mask.copy()
                    mask[drop] = False
            out = []
            for row in scores:
                if mask is not None:
                    row = np.where(mask, row, -np.inf)
                    avail = int(mask.sum())
                else:
                    avail = n
                take = min(k, avail)
                if take <= 0:
                    out.append([])
                    continue
                top = np.argpartition(-row, take - 1)[:take] if take < n else np.arange(n)
                top = top[np.lexsort((top, -row[top]))][:take]
                out.append([VectorHit(self.ids[i], float(row[i])) for i in top])  # type: ignore[arg-type]
            return out


class VectorReader:
    """Vector search and neighbour look-ups: from the replica for users in the budget, else Milvus."""

    def __init__(self, store: RecordStore, index: MilvusVectorIndex, *, budget_mb: float, lock: Any) -> None:
        self.store = store
        self.index = index
        self.model = index.model
        self.dim = index.dim
        self.budget = int(budget_mb * 2**20)
        self._lock = lock  # the store's lock: loads and updates never interleave with a write
        self._users: OrderedDict[Scope, UserVectors] = OrderedDict()
        self._too_big: dict[Scope, int] = {}
        self._used = 0

    # ------------------------------------------------------------------ residency
    def _resident(self, scope: Scope) -> UserVectors | None:
        if self.budget <= 0:
            return None
        uv = self._users.get(scope)
        if uv is not None:  # no wait behind a write in progress: the replica is current at every commit
            try:
                self._users.move_to_end(scope)
            except KeyError:  # dropped by another thread just now
                pass
            return uv
        with self._lock:
            uv = self._users.get(scope)
            if uv is not None:
                return uv
            n = self.store.user_count(*scope)  # every status, from the keyword counters (one key look-up)
            need = n * (self.dim * 4 + _ROW_OVERHEAD)
            if need > self.budget or self._too_big.get(scope, -1) == n:
                self._too_big[scope] = n
                return None
            uv = UserVectors(self.dim, self.store.user_vectors(*scope, self.model))
            self._users[scope] = uv
            self._used += uv.nbytes
            while self._used > self.budget and len(self._users) > 1:
                _, old = self._users.popitem(last=False)
                self._used -= old.nbytes
            return uv

    def drop_user(self, tenant_id: str, user_id: str) -> None:
        """Unload one user whatever they hold (an erased user: ``portamem.lifecycle.erasure``)."""
        with self._lock:
            uv = self._users.pop((tenant_id, user_id), None)
            self._too_big.pop((tenant_id, user_id), None)
            if uv is not None:
                self._used -= uv.nbytes

    def holds(self, tenant_id: str, user_id: str) -> bool:
        """Whether one user's vectors are loaded."""
        return (tenant_id, user_id) in self._users

    def loaded_ids(self, tenant_id: str, user_id: str) -> set[str]:
        """The ids whose vectors the replica holds for one user (none when the user is not loaded)."""
        uv = self._users.get((tenant_id, user_id))
        return set() if uv is None else set(uv.pos)

    def resident_users(self) -> int:
        return len(self._users)

    def resident_bytes(self) -> int:
        return self._used

    def clear(self) -> None:
        with self._lock:
            self._users.clear()
            self._too_big.clear()
            self._used = 0

    # ------------------------------------------------------------------ upkeep (caller holds the lock)
    def apply(self, upserts: Sequence[MemoryRecord], removed: Sequence[MemoryRecord]) -> None:
        """Mirror an index write into the loaded users; users not loaded read the store when they load."""
        if not self._users:
            return
        for scope, group in _by_scope(upserts).items():
            uv = self._users.get(scope)
            if uv is not None:
                before = uv.nbytes
                uv.upsert([r for r in group if r.embedding is not None and r.embedding_model == self.model])
                self._used += uv.nbytes - before
        for scope, group in _by_scope(removed).items():
            uv = self._users.get(scope)
            if uv is not None:
                uv.delete([r.memory_id for r in group])

    def forget(self, memory_ids: Collection[str]) -> None:
        """Drop ids from whichever loaded user holds them (a delete that knows only ids)."""
        for uv in list(self._users.values()):  # a search moves its user to the end without the lock
            uv.delete([m for m in memory_ids if m in uv.pos])

    # ------------------------------------------------------------------ reads
    def search(self, tenant_id: str, user_id: str, vector: np.ndarray, k: int,
               filters: SearchFilters) -> list[VectorHit]:
        uv = self._resident((tenant_id, user_id))
        if uv is None:
            try:
                if filters.metadata is not None:
                    return self._search_admitted(tenant_id, user_id, vector, k, filters)
                return self.index.search(tenant_id, user_id, vector, k, filters)
            except IndexRestarting:
                uv = self._from_records((tenant_id, user_id))
        return uv.search(np.asarray(vector, dtype=np.float32)[None, :], k, filters)[0]

    def _from_records(self, scope: Scope) -> UserVectors:
        """One user's vectors read from the record store for one search, never kept (the index's process
        is restarting)."""
        return UserVectors(self.dim, self.store.user_vectors(*scope, self.model))

    def _search_admitted(self, tenant_id: str, user_id: str, vector: np.ndarray, k: int,
                         filters: SearchFilters) -> list[VectorHit]:
        """A metadata-filtered search of a user the replica does not hold: Milvus holds no metadata,
        so the store names the rows the filters admit, and the nearest k are found among those alone
        (scored here when they are few, or when the index cannot reach k of them)."""
        allowed = self.store.admitted_ids(tenant_id, user_id, replace(filters, tiers=(Tier.HOT,)))
        if not allowed:
            return []
        if len(allowed) > EXACT_ADMITTED:
            # one search usually reaches k of them: as deep as k admitted rows lie among all the user's
            depth = int(2 * k * max(1, self.store.user_count(tenant_id, user_id)) / len(allowed)) + 1
            hits = self.index.search(tenant_id, user_id, vector, k, filters, only=allowed, depth=depth)
            if len(hits) >= min(k, len(allowed)):
                return hits
        q = np.asarray(vector, dtype=np.float32)
        scored: list[VectorHit] = []
        ids = sorted(allowed)
        for start in range(0, len(ids), 4096):
            found = self.store.vectors(tenant_id, user_id, ids[start:start + 4096], self.model)
            if found:
                names = list(found)
                scores = np.stack([found[m] for m in names]) @ q
                scored += [VectorHit(m, float(s)) for m, s in zip(names, scores.tolist())]
                scored = sorted(scored, key=lambda h: -h.score)[:k]
        return scored

    def vectors(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of these ids (float32): the replica's rows, the store's for the rest (rows not
        active, or of a user outside the budget); ids with no vector of the model are left out."""
        uv = self._resident((tenant_id, user_id))
        found = uv.take(memory_ids) if uv is not None else {}
        rest = [m for m in memory_ids if m not in found]
        if rest:
            found.update(self.store.vectors(tenant_id, user_id, rest, self.model))
        return found

    def nearest(self, records: Sequence[MemoryRecord], k: int = 3,
                exclude: Collection[str] = ()) -> dict[str, list[VectorHit]]:
        """Each record's k nearest active neighbours in its own tenant+user, none of ``exclude``."""
        out: dict[str, list[VectorHit]] = {}
        for scope, group in _by_scope(records).items():
            uv = self._resident(scope)
            queries = np.asarray([r.embedding for r in group], dtype=np.float32)
            if uv is not None:
                found = uv.search(queries, k, SearchFilters(), exclude)
                out.update((r.memory_id, hits) for r, hits in zip(group, found))
            else:
                try:
                    hits = self.index.nearest(group, k=k + len(exclude))
                except IndexRestarting:
                    found = self._from_records(scope).search(queries, k, SearchFilters(), exclude)
                    out.update((r.memory_id, hits) for r, hits in zip(group, found))
                    continue
                out.update((m, [h for h in hs if h.memory_id not in exclude][:k]) for m, hs in hits.items())
        return out


def _by_scope(records: Sequence[MemoryRecord]) -> dict[Scope, list[MemoryRecord]]:
    out: dict[Scope, list[MemoryRecord]] = {}
    for r in records:
        out.setdefault((r.tenant_id, r.user_id), []).append(r)
    return out
