"""``PortamemStorage``: CrewAI's ``StorageBackend`` protocol on portamem's operations."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from crewai.memory.types import MemoryRecord as CrewRecord
from crewai.memory.types import ScopeInfo

from portamem import Memory, Status
from portamem.errors import NotFoundError, ValidationError
from portamem.filters import for_agent
from portamem.records import from_iso

from .records import category_filter, draft_of, record_of, scope_filter, under

__all__ = ["PortamemStorage", "QueryEmbedder"]


class QueryEmbedder:
    """The embedder to give CrewAI's ``Memory``: portamem's own model, and each vector remembers its text.

    CrewAI hands its storage a query's vector, never its text; portamem searches by text (vectors,
    keywords and entities together), so ``PortamemStorage.search`` looks the text up here.
    """

    def __init__(self, memory: Memory, *, remembered: int = 4096) -> None:
        self.memory = memory
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._limit = remembered
        self._lock = threading.Lock()

    @staticmethod
    def _key(vector: Sequence[float]) -> bytes:
        return np.asarray(vector, dtype=np.float32).tobytes()

    def __call__(self, input: list[str]) -> list[list[float]]:  # noqa: A002 - CrewAI's name for it
        vectors = np.asarray(self.memory.embedder.embed(list(input), kind="query"), dtype=np.float32)
        with self._lock:
            for text, vector in zip(input, vectors):
                self._texts[vector.tobytes()] = text
                self._texts.move_to_end(vector.tobytes())
            while len(self._texts) > self._limit:
                self._texts.popitem(last=False)
        return [v.tolist() for v in vectors]

    def text_for(self, vector: Sequence[float]) -> str:
        with self._lock:
            text = self._texts.get(self._key(vector))
        if text is None:
            raise ValidationError("PortamemStorage searches by the text of a query embedded by its own embedder; "
                                  "build CrewAI's Memory with embedder=storage.embedder (portamem_crewai.crew_memory does)")
        return text


class PortamemStorage:
    """One user's portamem memories as CrewAI's memory storage: ``Memory(storage=PortamemStorage(...))``.

    A CrewAI record's id is its portamem memory id (given when it is saved); its scope, categories,
    source and privacy live in the memory's metadata under ``"crewai"``, its own metadata beside them.
    ``search`` is portamem's hybrid search and its score is portamem's final score. Memories written
    through another framework are records at the root scope ``/`` with no categories.
    """

    def __init__(self, memory: Memory, *, user_id: str, tenant_id: str | None = None,
                 agent_id: str | None = None) -> None:
        self.memory = memory
        self.user_id = user_id
        self.tenant_id = tenant_id
        self.agent_id = agent_id
        self.embedder = QueryEmbedder(memory)

    # ------------------------------------------------------------------ helpers
    def _filters(self, scope_prefix: str | None = None, categories: list[str] | None = None,
                 metadata_filter: dict[str, Any] | None = None, older_than: datetime | None = None) -> Any:
        metadata = {**(metadata_filter or {}), **scope_filter(scope_prefix), **category_filter(categories)}
        filters: dict[str, Any] = {"metadata": metadata} if metadata else {}
        if older_than is not None:
            filters["created_before"] = from_iso(older_than)
        return for_agent(filters or None, self.agent_id)

    def _records(self, scope_prefix: str | None = None, **kw: Any) -> list[CrewRecord]:
        rows = self.memory.list_memories(user_id=self.user_id, tenant_id=self.tenant_id,
                                         filters=self._filters(scope_prefix, **kw))
        return [record_of(r) for r in rows]

    def _forget(self, ids: list[str]) -> int:
        if not ids:
            return 0
        return len(self.memory.forget_memory(ids, user_id=self.user_id, tenant_id=self.tenant_id))

    # ------------------------------------------------------------------ the protocol
    def save(self, records: list[CrewRecord]) -> None:
        """Save all or none; each record's ``id`` becomes the id portamem gave it."""
        saved = self.memory.save_memories([draft_of(r, agent_id=self.agent_id) for r in records],
                                          user_id=self.user_id, tenant_id=self.tenant_id)
        for record, row in zip(records, saved):
            record.id = row.memory_id

    def search(self, query_embedding: list[float], scope_prefix: str | None = None,
               categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
               limit: int = 10, min_score: float = 0.0) -> list[tuple[CrewRecord, float]]:
        hits = self.memory.search_memory(
            self.embedder.text_for(query_embedding), user_id=self.user_id, tenant_id=self.tenant_id, top_k=limit,
            filters=self._filters(scope_prefix, categories, metadata_filter), touch=True)
        return [(record_of(h.record, quote=True), h.score) for h in hits if h.score >= min_score]

    def delete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
               record_ids: list[str] | None = None, older_than: datetime | None = None,
               metadata_filter: dict[str, Any] | None = None) -> int:
        """Forget the records matching every criterion given; returns how many were forgotten."""
        if record_ids is not None and not (scope_prefix or categories or older_than or metadata_filter):
            return self._forget(list(record_ids))
        found = self._records(scope_prefix, categories=categories, metadata_filter=metadata_filter,
                              older_than=older_than)
        return self._forget([r.id for r in found if record_ids is None or r.id in record_ids])

    def update(self, record: CrewRecord) -> None:
        """Rewrite the record's text and metadata (scope and categories included), keeping its id and history."""
        draft = draft_of(record, agent_id=self.agent_id)
        self.memory.update_memory(record.id, user_id=self.user_id, tenant_id=self.tenant_id,
                                  content=draft["content"], metadata=draft["metadata"])

    def get_record(self, record_id: str) -> CrewRecord | None:
        try:
            found = self.memory.get_memory(record_id, user_id=self.user_id, tenant_id=self.tenant_id)
        except NotFoundError:
            return None
        return record_of(found) if found.status == Status.ACTIVE else None

    def list_records(self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0) -> list[CrewRecord]:
        """Newest first, as CrewAI lists."""
        newest = sorted(self._records(scope_prefix), key=lambda r: r.created_at, reverse=True)
        return newest[offset:offset + limit]

    def get_scope_info(self, scope: str) -> ScopeInfo:
        found = self._records(scope)
        times = [r.created_at for r in found]
        return ScopeInfo(path=scope, record_count=len(found),
                         categories=sorted({c for r in found for c in r.categories}),
                         oldest_record=min(times, default=None), newest_record=max(times, default=None),
                         child_scopes=self.list_scopes(scope))

    def list_scopes(self, parent: str = "/") -> list[str]:
        depth = len([s for s in parent.split("/") if s])
        children = set()
        for record in self._records(parent):
            parts = [s for s in record.scope.split("/") if s]
            if len(parts) > depth and under(record, parent):
                children.add("/" + "/".join(parts[: depth + 1]))
        return sorted(children)

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self._records(scope_prefix):
            for category in record.categories:
                counts[category] = counts.get(category, 0) + 1
        return counts

    def count(self, scope_prefix: str | None = None) -> int:
        return len(self._records(scope_prefix))

    def reset(self, scope_prefix: str | None = None) -> None:
        """Forget every record in the scope (all of this user's memories for None)."""
        self._forget([r.id for r in self._records(scope_prefix)])

    # ------------------------------------------------------------------ async twins
    async def asave(self, records: list[CrewRecord]) -> None:
        await asyncio.to_thread(self.save, records)

    async def asearch(self, query_embedding: list[float], scope_prefix: str | None = None,
                      categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
                      limit: int = 10, min_score: float = 0.0) -> list[tuple[CrewRecord, float]]:
        return await asyncio.to_thread(self.search, query_embedding, scope_prefix, categories, metadata_filter,
                                       limit, min_score)

    async def adelete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
                      record_ids: list[str] | None = None, older_than: datetime | None = None,
                      metadata_filter: dict[str, Any] | None = None) -> int:
        return await asyncio.to_thread(self.delete, scope_prefix, categories, record_ids, older_than,
                                       metadata_filter)
