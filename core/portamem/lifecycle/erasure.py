"""Erasing a user: everything of one user in a tenant leaves the store at once, without a grace period.

Every tier (hot and warm rows, the cold archive), the keyword postings and counts and their cache, the
entity index, the working window, the formation queue's turns (waiting or formed), the retrieval log, the
audit trail, the sealed originals (they live in the rows' metadata), the vector index and the replica; the
abstract memories and episodes derived from the user's memories are rows of the user too. What is left
is one audit row (action ``erase_user``) that says how many rows went, without any content: it keeps the
user id, because an erasure that leaves no trace cannot be shown to have happened (the operator answers
"when was this user erased, and by whom?" from it), and an id is what the request named, not what the
user said.

May import: the data model, ``portamem.components``, storage and the background path's upkeep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..background.upkeep import reindex
from ..components import Components
from ..language.duplicates import text_profile
from ..storage.erasure import erase_rows, user_memory_ids

__all__ = ["Erasure", "erase_user", "ERASE_ACTION"]

#: the action of the one audit row an erasure leaves
ERASE_ACTION = "erase_user"


@dataclass(frozen=True)
class Erasure:
    """What erasing a user removed: how many memories (every tier), and rows per table."""

    tenant_id: str
    user_id: str
    memories: int
    rows: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "user_id": self.user_id, "memories": self.memories,
                "rows": dict(self.rows)}


def erase_user(parts: Components, tenant_id: str, user_id: str, *, actor: str) -> Erasure:
    """Delete everything of one user in one transaction, then take their vectors out of the index and the
    replica. The caller holds the store's lock and has let the indexer settle what was queued (a batch
    in its hands would write the user's vectors back)."""
    with parts.store.transaction() as conn:
        ids = user_memory_ids(conn, tenant_id, user_id)
        rows = erase_rows(parts.store, conn, tenant_id, user_id)
        parts.store.audit(conn, ERASE_ACTION, tenant_id=tenant_id, user_id=user_id, actor=actor,
                          detail={"memories": len(ids), "rows": {k: v for k, v in rows.items() if v}})
    parts.store.scrub_log()  # the log's copies of the erased pages go too
    parts.outbox.forget(ids)
    if ids:  # a failure here raises: the rows are gone, and the index is reconciled with them on open
        parts.index.delete(ids)
        parts.replica.forget(set(ids))
        if getattr(parts.index, "lite", False):
            # milvus-lite keeps deleted rows (their vectors) in its segment files until a compaction it
            # rarely runs and cannot be asked for: the index is rebuilt from the records, whose cost grows
            # with the store (the vectors are stored, nothing is embedded again)
            reindex(parts)
        else:  # a Milvus server drops deleted rows from its segments at its next compaction: asked for now
            parts.index.compact()
    text_profile.cache_clear()  # the duplicate check's memo of texts it compared
    return Erasure(tenant_id, user_id, len(ids), {k: v for k, v in rows.items() if v})
