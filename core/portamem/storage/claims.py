"""Outbox claims: the background indexers of several processes on one PostgreSQL store share its outbox.

Each indexer claims the rows of a batch before it embeds them and releases them once the batch is
committed (``memories.indexed = 1``), so no row is embedded or indexed by two processes. A claim is
a session-level advisory lock on one connection the indexer keeps: when a process dies, PostgreSQL
ends its session and the rows are free for the others at once, with no lease to expire. The locks
live in their own two-key space (the schema lock uses the one-key form).

SQLite needs none: a store opens in one process only (its lock file), so every row is that
process's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

__all__ = ["OutboxClaims", "FORMATION_SPACE"]

log = logging.getLogger(__name__)

#: the first key of every claim: "pmix" (portamem indexer)
_SPACE = 0x706D6978

#: the first key of the formation queue's claims: "pmfq" (portamem formation queue)
FORMATION_SPACE = 0x706D6671

_CLAIM = sa.text("SELECT pk FROM unnest(CAST(:pks AS integer[])) AS pk WHERE pg_try_advisory_lock(:space, pk)")
_RELEASE = sa.text("SELECT pg_advisory_unlock(:space, pk) FROM unnest(CAST(:pks AS integer[])) AS pk")


class OutboxClaims:
    """Claims on outbox rows (by ``memories.pk``) for one indexer; see the module docstring."""

    def __init__(self, engine: Engine, space: int = _SPACE) -> None:
        """``space``: the first key of the claims, one per queue (``FORMATION_SPACE`` for the formation queue)."""
        self.engine = engine
        self._space = space
        #: whether claims are taken at all (on PostgreSQL); elsewhere every row is this process's
        self.shared = engine.dialect.name == "postgresql"
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._conn

    def claim(self, pks: Sequence[int]) -> set[int]:
        """Those of ``pks`` now claimed by this indexer (none that another one holds)."""
        if not self.shared or not pks:
            return set(pks)
        with self._lock:
            try:
                return {int(r[0]) for r in self._connection().execute(_CLAIM, {"pks": list(pks), "space": self._space})}
            except sa.exc.DBAPIError:
                self._drop()  # the session is gone, and its claims with it
                raise

    def release(self, pks: Sequence[int]) -> None:
        """Give claimed rows back (after their batch committed, or failed)."""
        if not self.shared or not pks:
            return
        with self._lock:
            try:
                self._connection().execute(_RELEASE, {"pks": list(pks), "space": self._space})
            except sa.exc.DBAPIError:
                log.warning("releasing %d outbox claims failed; they end with the session", len(pks))
                self._drop()

    def _drop(self) -> None:
        """Close the session itself (a pooled connection would keep its locks)."""
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except sa.exc.SQLAlchemyError:
                pass
            self._conn = None

    def close(self) -> None:
        """End the session: whatever is still claimed is free for the other processes."""
        with self._lock:
            self._drop()
