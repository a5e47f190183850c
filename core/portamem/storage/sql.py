"""Record store: memories, entities, keyword index, working window, audit log. The source of truth.

One code path for SQLite and PostgreSQL (``portamem.storage.dialect`` holds their differences, and
``portamem.storage.schema`` the tables); the keyword index is exact per-user BM25 over a postings table
(``portamem.storage.keywords``).
"""

from __future__ import annotations

import json
import logging
import zlib
from contextlib import contextmanager
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .actor import current_actor
from ..language.entities import normalize_entity
from ..errors import StoreError, StoreOpenError
from ..filters import SearchFilters
from ..records import MemoryRecord, Status, Tier, Turn
from ..language.text import query_tokens, tokenize
from .dialect import dialect_insert, open_engine, safe_url, schema_lock, upsert
from .metadata_sql import MetadataMatch, metadata_sql
from . import fast
from .keywords import PostingsKeywordIndex, keyword_md
from .termcache import TermCache
from .schema import (
    SCHEMA_VERSION, audit_t, blob_to_vec, cold_entities_t, cold_t, dt_of, entities_t, keyword_text, md, memories,
    meta_t, record_row, retrievals_t, row_record, ts_of, turns_t, vec_to_blob,
)

__all__ = ["RecordStore"]

_log = logging.getLogger(__name__)

#: the working window's hot statements on SQLite (``fast``)
_ADD_TURN = ("INSERT INTO turns (tenant_id, user_id, session_id, user_text, assistant_text, created_at, metadata) "
             "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING pk")
_TURNS = ("SELECT pk, user_text, assistant_text, created_at, metadata FROM turns "
          "WHERE tenant_id = ? AND user_id = ? AND session_id = ? ORDER BY pk")


