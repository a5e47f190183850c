"""Models for CrewAI's ``Memory``: the offline stand-in that leaves analysis to portamem, and a scripted agent model."""

from __future__ import annotations

from typing import Any

from crewai.llms.base_llm import BaseLLM
from crewai.memory.analyze import ConsolidationPlan, ExtractedMemories, ExtractedMetadata, MemoryAnalysis
from pydantic import Field

__all__ = ["NoAnalysisLLM", "ScriptedLLM"]

#: CrewAI's prompt of extract_memories (translations/en.json "extract_memories_user"), around the content
_EXTRACT_HEAD, _EXTRACT_TAIL = "Content:\n", "\n\nExtract memory statements as described."


def _last_text(messages: Any) -> str:
    if isinstance(messages, str):
        return messages
    content = messages[-1].get("content") if messages else ""
    return content if isinstance(content, str) else ""


class NoAnalysisLLM(BaseLLM):
    """The analysis model ``crew_memory`` gives CrewAI's ``Memory`` when none is named: no calls out.

    CrewAI asks a model to split a task's output into statements, to pick a scope, categories and an
    importance, and to merge near-duplicates. This one gives CrewAI's own fallbacks (the whole output as
    one memory; scope ``/``, no categories, importance 0.5; insert) and leaves the rest to portamem's write
    path (formation, dedupe, review). Pass a real CrewAI LLM as ``llm`` to have CrewAI analyse.
    """

    model: str = "portamem-no-analysis"

    def __init__(self, **data: Any) -> None:
        super().__init__(**{"model": "portamem-no-analysis", **data})

    def supports_function_calling(self) -> bool:
        return True

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        if response_model is MemoryAnalysis:
            return MemoryAnalysis(suggested_scope="/", categories=[], importance=0.5,
                                  extracted_metadata=ExtractedMetadata())
        if response_model is ConsolidationPlan:
            return ConsolidationPlan(actions=[], insert_new=True)
        if response_model is ExtractedMemories:
            text = _last_text(messages)
            if text.startswith(_EXTRACT_HEAD) and _EXTRACT_TAIL in text:
                text = text[len(_EXTRACT_HEAD):text.rindex(_EXTRACT_TAIL)]
            return ExtractedMemories(memories=[text] if text.strip() else [])
        # a query analysis or an exploration round: CrewAI falls back to the query itself
        raise NotImplementedError(f"{type(self).__name__} analyses nothing; pass a real LLM to CrewAI's Memory")


class ScriptedLLM(BaseLLM):
    """An agent's model for offline tests and examples: answers each call with the next reply of a list."""

    model: str = "scripted"
    replies: list[str] = Field(default_factory=list)
    calls: list[Any] = Field(default_factory=list)

    def __init__(self, **data: Any) -> None:
        super().__init__(**{"model": "scripted", **data})

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:
        self.calls.append(messages)
        return self.replies.pop(0) if self.replies else "(no scripted reply left)"
