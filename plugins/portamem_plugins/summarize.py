"""Turn compression for the working window: extractive by default, an LLM when one is given."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence

from portamem import hookimpl
from portamem.entities import extract_entities
from portamem.pipeline import WriteContext
from portamem.records import Turn

__all__ = ["extractive_summary", "LLMSummarizer"]

log = logging.getLogger(__name__)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
MAX_CHARS = 600


def extractive_summary(turns: Sequence[Turn], max_chars: int = MAX_CHARS) -> str:
    """Keep the user's words whole (they hold the facts) and the most informative sentences of the replies."""
    lines: list[str] = []
    for turn in turns:
        if turn.user.strip():
            lines.append(f"User: {turn.user.strip()}")
        sentences = [s for s in _SENTENCE.split(turn.assistant.strip()) if s]
        if sentences:
            best = max(sentences, key=lambda s: (len(extract_entities(s)), -sentences.index(s)))
            lines.append(f"Assistant: {best}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"


@hookimpl(trylast=True)
def portamem_summarize_turns(turns: Sequence[Turn], context: WriteContext) -> str | None:
    return extractive_summary(turns)


class LLMSummarizer:
    """A summariser plugin around any ``llm(prompt) -> str``: strict JSON, two retries, then pass.

    Register it with ``memory.plugins.register(LLMSummarizer(llm), name="llm_summary")``; when the
    model fails three times the extractive summariser takes over.
    """

    PROMPT = (
        "Summarise this conversation excerpt for long-term memory. Keep names, numbers, dates, decisions "
        "and preferences; keep the language of the user. Answer with JSON only, exactly "
        '{{"summary": "<text>"}}.\n\n{turns}'
    )

    def __init__(self, llm: Callable[[str], str], retries: int = 2, max_chars: int = MAX_CHARS) -> None:
        self.llm = llm
        self.retries = retries
        self.max_chars = max_chars

    @hookimpl
    def portamem_summarize_turns(self, turns: Sequence[Turn], context: WriteContext) -> str | None:
        prompt = self.PROMPT.format(
            turns="\n".join(f"User: {t.user}\nAssistant: {t.assistant}" for t in turns)
        )
        for attempt in range(self.retries + 1):
            try:
                data = json.loads(self.llm(prompt))
            except (json.JSONDecodeError, TypeError) as exc:
                log.warning("summary attempt %d: not JSON (%s)", attempt + 1, exc)
                continue
            summary = data.get("summary") if isinstance(data, dict) else None
            if isinstance(summary, str) and summary.strip() and set(data) == {"summary"}:
                return summary.strip()[: self.max_chars]
            log.warning("summary attempt %d: JSON without a single 'summary' string", attempt + 1)
        return None
