"""Turn compression for the working window: rule-based by default, an LLM when one is given; and an
LLM merger of a statement with the newer one that supersedes it.

Both give the five fields of an episode, ``{summary, key_facts, user_intent, outcome, entities}``:
one event (a booking, a plan, a change) over the turns that left the window together. Turns with
nothing worth keeping (greetings, thanks, small talk, questions and their answers) give no episode.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from typing import Any

from portamem import hookimpl
from portamem.language.entities import extract_entities
from portamem.lifecycle.abstraction import habit_template
from portamem.models import ChatModel, ModelStats, as_chat_model, ask_json
from portamem.pipeline import Habit, WriteContext
from portamem.records import MemoryRecord, Turn

from portamem.language.statements import Statement
from portamem.language.text import same_passage

from .acts import utterances
from .classify import classify_kind, has_decision, has_strong_emotion, is_explicit
from .extract import attribute_values
from .statements import extract_statements

__all__ = ["extractive_summary", "extractive_episode", "LLMSummarizer", "LLMMerger", "LLMHabitSummarizer", "EPISODE_KEYS",
           "ask_json"]

#: the fields of a structured episode
EPISODE_KEYS = frozenset({"summary", "key_facts", "user_intent", "outcome", "entities"})
_DIGIT = re.compile(r"\d")

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


def _worth_keeping(sentence: str, *, user: bool) -> bool:
    """A sentence that holds something to remember: a name or id, a decision, a stated preference,
    identity or attribute, an explicit ask, strong feeling, or (from the user) a number."""
    return bool(
        extract_entities(sentence) or has_decision(sentence) or is_explicit(sentence)
        or attribute_values(sentence) or classify_kind(sentence) in {"identity", "preference"}
        or (user and (has_strong_emotion(sentence) or _DIGIT.search(sentence)))
    )


def extractive_episode(turns: Sequence[Turn], max_chars: int = MAX_CHARS, *,
                       facts_captured: bool = False, captured: Sequence[str] = ()) -> dict[str, Any] | None:
    """Rule mode: the five fields of one event, from what the turns say rather than a transcript.

    The user's statements become key facts in their normalised form ("lives_in: Paris (was Lyon)");
    a request to the assistant is the intent, the assistant's decision or confirmation its outcome;
    other sentences of the user's that hold a name, number or decision are kept as said. Small talk,
    questions and their answers leave nothing. With ``facts_captured`` (the write-triggers capture the
    user's statements as memories of their own) the episode's text leaves the statements out, and the
    other sentences ``captured`` holds (the texts of the memories captured from these turns): each fact
    is stored once, and the episode points at it (``covers``). A request enters the text only with
    what came of it ("Book a table → Booked Dishoom for 8pm"): a question put to the assistant is not
    an event. None when nothing is left.
    """
    key_facts: list[str] = []
    said: list[str] = []
    stated: list[str] = []
    intent: str | None = None
    outcome: str | None = None
    for turn in turns:
        asked = False
        acts = {act for _, act in utterances(turn.user)}
        for sentence, act in utterances(turn.user):
            if act == "request":
                intent = intent or _intent(sentence)
                asked = True
            if act != "statement":
                continue
            found = extract_statements(sentence)
            if found:
                key_facts.extend(_render(st) for st in found)
                stated.append(sentence)
            elif _worth_keeping(sentence, user=True):
                key_facts.append(sentence)
                said.append(sentence)
        if acts and acts <= {"question", "smalltalk"}:
            continue  # the answer to a question (advice, a fact looked up) is not an event's outcome
        for sentence, act in utterances(turn.assistant):
            # what was done: a decision, or what the assistant reports back on a request (a reference, a date)
            if act == "statement" and (has_decision(sentence) or (asked and _worth_keeping(sentence, user=False))):
                outcome = sentence
    told = [s for s in said if not any(same_passage(c, s) for c in captured)] + ([] if facts_captured else stated)
    if not told and outcome is None:
        return None
    head = " → ".join(x for x in (intent, outcome) if x) if outcome else ""
    summary = " ".join(x for x in [head, *told] if x)
    if len(summary) > max_chars:
        summary = summary[: max_chars - 1].rstrip() + "…"
    entities = list(dict.fromkeys(e for t in [*told, *(x for x in (intent, outcome) if x)] for e in extract_entities(t)))
    return {"summary": summary, "key_facts": key_facts, "user_intent": intent, "outcome": outcome,
            "entities": entities}


_ASKING = re.compile(r"^(?:please\s+|pls\s+|kindly\s+|can you\s+|could you\s+|would you\s+|will you\s+|"
                     r"would you mind\s+|i(?:'d| would) like(?: you)? to\s+|i (?:want|need)(?: you)? to\s+|"
                     r"help me\s+|go ahead and\s+|请|麻烦你?|帮我|帮忙|能不能|可以帮我|你能)+", re.I)


def _intent(sentence: str) -> str:
    """A request as what the user wanted done: "Can you book a table for two?" -> "Book a table for two"."""
    text = _ASKING.sub("", sentence.strip()).rstrip(" ?？.!！。")
    text = re.sub(r",?\s*please$", "", text, flags=re.I)
    return text[:1].upper() + text[1:] if text else sentence.strip()


def _render(statement: Statement) -> str:
    """A statement as a key fact: "budget (kitchen renovation): 15000 euros (was 12000)"."""
    what = statement.attribute.replace("_", " ") + (f" ({statement.qualifier})" if statement.qualifier else "")
    value = statement.value if statement.polarity else f"no longer {statement.value}"
    return f"{what}: {value}" + (f" (was {statement.previous})" if statement.previous else "")


@hookimpl(trylast=True)
def portamem_summarize_turns(turns: Sequence[Turn], context: WriteContext) -> dict[str, Any] | None:
    return extractive_episode(turns, facts_captured=context.captured, captured=context.captured_texts)


@hookimpl(trylast=True)
def portamem_summarize_habit(habit: Habit, context: WriteContext) -> str | None:
    return habit_template(habit)


class AskingPlugin:
    """A plugin around a chat model (``portamem.models.ChatModel``, or any ``llm(prompt) -> str``) whose
    answers must be JSON under ``SCHEMA`` that ``validate`` accepts; ``budget_s`` bounds the time of all
    its tries together (None: each call's own timeout only), ``max_tokens`` the length of each answer."""

    #: the JSON schema of the answer, sent to a server that can hold the model to it
    SCHEMA: dict[str, Any] | None = None

    def __init__(self, llm: ChatModel | Callable[[str], str], retries: int = 2, max_chars: int = MAX_CHARS, *,
                 budget_s: float | None = None, stats: ModelStats | None = None, max_tokens: int = 512) -> None:
        self.llm = llm
        self.model = as_chat_model(llm)
        self.retries = retries
        self.max_chars = max_chars
        self.budget_s = budget_s
        self.stats = stats
        #: the tokens one answer may take
        self.max_tokens = max_tokens

    @staticmethod
    def validate(data: Any) -> str | None:
        raise NotImplementedError

    def ask(self, prompt: str, what: str, validate: Callable[[Any], str | None] | None = None) -> Any:
        return ask_json(self.model, [{"role": "user", "content": prompt}], schema=self.SCHEMA,
                        validate=validate or self.validate, budget_s=self.budget_s, retries=self.retries,
                        stats=self.stats, max_tokens=self.max_tokens, what=what)


def _object(**properties: Any) -> dict[str, Any]:
    """A strict JSON schema of an object with exactly these properties."""
    return {"type": "object", "properties": properties, "required": sorted(properties), "additionalProperties": False}


_TEXT = {"type": "string"}
_TEXT_OR_NULL = {"type": ["string", "null"]}
_TEXTS = {"type": "array", "items": {"type": "string"}}


class LLMSummarizer(AskingPlugin):
    """A summariser plugin around any ``llm(prompt) -> str``: strict JSON of the five episode
    fields, two retries, then pass (the extractive summariser takes over).

    Register it with ``memory.plugins.register(LLMSummarizer(llm), name="llm_summary")``. The
    answer must be one JSON object with exactly ``summary`` (non-empty text), ``key_facts`` and
    ``entities`` (lists of strings), ``user_intent`` and ``outcome`` (text or null); anything else
    counts as a failed attempt.
    """

    PROMPT = (
        "Summarise this conversation excerpt for long-term memory. Keep names, numbers, dates, decisions "
        "and preferences; keep the language of the user. Answer with JSON only, exactly "
        '{{"summary": "<text>", "key_facts": ["<fact>", ...], "user_intent": "<text or null>", '
        '"outcome": "<text or null>", "entities": ["<name>", ...]}}.\n\n{turns}'
    )

    SCHEMA = {"title": "episode", **_object(summary=_TEXT, key_facts=_TEXTS, user_intent=_TEXT_OR_NULL,
                                            outcome=_TEXT_OR_NULL, entities=_TEXTS)}

    @staticmethod
    def validate(data: Any) -> str | None:
        """Why ``data`` is not a valid episode, or None when it is."""
        if not isinstance(data, dict) or set(data) != EPISODE_KEYS:
            return f"expected exactly the keys {sorted(EPISODE_KEYS)}"
        if not isinstance(data["summary"], str) or not data["summary"].strip():
            return "summary must be non-empty text"
        for key in ("key_facts", "entities"):
            if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
                return f"{key} must be a list of strings"
        for key in ("user_intent", "outcome"):
            if data[key] is not None and not isinstance(data[key], str):
                return f"{key} must be text or null"
        return None

    @hookimpl
    def portamem_summarize_turns(self, turns: Sequence[Turn], context: WriteContext) -> dict[str, Any] | None:
        prompt = self.PROMPT.format(
            turns="\n".join(f"User: {t.user}\nAssistant: {t.assistant}" for t in turns)
        )
        data = self.ask(prompt, "summary")
        if data is None:
            return None
        return {**data, "summary": data["summary"].strip()[: self.max_chars],
                "key_facts": [f.strip() for f in data["key_facts"] if f.strip()],
                "entities": [e.strip() for e in data["entities"] if e.strip()]}


class LLMMerger(AskingPlugin):
    """A merger plugin (``portamem_merge_statements``) around any ``llm(prompt) -> str``: a statement
    and the newer one that supersedes it become one, as strict JSON ``{"statement": "<text>"}``, two
    retries, then pass (the two statements stay as they are).

    Register it with ``memory.plugins.register(LLMMerger(llm), name="llm_merge")``. The merged
    statement waits PENDING until the user names its entity again (``portamem.write.supersession``).
    """

    PROMPT = (
        "The user's memory holds an older statement and a newer one that replaces its value. Write one "
        "statement that keeps what holds now and says what it was before; keep the user's language. "
        'Answer with JSON only, exactly {{"statement": "<text>"}}.\n\nOlder: {older}\nNewer: {newer}'
    )

    SCHEMA = {"title": "merged_statement", **_object(statement=_TEXT)}

    @staticmethod
    def validate(data: Any) -> str | None:
        if not isinstance(data, dict) or set(data) != {"statement"}:
            return "expected exactly the key 'statement'"
        if not isinstance(data["statement"], str) or not data["statement"].strip():
            return "statement must be non-empty text"
        return None

    @hookimpl
    def portamem_merge_statements(self, older: MemoryRecord, newer: MemoryRecord,
                                  context: WriteContext) -> str | None:
        data = self.ask(self.PROMPT.format(older=older.content, newer=newer.content), "merge")
        return None if data is None else str(data["statement"]).strip()[: self.max_chars]


class LLMHabitSummarizer(AskingPlugin):
    """A habit summariser (``portamem_summarize_habit``) around any ``llm(prompt) -> str``: the abstract
    memory of a habit as strict JSON ``{"summary": "<text>"}`` that keeps its support, two retries,
    then pass (the rule template takes over).

    Register it with ``memory.plugins.register(LLMHabitSummarizer(llm), name="llm_habits")``. An
    answer without the support's numbers ("10 of 10") counts as a failed attempt: the count is what
    makes the habit worth its confidence.
    """

    PROMPT = (
        "These memories of one user show a habit (shared words: {words}); {support} of {of} similar "
        "memories since {since} hold it. Write one sentence for long-term memory that states the habit "
        "as a preference and keeps the count \"{support} of {of}\" and the date; use the memories' "
        'language. Answer with JSON only, exactly {{"summary": "<text>"}}.\n\n{members}'
    )

    SCHEMA = {"title": "habit_summary", **_object(summary=_TEXT)}

    @staticmethod
    def validate(data: Any, support: tuple[str, str] = ("", "")) -> str | None:
        if not isinstance(data, dict) or set(data) != {"summary"}:
            return "expected exactly the key 'summary'"
        if not isinstance(data["summary"], str) or not data["summary"].strip():
            return "summary must be non-empty text"
        if not all(n in data["summary"] for n in support):
            return f"the summary must keep the support: {support[0]} of {support[1]}"
        return None

    @hookimpl
    def portamem_summarize_habit(self, habit: Habit, context: WriteContext) -> str | None:
        support = (str(habit.support), str(habit.of))
        prompt = self.PROMPT.format(words=", ".join(habit.words), support=habit.support, of=habit.of,
                                    since=f"{habit.since:%Y-%m-%d}",
                                    members="\n".join(f"- {m}" for m in habit.members[-20:]))
        data = self.ask(prompt, "habit summary", lambda d: self.validate(d, support))
        return None if data is None else str(data["summary"]).strip()[: self.max_chars]
