"""``crew_memory``: CrewAI's own unified ``Memory`` wired to portamem."""

from __future__ import annotations

from typing import Any

from crewai.memory.unified_memory import Memory as CrewMemory

from portamem import Memory

from .models import NoAnalysisLLM
from .storage import PortamemStorage

__all__ = ["crew_memory"]


def crew_memory(memory: Memory, *, user_id: str, tenant_id: str | None = None, agent_id: str | None = None,
                llm: Any = None, **options: Any) -> CrewMemory:
    """A CrewAI ``Memory`` whose storage is portamem: pass it as ``Crew(memory=...)`` or ``Agent(memory=...)``.

    Its embedder is portamem's own (``PortamemStorage.embedder``), so nothing is sent out to embed.
    Ranking is portamem's: CrewAI's composite score is given weight 1 on the storage's score and 0 on
    recency and importance, which portamem's score already weighs. ``llm`` analyses what is saved
    (``NoAnalysisLLM`` by default: no model calls); ``options`` go to CrewAI's ``Memory`` unchanged.
    """
    storage = PortamemStorage(memory, user_id=user_id, tenant_id=tenant_id, agent_id=agent_id)
    settings: dict[str, Any] = {"semantic_weight": 1.0, "recency_weight": 0.0, "importance_weight": 0.0, **options}
    return CrewMemory(storage=storage, embedder=storage.embedder, llm=llm or NoAnalysisLLM(), **settings)
