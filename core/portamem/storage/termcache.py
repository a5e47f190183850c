"""An in-memory copy of the keyword postings that searches read, for a store one process owns.

Scoring a common word's postings in SQL is the dearest part of a keyword search at 100k records of
one user (the statement sums tens of thousands of rows on every search). This cache keeps, per
(tenant, user, term) that a search asked for, the postings as three arrays (record key, tf, length),
and per user the record count and total length, and scores them with numpy by the same formula.

It stays exact: every change of the postings is noted in its transaction (``note``, by
``PostingsKeywordIndex``) and applied to the cached terms once that transaction
commits (``RecordStore.transaction``: ``take`` then ``apply``), still under the store's write lock; a term or a user's counts
are loaded from the store under that same lock, so a load never misses, or counts twice, a commit.
Only a store written by this process alone may use it (SQLite: the store lock keeps other processes
out); a store shared by several processes (PostgreSQL) scores in SQL.

Least recently used terms are dropped beyond ``budget_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

__all__ = ["TermCache", "Postings"]

Scope = tuple[str, str]
TermKey = tuple[str, str, str]
#: the key under which a connection carries its transaction's noted changes
NOTES = "portamem_keyword_notes"
#: users whose counts are kept
_USERS = 100_000
#: bytes per cached term beside its arrays (dict slots, the key's strings, the arrays' headers)
_TERM_OVERHEAD = 400


class Postings:
    """One user's postings of one term: record keys (in no order: scoring sums by key), with their tf
    and text length.

    Never changed once built (a change builds a new one), so a search holding it reads one state."""

    __slots__ = ("pk", "tf", "dl")

    def __init__(self, pk: np.ndarray, tf: np.ndarray, dl: np.ndarray) -> None:
        self.pk, self.tf, self.dl = pk, tf, dl

    @property
    def nbytes(self) -> int:
        return int(self.pk.nbytes + self.tf.nbytes + self.dl.nbytes) + _TERM_OVERHEAD

    def added(self, pks: Sequence[int], tfs: Sequence[int], dls: Sequence[int]) -> Postings:
        return Postings(np.concatenate([self.pk, np.asarray(pks, dtype=np.int64)]),
                        np.concatenate([self.tf, np.asarray(tfs, dtype=np.int32)]),
                        np.concatenate([self.dl, np.asarray(dls, dtype=np.int32)]))

    def dropped(self, pks: Iterable[int]) -> Postings:
        keep = ~np.isin(self.pk, np.fromiter(pks, dtype=np.int64))
        return Postings(self.pk[keep], self.tf[keep], self.dl[keep])


class TermCache:
    """The cached postings and per-user counts of one record store (thread-safe)."""

    def __init__(self, budget_bytes: int, write_lock: AbstractContextManager[Any]) -> None:
        self.budget = int(budget_bytes)
        self._write_lock = write_lock
        self._lock = threading.Lock()
        self._terms: OrderedDict[TermKey, Postings] = OrderedDict()
        self._users: dict[Scope, tuple[int, int]] = {}
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    # ---------------------------------------------------------------- reads
    def get(self, tenant_id: str, user_id: str, terms: Sequence[str],
            load_terms: Callable[[Sequence[str]], dict[str, tuple[list[int], list[int], list[int]]]],
            load_user: Callable[[], tuple[int, int]]) -> tuple[tuple[int, int], dict[str, Postings]]:
        """The user's (record count, total length) and the postings of ``terms`` (empty for a term no
        record holds), loading what is not cached through the callbacks, under the write lock."""
        scope = (tenant_id, user_id)
        with self._lock:
            user = self._users.get(scope)
            found = {}
            for term in terms:
                p = self._terms.get((tenant_id, user_id, term))
                if p is not None:
                    self._terms.move_to_end((tenant_id, user_id, term))
                    found[term] = p
        missing = [t for t in terms if t not in found]
        if user is not None and not missing:
            return user, found
        with self._write_lock:  # no commit lands between reading the store and caching what it said
            with self._lock:
                user = self._users.get(scope)
                missing = [t for t in terms if (tenant_id, user_id, t) not in self._terms]
            loaded_user = load_user() if user is None else user
            loaded = load_terms(missing) if missing else {}
            with self._lock:
                self._users[scope] = loaded_user
                while len(self._users) > _USERS:  # the oldest user's counts: reloaded when asked for
                    del self._users[next(iter(self._users))]
                for term in missing:
                    pk, tf, dl = loaded.get(term, ([], [], []))
                    p = Postings(np.asarray(pk, dtype=np.int64), np.asarray(tf, dtype=np.int32),
                                 np.asarray(dl, dtype=np.int32))
                    self._replace((tenant_id, user_id, term), p)
                for term in terms:
                    found[term] = self._terms[(tenant_id, user_id, term)]
                self._shrink(keep={(tenant_id, user_id, t) for t in terms})
                return loaded_user, found

    # ---------------------------------------------------------------- changes
    @staticmethod
    def note(conn: Any, change: tuple[Any, ...]) -> None:
        """Remember a change of the postings made in ``conn``'s open transaction."""
        conn.info.setdefault(NOTES, []).append(change)

    @staticmethod
    def begin(conn: Any) -> None:
        conn.info.pop(NOTES, None)  # left by a transaction that rolled back

    @staticmethod
    def take(conn: Any) -> list[tuple[Any, ...]] | None:
        """The changes noted in ``conn``'s transaction, taken before it commits."""
        return conn.info.pop(NOTES, None)

    def apply(self, notes: Sequence[tuple[Any, ...]]) -> None:
        """Apply the changes of a committed transaction (the caller still holds the write lock)."""
        with self._lock:
            for kind, *args in notes:
                if kind == "clear":
                    self._empty()
                elif kind == "erase":
                    self._erase(*args)
                elif kind == "prune":
                    self._prune(*args)
                elif kind == "add":
                    self._apply_add(*args)
                else:
                    self._apply_drop(*args)

    def clear(self) -> None:
        with self._lock:
            self._empty()

    def _erase(self, tenant_id: str, user_id: str) -> None:
        """Drop everything cached of one user (an erased user: ``portamem.storage.erasure``)."""
        self._users.pop((tenant_id, user_id), None)
        for key in [k for k in self._terms if k[0] == tenant_id and k[1] == user_id]:
            self._bytes -= self._terms.pop(key).nbytes

    def _prune(self, tenant_id: str, user_id: str) -> None:
        """Drop a user's cached terms no record holds (words searched for, kept as "none"): after a purge
        the words of what was purged are not kept even as a search's empty answer."""
        for key in [k for k, p in self._terms.items() if k[0] == tenant_id and k[1] == user_id and not len(p.pk)]:
            self._bytes -= self._terms.pop(key).nbytes

    def cached_terms(self, tenant_id: str, user_id: str) -> list[str]:
        """The terms cached for a user (what the cache holds of their texts)."""
        with self._lock:
            return [k[2] for k in self._terms if k[0] == tenant_id and k[1] == user_id]

    def _empty(self) -> None:
        self._terms.clear()
        self._users.clear()
        self._bytes = 0

    def _apply_add(self, rows: Sequence[dict[str, Any]], users: dict[Scope, list[int]]) -> None:
        grouped: dict[TermKey, tuple[list[int], list[int], list[int]]] = {}
        for r in rows:
            key = (r["tenant_id"], r["user_id"], r["term"])
            if key in self._terms:
                g = grouped.setdefault(key, ([], [], []))
                g[0].append(r["record"])
                g[1].append(r["tf"])
                g[2].append(r["doc_len"])
        for key, (pk, tf, dl) in grouped.items():
            self._replace(key, self._terms[key].added(pk, tf, dl))
        self._count(users)
        self._shrink()

    def _apply_drop(self, removed: Sequence[tuple[str, str, str, int]], users: dict[Scope, list[int]]) -> None:
        grouped: dict[TermKey, list[int]] = {}
        for tenant_id, user_id, term, pk in removed:
            if (tenant_id, user_id, term) in self._terms:
                grouped.setdefault((tenant_id, user_id, term), []).append(pk)
        for key, pks in grouped.items():
            left = self._terms[key].dropped(pks)
            if len(left.pk):
                self._replace(key, left)
            else:  # no record holds the term now: its key (a word of the dropped text) goes too
                self._bytes -= self._terms.pop(key).nbytes
        self._count(users)

    def _replace(self, key: TermKey, postings: Postings) -> None:
        old = self._terms.get(key)
        self._bytes += postings.nbytes - (old.nbytes if old is not None else 0)
        self._terms[key] = postings

    def _count(self, users: dict[Scope, list[int]]) -> None:
        for scope, (n, length) in users.items():
            have = self._users.get(scope)
            if have is not None:
                self._users[scope] = (have[0] + n, have[1] + length)

    def _shrink(self, keep: frozenset[TermKey] | set[TermKey] = frozenset()) -> None:
        if self._bytes <= self.budget:  # listing every cached term on each commit cost 1.5 ms per save
            return
        for key in list(self._terms):
            if self._bytes <= self.budget:
                break
            if key not in keep:
                self._bytes -= self._terms.pop(key).nbytes
