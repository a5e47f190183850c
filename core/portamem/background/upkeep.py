"""Index upkeep outside the indexer's batches: a change made under the store's lock brought into the
index at once, the embedder checked on open, the index repaired when it disagrees with the records,
and rebuilt on request.

May import: the data model, ``portamem.components``, ``portamem.storage`` and the write path.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..components import Components
from ..errors import EmbeddingModelMismatchError
from ..filters import SearchFilters
from ..records import MemoryRecord, Tier, in_vector_index
from ..write.validation import SafeProgress

__all__ = ["index_now", "reconcile", "index_disagrees", "repair", "reindex"]

log = logging.getLogger(__name__)


def index_now(parts: Components, records: Sequence[MemoryRecord], deleted: Sequence[str] = ()) -> None:
    """Bring the index in line after a committed change made under the store's lock (refresh, forget,
    update, restore, import); rows without a vector of this model are left to the background indexer.
    A failure here is logged: the rows stay in the outbox and the indexer retries them."""
    ready: list[MemoryRecord] = []
    later: list[MemoryRecord] = []
    for r in records:  # by identity: comparing records field by field made an import quadratic
        (ready if not in_vector_index(r) or not parts.needs_vector(r) else later).append(r)
    try:
        active = [r for r in ready if in_vector_index(r)]
        gone = list(deleted) + [r.memory_id for r in ready if not in_vector_index(r)]
        if active:
            parts.index.upsert(active)
        if gone:
            parts.index.delete(gone)
        parts.store.mark_indexed([r.memory_id for r in ready] + list(deleted))
    except Exception:
        log.exception("vector index update failed; the records are safe and the indexer retries them")
        later = list(records)
    else:
        parts.replica.apply(active, [r for r in ready if not in_vector_index(r)])
        if deleted:
            parts.replica.forget(set(deleted))
    if later:
        parts.outbox.enqueue(later)


def reconcile(parts: Components, progress: Any = None) -> None:
    """On open: reindex when the embedder changed (or refuse); the outbox drains in the background."""
    recorded = parts.store.get_meta("embedder")
    if recorded is not None and recorded != parts.embedder.name:
        if not parts.settings.auto_reindex:
            raise EmbeddingModelMismatchError(
                f"this store was indexed with {recorded!r} but the embedder is {parts.embedder.name!r}; "
                "run `portamem reindex` or set auto_reindex"
            )
        log.warning("embedder changed from %s to %s: reindexing", recorded, parts.embedder.name)
        reindex(parts, progress=progress)
        return
    with parts.store.transaction() as conn:
        parts.store.set_meta(conn, "embedder", parts.embedder.name)


def index_disagrees(parts: Components) -> bool:
    """Whether the index may not hold exactly the settled active rows: its count differs from the hot
    tier's, the outbox holds rows the last process left (a crash between an index write and its
    commit), or the last process noted index writes it never applied (``MilvusVectorIndex.recovering``).

    Asked when the store opens (``Indexer.start``), before this process writes: a row saved since is in
    the outbox by design, not a disagreement. Asked later, from the indexer's thread, the first save of
    a fresh store raced it and was taken for one (a repair and its warning on one open in three).
    """
    with parts.lock:
        if getattr(parts.index, "recovering", False):
            return True
        return parts.index.count() != parts.store.count(filters=SearchFilters(tiers=(Tier.HOT,))) \
            or bool(parts.store.outbox_size())


def repair(parts: Components) -> None:
    """Make the index hold exactly the settled active rows; run by the indexer when ``index_disagrees``
    said so at open."""
    with parts.lock:
        recovering = getattr(parts.index, "recovering", False)
        mark = getattr(parts.index, "restart_mark", None)  # its process restarted: checked here
        log.warning("vector index disagrees with the records; repairing")
        have = parts.index.ids()
        parts.index.delete(have - parts.store.all_active_ids())
        for records in parts.store.iter_vectors():
            todo = [r for r in records if r.memory_id not in have]
            if todo:
                parts.attach_embeddings(todo)
                parts.index.upsert(todo)
        parts.index.flush()
        if recovering or mark:
            parts.index.repaired(mark)
        parts.replica.clear()


def reindex(parts: Components, *, progress: Any = None) -> int:
    """Rebuild the vector index from the records (re-embedding any vector of another model); rows
    still queued for review are left to the indexer."""
    with parts.lock:
        total = parts.store.count(filters=SearchFilters(tiers=(Tier.HOT,)))  # the index holds the hot tier
        bar = SafeProgress(progress, total, "reindex")  # a failing factory fails before the index is dropped
        parts.index.drop()
        parts.replica.clear()
        done: list[str] = []
        for records in parts.store.iter_vectors(batch=256):
            stale = [r for r in records if r.embedding is None or r.embedding_model != parts.embedder.name]
            if stale:
                parts.attach_embeddings(stale)
                with parts.store.transaction() as conn:
                    parts.store.set_embeddings(conn, stale)
            parts.index.upsert(records)
            done.extend(r.memory_id for r in records)
            bar.update(len(records))
        bar.close()
        with parts.store.transaction() as conn:
            parts.store.set_meta(conn, "embedder", parts.embedder.name)
            parts.store.audit(conn, "reindex", tenant_id=parts.tenant_id, user_id=None, detail={"records": len(done)})
            parts.store.mark_indexed(done, conn)
        parts.index.flush()
        return len(done)
