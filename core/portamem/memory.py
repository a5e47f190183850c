"""``Memory``: the facade over one store. It composes the stages and delegates to them: every call is
validated here (``portamem.write.validation``), then handed to the write path (``portamem.write``),
the read path (``portamem.read``), lifecycle (``portamem.lifecycle``) or portability
(``portamem.portable``); the background indexer (``portamem.background``) runs beside them. Each
stage receives the store's parts (``portamem.components``), never this facade. Sync and async."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, Callable, TypeVar

import numpy as np
import pluggy

from .background.formation import Former
from .background.indexer import Indexer, IndexStats
from .background.process import IndexerProcess
from .background.queued import queued_vectors
from .background.upkeep import index_now, reconcile, reindex
from .components import Components
from .config import Settings
from .embedding.embedders import Embedder, PassageBatcher, QueryCache, get_embedder
from .errors import ConfigError, IndexingTimeoutError, NotFoundError, StoreError, ValidationError
from .filters import SearchFilters
from .lifecycle.audit import AuditFinding, audit_scan
from .lifecycle import erasure
from .lifecycle.erasure import Erasure
from .lifecycle.explain import Explanation
from .lifecycle.explain import explain as explain_record
from .lifecycle.forgetting import holders, purge, restore, soft_delete
from .lifecycle.maintenance import Maintainer, MaintenanceReport, maintain
from .lifecycle.reinforcement import refresh
from .lifecycle.tiers import ColdLoader
from .lifecycle.tiers import move as move_tier
from .models import model_from_settings
from .plugins import get_plugin_manager, Hooks
from .portable.keys import Namespace, get_keyed, list_keyed
from .portable.transfer import export_jsonl, import_jsonl
from .read.calibration import calibration_for, fusion_weights, hubness_for, measured_calibration
from .read.candidates import SOURCES
from .read.preload import TASKS
from .read.replica import VectorReader
from .read.search import Retriever, Search
from .read.trace import TraceEntry
from .read.usage import RetrievalLog
from .pipeline import WriteContext
from .records import MemoryRecord, MemoryType, SearchHit, Source, Status, Tier, Trust, Turn, utcnow
from .storage.actor import current_actor
from .storage.sql import RecordStore
from .storage.indexes import open_vector_index
from .storage.vault import Vault, load_private_key
from .write import trust
from .write import validation as check
from .write.batch import close_sessions, save_many
from .write.privacy import reveal
from .write.requests import MemoryDraft, SaveRequest, SaveResult, TurnRequest
from .write.save import checked_drafts, settled, write
from .write.update import rewrite
from .write.validation import ProgressFactory
from .write.window import episode_draft

__all__ = ["Memory", "MemoryDraft", "SaveRequest", "SaveResult", "TurnRequest"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


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
        plugins: pluggy.PluginManager | None = None,
        progress: ProgressFactory | None = None,
    ) -> None:
        """Open (or create) a store. ``plugins`` defaults to the built-ins plus installed entry points."""
        settings = settings or Settings.load()
        if path is not None:
            settings = settings.replace(path=str(path))
        self.settings = settings
        self.tenant_id = check.check_id(settings, "tenant_id", settings.tenant_id if tenant_id is None else tenant_id)
        self.embedder = embedder or get_embedder(settings.embedder, workers=settings.embed_workers)
        self.plugins = plugins if plugins is not None else get_plugin_manager()
        self.hooks = Hooks(self.plugins)
        #: seals the originals of redacted memories when a vault public key is set
        self.vault = Vault(settings.pii_vault_public_key) if settings.pii_vault_public_key else None
        # with the indexer in its worker process, that process checkpoints SQLite's log, off this one's commits
        self.store = RecordStore(settings.resolved_db_url, keyword_cache_mb=settings.keyword_cache_mb,
                                 autocheckpoint=settings.resolved_indexer_process != "child")
        try:
            self.index = open_vector_index(settings, model=self.embedder.name, dim=self.embedder.dim)
        except BaseException:
            self.store.close()
            raise
        calibration = calibration_for(self.embedder.name, settings.vector_calibration) \
            or measured_calibration(self.store, self.embedder)
        # the weights in use: the user's, else the model's own, else the defaults (``fusion_weights``)
        self.settings = settings = settings.replace(weights=fusion_weights(settings.weights, calibration))
        self._lock = threading.RLock()
        #: what every stage is handed: the store, index, embedder, hooks, settings, lock
        self.parts = Components(settings=settings, tenant_id=self.tenant_id, store=self.store, index=self.index,
                                embedder=self.embedder, hooks=self.hooks, vault=self.vault, lock=self._lock,
                                passages=PassageBatcher(self.embedder))
        #: vector reads: the in-memory replica for users within the budget, else the index
        self.vectors = VectorReader(self.store, self.index, budget_mb=settings.replica_budget_mb, lock=self._lock)
        self.parts.vectors = self.vectors
        self._queries = QueryCache(self.embedder, settings.query_cache_size)
        self.retriever = Retriever(self.store, self.vectors, self._queries.get, calibration)  # type: ignore[arg-type]
        self.retriever.hubness_of = functools.partial(hubness_for, self.embedder)
        self.retriever.redacts = self._redacts
        self.retrieval_log = RetrievalLog(self.store, self.hooks)
        if settings.resolved_indexer_process == "child":
            self._refuse_objects_for_the_worker(embedder, plugins)
            self.indexer: Indexer = IndexerProcess(self.parts, batch=settings.index_batch)
        else:
            self.indexer = Indexer(self.parts, batch=settings.index_batch)
        self.parts.queue = self.indexer
        #: forms each user turn's memories in the background (``portamem.background.formation``); its
        #: ``model`` is the configured chat model, which only it asks
        self.formation = Former(self.parts, self.indexer, model=model_from_settings(settings))
        self.parts.formation = self.formation
        self._search = Search(self.parts, self.retriever, self.retrieval_log, self._queued,
                              trust.trust_factors(settings.trust_factors))
        #: cold memories a query names come back hot in the background (``portamem.lifecycle.tiers``)
        self.cold_loader = ColdLoader(self.parts)
        if settings.tiers:
            self.retriever.on_cold = self.cold_loader.submit
        self._closed = False
        self.maintainer: Maintainer | None = None
        try:
            reconcile(self.parts, progress)
            self.indexer.start()
            self.formation.start()
        except BaseException:
            self.close()
            raise
        if settings.maintain_interval_s:
            self.maintainer = Maintainer(self.maintain, self.audit_scan, settings.maintain_interval_s).start()

    def _refuse_objects_for_the_worker(self, embedder: Embedder | None, plugins: pluggy.PluginManager | None) -> None:
        """The indexer's worker process builds its embedder and plugins from the settings: objects
        handed to this constructor cannot follow it there, and it reaches the vector index only in a
        process of its own."""
        if self.index.address is None:
            why = ("needs the vector index in a process of its own (vector_process='child', a Milvus "
                   "server's vector_uri, or vector_uri='pgvector')")
        elif embedder is not None and embedder.name != self.settings.embedder:
            why = (f"builds the embedder {self.settings.embedder!r} from the settings, not the {embedder.name!r} "
                   "given: set Settings.embedder to a registered name, or keep indexer_process='thread'")
        elif plugins is not None:
            why = ("loads the plugins installed as entry points; a plugin manager given to Memory cannot follow "
                   "it into the worker process: install the plugins, or keep indexer_process='thread'")
        else:
            return
        self.index.close()
        self.store.close()
        raise ConfigError(f"indexer_process='child' {why}")

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Let the indexer drain what is queued (at most ``Settings.index_wait_s``; the rest is indexed
        on the next open), then release the stores. Idempotent."""
        if self._closed:
            return
        if self.maintainer is not None:
            self.maintainer.stop()
        try:
            if self.indexer.stats().last_error is None:
                self.indexer.flush(self.settings.index_wait_s)
        except Exception:  # noqa: BLE001 - the outbox keeps what is left
            log.warning("closing with %d records not yet in the vector index", self.indexer.stats().pending)
        self._closed = True
        try:
            self.cold_loader.stop()
            self.formation.stop()  # what it has not formed stays queued for the next open
            getattr(self.formation.model, "close", lambda: None)()  # the model client's connections
            self.indexer.stop()
            self.retrieval_log.flush()
        finally:
            try:
                self.index.close()
            finally:
                self.store.close()

    def _redacts(self, text: str) -> bool:
        """Whether the write path would redact some of ``text`` (memories hold such data as placeholders)."""
        return bool(self.hooks.redact(text, WriteContext(tenant_id=self.tenant_id, user_id="",
                                                         settings=self.settings))[1])

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this Memory is closed")

    def _tenant(self, tenant_id: Any) -> str:
        return check.check_tenant(self.settings, tenant_id, self.tenant_id)

    def _user(self, user_id: Any) -> str:
        return check.check_id(self.settings, "user_id", user_id)

    def _queued(self, tenant_id: str, user_id: str, filters: SearchFilters) -> Mapping[str, np.ndarray]:
        """The vectors of the user's rows the indexer has not reached (``portamem.background.queued``)."""
        if self.settings.search_wait_s:
            self.indexer.wait_scope((tenant_id, user_id), self.settings.search_wait_s)
        return queued_vectors(self.store, self.indexer, self.parts.embed, self.embedder.name, tenant_id, user_id,
                              filters, budget_s=self.settings.search_queued_budget_s)

    # ------------------------------------------------------------------ index upkeep
    def reindex(self, *, progress: ProgressFactory | None = None) -> int:
        """Rebuild the vector index from the records (re-embedding any vector of another model)."""
        self._check_open()
        return reindex(self.parts, progress=check.check_progress(progress))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the vector index reflects every write committed before this call (read-your-writes
        for vector search), and write the retrieval log and use counts buffered so far;
        ``IndexingTimeoutError`` after ``timeout`` seconds (the writes stay stored)."""
        self._check_open()
        self.indexer.flush(timeout)
        self.formation.flush(timeout)  # then formation, whose turns wait for their rule pass above
        self.indexer.flush(timeout)  # and what formation wrote
        self.cold_loader.flush()
        self.retrieval_log.flush()  # the searches' hits and use counts: ``show`` and ``/ui`` see them now

    def stats(self) -> IndexStats:
        """How far the background indexer is behind: pending rows, the oldest one's age, indexed/s;
        and formation (``formation``): turns pending, the oldest one's age, formed/s, fallbacks."""
        model = getattr(self.formation.model, "stats", None)  # portamem.models.ModelStats of the configured model
        return replace(self.indexer.stats(), formation=self.formation.stats(),
                       model=model.snapshot() if model is not None else None)

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
        wait: bool = False,
    ) -> MemoryRecord:
        """Store one memory. When this returns, the record is committed, survives a crash and is
        keyword-searchable; the background indexer embeds it, reviews it (trust, dedupe) and adds it to
        the vector index within moments (``stats()``). ``wait=True`` returns once that is done, with
        the record as settled: the older memory it was merged into, when it was a duplicate.

        With a ``key`` the write is an atomic upsert of ``(key_namespace, key)``: the returned record is
        the key's one row (its id kept across overwrites), never merged by dedupe (``portamem.portable.keys``).
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
            metadata=metadata,  # type: ignore[arg-type]
            created_at=created_at,
            key=key,
            key_namespace=key_namespace,  # type: ignore[arg-type]
        )
        return self.save_memories([draft], user_id=user_id, tenant_id=tenant_id, wait=wait)[0]

    def save_memories(
        self,
        drafts: Iterable[MemoryDraft | Mapping[str, Any] | str],
        *,
        user_id: str,
        tenant_id: str | None = None,
        wait: bool = False,
    ) -> list[MemoryRecord]:
        """Store several memories in one transaction (all or none); ``wait`` as in ``save_memory``."""
        self._check_open()
        user_id, tenant_id, items = checked_drafts(self.parts, drafts, user_id, tenant_id)
        return write(self.parts, items, user_id=user_id, tenant_id=tenant_id, explicit=True, wait=wait)

    def save_many(self, requests: Sequence[SaveRequest | TurnRequest]) -> list[SaveResult]:
        """Apply the saves and window turns of many users and tenants in ONE transaction (group commit),
        for a write queue.

        Each request is validated, guarded and redacted on its own: a bad one gets its typed error in
        its ``SaveResult`` and the others are still written. The valid ones commit together, so one
        fsync covers them all; results come back in request order (for a turn, the memories it wrote).
        A failure of the commit itself raises (``StoreError``) and writes none of them.
        """
        self._check_open()
        return save_many(self.parts, requests)

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
        touch: bool = False,
        tiers: Sequence[str] | None = None,
    ) -> list[SearchHit]:
        """Hybrid search of one user's memories; each hit carries its score breakdown and provenance.

        ``tiers`` (or ``filters["tiers"]``) names the storage tiers to search: by default the vector
        index (hot) and the keyword and entity matches of hot and warm, the warm vectors on disk too when
        the best hit is weak; ``("hot", "warm")`` always scans the warm vectors, and ``"cold"`` reads the
        user's archive (``portamem.lifecycle.tiers``).

        ``touch`` counts the hits as used (a model reads them, as ``recall``, the adapters' tools and the
        MCP tool do): their access count and last use move, off the search path, with the retrieval log's
        batched writes. ``recall`` also keeps the prompt to the hits that bear on the question.

        ``sources`` and ``weights`` narrow or reweigh the read path (baselines, tuning). Memories the
        prompt already holds, the turns of ``window_session``'s working window and the ``shown`` texts,
        are left out. ``debug`` prints every candidate, its scores and fate, and the prompt text
        (to stderr, or to the stream given); ``trace`` collects the same as ``TraceEntry`` objects.
        """
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        query = check.check_query(self.settings, query)
        k = check.check_top_k(self.settings, top_k)
        f = check.check_filters(self.settings, filters)
        if tiers is not None:
            f = replace(f, tiers=SearchFilters.coerce({"tiers": tiers}).tiers)
        if Status.QUARANTINED in f.statuses:
            raise ValidationError(
                "quarantined memories are never searched or recalled; review them with "
                "list_memories(filters={'statuses': ['quarantined']}) or audit_scan(include_quarantined=True)"
            )
        now = check.check_datetime("now", now) or utcnow()
        sources = check.check_sources(sources, SOURCES)
        weights = check.check_weights(weights)
        window_session = check.check_id(self.settings, "window_session", window_session, optional=True)
        shown = [t for t in check.check_texts("shown", shown) if t.strip()]
        if trace is not None and not isinstance(trace, list):
            raise ValidationError(f"trace must be a list or None, got {type(trace).__name__}")
        if not isinstance(debug, bool) and not callable(getattr(debug, "write", None)):
            raise ValidationError(f"debug must be True, False or a text stream, got {type(debug).__name__}")
        return self._search.run(query, tenant_id=tenant_id, user_id=user_id, filters=f, k=k, now=now, sources=sources,
                                weights=weights, window_session=window_session, shown=shown, debug=debug, trace=trace,
                                touch=touch)

    def get_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        check.check_id(self.settings, "memory_id", memory_id)
        found = self.store.get(tenant_id, user_id, [memory_id])
        if memory_id not in found:
            cold = self.store.cold_records(tenant_id, user_id, [memory_id])
            if cold:
                return cold[0]
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
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        f = check.check_filters(self.settings, filters)
        limit = check.check_int("limit", limit, 0, check.MAX_ROWS, optional=True)
        offset = check.check_int("offset", offset, 0, check.MAX_ROWS)
        if f.tiers is None or Tier.COLD not in f.tiers:
            return self.store.list(tenant_id, user_id, f, limit=limit, offset=offset)
        # the record store's tiers first, then the archive
        rows = self.store.list(tenant_id, user_id, f) if set(f.tiers) - {Tier.COLD} else []
        rows += [r for r in self.store.cold_records(tenant_id, user_id) if f.admits(r)]
        return rows[offset:] if limit is None else rows[offset:offset + limit]

    def set_tier(self, memory_ids: Sequence[str] | str, tier: str, *, user_id: str, tenant_id: str | None = None,
                 now: datetime | None = None) -> list[str]:
        """Move memories to a storage tier ("hot", "warm" or "cold"), audited; a cold memory comes back
        from the archive whole. Keyed memories never go cold. Returns the ids that moved."""
        self._check_open()
        ids = check.check_memory_ids(self.settings, memory_ids, single=True)
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        target = SearchFilters.coerce({"tiers": [tier]}).tiers[0]  # type: ignore[index]
        now = check.check_datetime("now", now) or utcnow()
        self.indexer.flush(self.settings.index_wait_s)  # a row still under review moves once reviewed
        with self._lock:
            moved = move_tier(self.parts, tenant_id, user_id, ids, target, now=now, actor=current_actor.get(),
                              reason="requested")
        return [m.memory_id for m in moved]

    def tier_counts(self, *, user_id: str | None = None, tenant_id: str | None = None) -> dict[str, int]:
        """Active memories in the hot and warm tiers, and archived ones in the cold tier."""
        self._check_open()
        tenant_id = self._tenant(tenant_id)
        user_id = None if user_id is None else self._user(user_id)
        return self.store.tier_counts(tenant_id, user_id)

    def history(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> list[dict[str, Any]]:
        """The audit trail of one memory: when and how it was written, changed and removed."""
        record = self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id)
        return self.store.audit_trail(record.tenant_id, memory_id)

    # ------------------------------------------------------------------ change
    def _owned(self, memory_ids: Sequence[str], user_id: str, tenant_id: str) -> dict[str, MemoryRecord]:
        memory_ids = check.check_memory_ids(self.settings, memory_ids)
        found = self.store.get(tenant_id, user_id, memory_ids)
        missing = [m for m in memory_ids if m not in found]
        if missing:
            raise NotFoundError(f"no memories {missing} for user {user_id!r} in tenant {tenant_id!r}; nothing changed")
        return found

    def forget_memory(
        self, memory_ids: Sequence[str] | str, *, user_id: str, tenant_id: str | None = None
    ) -> list[str]:
        """Soft-delete memories: they leave search at once and are purged after the grace period.

        The id a save returned forgets what that save said wherever it is held now: a save the review
        merged into an older duplicate forgets that memory (``lifecycle.forgetting.holders``). Returns
        the ids that changed."""
        self._check_open()
        ids = check.check_memory_ids(self.settings, memory_ids, single=True)
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        try:  # a save still under review may yet be merged: forget where the review puts it
            self.indexer.wait_ids(ids, self.settings.index_wait_s)
        except IndexingTimeoutError:
            log.warning("forgetting %s before the indexer reviewed them", ids)
        with self._lock:
            ids = holders(self.parts, tenant_id, user_id, ids)
            archived = [r.memory_id for r in self.store.cold_records(tenant_id, user_id, ids, vectors=False)]
            if len(archived) < len(ids):
                self._owned([m for m in ids if m not in archived], user_id, tenant_id)
            if archived:  # out of the archive first, so the soft delete and its grace period apply as ever
                move_tier(self.parts, tenant_id, user_id, archived, Tier.WARM, now=utcnow(),
                          actor=current_actor.get(), reason="forget")
            return soft_delete(self.parts, ids, user_id=user_id, tenant_id=tenant_id, action="forget",
                               actor=current_actor.get())

    def maintain(self, *, now: datetime | None = None, policy: str | None = None,
                 tenant_id: str | None = None) -> MaintenanceReport:
        """Evict decayed memories (marked, restorable), purge those past the grace period, consolidate.

        Waits for the indexer first: consolidation compares the vectors of settled memories."""
        self._check_open()
        tenant_id = self._tenant(tenant_id)
        now = check.check_datetime("now", now)
        if policy is not None:
            check.check_id(self.settings, "policy", policy)
            known = self.hooks.eviction_policies()
            if policy not in known:  # refused before the indexer settles anything: a refusal changes nothing
                raise ValidationError(f"unknown eviction policy {policy!r}; known: {sorted(known)}")
        self.indexer.flush(self.settings.index_wait_s)
        with self._lock:
            return maintain(self.parts, self.retrieval_log, now=now, policy=policy, tenant_id=tenant_id)

    def restore_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        """Undo ``forget_memory`` while the record has not been purged yet."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        with self._lock:
            record = self._owned([memory_id], user_id, tenant_id)[memory_id]
            return restore(self.parts, record)

    def purge_deleted(
        self, *, older_than: timedelta | None = None, tenant_id: str | None = None, now: datetime | None = None
    ) -> int:
        """Hard-delete soft-deleted records whose grace period has passed."""
        self._check_open()
        tenant_id = self._tenant(tenant_id)
        older_than = check.check_timedelta("older_than", older_than)
        now = check.check_datetime("now", now)
        grace = older_than if older_than is not None else timedelta(days=self.settings.grace_days)
        cutoff = ((now or utcnow()) - grace).timestamp()
        with self._lock:
            return purge(self.parts, tenant_id, cutoff)

    def refresh_memory(
        self, memory_id: str, delta: float = 0.1, *, user_id: str, tenant_id: str | None = None
    ) -> MemoryRecord:
        """Reinforce a memory: importance += delta (clamped to 0..1), and count it as accessed now."""
        self._check_open()
        delta = check.check_number("delta", delta, -1.0, 1.0)
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        with self._lock:
            record = self._owned([memory_id], user_id, tenant_id)[memory_id]
            return refresh(self.parts, record, delta)

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
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        if content is None and metadata is None:
            raise ValidationError("nothing to update: give content, metadata or both")
        if content is not None:
            content = check.check_content(self.settings, content)
        if metadata is not None:
            metadata = check.check_json(self.settings, "metadata", metadata)
        with self._lock:
            old = self._owned([memory_id], user_id, tenant_id)[memory_id]
            record = rewrite(self.parts, old, content=content, metadata=metadata)
            index_now(self.parts, [record])
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
        wait: bool = False,
    ) -> list[MemoryRecord]:
        """Append a turn (a user message plus the reply) to the working window.

        Turns pushed out of the window are compressed into one episodic memory, and the write-triggers
        decide whether the user's message is worth keeping (``Settings.auto_capture``). Returns the
        memories written (as settled by the indexer with ``wait=True``, as in ``save_memory``).
        """
        self._check_open()
        request = TurnRequest(user_id=user_id, user=user, assistant=assistant, session_id=session_id,
                              metadata=metadata, tenant_id=tenant_id, created_at=created_at)
        result = save_many(self.parts, [request])[0]
        if result.error is not None:
            raise result.error
        return settled(self.parts, result.records) if wait else result.records

    def context(self, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> list[Turn]:
        """The turns currently in the working window, oldest first."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        return self.store.turns(tenant_id, user_id, check.check_id(self.settings, "session_id", session_id))

    def archive_turns(self, turns: Sequence[Turn], *, user_id: str, session_id: str = "default",
                      tenant_id: str | None = None) -> MemoryRecord | None:
        """Compress turns that left a window the framework keeps itself into one episodic memory (the
        summariser plugins write its text, as for turns leaving portamem's own window); None when
        nothing was worth keeping. ``portamem.messages.archive_messages`` folds messages into turns."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        session_id = check.check_id(self.settings, "session_id", session_id)
        check.check_opaque_ids(self.hooks, self.settings, tenant_id, user_id, session_id=session_id)
        for turn in turns:  # the episode quotes its turns' metadata: a caller's may not bring provenance into it
            check.check_provenance("turn metadata", getattr(turn, "metadata", None) or {})
        draft = episode_draft(self.parts, list(turns), user_id=user_id, tenant_id=tenant_id, session_id=session_id)
        if draft is None:
            return None
        # the write path's own draft (its metadata holds the turns, keys callers may not set): checked, not bounded
        return write(self.parts, [draft], user_id=user_id, tenant_id=tenant_id, explicit=True)[0]

    def end_idle_sessions(self, *, user_id: str, now: datetime | None = None, keep: str | None = None,
                          tenant_id: str | None = None) -> list[MemoryRecord]:
        """End the user's sessions (but ``keep``) whose last turn is ``Settings.session_idle_s`` or more
        before ``now``: their working windows leave as episodes. ``recall`` does this before it searches
        in another session, and maintenance for every user. Returns the episodes written."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        now = check.check_datetime("now", now) or utcnow()
        keep = check.check_id(self.settings, "session_id", keep, optional=True)
        return close_sessions(self.parts, tenant_id, user_id, now=now, idle_s=self.settings.session_idle_s, keep=keep)

    def clear_context(self, *, user_id: str, session_id: str | None = None, tenant_id: str | None = None) -> None:
        """Drop the working window (of one session, or all) without writing episodic memory."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        session_id = check.check_id(self.settings, "session_id", session_id, optional=True)
        with self.store.transaction() as conn:
            self.store.clear_turns(conn, tenant_id, user_id, session_id)

    def pop_turn(self, *, user_id: str, session_id: str = "default", tenant_id: str | None = None) -> Turn | None:
        """Take the newest turn out of the session's working window, without writing episodic memory, and
        return it (None when the window is empty): an undo of the last exchange. What the turn's
        write-triggers captured as memories stays; forget those by id."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        session_id = check.check_id(self.settings, "session_id", session_id)
        with self.store.transaction() as conn:
            turns = self.store.turns(tenant_id, user_id, session_id, conn)
            if not turns:
                return None
            self.store.drop_turns(conn, [turns[-1].seq])
        return turns[-1]

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
        return export_jsonl(self.parts, fp, user_id=user_id, include_embeddings=include_embeddings,
                            include_deleted=include_deleted, tenant_id=tenant_id)

    def import_(
        self,
        fp: IO[str] | str | Path,
        *,
        tenant_id: str | None = None,
        on_conflict: str = "error",
        progress: ProgressFactory | None = None,
        trusted: bool = False,
    ) -> int:
        """Read an export back, all or nothing; vectors of another model are recomputed with this one.

        ``on_conflict`` decides about ids and keys the record's own scope (tenant, user and agent)
        already holds: ``"error"`` aborts the import, ``"skip"`` or ``"replace"``. An id another scope
        holds never touches that scope's record: the imported one gets a fresh id; a key another
        agent scope holds is not replaced (``PermissionDeniedError``). Every record is guarded and redacted again; the
        file's source, trust and status count only when ``trusted`` (a restore of one's own backup).
        """
        self._check_open()
        return import_jsonl(self.parts, fp, tenant_id=tenant_id, on_conflict=on_conflict, progress=progress,
                            trusted=trusted)

    # ------------------------------------------------------------------ trust, audit, explanation, reveal
    def confirm_memory(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> MemoryRecord:
        """Activate a PENDING memory (low trust, or contradicting a high-trust one) after review."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        with self._lock:
            record = self._owned([memory_id], user_id, tenant_id)[memory_id]
            if record.status is Status.ACTIVE:
                return record
            confirmed = trust.confirm(self.parts, record)
            index_now(self.parts, [confirmed])
            return confirmed

    def explain(self, memory_id: str, *, user_id: str, tenant_id: str | None = None) -> Explanation:
        """When and from which turn a memory was written, its source, trust and weight, and every search that returned it."""
        record = self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id)
        return explain_record(self.store, self.retrieval_log, record)

    def audit_scan(
        self, *, user_id: str | None = None, tenant_id: str | None = None, since: datetime | None = None,
        window: timedelta = timedelta(days=1), factor: float = 2.0, include_quarantined: bool = False,
    ) -> list[AuditFinding]:
        """Memories to review: weight that rose ``factor``-fold within ``window``, low-trust and pending ones."""
        self._check_open()
        if user_id is not None:
            user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        since = check.check_datetime("since", since)
        window = check.check_timedelta("window", window, optional=False)
        factor = check.check_number("factor", factor, 1.0, 1e9)
        include_quarantined = check.check_flag("include_quarantined", include_quarantined)
        return audit_scan(self.store, tenant_id=tenant_id, user_id=user_id,
                          since=since, window=window, factor=factor, include_quarantined=include_quarantined)

    def reveal_memory(
        self, memory_id: str, *, user_id: str, private_key: str | bytes | None = None,
        key_file: str | Path | None = None, tenant_id: str | None = None,
    ) -> dict[str, Any]:
        """The original (unredacted) texts of a memory, opened with the vault's private key; audited."""
        check.check_private_key(private_key, key_file)
        record = self.get_memory(memory_id, user_id=user_id, tenant_id=tenant_id)
        key = load_private_key(private_key, key_file=key_file, store_path=self.settings.path)
        original = reveal(record, key)
        with self.store.transaction() as conn:
            self.store.audit(conn, "reveal", tenant_id=record.tenant_id, user_id=record.user_id,
                             memory_id=memory_id, detail={"fields": sorted(original)})
        return original

    # ------------------------------------------------------------------ keyed memories
    def get_by_key(self, key: str, *, user_id: str, key_namespace: Namespace = (),
                   tenant_id: str | None = None) -> MemoryRecord:
        """The memory stored under ``(key_namespace, key)`` (any status but deleted), or ``NotFoundError``;
        writing with a key is ``save_memory(..., key=...)`` (``portamem.portable.keys``)."""
        self._check_open()
        return get_keyed(self.parts, key, user_id=user_id, key_namespace=key_namespace, tenant_id=tenant_id)

    def forget_by_key(self, key: str, *, user_id: str, key_namespace: Namespace = (),
                      tenant_id: str | None = None) -> str:
        """Soft-delete the memory under a key (as ``forget_memory``); returns its id. A later write revives the key."""
        self._check_open()
        with self._lock:
            record = get_keyed(self.parts, key, user_id=user_id, key_namespace=key_namespace, tenant_id=tenant_id)
            soft_delete(self.parts, [record.memory_id], user_id=record.user_id, tenant_id=record.tenant_id,
                        action="forget", actor="api")
        return record.memory_id

    def list_keyed(
        self, *, user_id: str, key_namespace: Namespace = (), filters: Any = None,
        limit: int | None = None, offset: int = 0, tenant_id: str | None = None,
    ) -> list[MemoryRecord]:
        """One user's keyed memories in ``key_namespace`` or below it, in write order (active unless ``filters``)."""
        self._check_open()
        return list_keyed(self.parts, user_id=user_id, key_namespace=key_namespace, filters=filters, limit=limit,
                          offset=offset, tenant_id=tenant_id)

    def user_ids(self, *, tenant_id: str | None = None) -> list[str]:
        """The users of a tenant that hold memories, for tenant-wide (administrative) tooling."""
        self._check_open()
        return self.store.user_ids(self._tenant(tenant_id))

    def erase_user(self, *, user_id: str, tenant_id: str | None = None) -> Erasure:
        """Erase everything of one user in a tenant now, with no grace period and no undo: every tier,
        the keyword, entity and vector indexes, the replica and caches, the working windows, open
        preloads, logs and sealed originals; one audit row without content remains
        (``portamem.lifecycle.erasure``). An administrative call: the server asks an ``admin`` key."""
        self._check_open()
        user_id = self._user(user_id)
        tenant_id = self._tenant(tenant_id)
        self.indexer.flush(self.settings.index_wait_s)  # a batch in the indexer's hands would come back
        self.cold_loader.flush()
        self.retrieval_log.flush()
        with self._lock:
            done = erasure.erase_user(self.parts, tenant_id, user_id, actor=current_actor.get())
            self.vectors.drop_user(tenant_id, user_id)
        self.index.flush()  # the deletes applied and sealed, not only noted
        self._queries.clear()
        self.retriever.forget_user(tenant_id, user_id)
        TASKS.drop_user(self, tenant_id, user_id)
        return done

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
    apop_turn = _async_twin(pop_turn)
    aend_idle_sessions = _async_twin(end_idle_sessions)
    aupdate_memory = _async_twin(update_memory)
    aset_tier = _async_twin(set_tier)
    atier_counts = _async_twin(tier_counts)
    aexport = _async_twin(export)
    aimport = _async_twin(import_)
    areindex = _async_twin(reindex)
    amaintain = _async_twin(maintain)
    aconfirm_memory = _async_twin(confirm_memory)
    aexplain = _async_twin(explain)
    aget_by_key = _async_twin(get_by_key)
    aforget_by_key = _async_twin(forget_by_key)
    alist_keyed = _async_twin(list_keyed)
    aarchive_turns = _async_twin(archive_turns)
    aerase_user = _async_twin(erase_user)
