"""A LlamaIndex retriever over one user's memories: query engines and RAG pipelines read portamem directly."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from portamem import Memory, SearchFilters, SearchHit
from portamem.filters import for_agent
from portamem.recall import prompt_text
from portamem.records import to_iso

__all__ = ["PortamemRetriever", "hit_to_node"]

#: node metadata kept out of what the LLM and the embedder see (provenance, not content)
_HIDDEN = ["memory_id", "score_components", "found_by", "importance", "session_id"]


def hit_to_node(hit: SearchHit) -> NodeWithScore:
    """One search hit as a scored node whose id is the memory id; its text is ``prompt_text``'s (quoted and
    attributed when the memory's trust is low)."""
    r = hit.record
    node = TextNode(
        id_=r.memory_id,
        text=prompt_text(r),
        metadata={
            "memory_id": r.memory_id,
            "type": r.type.value,
            "created_at": to_iso(r.created_at),
            "trust": r.trust.value,
            "source": r.source.value,
            "session_id": r.session_id,
            "importance": r.importance,
            "found_by": list(hit.found_by),
            "score_components": dict(hit.breakdown.components),
        },
        excluded_llm_metadata_keys=_HIDDEN,
        excluded_embed_metadata_keys=_HIDDEN,
    )
    return NodeWithScore(node=node, score=hit.score)


class PortamemRetriever(BaseRetriever):
    """``retriever.retrieve("...")`` runs portamem's hybrid search; scores and provenance ride in node metadata."""

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str,
        tenant_id: Optional[str] = None,
        similarity_top_k: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        callback_manager: Optional[CallbackManager] = None,
        agent_id: Optional[str] = None,
    ) -> None:
        """``agent_id`` names the agent (e.g. the agent's ``name``): its private memories come first, then the
        user's shared layer (memories saved without an agent)."""
        super().__init__(callback_manager=callback_manager)
        self.memory = memory
        self.user_id = user_id
        self.tenant_id = tenant_id
        self.similarity_top_k = similarity_top_k
        self.filters = for_agent(filters, agent_id)
        self.agent_id = agent_id

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        hits = self.memory.search_memory(query_bundle.query_str, user_id=self.user_id, top_k=self.similarity_top_k,
                                         filters=self.filters, tenant_id=self.tenant_id)
        return [hit_to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        hits = await self.memory.asearch_memory(query_bundle.query_str, user_id=self.user_id,
                                                top_k=self.similarity_top_k, filters=self.filters,
                                                tenant_id=self.tenant_id)
        return [hit_to_node(h) for h in hits]