class RecordStore:
    """SQLAlchemy-backed store. Every query that returns records is scoped by tenant and user."""

    def __init__(self, url: str, *, keyword_cache_mb: float = 0.0, autocheckpoint: bool = True) -> None:
        """``keyword_cache_mb`` keeps the postings searches read in memory (``storage.termcache``), on
        SQLite only: a store that other processes may write at the same time scores in SQL.
        ``autocheckpoint=False``: this process's commits leave SQLite's log to ``checkpoint`` calls
        of another process (the indexer's worker), so no acknowledged write waits for one."""
        self.url = url
        self.engine: Engine = open_engine(url, autocheckpoint=autocheckpoint)
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.keywords = PostingsKeywordIndex()
        try:
            with self.engine.begin() as conn:
                schema_lock(conn)
                fresh = not sa.inspect(conn).has_table(meta_t.name)
                md.create_all(conn)
                keyword_md.create_all(conn)
                version = conn.execute(sa.select(meta_t.c.value).where(meta_t.c.key == "schema_version")).scalar()
                if version is None:
                    conn.execute(meta_t.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                    if not fresh:  # a store from before the schema was versioned
                        self._rebuild_keywords(conn)
                elif int(version) > SCHEMA_VERSION:
                    raise StoreOpenError(f"store schema {version} is newer than this portamem ({SCHEMA_VERSION})")
                elif int(version) < SCHEMA_VERSION:
                    self._migrate(conn, int(version))
        except StoreOpenError:
            self.engine.dispose()
            raise
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            self.engine.dispose()
            raise StoreOpenError(f"cannot open record store {safe_url(url)}: {exc}") from exc
        self._write_lock = threading.RLock()
        #: rows read once for a batch of reads of one thread (``reading``)
        self._batch = threading.local()
        if self.is_sqlite and keyword_cache_mb > 0:
            self.keywords.cache = TermCache(int(keyword_cache_mb * 2**20), self._write_lock)

    def _migrate(self, conn: Connection, version: int) -> None:
        """Bring a store of an older schema up to ``SCHEMA_VERSION``, step by step, in the open transaction."""
        if version < 3:  # keyed memories
            have = {c["name"] for c in sa.inspect(conn).get_columns("memories")}
            for name, kind in (("key_namespace", "VARCHAR(1024)"), ("key", "VARCHAR(256)")):
                if name not in have:
                    conn.exec_driver_sql(f'ALTER TABLE memories ADD COLUMN "{name}" {kind}')
            conn.exec_driver_sql('CREATE UNIQUE INDEX IF NOT EXISTS ux_memories_key '
                                 'ON memories (tenant_id, user_id, key_namespace, "key")')
        if version < 5:  # postings instead of SQLite FTS5 (4); tokens of 5: a number before Chinese ends
            # where the Chinese starts ("7月8号入职"), a possessive "'s" is dropped ("dentist's")
            self._rebuild_keywords(conn)
        if version < 6:  # storage tiers (the cold tables are made by create_all)
            have = {c["name"] for c in sa.inspect(conn).get_columns("memories")}
            if "tier" not in have:
                conn.exec_driver_sql("ALTER TABLE memories ADD COLUMN tier VARCHAR(8) NOT NULL DEFAULT 'hot'")
            if "tiered_at" not in have:
                conn.exec_driver_sql("ALTER TABLE memories ADD COLUMN tiered_at FLOAT")
        if version < 7:  # a user's rows of one tier found by index (the schema's own definition)
            next(i for i in memories.indexes if i.name == "ix_memories_tier").create(conn, checkfirst=True)
        # 8: the formation queue (``formation_queue``), a new table that create_all made above
        conn.execute(meta_t.update().where(meta_t.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))

    def close(self) -> None:
        self.engine.dispose()

    # ---------------------------------------------------------------- transactions
    def checkpoint(self) -> None:
        """Copy SQLite's write-ahead log back into the database as far as no reader needs it (PASSIVE:
        it waits for no one and no one waits for it); nothing elsewhere."""
        if self.is_sqlite:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def scrub_log(self) -> bool:
        """After a commit that erased text: SQLite's write-ahead log still holds the pages as they were
        before it (a file-level backup would copy them), so the log is copied back into the database,
        whose freed bytes ``secure_delete`` zeroed, and truncated to nothing (TRUNCATE waits for readers,
        up to the busy timeout). False when a reader kept part of it; PostgreSQL: nothing to do here
        (its own log and dead tuples are the server's: docs/security.md)."""
        if not self.is_sqlite:
            return True
        with self.engine.connect() as conn:
            busy, log, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if busy:
            _log.warning("the write-ahead log was not truncated after an erasure (a reader held %d of %d pages); "
                         "the next checkpoint copies them", log - copied, log)
        return not busy

    def committed(self) -> None:
        """Return once no write transaction of this process is open (one in progress has committed or
        rolled back): what was noted before a commit is then in the store, or was never."""
        with self._write_lock:
            pass

    def forget_cached_keywords(self, scopes: Sequence[tuple[str, str]] | None) -> None:
        """Drop the cached keyword postings of these users (None: of every user), to be read again from
        the store: another process wrote their postings (``portamem.background.process``)."""
        cache = self.keywords.cache
        if cache is None:
            return
        with self._write_lock:  # no load of this process is between reading the store and caching it
            cache.apply([("clear",)] if scopes is None else [("erase", t, u) for t, u in scopes])

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction; writes are serialised within the process."""
        cache = self.keywords.cache
        with self._write_lock:
            with self.engine.begin() as conn:
                if cache is not None:
                    cache.begin(conn)
                yield conn
                notes = cache.take(conn) if cache is not None else None
            if notes:  # committed: the cached postings follow, before another writer can begin
                cache.apply(notes)

    # ---------------------------------------------------------------- meta
    def get_meta(self, key: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(meta_t.c.value).where(meta_t.c.key == key)).scalar()

    def set_meta(self, conn: Connection, key: str, value: str) -> None:
        upsert(conn, meta_t, ("key",), {"key": key, "value": value})

    # ---------------------------------------------------------------- writes
    def insert(self, conn: Connection, records: Sequence[MemoryRecord], *, indexed: int = 0) -> None:
        """Add records with their entity and keyword rows: one statement per table for the batch.
        ``indexed=REVIEW`` queues them for the indexer's embedding, trust review and dedupe, 0 for
        indexing only."""
        if not records:
            return
        rows = [{**record_row(r), "indexed": indexed} for r in records]
        if self.is_sqlite:
            pks = fast.insert_memories(conn, rows)
        else:  # parameters apart from the statement: compiled once, and one round trip for the batch
            result = conn.execute(memories.insert().returning(memories.c.pk, sort_by_parameter_order=True), rows)
            pks = [int(row[0]) for row in result]
        self._write_derived(conn, list(zip(pks, records)))

    def upsert_keyed(self, conn: Connection, record: MemoryRecord) -> bool:
        """Write a keyed record as the one row of its key: insert it, or overwrite the row that holds the key.

        One statement (``INSERT ... ON CONFLICT DO UPDATE`` on the unique key index), so two writers of
        one key can never leave two rows. An overwrite keeps the row's id, ``created_at`` and counters;
        ``record`` takes them. Returns whether a row was overwritten.
        """
        row = record_row(record)
        stmt = dialect_insert(conn, memories).values(indexed=0, **row)
        kept = {"memory_id", "tenant_id", "user_id", "key_namespace", "key", "created_at", "access_count",
                "last_accessed_at", "frequency", "supersedes"}
        stmt = stmt.on_conflict_do_update(
            index_elements=["tenant_id", "user_id", "key_namespace", "key"],
            set_={**{name: stmt.excluded[name] for name in row if name not in kept}, "indexed": 0},
        ).returning(memories.c.pk, memories.c.memory_id, memories.c.created_at, memories.c.access_count,
                    memories.c.last_accessed_at, memories.c.frequency)
        got = conn.execute(stmt).one()
        replaced = got.memory_id != record.memory_id
        if replaced:
            record.memory_id, record.created_at = got.memory_id, dt_of(got.created_at)  # type: ignore[assignment]
            record.access_count, record.frequency = got.access_count, got.frequency
            record.last_accessed_at = dt_of(got.last_accessed_at)
            conn.execute(entities_t.delete().where(entities_t.c.pk == got.pk))
            self.keywords.drop(conn, [got.pk])
        self._write_derived(conn, [(got.pk, record)])
        return replaced

    def _write_derived(self, conn: Connection, rows: Sequence[tuple[int, MemoryRecord]]) -> None:
        entities = [
            {"pk": pk, "tenant_id": r.tenant_id, "user_id": r.user_id, "entity": e[:256]}
            for pk, r in rows for e in dict.fromkeys(normalize_entity(e) for e in r.entities) if e
        ]
        if entities and self.is_sqlite:
            fast.insert_entities(conn, entities)
        elif entities:
            conn.execute(entities_t.insert(), entities)
        # one keyword update for the batch: its counters are locked once, in key order
        self.keywords.add(conn, [(pk, r.tenant_id, r.user_id, keyword_text(r)) for pk, r in rows])

    def _rebuild_keywords(self, conn: Connection) -> None:
        """Index every record's text again (older stores kept an SQLite FTS5 table instead)."""
        self.keywords.clear(conn)
        last = 0
        c = memories.c
        while rows := list(conn.execute(
            sa.select(c.pk, c.tenant_id, c.user_id, c.content, c.summary).where(c.pk > last).order_by(c.pk).limit(2000)
        )):
            self.keywords.add(conn, [(r[0], r[1], r[2], r[3] if not r[4] else f"{r[3]}\n{r[4]}") for r in rows])
            last = rows[-1][0]
        if self.is_sqlite:
            conn.exec_driver_sql("DROP TABLE IF EXISTS memory_fts")

    def replace(self, conn: Connection, record: MemoryRecord) -> None:
        """Rewrite a record in place (same id, same owner), rebuilding its entities and keyword entry."""
        pk = self._pk(conn, record.memory_id, record.tenant_id, record.user_id)
        conn.execute(memories.update().where(memories.c.pk == pk).values(indexed=0, **record_row(record)))
        conn.execute(entities_t.delete().where(entities_t.c.pk == pk))
        self.keywords.drop(conn, [pk])
        self._write_derived(conn, [(pk, record)])

    def update_fields(self, conn: Connection, memory_ids: Sequence[str], *, reindex: bool, **values: Any) -> int:
        if reindex:  # a row still queued for review stays queued
            values["indexed"] = sa.case((memories.c.indexed < 0, memories.c.indexed), else_=0)
        result = conn.execute(memories.update().where(memories.c.memory_id.in_(list(memory_ids))).values(**values))
        return int(result.rowcount)

    def update_each(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Set fields of many rows by ``memory_id``, each row its own values: one statement per set
        of field names, executed once for all its rows (``update_fields`` is one statement per row)."""
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(sorted(k for k in row if k != "memory_id")), []).append(row)
        for names, group in groups.items():
            if self.is_sqlite:
                fast.executemany(conn, f'UPDATE memories SET {", ".join(f"{chr(34)}{n}{chr(34)} = ?" for n in names)} '
                                       "WHERE memory_id = ?",
                                 [(*(fast._value(n, r[n]) for n in names), r["memory_id"]) for r in group])
                continue
            stmt = memories.update().where(memories.c.memory_id == sa.bindparam("_id")).values(
                {name: sa.bindparam(f"_{name}", type_=memories.c[name].type) for name in names})
            conn.execute(stmt, [{"_id": r["memory_id"], **{f"_{n}": r[n] for n in names}} for r in group])

    def set_embeddings(self, conn: Connection, records: Sequence[MemoryRecord]) -> None:
        """Store the vectors the indexer computed (the records stay the source of truth for rebuilds)."""
        if records and self.is_sqlite:
            fast.executemany(conn, "UPDATE memories SET embedding = ?, embedding_model = ?, embedding_version = ? "
                                   "WHERE memory_id = ?",
                             [(vec_to_blob(r.embedding), r.embedding_model, r.embedding_version, r.memory_id)
                              for r in records])
        elif records:
            conn.execute(
                memories.update().where(memories.c.memory_id == sa.bindparam("mid")).values(
                    embedding=sa.bindparam("emb"), embedding_model=sa.bindparam("model"),
                    embedding_version=sa.bindparam("version")),
                [{"mid": r.memory_id, "emb": vec_to_blob(r.embedding), "model": r.embedding_model,
                  "version": r.embedding_version} for r in records],
            )

    def purge(self, conn: Connection, memory_ids: Sequence[str], *, tenant_id: str, user_id: str | None = None,
              keep_log: bool = False) -> int:
        """Hard-delete records of one tenant (of one user when given); ids of other owners are left alone.
        Cold ones leave the archive too. ``keep_log`` keeps their retrieval log (a move to the cold tier)."""
        owner = self._owned_by(tenant_id, user_id) if user_id is not None else [memories.c.tenant_id.concat("") == tenant_id]
        ids = list(memory_ids)
        rows = [] if not ids else list(conn.execute(sa.select(memories.c.pk, memories.c.memory_id)
                                                    .where(memories.c.memory_id.in_(ids), *owner)))
        pks, found = [r[0] for r in rows], [r[1] for r in rows]
        if pks:
            self.keywords.drop(conn, pks)
            conn.execute(entities_t.delete().where(entities_t.c.pk.in_(pks)))
            conn.execute(memories.delete().where(memories.c.pk.in_(pks)))
        gone = set(found)
        cold = [] if keep_log else self._cold_drop(conn, tenant_id, user_id, [m for m in ids if m not in gone])
        if not keep_log and (found or cold):
            conn.execute(retrievals_t.delete().where(retrievals_t.c.tenant_id == tenant_id,
                                                     retrievals_t.c.memory_id.in_(found + cold)))
        return len(pks) + len(cold)

    # ---------------------------------------------------------------- the cold tier
    def archive(self, conn: Connection, records: Sequence[MemoryRecord], *, archived_at: float) -> None:
        """Move records out of ``memories`` (and its keyword and entity indexes) into the cold archive:
        one compressed JSON document each (with ``tier`` cold), the vector beside it."""
        if not records:
            return
        forgotten = [r.memory_id for r in records if r.status is Status.DELETED]
        if forgotten:  # a deletion waits for its purge in ``memories``
            raise StoreError(f"forgotten memories cannot be archived: {forgotten}")
        conn.execute(cold_t.insert(), [{
            "memory_id": r.memory_id, "tenant_id": r.tenant_id, "user_id": r.user_id,
            "created_at": ts_of(r.created_at), "archived_at": archived_at,
            "document": zlib.compress(json.dumps(r.to_dict(include_embedding=False), ensure_ascii=False)
                                      .encode("utf-8"), 6),
            "embedding": vec_to_blob(r.embedding), "embedding_model": r.embedding_model,
        } for r in records])
        entities = [{"tenant_id": r.tenant_id, "user_id": r.user_id, "entity": e, "memory_id": r.memory_id}
                    for r in records for e in dict.fromkeys(normalize_entity(x) for x in r.entities) if e]
        if entities:
            conn.execute(cold_entities_t.insert(), entities)
        scopes: dict[tuple[str, str], list[str]] = {}
        for r in records:
            scopes.setdefault((r.tenant_id, r.user_id), []).append(r.memory_id)
        for (tenant_id, user_id), ids in scopes.items():
            self.purge(conn, ids, tenant_id=tenant_id, user_id=user_id, keep_log=True)

    @staticmethod
    def _cold_record(row: Any, vectors: bool = True) -> MemoryRecord:
        m = row._mapping
        record = MemoryRecord.from_dict(json.loads(zlib.decompress(m["document"]).decode("utf-8")))
        if vectors:
            record.embedding = blob_to_vec(m["embedding"])
        return record

    def cold_records(self, tenant_id: str, user_id: str | None, memory_ids: Sequence[str] | None = None, *,
                     vectors: bool = True, limit: int | None = None, offset: int = 0,
                     conn: Connection | None = None) -> list[MemoryRecord]:
        """One user's cold records (the tenant's for ``user_id`` None; those of ``memory_ids``, or all
        in archive order)."""
        c = cold_t.c
        cols = [cold_t] if vectors else [c.pk, c.document]
        q = sa.select(*cols).where(c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(c.user_id == user_id)
        if memory_ids is not None:
            if not memory_ids:
                return []
            q = q.where(c.memory_id.in_(list(memory_ids)))
        q = q.order_by(c.pk).offset(offset)
        if limit is not None:
            q = q.limit(limit)
        if conn is not None:
            return [self._cold_record(r, vectors) for r in conn.execute(q)]
        with self.engine.connect() as own:
            return [self._cold_record(r, vectors) for r in own.execute(q)]

    def unarchive(self, conn: Connection, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[MemoryRecord]:
        """Take records out of the archive (the caller inserts them back where they go)."""
        records = self.cold_records(tenant_id, user_id, memory_ids, conn=conn)
        self._cold_drop(conn, tenant_id, user_id, [r.memory_id for r in records])
        return records

    def _cold_drop(self, conn: Connection, tenant_id: str, user_id: str | None, memory_ids: Sequence[str]) -> list[str]:
        if not memory_ids:
            return []
        owner = [cold_t.c.tenant_id == tenant_id] + ([cold_t.c.user_id == user_id] if user_id is not None else [])
        ids = [r[0] for r in conn.execute(sa.select(cold_t.c.memory_id).where(
            cold_t.c.memory_id.in_(list(memory_ids)), *owner))]
        if ids:
            conn.execute(cold_entities_t.delete().where(cold_entities_t.c.memory_id.in_(ids)))
            conn.execute(cold_t.delete().where(cold_t.c.memory_id.in_(ids)))
        return ids

    def cold_entity_ids(self, tenant_id: str, user_id: str, entities: Sequence[str]) -> list[str]:
        """Cold records holding any of these (normalised) entities."""
        if not entities:
            return []
        c = cold_entities_t.c
        q = sa.select(c.memory_id).where(c.tenant_id == tenant_id, c.user_id == user_id,
                                         c.entity.in_(list(entities))).distinct()
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(q)]

    def cold_count(self, tenant_id: str | None = None, user_id: str | None = None) -> int:
        q = sa.select(sa.func.count()).select_from(cold_t)
        if tenant_id is not None:
            q = q.where(cold_t.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(cold_t.c.user_id == user_id)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def tier_counts(self, tenant_id: str | None = None, user_id: str | None = None) -> dict[str, int]:
        """Active memories by tier (the cold tier: archived records of any status)."""
        q = sa.select(memories.c.tier, sa.func.count()).where(memories.c.status == Status.ACTIVE.value)
        if tenant_id is not None:
            q = q.where(memories.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(memories.c.user_id == user_id)
        with self.engine.connect() as conn:
            out = {t.value: 0 for t in Tier}
            out.update({r[0]: int(r[1]) for r in conn.execute(q.group_by(memories.c.tier))})
        out[Tier.COLD.value] = self.cold_count(tenant_id, user_id)
        return out

    def _pk(self, conn: Connection, memory_id: str, tenant_id: str, user_id: str) -> int:
        pk = conn.execute(sa.select(memories.c.pk).where(
            memories.c.memory_id == memory_id, *self._scope(tenant_id, user_id))).scalar()
        if pk is None:
            raise StoreError(f"memory {memory_id} vanished during an update")
        return int(pk)

    # ---------------------------------------------------------------- reads
    @staticmethod
    def _scope(tenant_id: str, user_id: str) -> list[Any]:
        return [memories.c.tenant_id == tenant_id, memories.c.user_id == user_id]

    @staticmethod
    def _filter_clauses(f: SearchFilters) -> list[Any]:
        c = memories.c
        clauses: list[Any] = [c.status.in_([s.value for s in f.statuses])]
        if f.types:
            clauses.append(c.type.in_([t.value for t in f.types]))
        if f.sources:
            clauses.append(c.source.in_([s.value for s in f.sources]))
        if f.trusts:
            clauses.append(c.trust.in_([t.value for t in f.trusts]))
        if f.session_id is not None:
            clauses.append(c.session_id == f.session_id)
        if f.agent_id is not None:  # the agent's own memories and the shared layer
            clauses.append(sa.or_(c.agent_id == f.agent_id, c.agent_id.is_(None)))
        if f.created_after is not None:
            clauses.append(c.created_at > ts_of(f.created_after))
        if f.created_before is not None:
            clauses.append(c.created_at <= ts_of(f.created_before))
        if f.min_importance is not None:
            clauses.append(c.importance >= f.min_importance)
        if f.tiers is not None:  # the cold tier is not in this table: it adds nothing here
            clauses.append(c.tier.in_([t.value for t in f.tiers]))
        if f.metadata is not None:
            clauses.append(MetadataMatch(c.metadata, f.metadata))
        return clauses

    @staticmethod
    def _filter_sql(f: SearchFilters) -> tuple[str, list[Any]]:
        """``_filter_clauses`` as SQL text over ``memories`` (``?`` placeholders) for ``storage.fast``."""
        parts = [f"status IN ({fast.marks(len(f.statuses))})"]
        params: list[Any] = [s.value for s in f.statuses]
        for column, values in (("type", f.types), ("source", f.sources), ("trust", f.trusts)):
            if values:
                parts.append(f"{column} IN ({fast.marks(len(values))})")
                params += [v.value for v in values]
        if f.session_id is not None:
            parts.append("session_id = ?")
            params.append(f.session_id)
        if f.agent_id is not None:  # the agent's own memories and the shared layer
            parts.append("(agent_id = ? OR agent_id IS NULL)")
            params.append(f.agent_id)
        if f.created_after is not None:
            parts.append("created_at > ?")
            params.append(ts_of(f.created_after))
        if f.created_before is not None:
            parts.append("created_at <= ?")
            params.append(ts_of(f.created_before))
        if f.min_importance is not None:
            parts.append("importance >= ?")
            params.append(f.min_importance)
        if f.tiers is not None:
            parts.append(f"tier IN ({fast.marks(len(f.tiers))})")
            params += [t.value for t in f.tiers]
        if f.metadata is not None:
            parts.append(metadata_sql(f.metadata, "metadata", "sqlite", lambda v: params.append(v) or "?"))
        return " AND ".join(parts), params

    def get_by_key(self, tenant_id: str, user_id: str, key_namespace: str, key: str) -> MemoryRecord | None:
        """The row of a key, whatever its status."""
        q = sa.select(memories).where(*self._scope(tenant_id, user_id), memories.c.key_namespace == key_namespace,
                                      memories.c.key == key)
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        return None if row is None else row_record(row)

    def list_keyed(
        self, tenant_id: str, user_id: str, prefix: str, filters: SearchFilters,
        *, limit: int | None = None, offset: int = 0,
    ) -> list[MemoryRecord]:
        """Keyed rows whose namespace is ``prefix`` or below it (whole labels), in write order."""
        c = memories.c
        q = sa.select(memories).where(*self._scope(tenant_id, user_id), c.key.is_not(None),
                                      *self._filter_clauses(filters))
        if prefix:  # "a.b" and "a.b.*": a range over the index ("/" sorts right after ".")
            q = q.where(sa.or_(c.key_namespace == prefix,
                               sa.and_(c.key_namespace > prefix + ".", c.key_namespace < prefix + "/")))
        q = q.order_by(c.pk).offset(offset)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [row_record(r) for r in conn.execute(q)]

    @staticmethod
    def _owned_by(tenant_id: str, user_id: str) -> list[Any]:
        """The scope as a check on rows looked up by id: compared as expressions, so the planner reads
        the few ids through the unique index instead of scanning every row of the user by scope."""
        return [memories.c.tenant_id.concat("") == tenant_id, memories.c.user_id.concat("") == user_id]

    @contextmanager
    def reading(self, memory_ids: Sequence[str] = (), pending: Sequence[tuple[str, str]] = ()) -> Iterator[None]:
        """Within the block, this thread's ``get`` of these ids and ``reviewed_pending`` of these
        (tenant, user) scopes answer from rows read here in two statements, each call building
        fresh records from them. For a batch of reads that asked one scope at a time (the indexer's
        review of rows of many users); the caller holds the lock that keeps the rows current."""
        ids = list(dict.fromkeys(memory_ids))
        scopes = list(dict.fromkeys(pending))
        waiting: dict[tuple[str, str], list[Any]] = {scope: [] for scope in scopes}
        tenants = sorted({t for t, _ in scopes})
        users = sorted({u for _, u in scopes})
        with self.engine.connect() as conn:
            if self.is_sqlite:
                rows = {fast.field(r, "memory_id"): r for r in fast.select_ids(conn, ids)}
                found: list[Any] = []
                for start in range(0, len(users), fast.CHUNK):  # IN on both keys reads the scope index
                    chunk = users[start:start + fast.CHUNK]
                    found += fast.select(conn, f"tenant_id IN ({fast.marks(len(tenants))}) AND user_id IN "
                                               f"({fast.marks(len(chunk))}) AND status = ? AND indexed >= 0",
                                         [*tenants, *chunk, Status.PENDING.value], "ORDER BY pk")
            else:
                rows = {fast.field(r, "memory_id"): r
                        for r in (fast.pg_select(conn, "memory_id = ANY(%s::text[])", [ids]) if ids else [])}
                found = []
                for start in range(0, len(users), 500):
                    found += fast.pg_select(conn, "tenant_id = ANY(%s::text[]) AND user_id = ANY(%s::text[]) "
                                                  "AND status = %s AND indexed >= 0",
                                            [tenants, users[start:start + 500], Status.PENDING.value], "ORDER BY pk")
        for r in sorted(found, key=lambda r: self._field(r, "pk")):
            scope = (self._field(r, "tenant_id"), self._field(r, "user_id"))
            if scope in waiting:
                waiting[scope].append(r)
        self._batch.rows, self._batch.known, self._batch.pending = rows, set(ids), waiting
        try:
            yield
        finally:
            self._batch.rows = self._batch.known = self._batch.pending = None

    @staticmethod
    def _field(row: Any, name: str) -> Any:
        return fast.field(row, name)

    def _record(self, row: Any, vectors: bool = True) -> MemoryRecord:
        """A record from a whole row as this store's read path returns it (a tuple in ``fast.COLUMNS`` order)."""
        return fast.record_of(row, vectors=vectors, parsed=not self.is_sqlite)

    def get(self, tenant_id: str, user_id: str, memory_ids: Sequence[str], *,
            vectors: bool = True) -> dict[str, MemoryRecord]:
        """Records by id within one scope; ``vectors=False`` leaves their embeddings out (the read
        path scores vectors from the replica, and a blob per candidate is most of a row)."""
        out: dict[str, MemoryRecord] = {}
        ids = list(dict.fromkeys(memory_ids))
        known = getattr(self._batch, "known", None)
        if known:
            rows = self._batch.rows
            for m in ids:
                row = rows.get(m)
                if row is not None and self._field(row, "tenant_id") == tenant_id \
                        and self._field(row, "user_id") == user_id:
                    out[m] = self._record(row, vectors)
            ids = [m for m in ids if m not in known]
        if self.is_sqlite:
            if ids:
                with self.engine.connect() as conn:  # the scope as expressions: the id index reads the rows
                    for row in fast.select_ids(conn, ids, "tenant_id || '' = ? AND user_id || '' = ?",
                                               [tenant_id, user_id]):
                        out[fast.field(row, "memory_id")] = fast.record_of(row, vectors=vectors)
            return out
        if not ids:
            return out
        with self.engine.connect() as conn:  # the scope as expressions, as ``_owned_by`` has it
            for row in fast.pg_select(conn, "memory_id = ANY(%s::text[]) AND tenant_id || '' = %s "
                                            "AND user_id || '' = %s", [ids, tenant_id, user_id], vectors=vectors):
                out[fast.field(row, "memory_id")] = fast.record_of(row, vectors=vectors, parsed=True)
        return out

    def vectors(self, tenant_id: str, user_id: str, memory_ids: Sequence[str], model: str) -> dict[str, np.ndarray]:
        """The stored ``model`` vectors of these ids within one scope (float32), without the rest of the rows."""
        out: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(memory_ids))
        c = memories.c
        if self.is_sqlite:
            with self.engine.connect() as conn:
                db = fast.driver(conn)
                for start in range(0, len(ids), fast.CHUNK):
                    chunk = ids[start:start + fast.CHUNK]
                    out.update((r[0], np.frombuffer(r[1], dtype="<f4")) for r in db.execute(
                        f"SELECT memory_id, embedding FROM memories WHERE memory_id IN ({fast.marks(len(chunk))}) "
                        "AND tenant_id || '' = ? AND user_id || '' = ? AND embedding_model = ? "
                        "AND embedding IS NOT NULL", (*chunk, tenant_id, user_id, model)))
            return out
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                q = sa.select(c.memory_id, c.embedding).where(
                    c.memory_id.in_(ids[start:start + 500]), *self._owned_by(tenant_id, user_id),
                    c.embedding_model == model, c.embedding.is_not(None))
                out.update((r[0], np.frombuffer(r[1], dtype="<f4")) for r in conn.execute(q))
        return out

    def list(
        self,
        tenant_id: str,
        user_id: str | None,
        filters: SearchFilters | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
        newest_first: bool = False,
    ) -> list[MemoryRecord]:
        q = sa.select(memories).where(memories.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(memories.c.user_id == user_id)
        if filters is not None:
            q = q.where(*self._filter_clauses(filters))
        q = q.order_by(memories.c.created_at.desc() if newest_first else memories.c.pk).offset(offset)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [row_record(r) for r in conn.execute(q)]

    def taken_ids(self, memory_ids: Sequence[str]) -> set[str]:
        """Which of these ids any record holds, whoever owns it (ids are unique across the store).

        Only for choosing a free id: what it returns must never reach a caller of another scope.
        """
        ids = list(memory_ids)
        taken = {r[0] for r in self._by_ids(ids, "memory_id")}
        with self.engine.connect() as conn:  # the cold tier's ids are taken too
            for start in range(0, len(ids), 500):
                taken.update(r[0] for r in conn.execute(sa.select(cold_t.c.memory_id).where(
                    cold_t.c.memory_id.in_(ids[start:start + 500]))))
        return taken

    def arrival(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """Commit order of the rows (their primary key), for "the newest acknowledged value wins"."""
        return {r[0]: int(r[1]) for r in self._by_ids(memory_ids, "memory_id", "pk")}

    def _by_ids(self, memory_ids: Sequence[str], *columns: str) -> list[Any]:
        """``columns`` of the rows these ids name, whoever owns them, in chunks of 500 ids."""
        ids, out = list(dict.fromkeys(memory_ids)), []
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                if self.is_sqlite:
                    out += fast.driver(conn).execute(
                        f"SELECT {', '.join(columns)} FROM memories WHERE memory_id IN ({fast.marks(len(chunk))})",
                        chunk).fetchall()
                else:
                    out += conn.execute(sa.select(*(memories.c[c] for c in columns)).where(
                        memories.c.memory_id.in_(chunk))).all()
        return out

    def count(self, tenant_id: str | None = None, user_id: str | None = None, filters: SearchFilters | None = None) -> int:
        q = sa.select(sa.func.count()).select_from(memories)
        if tenant_id is not None:
            q = q.where(memories.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(memories.c.user_id == user_id)
        if filters is not None:
            q = q.where(*self._filter_clauses(filters))
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def admitted_ids(self, tenant_id: str, user_id: str, filters: SearchFilters) -> set[str]:
        """The ids of the user's rows the filters admit (a vector search the index cannot filter
        itself, a metadata filter, is confined to them)."""
        if self.is_sqlite:
            where, params = self._filter_sql(filters)
            with self.engine.connect() as conn:
                return {r[0] for r in fast.driver(conn).execute(
                    f"SELECT memory_id FROM memories WHERE tenant_id = ? AND user_id = ? AND {where}",
                    (tenant_id, user_id, *params))}
        q = sa.select(memories.c.memory_id).where(*self._scope(tenant_id, user_id), *self._filter_clauses(filters))
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(q)}

    def user_count(self, tenant_id: str, user_id: str) -> int:
        """The user's number of records, every status, as ``count(tenant_id, user_id)`` gives it, from
        the keyword index's counters (one key lookup instead of a scan of the user's rows)."""
        with self.engine.connect() as conn:
            return self.keywords.size(conn, tenant_id, user_id)

    def keyword_search(
        self, tenant_id: str, user_id: str, query: str, filters: SearchFilters, k: int
    ) -> list[tuple[str, float]]:
        """The user's k best records by exact per-user BM25 among those the filters admit."""
        with self.engine.connect() as conn:
            return self.keywords.search(conn, tenant_id, user_id, query_tokens(query), k, memories,
                                        self._filter_clauses(filters),
                                        self._filter_sql(filters) if self.is_sqlite else None,
                                        selective=filters.metadata is not None)

    def keyword_stats(self, tenant_id: str, user_id: str, tokens: Sequence[str]) -> tuple[float, dict[str, int]]:
        """BM25 statistics of one user's records (``count`` gives their number): the mean text length
        in characters, and per search token how many hold it. One user's scores never depend on what
        other users store; the counts are kept with the keyword index, so this is one lookup per token.
        """
        with self.engine.connect() as conn:
            _, mean_len, df = self.keywords.stats(conn, tenant_id, user_id, tokens)
        return mean_len, df

    def entity_search(
        self, tenant_id: str, user_id: str, entities: Sequence[str], filters: SearchFilters, k: int
    ) -> list[tuple[str, int]]:
        """Records sharing exact (normalised) entities with the query, most shared first."""
        if not entities:
            return []
        if self.is_sqlite:
            where, params = self._filter_sql(filters)
            with self.engine.connect() as conn:
                return [(r[0], int(r[1])) for r in fast.driver(conn).execute(
                    f"SELECT m.memory_id, count(DISTINCT e.entity) AS n FROM {entities_t.name} e "
                    f"JOIN memories m ON m.pk = e.pk WHERE e.tenant_id = ? AND e.user_id = ? "
                    f"AND e.entity IN ({fast.marks(len(entities))}) AND {where} "
                    "GROUP BY m.pk ORDER BY n DESC, m.created_at DESC LIMIT ?",
                    (tenant_id, user_id, *entities, *params, int(k)))]
        hits = sa.func.count(sa.distinct(entities_t.c.entity))
        q = (
            sa.select(memories.c.memory_id, hits.label("n"))
            .select_from(entities_t.join(memories, memories.c.pk == entities_t.c.pk))
            .where(
                entities_t.c.tenant_id == tenant_id,
                entities_t.c.user_id == user_id,
                entities_t.c.entity.in_(list(entities)),
                *self._filter_clauses(filters),
            )
            .group_by(memories.c.pk)  # the key: PostgreSQL then allows ordering by its other columns
            .order_by(hits.desc(), memories.c.created_at.desc())
            .limit(k)
        )
        with self.engine.connect() as conn:
            return [(r[0], int(r[1])) for r in conn.execute(q)]

    def entity_counts(self, tenant_id: str, user_id: str, entities: Sequence[str]) -> dict[str, int]:
        """How many of the user's records hold each entity (for its weight; ``count`` gives the total)."""
        if not entities:
            return {}
        if self.is_sqlite:
            with self.engine.connect() as conn:
                return {r[0]: int(r[1]) for r in fast.driver(conn).execute(
                    f"SELECT entity, count(*) FROM {entities_t.name} WHERE tenant_id = ? AND user_id = ? "
                    f"AND entity IN ({fast.marks(len(entities))}) GROUP BY entity", (tenant_id, user_id, *entities))}
        q = (
            sa.select(entities_t.c.entity, sa.func.count())
            .where(entities_t.c.tenant_id == tenant_id, entities_t.c.user_id == user_id,
                   entities_t.c.entity.in_(list(entities)))
            .group_by(entities_t.c.entity)
        )
        with self.engine.connect() as conn:
            return {r[0]: int(r[1]) for r in conn.execute(q)}

    # ---------------------------------------------------------------- vector-index outbox
    def unindexed(self, limit: int = 1000, *, after: int = 0) -> list[tuple[int, MemoryRecord]]:
        """Outbox rows (``indexed`` 0 or ``REVIEW``) in commit order from ``pk > after``."""
        return [(pk, r) for pk, _, r in self.outbox(limit, after=after)]

    def outbox(self, limit: int = 1000, *, after: int = 0, pks: Sequence[int] | None = None
               ) -> list[tuple[int, int, MemoryRecord]]:
        """(pk, indexed state, record) of outbox rows in commit order, or of those of ``pks`` still queued."""
        if self.is_sqlite:
            keys = list(pks) if pks is not None else []
            with self.engine.connect() as conn:
                # the queued rows found by the outbox's index: "indexed <= 0 AND pk > ?" as such was planned
                # as a walk of every row after ``after`` in key order (to spare the sort), which is the
                # whole table on each of the indexer's rounds (4 ms a round at 3,000 rows, growing)
                rows = fast.select(conn, f"indexed <= 0 AND pk IN ({fast.marks(len(keys))})" if pks is not None
                                   else "pk IN (SELECT pk FROM memories WHERE indexed <= 0 AND pk > ?)",
                                   keys if pks is not None else [after], f"ORDER BY pk LIMIT {int(limit)}")
            return [(fast.field(r, "pk"), fast.field(r, "indexed"), fast.record_of(r)) for r in rows]
        with self.engine.connect() as conn:
            rows = fast.pg_select(conn, "indexed <= 0 AND pk = ANY(%s::integer[])" if pks is not None
                                  else "indexed <= 0 AND pk > %s", [list(pks) if pks is not None else after],
                                  f"ORDER BY pk LIMIT {int(limit)}")
        return [(fast.field(r, "pk"), fast.field(r, "indexed"), fast.record_of(r, parsed=True)) for r in rows]

    def outbox_keys(self) -> list[tuple[str, str, str]]:
        """(memory_id, tenant_id, user_id) of every outbox row: what a reopened store still has to index."""
        c = memories.c
        with self.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(  # type: ignore[misc]
                sa.select(c.memory_id, c.tenant_id, c.user_id).where(c.indexed <= 0).order_by(c.pk))]

    def indexed_ids(self, memory_ids: Sequence[str]) -> set[str]:
        """Those of ``memory_ids`` whose rows the vector index reflects."""
        ids = list(memory_ids)
        out: set[str] = set()
        with self.engine.connect() as conn:
            if self.is_sqlite:  # raw sqlite3 (``fast``): the indexer asks after every round
                for start in range(0, len(ids), fast.CHUNK):
                    chunk = ids[start:start + fast.CHUNK]
                    out.update(r[0] for r in fast.driver(conn).execute(
                        f"SELECT memory_id FROM memories WHERE memory_id IN ({fast.marks(len(chunk))}) "
                        "AND indexed + 0 = 1", chunk))
                return out
            for start in range(0, len(ids), 500):
                out.update(r[0] for r in conn.execute(sa.select(memories.c.memory_id).where(
                    memories.c.memory_id.in_(ids[start:start + 500]), memories.c.indexed + 0 == 1)))
        return out

    def outbox_size(self) -> int:
        q = sa.select(sa.func.count()).select_from(memories).where(memories.c.indexed <= 0)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def mark_indexed(self, memory_ids: Sequence[str], conn: Connection | None = None) -> None:
        ids = list(memory_ids)
        if not ids:  # formation's index_now of a turn that changed nothing: no transaction to open
            return
        if conn is None:
            with self.transaction() as c:
                self.mark_indexed(ids, c)
            return
        for start in range(0, len(ids), 500):
            if self.is_sqlite:
                chunk = ids[start:start + 500]
                fast.driver(conn).execute(f"UPDATE memories SET indexed = 1 WHERE memory_id IN ({fast.marks(len(chunk))})",
                                          chunk)
            else:
                conn.execute(memories.update().where(memories.c.memory_id.in_(ids[start:start + 500])).values(indexed=1))

    def reviewed_pending(self, tenant_id: str, user_id: str) -> list[MemoryRecord]:
        """The user's PENDING memories that the indexer has reviewed (not those still queued)."""
        waiting = getattr(self._batch, "pending", None)
        if waiting and (tenant_id, user_id) in waiting:
            return [self._record(r) for r in waiting[(tenant_id, user_id)]]
        q = sa.select(memories).where(*self._scope(tenant_id, user_id), memories.c.status == Status.PENDING.value,
                                      memories.c.indexed >= 0).order_by(memories.c.pk)
        with self.engine.connect() as conn:
            return [row_record(r) for r in conn.execute(q)]

    def user_vectors(self, tenant_id: str, user_id: str, model: str, tier: Tier = Tier.HOT) -> list[Any]:
        """The raw index fields of a user's active rows of one tier with a vector of ``model`` (the read
        replica's load of the hot tier; a scan of the warm one's vectors on disk)."""
        c = memories.c
        if self.is_sqlite:
            with self.engine.connect() as conn:
                return fast.driver(conn).execute(
                    "SELECT memory_id, embedding, type, source, trust, session_id, agent_id, created_at, importance, "
                    "metadata FROM memories WHERE tenant_id = ? AND user_id = ? AND status = ? AND embedding_model = ? "
                    "AND embedding IS NOT NULL AND tier = ? ORDER BY pk",
                    (tenant_id, user_id, Status.ACTIVE.value, model, tier.value)).fetchall()
        q = sa.select(c.memory_id, c.embedding, c.type, c.source, c.trust, c.session_id, c.agent_id,
                      c.created_at, c.importance, c.metadata).where(
            *self._scope(tenant_id, user_id), c.status == Status.ACTIVE.value, c.embedding_model == model,
            c.embedding.is_not(None), c.tier == tier.value).order_by(c.pk)
        with self.engine.connect() as conn:
            return list(conn.execute(q))

    def mark_all_unindexed(self, conn: Connection) -> None:
        conn.execute(memories.update().values(indexed=0))

    def iter_vectors(self, batch: int = 1000) -> Iterator[list[MemoryRecord]]:
        """Active records in id order, for (re)building the vector index (not those queued for review)."""
        last = 0
        while True:
            q = (
                sa.select(memories)
                .where(memories.c.pk > last, memories.c.status == Status.ACTIVE.value, memories.c.indexed >= 0,
                       memories.c.tier == Tier.HOT.value)
                .order_by(memories.c.pk)
                .limit(batch)
            )
            with self.engine.connect() as conn:
                rows = list(conn.execute(q))
            if not rows:
                return
            last = rows[-1].pk
            yield [row_record(r) for r in rows]

    def user_ids(self, tenant_id: str) -> list[str]:
        q = sa.select(memories.c.user_id).where(memories.c.tenant_id == tenant_id).distinct().order_by(memories.c.user_id)
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(q)]

    def all_active_ids(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(sa.select(memories.c.memory_id).where(
                memories.c.status == Status.ACTIVE.value, memories.c.tier == Tier.HOT.value))}

    # ---------------------------------------------------------------- working window
    def add_turn(self, conn: Connection, tenant_id: str, user_id: str, session_id: str, turn: Turn) -> int:
        if self.is_sqlite:  # raw sqlite3 (``fast``): the write path's turn costs one statement, not Core's build
            return int(fast.driver(conn).execute(_ADD_TURN, (tenant_id, user_id, session_id, turn.user, turn.assistant,
                                                             ts_of(turn.created_at), json.dumps(turn.metadata))
                                                 ).fetchone()[0])
        return int(
            conn.execute(
                turns_t.insert().values(
                    tenant_id=tenant_id,
                    user_id=user_id,
                    session_id=session_id,
                    user_text=turn.user,
                    assistant_text=turn.assistant,
                    created_at=ts_of(turn.created_at),
                    metadata=turn.metadata,
                )
            ).inserted_primary_key[0]
        )

    def turns(self, tenant_id: str, user_id: str, session_id: str, conn: Connection | None = None) -> list[Turn]:
        def run(c: Connection) -> list[Turn]:
            if self.is_sqlite:  # raw sqlite3 (``fast``), the same values: read on every window turn
                return [Turn(u, a, dt_of(at), dict(json.loads(meta) or {}), pk)  # type: ignore[arg-type]
                        for pk, u, a, at, meta in fast.driver(c).execute(_TURNS, (tenant_id, user_id, session_id))]
            q = (
                sa.select(turns_t)
                .where(turns_t.c.tenant_id == tenant_id, turns_t.c.user_id == user_id,
                       turns_t.c.session_id == session_id)
                .order_by(turns_t.c.pk)
            )
            return [
                Turn(r.user_text, r.assistant_text, dt_of(r.created_at), dict(r.metadata or {}), r.pk)  # type: ignore[arg-type]
                for r in c.execute(q)
            ]

        if conn is not None:
            return run(conn)
        with self.engine.connect() as c:
            return run(c)

    def session_ids(self, tenant_id: str, user_id: str) -> list[str]:
        q = (
            sa.select(turns_t.c.session_id)
            .where(turns_t.c.tenant_id == tenant_id, turns_t.c.user_id == user_id)
            .distinct()
            .order_by(turns_t.c.session_id)
        )
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(q)]

    def drop_turns(self, conn: Connection, seqs: Sequence[int]) -> None:
        if not seqs:  # most turns push none out
            return
        if self.is_sqlite:
            keys = list(seqs)
            for start in range(0, len(keys), fast.CHUNK):
                chunk = keys[start:start + fast.CHUNK]
                fast.driver(conn).execute(f"DELETE FROM {turns_t.name} WHERE pk IN ({fast.marks(len(chunk))})", chunk)
            return
        conn.execute(turns_t.delete().where(turns_t.c.pk.in_(list(seqs))))

    def clear_turns(self, conn: Connection, tenant_id: str, user_id: str, session_id: str | None = None) -> None:
        q = turns_t.delete().where(turns_t.c.tenant_id == tenant_id, turns_t.c.user_id == user_id)
        if session_id is not None:
            q = q.where(turns_t.c.session_id == session_id)
        conn.execute(q)

    # ---------------------------------------------------------------- audit
    def audit(
        self,
        conn: Connection,
        action: str,
        *,
        tenant_id: str,
        user_id: str | None,
        memory_id: str | None = None,
        actor: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        conn.execute(
            audit_t.insert().values(
                ts=time.time(),
                tenant_id=tenant_id,
                user_id=user_id,
                memory_id=memory_id,
                action=action,
                actor=actor or current_actor.get(),
                detail=json.loads(json.dumps(detail or {}, default=str)),
            )
        )

    def audit_many(self, conn: Connection, rows: list[dict[str, Any]]) -> None:
        if rows:
            now = time.time()
            rows = [{"ts": now, "actor": current_actor.get(), "detail": {}, **r} for r in rows]
            if self.is_sqlite:
                fast.insert_audit(conn, rows)
            else:
                fast.pg_insert_audit(conn, rows)

    def audit_events(
        self, tenant_id: str, *, user_id: str | None = None, memory_id: str | None = None,
        actions: Sequence[str] | None = None, since: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Audit rows of a tenant (or one user, or one memory), oldest first, by action and from a time on."""
        q = sa.select(audit_t).where(audit_t.c.tenant_id == tenant_id)
        if user_id is not None:
            q = q.where(audit_t.c.user_id == user_id)
        if memory_id is not None:
            q = q.where(audit_t.c.memory_id == memory_id)
        if actions is not None:
            q = q.where(audit_t.c.action.in_(list(actions)))
        if since is not None:
            q = q.where(audit_t.c.ts >= ts_of(since))
        with self.engine.connect() as conn:
            return [
                {"ts": dt_of(r.ts), "action": r.action, "actor": r.actor, "user_id": r.user_id,
                 "memory_id": r.memory_id, "detail": r.detail}
                for r in conn.execute(q.order_by(audit_t.c.pk))
            ]

    # ---------------------------------------------------------------- retrieval log
    def record_access(self, touches: Sequence[dict[str, Any]]) -> None:
        """Count uses: each row (tenant_id, memory_id, n, ts) adds n to access_count and moves
        last_accessed_at forward to ts (never back), in one statement for the batch. No index changes:
        neither the keyword nor the vector index holds these fields."""
        if not touches:
            return
        c = memories.c
        last = sa.func.coalesce(c.last_accessed_at, 0.0)
        stmt = (
            memories.update()
            .where(c.tenant_id == sa.bindparam("t_tenant"), c.memory_id == sa.bindparam("t_id"))
            .values(access_count=c.access_count + sa.bindparam("t_n"),
                    last_accessed_at=sa.case((last > sa.bindparam("t_ts"), last), else_=sa.bindparam("t_ts")))
        )
        with self.transaction() as conn:
            conn.execute(stmt, [{"t_tenant": r["tenant_id"], "t_id": r["memory_id"], "t_n": int(r["n"]),
                                 "t_ts": float(r["ts"])} for r in touches])

    def log_retrievals(self, rows: Sequence[dict[str, Any]], *, keep: int | None = None) -> None:
        """Append retrieval rows (ts, search_id, tenant_id, user_id, memory_id, rank, score, query).

        With ``keep``, rows older than the newest ``keep`` are dropped in the same transaction (one
        range delete on the primary key), so the log stays bounded however many searches run.
        """
        if rows:
            with self.transaction() as conn:
                conn.execute(retrievals_t.insert(), list(rows))
                if keep is not None:
                    last = conn.execute(sa.select(sa.func.max(retrievals_t.c.pk))).scalar_one()
                    conn.execute(retrievals_t.delete().where(retrievals_t.c.pk <= last - keep))

    def retrievals(self, tenant_id: str, memory_id: str) -> list[dict[str, Any]]:
        """Every logged search that returned this memory, oldest first."""
        q = (
            sa.select(retrievals_t)
            .where(retrievals_t.c.tenant_id == tenant_id, retrievals_t.c.memory_id == memory_id)
            .order_by(retrievals_t.c.pk)
        )
        with self.engine.connect() as conn:
            return [
                {"ts": dt_of(r.ts), "search_id": r.search_id, "rank": r.rank, "score": r.score, "query": r.query}
                for r in conn.execute(q)
            ]

    def audit_trail(self, tenant_id: str, memory_id: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "memory_id"}
                for e in self.audit_events(tenant_id, memory_id=memory_id)]
