"""``PortamemRetriever``: a LangChain ``BaseRetriever`` over one user's memories."""

from __future__ import annotations

from typing import Any

from ._framework import require

require()

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict  # noqa: E402

from portamem import Memory, RemoteMemory, SearchHit  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402
from portamem.filters import for_agent  # noqa: E402
from portamem.recall import prompt_text  # noqa: E402

__all__ = ["PortamemRetriever", "hit_to_document"]


def hit_to_document(hit: SearchHit) -> Document:
    """A hit as a ``Document``: the memory text (quoted and attributed when its trust is low: ``prompt_text``),
    its id, and the score breakdown and provenance as metadata."""
    r = hit.record
    return Document(
        page_content=prompt_text(r),
        id=r.memory_id,
        metadata={
            "score": hit.score,
            "components": dict(hit.breakdown.components),
            "found_by": list(hit.found_by),
            "type": r.type.value,
            "trust": r.trust.value,
            "created_at": r.created_at.isoformat(),
            "session_id": r.session_id,
            "metadata": dict(r.metadata),
        },
    )


class PortamemRetriever(BaseRetriever):
    """``invoke(query)`` returns the user's best memories, best first, for RAG-style chains."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: an embedded store, or a server's (``RemoteMemory``)
    memory: Memory | RemoteMemory
    user_id: str
    tenant_id: str | None = None
    k: int | None = None
    filters: dict[str, Any] | None = None
    #: an agent's scope: its private memories first, then the user's shared layer (memories without an agent)
    agent_id: str | None = None

    def _search_args(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """``invoke(query, k=..., filters=...)`` overrides the fields for one call."""
        unknown = set(overrides) - {"k", "filters"}
        if unknown:
            raise ValidationError(f"unknown retriever arguments {sorted(unknown)}; known: ['filters', 'k']")
        return {
            "user_id": self.user_id,
            "top_k": overrides.get("k", self.k),
            "filters": for_agent(overrides.get("filters", self.filters), self.agent_id),
            "tenant_id": self.tenant_id,
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return [hit_to_document(h) for h in self.memory.search_memory(query, **self._search_args(kwargs))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return [hit_to_document(h) for h in await self.memory.asearch_memory(query, **self._search_args(kwargs))]
