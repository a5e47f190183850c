"""``Memory``: the four operations, the working window, export/import and index upkeep (sync and async)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

import numpy as np
import pluggy

from .config import Settings
from .embeddings import Embedder, get_embedder
from .errors import (
    ContentTooLongError,
    EmbeddingModelMismatchError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from .filters import SearchFilters
from .records import (
    MemoryRecord,
    MemoryType,
    SearchHit,
    Source,
    Status,
    Trust,
    Turn,
    importance_band,
    utcnow,
)
from .recall import format_memories
from .retrieval import SOURCES, Retriever, TraceEntry, explain
from . import trust
from .audit import AuditFinding, audit_scan, current_actor
from .explain import Explanation, RetrievalLog
from .explain import explain as explain_record
from .privacy import redact_turn, reveal
from .vault import Vault, load_private_key
from .keys import KeyedMemory, Namespace
from .lifecycle import MaintenanceReport, maintain
from .pipeline import WriteContext
from .plugins import Hooks, get_plugin_manager
from .portable import export_jsonl, import_jsonl
from .store import RecordStore
from .vectors import MilvusVectorIndex
from .window import capture, episode
from .writing import MemoryDraft, build_record, prepare, write

__all__ = ["Memory", "MemoryDraft"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
ProgressFactory = Callable[[int, str], Any]


def _async_twin(method: Callable[..., _T]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def twin(self: Memory, *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__doc__ = f"Async twin of :meth:`{method.__name__}` (runs it in a worker thread)."
    return twin


class Memory(KeyedMemory):
    """Portable long-term memory for one store. Every call is scoped by ``user_id`` (and tenant)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        tenant_id: str | None = None,
        plugins: pluggy.PluginManager | None = None,
        progress: ProgressFactory | None = None,
    ) -> None:
        """Open (or create) a store. ``plugins`` defaults to the built-ins plus installed entry points."""
        settings = settings or Settings.load()
        if path is not None:
            settings = settings.replace(path=str(path))
        self.settings = settings
        self.tenant_id = self._check_id("tenant_id", tenant_id or settings.tenant_id)
        self.embedder = embedder or get_embedder(settings.embedder)
        self.plugins = plugins if plugins is not None else get_plugin_manager()
        self.hooks = Hooks(self.plugins)
        #: seals the originals of redacted memories when a vault public key is set
        self.vault = Vault(settings.pii_vault_public_key) if settings.pii_vault_public_key else None
        self.store = RecordStore(settings.resolved_db_url)
        try:
            self.index = MilvusVectorIndex(
                settings.resolved_vector_uri,
                model=self.embedder.name,
                dim=self.embedder.dim,
                token=settings.vector_token,
                partition_per_user=settings.partition_per_user,
            )
        except BaseException:
            self.store.close()
            raise
        self.retriever = Retriever(self.store, self.index, self._embed_query)
        self.retrieval_log = RetrievalLog(self.store, self.hooks)
        self._lock = threading.RLock()
        self._indexed_pending: list[str] = []
        #: duplicate record (by id()) -> the record it was merged into, during one write
        self._replaced: dict[int, MemoryRecord] = {}
        self._closed = False
        try:
            self._reconcile(progress)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Flush index bookkeeping and release the stores. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._flush_indexed_marks()
            self.retrieval_log.flush()
        finally:
            try:
                self.index.close()
            finally:
                self.store.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this Memory is closed")

    # ------------------------------------------------------------------ validation
    def _check_id(self, name: str, value: Any, *, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise ValidationError(f"{name} must not be empty")
        if len(value) > self.settings.max_id_chars:
            raise ValidationError(f"{name} is longer than {self.settings.max_id_chars} characters")
        if "\x00" in value:
            raise ValidationError(f"{name} must not contain NUL characters")
        return value

    def _check_content(self, content: Any) -> str:
        if not isinstance(content, str):
            raise ValidationError(f"content must be a string, got {type(content).__name__}")
        if not content.strip():
            raise ValidationError("content must not be empty or whitespace")
        if len(content) > self.settings.max_content_chars:
            raise ContentTooLongError(
                f"content has {len(content)} characters; the limit is {self.settings.max_content_chars} "
                "(Settings.max_content_chars): split it or summarise it first"
            )
        if "\x00" in content:
            raise ValidationError("content must not contain NUL characters")
        return content

    @staticmethod
    def _check_unit(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise ValidationError(f"{name} must be a number between 0 and 1, got {value!r}")
        return float(value)

    # ------------------------------------------------------------------ embeddings
    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts, kind="passage")
        if vectors.shape != (len(texts), self.embedder.dim):
            raise StoreError(f"embedder {self.embedder.name} returned shape {vectors.shape}")
        return vectors

    def _embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed([text], kind="query")[0]

    def _attach_embeddings(self, records: Sequence[MemoryRecord]) -> None:
        missing = [r for r in records if r.embedding is None or r.embedding_model != self.embedder.name]
        if not missing:
            return
        vectors = self._embed([r.content for r in missing])
        for record, vector in zip(missing, vectors):
            record.embedding = vector.tolist()
            record.embedding_model = self.embedder.name
            record.embedding_version = self.embedder.version

    # ------------------------------------------------------------------ index upkeep
    def _index_records(self, records: Sequence[MemoryRecord], deleted: Sequence[str] = ()) -> None:
        """Bring the index in line after a committed write; a failure here is repaired on next open."""
        try:
            active = [r for r in records if r.status is Status.ACTIVE]
            gone = list(deleted) + [r.memory_id for r in records if r.status is not Status.ACTIVE]
            if active:
                self.index.upsert(active)
            if gone:
                self.index.delete(gone)
        except Exception:
            log.exception("vector index update failed; the records are safe and will be reindexed on next open")
            return
        self._indexed_pending.extend(r.memory_id for r in records)
        self._indexed_pending.extend(deleted)
        if len(self._indexed_pending) >= 256:
            self._flush_indexed_marks()

    def _flush_indexed_marks(self) -> None:
        if self._indexed_pending:
            ids, self._indexed_pending = self._indexed_pending, []
            self.store.mark_indexed(ids)

    def _reconcile(self, progress: ProgressFactory | None) -> None:
        """Repair the index from the records: the outbox first, then a full diff if the counts disagree."""
        recorded = self.store.get_meta("embedder")
        if recorded is not None and recorded != self.embedder.name:
            if not self.settings.auto_reindex:
                raise EmbeddingModelMismatchError(
                    f"this store was indexed with {recorded!r} but the embedder is {self.embedder.name!r}; "
                    "run `portamem reindex` or set auto_reindex"
                )
            log.warning("embedder changed from %s to %s: reindexing", recorded, self.embedder.name)
            self.reindex(progress=progress)
            return
        with self.store.transaction() as conn:
            self.store.set_meta(conn, "embedder", self.embedder.name)
        while batch := self.store.unindexed(1000):
            records = [r for _, r in batch]
            self._attach_embeddings([r for r in records if r.status is Status.ACTIVE])
            active = [r for r in records if r.status is Status.ACTIVE]
            if active:
                self.index.upsert(active)
            self.index.delete([r.memory_id for r in records if r.status is not Status.ACTIVE])
            self.store.mark_indexed([r.memory_id for r in records])
        expected = self.store.count(filters=SearchFilters())
        if self.index.count() != expected:
            log.warning("vector index disagrees with the records; repairing")
            have = self.index.ids()
            want = self.store.all_active_ids()
            self.index.delete(have - want)
            missing = want - have
            for records in self.store.iter_vectors():
                todo = [r for r in records if r.memory_id in missing]
                if todo:
                    self._attach_embeddings(todo)
                    self.index.upsert(todo)
        self.index.flush()

    def reindex(self, *, progress: ProgressFactory | None = None) -> int:
        """Rebuild the vector index from the records (re-embedding any vector of another model)."""
        self._check_open()
        with self._lock:
            self.index.drop()
            total = self.store.count(filters=SearchFilters())
            bar = progress(total, "reindex") if progress else None
            done = 0
            for records in self.store.iter_vectors(batch=256):
                stale = [r for r in records if r.embedding is None or r.embedding_model != self.embedder.name]
                if stale:
                    self._attach_embeddings(stale)
                    with self.store.transaction() as conn:
                        for r in stale:
                            self.store.update_fields(
                                conn,
                                [r.memory_id],
                                reindex=False,
                                embedding=np.asarray(r.embedding, dtype="<f4").tobytes(),
                                embedding_model=r.embedding_model,
                                embedding_version=r.embedding_version,
                            )
                self.index.upsert(records)
                done += len(records)
                if bar is not None:
                    bar.update(len(records))
            if bar is not None:
                bar.close()
            with self.store.transaction() as conn:
                self.store.set_meta(conn, "embedder", self.embedder.name)
                self.store.audit(conn, "reindex", tenant_id=self.tenant_id, user_id=None, detail={"records": done})
            self.index.flush()
            self._indexed_pending.clear()
            self.store.mark_indexed(list(self.store.all_active_ids()))
            return done

    # ------------------------------------------------------------------ write
    def save_memory(
        self,
        content: str,
        *,
        user_id: str,
        type: MemoryType | str = MemoryType.SEMANTIC,
        importance: float | None = None,
        half_life_days: float | None = None,
        source: Source | str = Source.USER,
        trust: Trust | str | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        summary: str | None = None,
        entities: list[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
        tenant_id: str | None = None,
        key: str | None = None,
        key_namespace: Namespace = (),
    ) -> MemoryRecord:
        """Store one memory. When this returns, the record is committed and survives a crash.

        With a ``key`` the write is an atomic upsert of ``(key_namespace, key)``: the returned record is
        the key's one row (its id kept across overwrites), never merged by dedupe (``portamem.keys``).
        """
        draft = MemoryDraft(
            content=content,
            type=type,
            importance=importance,
            half_life_days=half_life_days,
            source=source,
            trust=trust,
            session_id=session_id,
            agent_id=agent_id,
            kind=kind,
            summary=summary,
            entities=entities,
            metadata=dict(metadata or {}) if isinstance(metadata, Mapping) or metadata is None else metadata,  # type: ignore[arg-type]
            created_at=created_at,
            key=key,
            key_namespace=key_namespace,  # type: ignore[arg-type]
        )
        return self.save_memories([draft], user_id=user_id, tenant_id=tenant_id)[0]

    def save_memories(
        self,
        drafts: Iterable[MemoryDraft | Mapping[str, Any] | str],
        *,
        user_id: str,
        tenant_id: str | None = None,
    ) -> list[MemoryRecord]:
        """Store several memories in one transaction (all or none), embedding them in one batch."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        items: list[MemoryDraft] = []
        for d in drafts:
            if isinstance(d, MemoryDraft):
                items.append(d)
            elif isinstance(d, str):
                items.append(MemoryDraft(content=d))
            elif isinstance(d, Mapping):
                try:
                    items.append(MemoryDraft(**d))
                except TypeError as exc:
                    raise ValidationError(f"bad memory fields: {exc}") from exc
            else:
                raise ValidationError(f"each memory must be a MemoryDraft, mapping or string, got {type(d).__name__}")
        return write(self, items, user_id=user_id, tenant_id=tenant_id, explicit=True)

    # ------------------------------------------------------------------ read
    def search_memory(
        self,
        query: str,
        *,
        user_id: str,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        top_k: int | None = None,
        tenant_id: str | None = None,
        now: datetime | None = None,
        sources: Sequence[str] = SOURCES,
        weights: Mapping[str, float] | None = None,
        window_session: str | None = None,
        shown: Iterable[str] = (),
        debug: bool | IO[str] = False,
        trace: list[TraceEntry] | None = None,
    ) -> list[SearchHit]:
        """Hybrid search of one user's memories; each hit carries its score breakdown and provenance.

        ``sources`` and ``weights`` narrow or reweigh the read path (baselines, tuning). Memories the
        prompt already holds, the turns of ``window_session``'s working window and the ``shown`` texts,
        are left out. ``debug`` prints every candidate, its scores and fate, and the prompt text
        (to stderr, or to the stream given); ``trace`` collects the same as ``TraceEntry`` objects.
        """
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        if len(query) > self.settings.max_content_chars:
            raise ContentTooLongError(f"query is longer than {self.settings.max_content_chars} characters")
        k = self.settings.top_k if top_k is None else top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"top_k must be a positive integer, got {top_k!r}")
        f = SearchFilters.coerce(filters)
        if Status.QUARANTINED in f.statuses:
            raise ValidationError(
                "quarantined memories are never searched or recalled; review them with "
                "list_memories(filters={'statuses': ['quarantined']}) or audit_scan(include_quarantined=True)"
            )
        now = now or utcnow()
        s = self.settings
        if weights is not None:
            s.replace(weights=dict(weights))  # validates them
        window = [t for t in shown if isinstance(t, str) and t.strip()]
        if window_session is not None:
            for turn in self.context(user_id=user_id, session_id=window_session, tenant_id=tenant_id):
                window.append(f"{turn.user}\n{turn.assistant}")
        candidates = self.retriever.candidates(
            query, tenant_id=tenant_id, user_id=user_id, filters=f, k=max(s.candidate_k, k), sources=sources
        )
        registered = self.hooks.scorers()
        if trace is None and debug:
            trace = []
        hits = self.retriever.rank(
            query,
            candidates,
            tenant_id=tenant_id,
            user_id=user_id,
            weights=weights if weights is not None else {
                **{n: r.weight for n, r in registered.items() if r.weight is not None}, **s.weights},
            now=now,
            top_k=k,
            min_score=s.min_score,
            scorers=[r.fn for r in registered.values()],
            settings=s,
            window=window,
            duplicate_cosine=s.dedupe_threshold,
            trace=trace,
            trust_factor=trust.trust_factors(s.trust_factors),
        )
        self.retrieval_log.record(query, hits, WriteContext(tenant_id=tenant_id, user_id=user_id, settings=s))
        if debug:
            assert trace is not None
            print(explain(query, trace, format_memories(hits)), file=sys.stderr if debug is True else debug)
        return hits

    def get_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        self._check_id("memory_id", memory_id)
        found = self.store.get(tenant_id, user_id, [memory_id])
        if memory_id not in found:
            raise NotFoundError(f"no memory {memory_id!r} for user {user_id!r} in tenant {tenant_id!r}")
        return found[memory_id]

    def list_memories(
        self,
        *,
        user_id: str,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        limit: int | None = None,
        offset: int = 0,
        tenant_id: str | None = None,
    ) -> list[MemoryRecord]:
        """One user's memories in insertion order (active only unless ``filters`` says otherwise)."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        return self.store.list(tenant_id, user_id, SearchFilters.coerce(filters), limit=limit, offset=offset)

    def history(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> list[dict[str, Any]]:
        """The audit trail of one memory: when and how it was written, changed and removed."""
        record = self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id)
        return self.store.audit_trail(record.tenant_id, memory_id)

    # ------------------------------------------------------------------ change
    def _owned(self, memory_ids: Sequence[str], user_id: str, tenant_id: str) -> dict[str, MemoryRecord]:
        if isinstance(memory_ids, str) or not isinstance(memory_ids, Sequence):
            raise ValidationError("memory ids must be a list of strings")
        for mid in memory_ids:
            self._check_id("memory_id", mid)
        found = self.store.get(tenant_id, user_id, memory_ids)
        missing = [m for m in memory_ids if m not in found]
        if missing:
            raise NotFoundError(f"no memories {missing} for user {user_id!r} in tenant {tenant_id!r}; nothing changed")
        return found

    def forget_memory(
        self, memory_ids: Sequence[str] | str, *, user_id: str, tenant_id: str | None = None
    ) -> list[str]:
        """Soft-delete memories: they leave search at once and are purged after the grace period."""
        self._check_open()
        if not isinstance(memory_ids, (str, list, tuple)):
            raise ValidationError(f"memory ids must be a string or a list of strings, got {type(memory_ids).__name__}")
        ids = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids)
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self._lock:
            self._owned(ids, user_id, tenant_id)
            return self._soft_delete(ids, user_id=user_id, tenant_id=tenant_id, action="forget", actor=current_actor.get())

    def _soft_delete(
        self, ids: Sequence[str], *, user_id: str, tenant_id: str, action: str, actor: str,
        now: datetime | None = None, superseded_by: str | None = None,
    ) -> list[str]:
        found = self.store.get(tenant_id, user_id, ids)
        now = now or utcnow()
        changed = [m for m, r in found.items() if r.status is not Status.DELETED]
        extra = {} if superseded_by is None else {"superseded_by": superseded_by}
        with self.store.transaction() as conn:
            self.store.update_fields(
                conn, changed, reindex=True, status=Status.DELETED.value,
                deleted_at=now.timestamp(), updated_at=now.timestamp(), **extra,
            )
            self.store.audit_many(
                conn,
                [{"action": action, "actor": actor, "tenant_id": tenant_id, "user_id": user_id, "memory_id": m,
                  "detail": {"previous_status": found[m].status.value, **extra}} for m in changed],
            )
        self._index_records([], deleted=changed)
        return changed

    def _absorb(self, keep: MemoryRecord, merged: Sequence[MemoryRecord], *, now: datetime) -> None:
        """Consolidate: ``keep`` takes the others' frequency, accesses and top importance; they are retired."""
        keep.frequency += sum(m.frequency for m in merged)
        keep.access_count += sum(m.access_count for m in merged)
        top = max([keep, *merged], key=lambda r: r.importance)
        keep.importance, keep.importance_band = top.importance, top.importance_band
        keep.updated_at = now
        with self.store.transaction() as conn:
            self.store.update_fields(
                conn, [keep.memory_id], reindex=True, frequency=keep.frequency, access_count=keep.access_count,
                importance=keep.importance, importance_band=keep.importance_band, updated_at=now.timestamp(),
            )
            self.store.audit(conn, "consolidate", tenant_id=keep.tenant_id, user_id=keep.user_id,
                             memory_id=keep.memory_id, actor="maintain",
                             detail={"merged": [m.memory_id for m in merged]})
        self._index_records([keep])
        self._soft_delete([m.memory_id for m in merged], user_id=keep.user_id, tenant_id=keep.tenant_id,
                          action="consolidate", actor="maintain", now=now, superseded_by=keep.memory_id)

    def maintain(self, *, now: datetime | None = None, policy: str | None = None,
                 tenant_id: str | None = None) -> MaintenanceReport:
        """Evict decayed memories (marked, restorable), purge those past the grace period, consolidate."""
        self._check_open()
        with self._lock:
            return maintain(self, now=now, policy=policy,
                            tenant_id=self._check_id("tenant_id", tenant_id or self.tenant_id))

    def restore_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        """Undo ``forget_memory`` while the record has not been purged yet."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self._lock:
            record = self._owned([memory_id], user_id, tenant_id)[memory_id]
            if record.status is not Status.DELETED:
                return record
            record.status = Status.ACTIVE
            record.deleted_at = None
            record.updated_at = utcnow()
            with self.store.transaction() as conn:
                self.store.update_fields(
                    conn, [memory_id], reindex=True, status="active", deleted_at=None,
                    updated_at=record.updated_at.timestamp(),
                )
                self.store.audit(conn, "restore", tenant_id=tenant_id, user_id=user_id, memory_id=memory_id)
            self._attach_embeddings([record])
            self._index_records([record])
        return record

    def purge_deleted(
        self, *, older_than: timedelta | None = None, tenant_id: str | None = None, now: datetime | None = None
    ) -> int:
        """Hard-delete soft-deleted records whose grace period has passed."""
        self._check_open()
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        grace = older_than if older_than is not None else timedelta(days=self.settings.grace_days)
        cutoff = ((now or utcnow()) - grace).timestamp()
        with self._lock:
            victims = [
                r for r in self.store.list(tenant_id, None, SearchFilters(statuses=(Status.DELETED,)))
                if r.deleted_at is not None and r.deleted_at.timestamp() <= cutoff
            ]
            if not victims:
                return 0
            with self.store.transaction() as conn:
                n = self.store.purge(conn, [r.memory_id for r in victims])
                self.store.audit_many(
                    conn,
                    [{"action": "purge", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id}
                     for r in victims],
                )
            return n

    def refresh_memory(
        self, memory_id: str, delta: float = 0.1, *, user_id: str, tenant_id: str | None = None
    ) -> MemoryRecord:
        """Reinforce a memory: importance += delta (clamped to 0..1), and count it as accessed now."""
        self._check_open()
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not -1.0 <= delta <= 1.0:
            raise ValidationError(f"delta must be a number between -1 and 1, got {delta!r}")
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self._lock:
            record = self._owned([memory_id], user_id, tenant_id)[memory_id]
            before = record.importance
            now = utcnow()
            record.importance = min(1.0, max(0.0, before + float(delta)))
            record.importance_band = importance_band(record.importance)
            record.last_accessed_at = now
            record.access_count += 1
            record.updated_at = now
            with self.store.transaction() as conn:
                self.store.update_fields(
                    conn, [memory_id], reindex=record.status is Status.ACTIVE,
                    importance=record.importance, importance_band=record.importance_band,
                    last_accessed_at=now.timestamp(), access_count=record.access_count, updated_at=now.timestamp(),
                )
                self.store.audit(
                    conn, "refresh", tenant_id=tenant_id, user_id=user_id, memory_id=memory_id,
                    detail={"importance_before": before, "importance_after": record.importance},
                )
            if record.status is Status.ACTIVE:
                self._index_records([record])
        return record

    def update_memory(
        self,
        memory_id: str,
        *,
        user_id: str,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tenant_id: str | None = None,
    ) -> MemoryRecord:
        """Rewrite a memory's content and/or metadata in one transaction, keeping its id and history.

        New content goes through the write path again (guard, redaction, structure, embedding);
        the audit log keeps the previous text.
        """
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        if content is None and metadata is None:
            raise ValidationError("nothing to update: give content, metadata or both")
        with self._lock:
            old = self._owned([memory_id], user_id, tenant_id)[memory_id]
            draft = MemoryDraft(
                content=old.content if content is None else content,
                type=old.type, importance=old.importance, half_life_days=old.half_life_days,
                source=old.source, trust=old.trust, session_id=old.session_id, agent_id=old.agent_id,
                kind=old.kind, summary=None if content is not None else old.summary,
                entities=None if content is not None else old.entities,
                metadata=dict(old.metadata if metadata is None else metadata),  # type: ignore[arg-type]
                created_at=old.created_at, key=old.key, key_namespace=old.key_namespace or (),
            )
            record = build_record(self, draft, user_id=user_id, tenant_id=tenant_id)
            prepare(self, draft, record, explicit=True)
            record.memory_id = old.memory_id
            if record.status is Status.ACTIVE:  # a guard verdict on the new text wins over the old status
                record.status = old.status
            for name in ("triples", "access_count", "last_accessed_at", "frequency", "supersedes",
                         "superseded_by", "deleted_at"):
                if name != "triples" or content is None:
                    setattr(record, name, getattr(old, name))
            if record.content == old.content:
                record.embedding, record.embedding_model = old.embedding, old.embedding_model
                record.embedding_version = old.embedding_version
            self._attach_embeddings([record])
            with self.store.transaction() as conn:
                self.store.replace(conn, record)
                self.store.audit(
                    conn, "update", tenant_id=tenant_id, user_id=user_id, memory_id=memory_id,
                    detail={"previous_content": old.content if record.content != old.content else None,
                            "content_changed": record.content != old.content,
                            "metadata_changed": record.metadata != old.metadata},
                )
            self._index_records([record])
        return record

    # ------------------------------------------------------------------ working window
    def add_turn(
        self,
        user: str,
        assistant: str,
        *,
        user_id: str,
        session_id: str = "default",
        metadata: Mapping[str, Any] | None = None,
        tenant_id: str | None = None,
        created_at: datetime | None = None,
    ) -> list[MemoryRecord]:
        """Append a turn (a user message plus the reply) to the working window.

        Turns pushed out of the window are compressed into one episodic memory, and the write-triggers
        decide whether the user's message is worth keeping (``Settings.auto_capture``). Returns the
        memories written.
        """
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        session_id = self._check_id("session_id", session_id)
        for name, text in (("user", user), ("assistant", assistant)):
            if not isinstance(text, str):
                raise ValidationError(f"{name} message must be a string, got {type(text).__name__}")
            if len(text) > self.settings.max_content_chars:
                raise ContentTooLongError(f"{name} message is longer than {self.settings.max_content_chars} characters")
        if not (user.strip() or assistant.strip()):
            raise ValidationError("a turn needs a user message or a reply")
        try:
            meta = json.loads(json.dumps(dict(metadata or {})))
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"turn metadata must be JSON-serialisable: {exc}") from exc
        turn = Turn(user=user, assistant=assistant, metadata=meta, created_at=created_at or utcnow())
        with self._lock:
            window = self.store.turns(tenant_id, user_id, session_id)
            overflow = len(window) + 1 - self.settings.window_turns
            evicted = [*window, turn] if overflow > len(window) else window[: max(0, overflow)]
            compressed = episode(self, evicted, user_id, tenant_id, session_id) if evicted else None
            episodes = [compressed] if compressed is not None else []
            self._attach_embeddings(episodes)
            ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=self.settings, session_id=session_id)
            kept = redact_turn(self.hooks, turn, ctx) if self.settings.redact_window else turn
            with self.store.transaction() as conn:
                if not any(t is turn for t in evicted):
                    self.store.add_turn(conn, tenant_id, user_id, session_id, kept)
                self.store.drop_turns(conn, [t.seq for t in evicted if t.seq])
                self.store.insert(conn, episodes)
                self.store.audit_many(
                    conn,
                    [{"action": "compress_turns", "tenant_id": tenant_id, "user_id": user_id,
                      "memory_id": e.memory_id, "detail": {"session_id": session_id, "turns": len(evicted)}}
                     for e in episodes],
                )
            self._index_records(episodes)
        captured = capture(self, turn, user_id=user_id, tenant_id=tenant_id, session_id=session_id)
        return episodes + captured

    def context(self, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> list[Turn]:
        """The turns currently in the working window, oldest first."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        return self.store.turns(tenant_id, user_id, self._check_id("session_id", session_id))

    def clear_context(self, *, user_id: str, session_id: str | None = None, tenant_id: str | None = None) -> None:
        """Drop the working window (of one session, or all) without writing episodic memory."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self.store.transaction() as conn:
            self.store.clear_turns(conn, tenant_id, user_id, self._check_id("session_id", session_id, optional=True))

    # ------------------------------------------------------------------ export / import
    def export(
        self,
        fp: IO[str] | str | Path,
        *,
        user_id: str | None = None,
        include_embeddings: bool = True,
        include_deleted: bool = False,
        tenant_id: str | None = None,
    ) -> int:
        """Write memories (one user's, or the tenant's) and their working windows as JSON lines."""
        return export_jsonl(self, fp, user_id=user_id, include_embeddings=include_embeddings,
                            include_deleted=include_deleted, tenant_id=tenant_id)

    def import_(
        self,
        fp: IO[str] | str | Path,
        *,
        tenant_id: str | None = None,
        on_conflict: str = "error",
        progress: ProgressFactory | None = None,
    ) -> int:
        """Read an export back, all or nothing; vectors of another model are recomputed with this one.

        ``on_conflict``: ``"error"`` (an id already here aborts the import), ``"skip"`` or ``"replace"``.
        """
        return import_jsonl(self, fp, tenant_id=tenant_id, on_conflict=on_conflict, progress=progress)

    # ------------------------------------------------------------------ trust, audit, explanation, reveal
    def confirm_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        """Activate a PENDING memory (low trust, or contradicting a high-trust one) after review."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self._lock:
            return trust.confirm(self, self._owned([memory_id], user_id, tenant_id)[memory_id])

    def explain(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> Explanation:
        """When and from which turn a memory was written, its source, trust and weight, and every search that returned it."""
        return explain_record(self, self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id))

    def audit_scan(
        self, *, user_id: str | None = None, tenant_id: str | None = None, since: datetime | None = None,
        window: timedelta = timedelta(days=1), factor: float = 2.0, include_quarantined: bool = False,
    ) -> list[AuditFinding]:
        """Memories to review: weight that rose ``factor``-fold within ``window``, low-trust and pending ones."""
        self._check_open()
        if user_id is not None:
            user_id = self._check_id("user_id", user_id)
        return audit_scan(self, tenant_id=self._check_id("tenant_id", tenant_id or self.tenant_id), user_id=user_id,
                          since=since, window=window, factor=factor, include_quarantined=include_quarantined)

    def reveal_memory(
        self, memory_id: str, *, user_id: str, private_key: str | bytes | None = None,
        key_file: str | Path | None = None, tenant_id: str | None = None,
    ) -> dict[str, Any]:
        """The original (unredacted) texts of a memory, opened with the vault's private key; audited."""
        record = self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id)
        key = load_private_key(private_key, key_file=key_file, store_path=self.settings.path)
        original = reveal(record, key)
        with self.store.transaction() as conn:
            self.store.audit(conn, "reveal", tenant_id=record.tenant_id, user_id=record.user_id,
                             memory_id=memory_id, detail={"fields": sorted(original)})
        return original

    # ------------------------------------------------------------------ async twins
    asave_memory = _async_twin(save_memory)
    asave_memories = _async_twin(save_memories)
    asearch_memory = _async_twin(search_memory)
    aget_memory = _async_twin(get_memory)
    alist_memories = _async_twin(list_memories)
    aforget_memory = _async_twin(forget_memory)
    arestore_memory = _async_twin(restore_memory)
    arefresh_memory = _async_twin(refresh_memory)
    aadd_turn = _async_twin(add_turn)
    acontext = _async_twin(context)
    aclear_context = _async_twin(clear_context)
    aupdate_memory = _async_twin(update_memory)
    aexport = _async_twin(export)
    aimport = _async_twin(import_)
    areindex = _async_twin(reindex)
    amaintain = _async_twin(maintain)
    aconfirm_memory = _async_twin(confirm_memory)
    aexplain = _async_twin(explain)
