"""The record store's schema: its tables, the schema version, and how a record maps to a row and back.

One schema for SQLite and PostgreSQL (``portamem.storage.dialect`` holds their differences); the keyword
postings tables live beside the index that uses them (``portamem.storage.keywords``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import sqlalchemy as sa

from ..records import MemoryRecord, MemoryType, Source, Status, Tier, Trust

__all__ = ["SCHEMA_VERSION", "REVIEW", "keyword_text", "record_row", "row_record", "memories", "entities_t", "turns_t",
           "audit_t", "retrievals_t", "meta_t", "cold_t", "cold_entities_t", "formation_t", "FORMING", "FORMED"]

SCHEMA_VERSION = 8
#: ``memories.indexed`` of a new row the background indexer has not embedded and reviewed yet
REVIEW = -1

md = sa.MetaData()

memories = sa.Table(
    "memories",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("memory_id", sa.String(64), nullable=False, unique=True),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("session_id", sa.String(256)),
    sa.Column("agent_id", sa.String(256)),
    sa.Column("type", sa.String(16), nullable=False),
    sa.Column("kind", sa.String(32)),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("summary", sa.Text),
    sa.Column("entities", sa.JSON, nullable=False),
    sa.Column("triples", sa.JSON, nullable=False),
    sa.Column("embedding", sa.LargeBinary),
    sa.Column("embedding_model", sa.String(128)),
    sa.Column("embedding_version", sa.String(64)),
    sa.Column("importance", sa.Float, nullable=False),
    sa.Column("importance_band", sa.Integer, nullable=False),
    sa.Column("half_life_days", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("last_accessed_at", sa.Float),
    sa.Column("access_count", sa.Integer, nullable=False),
    sa.Column("frequency", sa.Integer, nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("trust", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("supersedes", sa.String(64)),
    sa.Column("superseded_by", sa.String(64)),
    sa.Column("deleted_at", sa.Float),
    sa.Column("metadata", sa.JSON, nullable=False),
    # the vector-index outbox: 1 indexed; 0 the index may not reflect this row yet; -1 a new row that
    # still needs its embedding, trust review and dedupe (the background indexer's queue)
    sa.Column("indexed", sa.Integer, nullable=False, default=0),
    # keyed memories (portamem.portable.keys): NULL key for unkeyed ones, which the unique index never compares
    sa.Column("key_namespace", sa.String(1024)),
    sa.Column("key", sa.String(256)),
    # the storage tier (portamem.lifecycle.tiers): hot rows are in the vector index, warm ones only in
    # the keyword and entity indexes; cold ones are not here but in ``memories_cold``
    sa.Column("tier", sa.String(8), nullable=False, default="hot", server_default="hot"),
    sa.Column("tiered_at", sa.Float),
    sa.Index("ix_memories_scope", "tenant_id", "user_id", "status", "type"),
    sa.Index("ux_memories_key", "tenant_id", "user_id", "key_namespace", "key", unique=True),
    sa.Index("ix_memories_created", "tenant_id", "user_id", "created_at"),
    sa.Index("ix_memories_unindexed", "indexed"),
    # a user's rows of one tier (the warm scan of a search with thin evidence): without it a user of
    # 100k hot rows and no warm ones was read whole, ~90 ms, to find none
    sa.Index("ix_memories_tier", "tenant_id", "user_id", "tier", "status"),
)

entities_t = sa.Table(
    "memory_entities",
    md,
    sa.Column("pk", sa.Integer, sa.ForeignKey("memories.pk", ondelete="CASCADE"), nullable=False),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("entity", sa.String(256), nullable=False),
    sa.Index("ix_entities_lookup", "tenant_id", "user_id", "entity"),
    sa.Index("ix_entities_pk", "pk"),
)

turns_t = sa.Table(
    "turns",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("session_id", sa.String(256), nullable=False),
    sa.Column("user_text", sa.Text, nullable=False),
    sa.Column("assistant_text", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Index("ix_turns_scope", "tenant_id", "user_id", "session_id", "pk"),
)

audit_t = sa.Table(
    "audit_log",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256)),
    sa.Column("memory_id", sa.String(64)),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("actor", sa.String(64), nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Index("ix_audit_memory", "memory_id", "pk"),
    sa.Index("ix_audit_scope", "tenant_id", "user_id", "ts"),
)

#: which search returned which memory, at which rank (``Memory.explain``); written in batches
retrievals_t = sa.Table(
    "retrieval_log",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("search_id", sa.String(32), nullable=False),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("score", sa.Float, nullable=False),
    #: the query after PII redaction, cut to 500 characters
    sa.Column("query", sa.Text, nullable=False),
    sa.Index("ix_retrieval_memory", "tenant_id", "memory_id", "pk"),
)

#: the cold tier: a record moved out of ``memories`` (and its keyword, entity and vector indexes) as
#: one zlib-compressed JSON document (``MemoryRecord.to_dict`` without its vector) and its vector
#: apart (float32 blobs barely compress); listed, exported and restored by id
cold_t = sa.Table(
    "memories_cold",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("memory_id", sa.String(64), nullable=False, unique=True),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("archived_at", sa.Float, nullable=False),
    sa.Column("document", sa.LargeBinary, nullable=False),
    sa.Column("embedding", sa.LargeBinary),
    sa.Column("embedding_model", sa.String(128)),
    sa.Index("ix_cold_scope", "tenant_id", "user_id", "created_at"),
)

#: the cold records' entities (normalised): a query that names what only the cold tier holds is
#: found by one indexed look-up, without opening the archive
cold_entities_t = sa.Table(
    "memories_cold_entities",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("entity", sa.String(256), nullable=False),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Index("ix_cold_entities_lookup", "tenant_id", "user_id", "entity"),
    sa.Index("ix_cold_entities_memory", "memory_id"),
)

#: ``formation_queue.state`` of a turn waiting for the formation worker, and of one it formed
FORMING, FORMED = 0, 1

#: the formation queue (``portamem.background.formation``, schema 8): each user turn with its session
#: context, written in the transaction that writes the turn, drained by the formation worker; the
#: worker marks a row FORMED in the transaction that applies its decisions, so a turn is formed once
formation_t = sa.Table(
    "formation_queue",
    md,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("session_id", sa.String(256), nullable=False),
    #: when it was queued (the backlog's age), not when the turn was said (``turn["created_at"]``)
    sa.Column("queued_at", sa.Float, nullable=False),
    #: {"user", "assistant", "created_at", "context": [{"user", "assistant"}, ...]}: the turn and the turns before it
    sa.Column("turn", sa.JSON, nullable=False),
    #: the ids of the memories the write path captured from the turn (the rule pass)
    sa.Column("memory_ids", sa.JSON, nullable=False),
    sa.Column("state", sa.Integer, nullable=False, default=FORMING),
    sa.Column("formed_at", sa.Float),
    #: what formation decided (counts, by whom), for ``explain`` and the tests
    sa.Column("result", sa.JSON),
    sa.Index("ix_formation_state", "state", "pk"),
)

meta_t = sa.Table(
    "meta",
    md,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

def keyword_text(record: MemoryRecord) -> str:
    """The text the keyword index holds for a record: its content, then its summary."""
    return record.content if not record.summary else f"{record.content}\n{record.summary}"


def ts_of(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def dt_of(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=timezone.utc)


def vec_to_blob(vector: Sequence[float] | np.ndarray | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype="<f4").tobytes()


def blob_to_vec(blob: bytes | None) -> list[float] | None:
    return None if blob is None else np.frombuffer(blob, dtype="<f4").tolist()


def record_row(record: MemoryRecord) -> dict[str, Any]:
    return {
        "memory_id": record.memory_id,
        "tenant_id": record.tenant_id,
        "user_id": record.user_id,
        "session_id": record.session_id,
        "agent_id": record.agent_id,
        "type": record.type.value,
        "kind": record.kind,
        "content": record.content,
        "summary": record.summary,
        "entities": list(record.entities),
        "triples": [list(t) for t in record.triples],
        "embedding": vec_to_blob(record.embedding),
        "embedding_model": record.embedding_model,
        "embedding_version": record.embedding_version,
        "importance": float(record.importance),
        "importance_band": int(record.importance_band),
        "half_life_days": float(record.half_life_days),
        "created_at": ts_of(record.created_at),
        "updated_at": ts_of(record.updated_at),
        "last_accessed_at": ts_of(record.last_accessed_at),
        "access_count": int(record.access_count),
        "frequency": int(record.frequency),
        "source": record.source.value,
        "trust": record.trust.value,
        "status": record.status.value,
        "supersedes": record.supersedes,
        "superseded_by": record.superseded_by,
        "deleted_at": ts_of(record.deleted_at),
        "metadata": dict(record.metadata),
        "key_namespace": record.key_namespace,
        "key": record.key,
        "tier": record.tier.value,
        "tiered_at": ts_of(record.tiered_at),
    }


def row_record(row: Any) -> MemoryRecord:
    m = row._mapping
    return MemoryRecord(
        memory_id=m["memory_id"],
        tenant_id=m["tenant_id"],
        user_id=m["user_id"],
        session_id=m["session_id"],
        agent_id=m["agent_id"],
        type=MemoryType(m["type"]),
        kind=m["kind"],
        content=m["content"],
        summary=m["summary"],
        entities=list(m["entities"] or []),
        triples=[list(t) for t in (m["triples"] or [])],
        embedding=blob_to_vec(m.get("embedding")),
        embedding_model=m["embedding_model"],
        embedding_version=m["embedding_version"],
        importance=m["importance"],
        importance_band=m["importance_band"],
        half_life_days=m["half_life_days"],
        created_at=dt_of(m["created_at"]),  # type: ignore[arg-type]
        updated_at=dt_of(m["updated_at"]),  # type: ignore[arg-type]
        last_accessed_at=dt_of(m["last_accessed_at"]),
        access_count=m["access_count"],
        frequency=m["frequency"],
        source=Source(m["source"]),
        trust=Trust(m["trust"]),
        status=Status(m["status"]),
        supersedes=m["supersedes"],
        superseded_by=m["superseded_by"],
        deleted_at=dt_of(m["deleted_at"]),
        metadata=dict(m["metadata"] or {}),
        key_namespace=m["key_namespace"],
        key=m["key"],
        tier=Tier(m["tier"]),
        tiered_at=dt_of(m["tiered_at"]),
    )


