"""A stored memory rewritten in place (``Memory.update_memory``): the new text goes through the write
path again (guard, redaction, extraction, importance), the id, history and use counts are kept, and
the audit log keeps the previous text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..components import Components
from ..records import MemoryRecord, Status
from .requests import MemoryDraft
from .save import build_record, prepare
from .validation import check_provenance

__all__ = ["rewrite"]

#: what a rewrite keeps of the stored memory (its triples only when the text stays)
_KEPT = ("access_count", "last_accessed_at", "frequency", "supersedes", "superseded_by", "deleted_at")


def rewrite(parts: Components, old: MemoryRecord, *, content: str | None,
            metadata: Mapping[str, Any] | None) -> MemoryRecord:
    """Commit ``old`` with new content and/or metadata (validated by the caller, under the store's
    lock); the caller brings the index in line."""
    draft = MemoryDraft(
        content=old.content if content is None else content,
        type=old.type, importance=old.importance, half_life_days=old.half_life_days,
        source=old.source, trust=old.trust, session_id=old.session_id, agent_id=old.agent_id,
        kind=old.kind, summary=None if content is not None else old.summary,
        entities=None if content is not None else old.entities,
        metadata=dict(old.metadata) if metadata is None else check_provenance("metadata", metadata, kept=old.metadata),
        created_at=old.created_at, key=old.key, key_namespace=old.key_namespace or (),
    )
    record = build_record(parts, draft, user_id=old.user_id, tenant_id=old.tenant_id)
    prepare(parts, draft, record, explicit=True)
    record.memory_id = old.memory_id
    if record.status is Status.ACTIVE:  # a guard verdict on the new text wins over the old status
        record.status = old.status
    for name in _KEPT + (("triples",) if content is None else ()):
        setattr(record, name, getattr(old, name))
    if record.content == old.content:
        record.embedding, record.embedding_model = old.embedding, old.embedding_model
        record.embedding_version = old.embedding_version
    parts.attach_embeddings([record])
    with parts.store.transaction() as conn:
        parts.store.replace(conn, record)
        parts.store.audit(
            conn, "update", tenant_id=old.tenant_id, user_id=old.user_id, memory_id=old.memory_id,
            detail={"previous_content": old.content if record.content != old.content else None,
                    "content_changed": record.content != old.content,
                    "metadata_changed": record.metadata != old.metadata},
        )
    return record
