"""``Memory``: the four operations, the working window, export/import and index upkeep (sync and async)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

import numpy as np

from .config import Settings
from .embeddings import Embedder, get_embedder
from .entities import extract_entities
from .errors import (
    ContentTooLongError,
    EmbeddingModelMismatchError,
    ImportFormatError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from .filters import SearchFilters
from .records import (
    DEFAULT_TRUST,
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
from .retrieval import Retriever
from .store import RecordStore
from .vectors import MilvusVectorIndex

__all__ = ["Memory", "MemoryDraft", "EXPORT_FORMAT"]

log = logging.getLogger(__name__)

EXPORT_FORMAT = "portamem-export"
EXPORT_VERSION = 1
_T = TypeVar("_T")
ProgressFactory = Callable[[int, str], Any]


def _as_enum(name: str, enum: type[_T], value: Any) -> _T:
    try:
        return enum(value)  # type: ignore[call-arg]
    except ValueError as exc:
        allowed = [e.value for e in enum]  # type: ignore[attr-defined]
        raise ValidationError(f"{name} must be one of {allowed}, got {value!r}") from exc


@dataclass
class MemoryDraft:
    """One memory to save in a batch (``Memory.save_memories``); the same fields as ``save_memory``."""

    content: str
    type: MemoryType | str = MemoryType.SEMANTIC
    importance: float | None = None
    half_life_days: float | None = None
    source: Source | str = Source.USER
    trust: Trust | str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    kind: str | None = None
    summary: str | None = None
    entities: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None


def _async_twin(method: Callable[..., _T]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def twin(self: Memory, *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__doc__ = f"Async twin of :meth:`{method.__name__}` (runs it in a worker thread)."
    return twin


class Memory:
    """Portable long-term memory for one store. Every call is scoped by ``user_id`` (and tenant)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        tenant_id: str | None = None,
        progress: ProgressFactory | None = None,
    ) -> None:
        settings = settings or Settings.load()
        if path is not None:
            settings = settings.replace(path=str(path))
        self.settings = settings
        self.tenant_id = self._check_id("tenant_id", tenant_id or settings.tenant_id)
        self.embedder = embedder or get_embedder(settings.embedder)
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
        self._lock = threading.RLock()
        self._indexed_pending: list[str] = []
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

    def _build_record(self, draft: MemoryDraft, *, user_id: str, tenant_id: str) -> MemoryRecord:
        content = self._check_content(draft.content)
        mtype = _as_enum("type", MemoryType, draft.type)
        source = _as_enum("source", Source, draft.source)
        trust = DEFAULT_TRUST[source] if draft.trust is None else _as_enum("trust", Trust, draft.trust)
        importance = 0.5 if draft.importance is None else self._check_unit("importance", draft.importance)
        kind = draft.kind
        if kind is not None and (not isinstance(kind, str) or kind not in self.settings.half_lives):
            raise ValidationError(f"kind must be one of {sorted(self.settings.half_lives)}, got {kind!r}")
        if draft.half_life_days is not None:
            hl = draft.half_life_days
            if isinstance(hl, bool) or not isinstance(hl, (int, float)) or hl <= 0:
                raise ValidationError(f"half_life_days must be a positive number, got {hl!r}")
            half_life = float(hl)
        else:
            default_kind = kind or ("episodic" if mtype is MemoryType.EPISODIC else "fact")
            half_life = self.settings.half_lives[default_kind]
        if not isinstance(draft.metadata, Mapping):
            raise ValidationError(f"metadata must be a mapping, got {type(draft.metadata).__name__}")
        try:
            metadata = json.loads(json.dumps(dict(draft.metadata)))
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"metadata must be JSON-serialisable: {exc}") from exc
        if draft.entities is not None and (
            not isinstance(draft.entities, (list, tuple)) or not all(isinstance(e, str) for e in draft.entities)
        ):
            raise ValidationError("entities must be a list of strings")
        if draft.summary is not None and not isinstance(draft.summary, str):
            raise ValidationError("summary must be a string")
        if draft.created_at is not None and not isinstance(draft.created_at, datetime):
            raise ValidationError("created_at must be a datetime")
        now = utcnow()
        created = draft.created_at or now
        if created.tzinfo is None:
            created = created.replace(tzinfo=now.tzinfo)
        return MemoryRecord(
            content=content,
            user_id=user_id,
            tenant_id=tenant_id,
            session_id=self._check_id("session_id", draft.session_id, optional=True),
            agent_id=self._check_id("agent_id", draft.agent_id, optional=True),
            type=mtype,
            kind=kind,
            summary=draft.summary,
            entities=list(draft.entities) if draft.entities is not None else extract_entities(content),
            importance=importance,
            importance_band=importance_band(importance),
            half_life_days=half_life,
            created_at=created,
            updated_at=now,
            source=source,
            trust=trust,
            metadata=metadata,
        )

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
    ) -> MemoryRecord:
        """Store one memory. When this returns, the record is committed and survives a crash."""
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
        records = [self._build_record(d, user_id=user_id, tenant_id=tenant_id) for d in items]
        if not records:
            return []
        self._attach_embeddings(records)
        with self._lock:
            with self.store.transaction() as conn:
                self.store.insert(conn, records)
                self.store.audit_many(
                    conn,
                    [
                        {"action": "save", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
                         "detail": {"type": r.type.value, "source": r.source.value, "session_id": r.session_id}}
                        for r in records
                    ],
                )
            self._index_records(records)
        return records

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
    ) -> list[SearchHit]:
        """Hybrid search of one user's memories; each hit carries its score breakdown and provenance."""
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
        now = now or utcnow()
        s = self.settings
        candidates = self.retriever.candidates(
            query, tenant_id=tenant_id, user_id=user_id, filters=f, k=max(s.candidate_k, k)
        )
        return self.retriever.rank(
            query,
            candidates,
            tenant_id=tenant_id,
            user_id=user_id,
            weights=s.weights,
            now=now,
            recency_lambda=s.recency_lambda,
            top_k=k,
            min_score=s.min_score,
        )

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
        ids = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids)
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        with self._lock:
            found = self._owned(ids, user_id, tenant_id)
            now = utcnow()
            changed = [m for m, r in found.items() if r.status is not Status.DELETED]
            with self.store.transaction() as conn:
                self.store.update_fields(
                    conn, changed, reindex=True, status=Status.DELETED.value,
                    deleted_at=now.timestamp(), updated_at=now.timestamp(),
                )
                self.store.audit_many(
                    conn,
                    [{"action": "forget", "tenant_id": tenant_id, "user_id": user_id, "memory_id": m,
                      "detail": {"previous_status": found[m].status.value}} for m in changed],
                )
            self._index_records([], deleted=changed)
        return changed

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

    def purge_deleted(self, *, older_than: timedelta | None = None, tenant_id: str | None = None) -> int:
        """Hard-delete soft-deleted records whose grace period has passed."""
        self._check_open()
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        grace = older_than if older_than is not None else timedelta(days=self.settings.grace_days)
        cutoff = (utcnow() - grace).timestamp()
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
        """Append a turn (a user message plus the reply) to the window.

        Turns pushed out of the window are compressed into episodic memories, returned here.
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
            evicted = window[: max(0, overflow)]
            if overflow > len(window):  # window size 0: the new turn leaves at once
                evicted = [*window, turn]
            episodes = [self._episode(t, user_id, tenant_id, session_id) for t in evicted]
            self._attach_embeddings(episodes)
            with self.store.transaction() as conn:
                if turn not in evicted:
                    self.store.add_turn(conn, tenant_id, user_id, session_id, turn)
                self.store.drop_turns(conn, [t.seq for t in evicted if t.seq])
                self.store.insert(conn, episodes)
                self.store.audit_many(
                    conn,
                    [{"action": "compress_turn", "tenant_id": tenant_id, "user_id": user_id,
                      "memory_id": e.memory_id, "detail": {"session_id": session_id}} for e in episodes],
                )
            self._index_records(episodes)
        return episodes

    def _episode(self, turn: Turn, user_id: str, tenant_id: str, session_id: str) -> MemoryRecord:
        parts = []
        if turn.user.strip():
            parts.append(f"User: {turn.user.strip()}")
        if turn.assistant.strip():
            parts.append(f"Assistant: {turn.assistant.strip()}")
        content = "\n".join(parts)[: self.settings.max_content_chars]
        draft = MemoryDraft(
            content=content,
            type=MemoryType.EPISODIC,
            source=Source.USER,
            session_id=session_id,
            kind="episodic",
            created_at=turn.created_at,
            entities=extract_entities(turn.user),
            metadata={"turn": {"user": turn.user, "assistant": turn.assistant, "metadata": turn.metadata}},
        )
        return self._build_record(draft, user_id=user_id, tenant_id=tenant_id)

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
        self._check_open()
        tenant_id = self._check_id("tenant_id", tenant_id or self.tenant_id)
        if user_id is not None:
            user_id = self._check_id("user_id", user_id)
        if isinstance(fp, (str, Path)):
            with open(fp, "w", encoding="utf-8") as handle:
                return self.export(handle, user_id=user_id, include_embeddings=include_embeddings,
                                   include_deleted=include_deleted, tenant_id=tenant_id)
        statuses = tuple(Status) if include_deleted else (Status.ACTIVE, Status.PENDING, Status.QUARANTINED)
        records = self.store.list(tenant_id, user_id, SearchFilters(statuses=statuses))
        header = {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "tenant_id": tenant_id,
            "user_id": user_id,
            "embedding_model": self.embedder.name,
            "embedding_dim": self.embedder.dim,
            "exported_at": utcnow().isoformat(),
            "records": len(records),
        }
        fp.write(json.dumps(header, ensure_ascii=False) + "\n")
        sessions: set[tuple[str, str]] = set()
        for r in records:
            fp.write(json.dumps({"record": r.to_dict(include_embedding=include_embeddings)}, ensure_ascii=False) + "\n")
            sessions.add((r.user_id, r.session_id or "default"))
        for uid in sorted({u for u, _ in sessions} | ({user_id} if user_id else set())):
            for sid in self.store.session_ids(tenant_id, uid):
                for t in self.store.turns(tenant_id, uid, sid):
                    fp.write(json.dumps({"turn": {
                        "tenant_id": tenant_id, "user_id": uid, "session_id": sid, "user": t.user,
                        "assistant": t.assistant, "created_at": t.created_at.isoformat(), "metadata": t.metadata,
                    }}, ensure_ascii=False) + "\n")
        return len(records)

    def import_(
        self,
        fp: IO[str] | str | Path,
        *,
        tenant_id: str | None = None,
        on_conflict: str = "error",
        progress: ProgressFactory | None = None,
    ) -> int:
        """Read an export back (all or nothing). Vectors of another model are recomputed with this one.

        ``on_conflict``: ``"error"`` (an id already here aborts the import), ``"skip"`` or ``"replace"``.
        """
        self._check_open()
        if on_conflict not in {"error", "skip", "replace"}:
            raise ValidationError("on_conflict must be 'error', 'skip' or 'replace'")
        if isinstance(fp, (str, Path)):
            try:
                with open(fp, encoding="utf-8") as handle:
                    return self.import_(handle, tenant_id=tenant_id, on_conflict=on_conflict, progress=progress)
            except OSError as exc:
                raise ImportFormatError(f"cannot read {fp}: {exc}") from exc
        records, turns = self._parse_export(fp, tenant_id)
        with self._lock:
            existing = {r.memory_id for r in records if self.store.find_owner(r.memory_id) is not None}
            if existing and on_conflict == "error":
                raise ImportFormatError(
                    f"{len(existing)} memory ids already exist (e.g. {sorted(existing)[0]}); "
                    "use on_conflict='skip' or 'replace'"
                )
            if on_conflict == "skip":
                records = [r for r in records if r.memory_id not in existing]
            bar = progress(len(records), "import") if progress else None
            for start in range(0, len(records), 256):
                self._attach_embeddings(records[start:start + 256])
                if bar is not None:
                    bar.update(len(records[start:start + 256]))
            if bar is not None:
                bar.close()
            with self.store.transaction() as conn:
                if on_conflict == "replace" and existing:
                    self.store.purge(conn, sorted(existing))
                self.store.insert(conn, records)
                for scope, turn in turns:
                    self.store.add_turn(conn, *scope, turn)
                self.store.audit_many(
                    conn,
                    [{"action": "import", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id}
                     for r in records],
                )
            if existing and on_conflict == "replace":
                self.index.delete(sorted(existing))
            self._index_records(records)
        return len(records)

    def _parse_export(
        self, fp: IO[str], tenant_id: str | None
    ) -> tuple[list[MemoryRecord], list[tuple[tuple[str, str, str], Turn]]]:
        records: list[MemoryRecord] = []
        turns: list[tuple[tuple[str, str, str], Turn]] = []
        header: dict[str, Any] | None = None
        for lineno, line in enumerate(fp, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFormatError(f"line {lineno}: not JSON ({exc.msg}); nothing was imported") from exc
            if header is None:
                if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
                    raise ImportFormatError(f"line 1 is not a {EXPORT_FORMAT} header; nothing was imported")
                if obj.get("version") != EXPORT_VERSION:
                    raise ImportFormatError(f"export version {obj.get('version')} is not supported")
                header = obj
                continue
            try:
                if "record" in obj:
                    data = dict(obj["record"])
                    if tenant_id is not None:
                        data["tenant_id"] = tenant_id
                    rec = MemoryRecord.from_dict(data)
                    self._check_id("user_id", rec.user_id)
                    self._check_id("tenant_id", rec.tenant_id)
                    self._check_id("memory_id", rec.memory_id)
                    self._check_content(rec.content)
                    if rec.embedding is not None and rec.embedding_model == self.embedder.name:
                        if len(rec.embedding) != self.embedder.dim:
                            raise ValueError(f"embedding has {len(rec.embedding)} dimensions, not {self.embedder.dim}")
                    else:
                        rec.embedding = None  # another model's vector: recomputed with ours
                    records.append(rec)
                elif "turn" in obj:
                    t = obj["turn"]
                    scope = (tenant_id or t["tenant_id"], t["user_id"], t["session_id"])
                    for name, value in zip(("tenant_id", "user_id", "session_id"), scope):
                        self._check_id(name, value)
                    turns.append((scope, Turn(t["user"], t["assistant"],
                                              datetime.fromisoformat(t["created_at"]), dict(t["metadata"]))))
                else:
                    raise ValueError("expected a 'record' or a 'turn' object")
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise ImportFormatError(f"line {lineno}: {exc}; nothing was imported") from exc
        if header is None:
            raise ImportFormatError("empty export file; nothing was imported")
        ids = [r.memory_id for r in records]
        if len(set(ids)) != len(ids):
            raise ImportFormatError("the file repeats a memory id; nothing was imported")
        return records, turns

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
    aexport = _async_twin(export)
    aimport = _async_twin(import_)
    areindex = _async_twin(reindex)
