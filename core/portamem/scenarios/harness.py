"""``portamem eval scenarios``: play each conversation of the suite into a fresh store the way an agent
does (``Memory.add_turn``; a turn with tool calls through ``portamem.messages.add_messages``, as the
adapters record them), then ask its questions in a new session through ``portamem.recall.recall`` and
judge the prompt ``format_memories`` makes of the hits.

A question names its current value (a list of acceptable surface forms), the stale values that must
not be presented as current, and optionally evidence substrings (text that bears on the answer without
holding the value, "I sold the Golf" for "what do I drive?"). A question with no current value asks
about something never stored: the right prompt is no prompt.

The figures, per split and language:

- **top-1 right**: the first hit holds a current value;
- **answer in prompt**: some prompt line holds a current value;
- **stale in prompt**: some prompt line holds a stale value and neither a current value nor an evidence
  substring ("moved from Lyon to Paris" states the change and is fine, and so does "I sold the Golf"
  where that is the question's evidence; "I live in Lyon" is not);
- **prompt precision**: the share of a prompt's lines that bear on the answer (hold a current value or
  an evidence substring), averaged over the questions whose prompt is not empty;
- **questions stored as facts**: the user's questions in the conversation (turns that only ask) whose
  text ended up in an active semantic or working memory; likewise **filler stored** for greetings,
  thanks, small talk and requests;
- for questions about nothing stored, the share that recall nothing.

Values match case-insensitively after Unicode NFKC, with thousands separators dropped ("15,000" reads
as "15000"); a form that starts or ends with a Latin letter or digit matches only at a word edge there,
so "12" is not found in "120" nor "Lyon" in "Lyonnaise".
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embedding.embedders import Embedder, get_embedder
from ..errors import ValidationError
from .locomo import CachedEmbedder
from ..memory import Memory
from ..messages import Message, add_messages
from ..read.prompt import DEFAULT_HEADER
from ..recall import format_memories, recall
from ..records import EARLIER_KEY, OUTDATED_KEY, REPLACED_KEY, MemoryRecord, MemoryType, SearchHit, Status
from .oracle import ORACLE_SPLIT, load_oracle, oracle_plugins

__all__ = [
    "ACTS",
    "FILLER_ACTS",
    "SPLITS",
    "HELD_OUT",
    "LANGUAGES",
    "TURN_GAP",
    "ToolCall",
    "ScenarioTurn",
    "ScenarioSession",
    "ScenarioQuestion",
    "Scenario",
    "Verdict",
    "suite_path",
    "load_scenarios",
    "holds",
    "prompt_lines",
    "judge_prompt",
    "stored_turns",
    "lost_statements",
    "play",
    "evaluate_scenarios",
    "format_report",
    "format_failures",
    "add_arguments",
    "run",
]

#: what a user turn does: the first five are not memory (``FILLER_ACTS`` and questions), ``statement``
#: says something about the user for the first time, ``update`` changes what was said before
ACTS = ("greeting", "thanks", "smalltalk", "question", "request", "statement", "update")
FILLER_ACTS = frozenset({"greeting", "thanks", "smalltalk", "request"})
STATING_ACTS = frozenset({"statement", "update"})
SPLITS = ("dev", "test")
#: conversations written after the rules, in phrasings no rule was written against: reported, never tuned on
#: (``unseen`` written later still, measured once on arrival)
HELD_OUT = ("holdout", "unseen")
LANGUAGES = ("en", "zh")
#: the time between two turns of a session
TURN_GAP = timedelta(minutes=2)


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    result: str


@dataclass(frozen=True)
class ScenarioTurn:
    user: str
    assistant: str
    acts: tuple[str, ...]
    #: for an ``update``: the way the change is phrased ("switched to", "改成"), one label per phrasing
    phrasing: str | None = None
    tools: tuple[ToolCall, ...] = ()

    @property
    def only_asks(self) -> bool:
        """A question to the assistant with nothing about the user in it."""
        return "question" in self.acts and not STATING_ACTS & set(self.acts)

    @property
    def is_filler(self) -> bool:
        """A greeting, thanks, small talk or a request, and nothing else."""
        return set(self.acts) <= FILLER_ACTS


@dataclass(frozen=True)
class ScenarioSession:
    id: str
    start: datetime
    turns: tuple[ScenarioTurn, ...]

    def at(self, index: int) -> datetime:
        return self.start + index * TURN_GAP


@dataclass(frozen=True)
class ScenarioQuestion:
    question: str
    #: acceptable surface forms of the current value; empty: the question is about nothing stored
    answer: tuple[str, ...]
    stale: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def unstored(self) -> bool:
        return not self.answer


@dataclass(frozen=True)
class Scenario:
    id: str
    lang: str
    user_id: str
    title: str
    sessions: tuple[ScenarioSession, ...]
    ask_session: str
    ask_at: datetime
    questions: tuple[ScenarioQuestion, ...]
    split: str = ""

    @property
    def turns(self) -> list[ScenarioTurn]:
        return [t for s in self.sessions for t in s.turns]


def suite_path(split: str) -> Traversable:
    """The packaged file of a split (``dev``, ``test`` or the held-out ``holdout`` and ``unseen``)."""
    if split not in (*SPLITS, *HELD_OUT):
        raise ValidationError(f"split must be one of {[*SPLITS, *HELD_OUT]}, got {split!r}")
    return resources.files(__package__ or "portamem.scenarios").joinpath(f"{split}.jsonl")


def _texts(value: Any, where: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where} must be a list of non-blank strings")
    if not value and not allow_empty:
        raise ValueError(f"{where} must not be empty")
    return tuple(value)


def _time(value: Any, where: str) -> datetime:
    at = datetime.fromisoformat(str(value))
    if at.tzinfo is None:
        raise ValueError(f"{where} must carry a UTC offset: {value!r}")
    return at


def _turn(data: Mapping[str, Any], where: str) -> ScenarioTurn:
    acts = _texts(data.get("acts"), f"{where} acts", allow_empty=False)
    unknown = set(acts) - set(ACTS)
    if unknown:
        raise ValueError(f"{where}: unknown acts {sorted(unknown)} (known: {list(ACTS)})")
    phrasing = data.get("phrasing")
    if ("update" in acts) != bool(phrasing):
        raise ValueError(f"{where}: an update turn names its phrasing, and only an update turn does")
    tools = tuple(ToolCall(str(t["name"]), dict(t.get("arguments") or {}), str(t["result"]))
                  for t in data.get("tools") or [])
    user, assistant = data["user"], data["assistant"]
    if not (isinstance(user, str) and user.strip() and isinstance(assistant, str) and assistant.strip()):
        raise ValueError(f"{where}: user and assistant must be non-blank strings")
    return ScenarioTurn(user, assistant, acts, phrasing, tools)


def _scenario(data: Mapping[str, Any], split: str, where: str) -> Scenario:
    lang = data["lang"]
    if lang not in LANGUAGES:
        raise ValueError(f"{where}: lang must be one of {list(LANGUAGES)}, got {lang!r}")
    sessions = []
    for s in data["sessions"]:
        turns = tuple(_turn(t, f"{where} session {s['id']} turn {i}") for i, t in enumerate(s["turns"]))
        if not turns:
            raise ValueError(f"{where}: session {s['id']} has no turns")
        sessions.append(ScenarioSession(str(s["id"]), _time(s["start"], f"{where} session start"), turns))
    if not sessions:
        raise ValueError(f"{where}: no sessions")
    for a, b in zip(sessions, sessions[1:]):
        if b.start <= a.at(len(a.turns) - 1):
            raise ValueError(f"{where}: session {b.id} starts before session {a.id} ends")
    ask = data["ask"]
    ask_at = _time(ask["at"], f"{where} ask.at")
    if ask_at <= sessions[-1].at(len(sessions[-1].turns) - 1):
        raise ValueError(f"{where}: the questions are asked before the last session ends")
    if str(ask["session"]) in {s.id for s in sessions}:
        raise ValueError(f"{where}: the questions' session must be a new one")
    questions = []
    for i, q in enumerate(data["questions"]):
        w = f"{where} question {i}"
        question = ScenarioQuestion(
            str(q["q"]), _texts(q.get("answer", []), f"{w} answer"), _texts(q.get("stale", []), f"{w} stale"),
            _texts(q.get("evidence", []), f"{w} evidence"), _texts(q.get("tags", []), f"{w} tags"))
        if question.unstored and (question.stale or question.evidence):
            raise ValueError(f"{w}: a question about nothing stored has no stale values or evidence")
        questions.append(question)
    return Scenario(str(data["id"]), lang, str(data["user_id"]), str(data.get("title", "")), tuple(sessions),
                    str(ask["session"]), ask_at, tuple(questions), split)


def load_scenarios(source: str | Path | Traversable, split: str | None = None) -> list[Scenario]:
    """Read a JSON Lines file of conversations (one per line; see the packaged ``dev.jsonl``)."""
    name = split or Path(str(source)).stem
    try:
        text = source.read_text(encoding="utf-8") if not isinstance(source, (str, Path)) \
            else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read scenarios file {source}: {exc}") from exc
    out: list[Scenario] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(_scenario(json.loads(line), name, f"{source}:{n}"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError(f"{source}:{n}: not a scenario: {exc!r}") from exc
    ids = [s.id for s in out]
    if len(set(ids)) != len(ids):
        raise ValidationError(f"{source}: conversation ids repeat")
    return out


# ---------------------------------------------------------------------- matching
_THOUSANDS = re.compile(r"(?<=\d)[,\u00a0\u202f '’](?=\d{3}(?!\d))")
_PREFIX = re.compile(r"^\s*-\s*\[[^\]]*\]\s*")


def _norm(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold().replace("’", "'").replace("‘", "'")
    return " ".join(_THOUSANDS.sub("", t).split())


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _found(text: str, form: str) -> bool:
    start = 0
    while form and (i := text.find(form, start)) >= 0:
        j = i + len(form)
        left = not (_word(form[0]) and i > 0 and _word(text[i - 1]))
        right = not (_word(form[-1]) and j < len(text) and _word(text[j]))
        if left and right:
            return True
        start = i + 1
    return False


def holds(text: str, forms: Iterable[str]) -> bool:
    """Whether ``text`` holds any of ``forms`` (see the module's notes on matching)."""
    t = _norm(text)
    return any(_found(t, _norm(f)) for f in forms)


def prompt_lines(prompt: str) -> list[str]:
    """The lines of a recall prompt that carry memories: the header left out, each line's bracket of
    id, date, source and trust taken off (its date would read as a number)."""
    out = []
    for line in prompt.splitlines():
        if not line.strip() or line.strip() == DEFAULT_HEADER:
            continue
        out.append(_PREFIX.sub("", line).strip())
    return out


@dataclass(frozen=True)
class Verdict:
    lines: int
    top1: bool = False
    answer: bool = False
    stale: bool = False
    #: share of lines that bear on the answer; None for an empty prompt
    precision: float | None = None
    stale_lines: tuple[str, ...] = ()


def judge_prompt(question: ScenarioQuestion, first_hit: str | None, lines: Sequence[str]) -> Verdict:
    """Judge one question's recall: its first hit's text and the prompt's lines (``prompt_lines``)."""
    if question.unstored:
        return Verdict(len(lines))
    current = [holds(line, question.answer) for line in lines]
    evidence = [holds(line, question.evidence) for line in lines]
    stale = tuple(line for line, cur, ev in zip(lines, current, evidence)
                  if not (cur or ev) and holds(line, question.stale))
    bearing = [cur or ev for cur, ev in zip(current, evidence)]
    return Verdict(
        lines=len(lines),
        top1=first_hit is not None and holds(first_hit, question.answer),
        answer=any(current),
        stale=bool(stale),
        precision=sum(bearing) / len(lines) if lines else None,
        stale_lines=stale,
    )


def _ask_key(text: str) -> str:
    return _norm(text).strip(" ?？!！.。…~～,，")


#: shortest text (in characters) matched inside a longer one; shorter ones ("hi", "ta") match only whole
MIN_PART = 6


def _kept_as(key: str, content: str) -> bool:
    """Whether a memory's text is a turn's text: the same, or one holds the other (at word edges) and
    the shorter is at least half the longer and at least ``MIN_PART`` characters."""
    if not key or not content:
        return False
    if key == content:
        return True
    short, long = sorted((key, content), key=len)
    return len(short) >= max(MIN_PART, len(long) // 2) and _found(long, short)


def stored_turns(records: Iterable[MemoryRecord], turns: Iterable[ScenarioTurn]) -> list[tuple[ScenarioTurn, MemoryRecord]]:
    """The turns whose user text an active semantic or working memory holds (``_kept_as``), each with
    the first such memory."""
    kept = [(r, _ask_key(r.content)) for r in records
            if r.status is Status.ACTIVE and r.type in (MemoryType.SEMANTIC, MemoryType.WORKING)]
    out = []
    for turn in turns:
        key = _ask_key(turn.user)
        for record, content in kept:
            if _kept_as(key, content):
                out.append((turn, record))
                break
    return out


#: what a turn left counts as kept in any of these states: a statement a later one replaced was kept
_FORMED = ("active", "pending", "superseded")


def lost_statements(records: Iterable[MemoryRecord],
                    stating: Iterable[tuple[ScenarioTurn, datetime]]) -> list[ScenarioTurn]:
    """The turns stating something about the user that left no semantic or working memory of their
    own time (an episode that folds a turn in later does not count: it is not recalled as a fact)."""
    formed = {r.created_at.timestamp() for r in records if r.type in (MemoryType.SEMANTIC, MemoryType.WORKING)}
    return [turn for turn, at in stating if at.timestamp() not in formed]


def marked_earlier(record: MemoryRecord, forms: Sequence[str] = (),
                   by_id: Mapping[str, MemoryRecord] | None = None) -> bool:
    """Whether the memory is marked as no longer current: superseded by a newer value, ended by a newer
    statement about the same thing (``EARLIER_KEY``), or outdated in part. With ``forms`` and the records
    by id, a memory outdated in part counts as marked for a value only when the part the newer replaced
    (its ``REPLACED_KEY`` value) holds one of the forms: "The Manchester Marathon on 14 April, and I'm
    aiming for sub 3:45", outdated in its goal, still says when the marathon is."""
    if record.status is Status.SUPERSEDED or EARLIER_KEY in record.metadata:
        return True
    link = record.metadata.get(OUTDATED_KEY)
    if not isinstance(link, dict):
        return False
    newer = by_id.get(str(link.get("by"))) if forms and by_id is not None else None
    replaced = newer.metadata.get(REPLACED_KEY) if newer is not None else None
    if isinstance(replaced, dict) and replaced.get("memory_id") == record.memory_id and replaced.get("part") \
            and isinstance(replaced.get("value"), str):
        return holds(replaced["value"], forms)
    return True


def currency(question: ScenarioQuestion, records: Iterable[MemoryRecord]) -> dict[str, Any]:
    """What the store knows of which statement is current, for one question: for a question about a
    value that changed (``stale`` forms), whether every statement holding only the old value is marked
    (``marked_earlier``, for that value) — ``changed`` is None when no statement holds it; for a question
    about a fact that never changed (tag ``fact``, no ``stale``), whether a statement holding the answer
    was marked earlier all the same, for the answer (``false_currency``)."""
    records = list(records)
    by_id = {r.memory_id: r for r in records}
    facts = [r for r in records if r.type in (MemoryType.SEMANTIC, MemoryType.WORKING)]
    out: dict[str, Any] = {"changed": None, "false_currency": None}
    if question.stale:
        old = [r for r in facts if holds(r.content, question.stale) and not holds(r.content, question.answer)
               and not holds(r.content, question.evidence)]
        if old:
            out["changed"] = all(marked_earlier(r, question.stale, by_id) for r in old)
    elif "fact" in question.tags and "history" not in question.tags:
        held = [r for r in facts if holds(r.content, question.answer)]
        if held:
            out["false_currency"] = any(marked_earlier(r, question.answer, by_id) for r in held)
    return out


#: the notes of a prompt line that tell the model the line is no longer current (``format_memories``)
_MARKED_LINE = re.compile(r"superseded by a newer memory|earlier, until|outdated by")


def unmarked_stale(question: ScenarioQuestion, prompt: str) -> bool:
    """Whether a prompt line holds a stale value (and neither a current value nor evidence) with
    nothing on the line saying it is no longer current."""
    for line in prompt.splitlines():
        m = _PREFIX.match(line)
        if m is None:
            continue
        text = line[m.end():]
        if holds(text, question.stale) and not holds(text, question.answer) and not holds(text, question.evidence) \
                and not _MARKED_LINE.search(m.group(0)):
            return True
    return False


def marked_fact(question: ScenarioQuestion, prompt: str) -> bool | None:
    """For a question about a fact that never changed (tag ``fact``, no ``stale``, not ``history``), whether
    a prompt line holding its answer tells the model the line is no longer current (false currency as
    the model reads it: a read-time link marks a line as well as a write-time one); None for another
    question, or when no line holds the answer."""
    if question.stale or "fact" not in question.tags or "history" in question.tags:
        return None
    held = [m for line in prompt.splitlines() if (m := _PREFIX.match(line)) is not None
            and holds(line[m.end():], question.answer)]
    return any(_MARKED_LINE.search(m.group(0)) for m in held) if held else None


# ---------------------------------------------------------------------- playing a conversation
def _messages(turn: ScenarioTurn, base: str, at: datetime) -> list[Message]:
    """A turn with tool calls as a framework hands it over: the user's message, per tool an assistant
    message that calls it and the tool's result, then the final reply."""
    out = [Message("user", turn.user, id=f"{base}-user", created_at=at)]
    for k, call in enumerate(turn.tools):
        call_id = f"call-{base}-{k}"
        out.append(Message("assistant", "", id=f"{base}-call-{k}", created_at=at, calls_tools=True,
                           metadata={"tool_calls": [{"id": call_id, "name": call.name, "args": call.arguments}]}))
        out.append(Message("tool", call.result, name=call.name, id=f"{base}-tool-{k}", created_at=at,
                           metadata={"tool_call_id": call_id}))
    out.append(Message("assistant", turn.assistant, id=f"{base}-reply", created_at=at))
    return out


def play(mem: Memory, scenario: Scenario) -> None:
    """Every turn of every session into ``mem``, in order, each settled by the indexer before the next
    (a person types slower than the indexer works, so the run does not depend on its timing)."""
    for session in scenario.sessions:
        for i, turn in enumerate(session.turns):
            at = session.at(i)
            if turn.tools:
                add_messages(mem, _messages(turn, f"{session.id}-{i}", at), user_id=scenario.user_id,
                             session_id=session.id)
            else:
                mem.add_turn(turn.user, turn.assistant, user_id=scenario.user_id, session_id=session.id,
                             created_at=at)
            mem.flush()


# ---------------------------------------------------------------------- the evaluation
@dataclass
class _Run:
    """What one conversation gave: a row per question, the stored question and filler turns."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"question_turns": 0, "filler_turns": 0,
                                                             "statement_turns": 0})
    #: what a configured model did while the conversation was formed (``_model_use``)
    model: dict[str, float] = field(default_factory=dict)


def _run_one(scenario: Scenario, settings: Settings, embedder: Embedder, *, maintain: bool = False,
             oracle: Mapping[tuple[str, str, int], list[str]] | None = None) -> _Run:
    path = tempfile.mkdtemp(prefix="portamem-scenario-")
    out = _Run()
    plugins = oracle_plugins(scenario, oracle) if oracle is not None else None
    mem = Memory(settings=settings.replace(path=path), embedder=embedder, plugins=plugins)
    try:
        play(mem, scenario)
        if maintain:  # as the scheduled maintainer would have by the time the questions come
            mem.maintain(now=scenario.ask_at)
        out.model = _model_use(mem, len(scenario.turns))
        records = mem.list_memories(user_id=scenario.user_id)
        base = {"split": scenario.split, "conversation": scenario.id, "lang": scenario.lang}
        stating = [(turn, session.at(i)) for session in scenario.sessions for i, turn in enumerate(session.turns)
                   if STATING_ACTS & set(turn.acts)]
        out.counts["statement_turns"] += len(stating)
        for turn in lost_statements(mem.list_memories(user_id=scenario.user_id, filters={"statuses": _FORMED}),
                                    stating):
            out.stored.append({**base, "kind": "lost", "turn": turn.user, "memory": None, "type": None})
        for kind, which in (("question", [t for t in scenario.turns if t.only_asks]),
                            ("filler", [t for t in scenario.turns if t.is_filler])):
            out.counts[f"{kind}_turns"] += len(which)
            for turn, record in stored_turns(records, which):
                out.stored.append({**base, "kind": kind, "turn": turn.user, "memory": record.content,
                                   "type": record.type.value})
        formed = mem.list_memories(user_id=scenario.user_id, filters={"statuses": _FORMED})
        if isinstance(embedder, CachedEmbedder):
            embedder.embed([q.question for q in scenario.questions], kind="query")
        for q in scenario.questions:
            hits: list[SearchHit] = recall(mem, q.question, user_id=scenario.user_id, session_id=scenario.ask_session,
                                           now=scenario.ask_at)
            prompt = format_memories(hits, now=scenario.ask_at)
            lines = prompt_lines(prompt)
            v = judge_prompt(q, hits[0].content if hits else None, lines)
            row: dict[str, Any] = {**base, "question": q.question, "tags": list(q.tags), "lines": lines}
            if q.unstored:
                row["empty"] = not hits
            else:
                row.update(answer=list(q.answer), stale=list(q.stale), top1=v.top1, answer_in_prompt=v.answer,
                           stale_in_prompt=v.stale, stale_lines=list(v.stale_lines), precision=v.precision,
                           stale_unmarked=unmarked_stale(q, prompt), fact_line_marked=marked_fact(q, prompt),
                           **currency(q, formed))
            out.rows.append(row)
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)
    return out


def _model_use(mem: Memory, turns: int) -> dict[str, float]:
    """The model's calls while a conversation was formed, its answers refused as invalid, the turns the
    rules formed instead, and the seconds it took; empty without a model."""
    st = mem.stats()
    if st.model is None:
        return {}
    form = st.formation
    return {"turns": turns, "calls": st.model["calls"], "ok": st.model["outcomes"].get("ok", 0),
            "invalid": st.model["failures"]["invalid"], "fallbacks": form.fallbacks if form is not None else 0,
            "seconds": round(st.model["latency_s"]["sum"], 1)}


def _share(n: int, of: int) -> float | None:
    return round(n / of, 4) if of else None


def _figures(rows: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]], counts: Mapping[str, int],
             conversations: int) -> dict[str, Any]:
    asked = [r for r in rows if "empty" not in r]
    none = [r for r in rows if "empty" in r]
    with_stale = [r for r in asked if r["stale"]]
    precisions = [r["precision"] for r in asked if r["precision"] is not None]
    changes = [r for r in asked if r.get("changed") is not None]
    facts = [r for r in asked if r.get("false_currency") is not None]
    fact_lines = [r for r in asked if r.get("fact_line_marked") is not None]
    personal = [r for r in none if "personal" in r["tags"]]
    general = [r for r in none if "general" in r["tags"]]
    return {
        "conversations": conversations,
        "questions": len(asked),
        "top1_right": _share(sum(r["top1"] for r in asked), len(asked)),
        "answer_in_prompt": _share(sum(r["answer_in_prompt"] for r in asked), len(asked)),
        "stale_in_prompt": sum(r["stale_in_prompt"] for r in asked),
        "questions_with_stale_values": len(with_stale),
        "prompt_precision": round(sum(precisions) / len(precisions), 4) if precisions else None,
        "mean_lines": round(sum(len(r["lines"]) for r in asked) / len(asked), 2) if asked else None,
        "question_turns": counts.get("question_turns", 0),
        "questions_stored": sum(s["kind"] == "question" for s in stored),
        "filler_turns": counts.get("filler_turns", 0),
        "filler_stored": sum(s["kind"] == "filler" for s in stored),
        "statement_turns": counts.get("statement_turns", 0),
        "statements_lost": sum(s["kind"] == "lost" for s in stored),
        "unstored_questions": len(none),
        "unstored_empty": _share(sum(r["empty"] for r in none), len(none)),
        # which statement is current: changed values marked, prompts showing an old value unmarked, facts
        # that never changed marked earlier, and questions about something of the user's never said
        "changes": len(changes),
        "changes_marked": _share(sum(r["changed"] for r in changes), len(changes)),
        "stale_unmarked": _share(sum(r.get("stale_unmarked", False) for r in asked), len(asked)),
        "facts": len(facts),
        "facts_marked": _share(sum(r["false_currency"] for r in facts), len(facts)),
        "fact_lines": len(fact_lines),
        "fact_lines_marked": _share(sum(r["fact_line_marked"] for r in fact_lines), len(fact_lines)),
        "personal_unstored": len(personal),
        "personal_empty": _share(sum(r["empty"] for r in personal), len(personal)),
        "general_unstored": len(general),
        "general_empty": _share(sum(r["empty"] for r in general), len(general)),
    }


def _chosen(split: str, path: str | Path | None) -> list[tuple[str, str | Path | Traversable]]:
    if path is not None:
        return [(Path(path).stem, path)]
    if split == "all":
        return [(s, suite_path(s)) for s in (*SPLITS, *HELD_OUT)]
    return [(split, suite_path(split))]


def evaluate_scenarios(
    split: str = "dev",
    *,
    path: str | Path | None = None,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    embedding_cache: str | Path | None = None,
    show_progress: bool = True,
    maintain: bool = False,
    conversations: Sequence[str] | None = None,
    oracle: bool = False,
) -> dict[str, Any]:
    """Play every conversation of ``split`` (``dev``, ``test``, ``holdout``, ``unseen`` or ``all``, each
    reported on its own; or the file at ``path``; only those whose id ``conversations`` names, when given; with
    ``oracle``, the dev half with each turn read as its hand-written statements: ``portamem.scenarios.oracle``)
    into a fresh store and judge the recall of each question; the report holds the figures per split,
    language and question tag, every question's prompt lines, and the stored question and filler turns.
    With ``maintain`` a maintenance run (eviction, promotion, consolidation, abstraction) comes at the
    questions' time, as the scheduled maintainer's would."""
    if path is None and split not in (*SPLITS, *HELD_OUT, "all"):
        raise ValidationError(f"split must be one of {[*SPLITS, *HELD_OUT, 'all']}, got {split!r}")
    settings = settings or Settings.load()
    started = time.perf_counter()
    cached = CachedEmbedder(embedder or get_embedder(settings.embedder), embedding_cache)
    if oracle and (path is not None or split != ORACLE_SPLIT):
        raise ValidationError(f"oracle statements are written for the {ORACLE_SPLIT} split only")
    statements = load_oracle() if oracle else None
    sets = [(name, load_scenarios(source, name)) for name, source in _chosen(split, path)]
    if conversations is not None:
        wanted = set(conversations)
        unknown = wanted - {s.id for _, scenarios in sets for s in scenarios}
        if unknown:
            raise ValidationError(f"no conversation {sorted(unknown)} in {split if path is None else path}")
        sets = [(name, kept) for name, scenarios in sets if (kept := [s for s in scenarios if s.id in wanted])]
    from tqdm import tqdm

    bar = tqdm(total=sum(len(s) for _, s in sets), desc="scenarios", unit="conv", file=sys.stderr,
               disable=not show_progress, leave=False)
    rows: list[dict[str, Any]] = []
    stored: list[dict[str, Any]] = []
    counts: dict[tuple[str, str], dict[str, int]] = {}
    model: dict[str, float] = {}
    for name, scenarios in sets:
        for scenario in scenarios:
            one = _run_one(scenario, settings, cached, maintain=maintain, oracle=statements)
            rows += one.rows
            stored += one.stored
            for k, n in one.model.items():
                model[k] = model.get(k, 0) + n
            tally = counts.setdefault((name, scenario.lang), {})
            for k, n in one.counts.items():
                tally[k] = tally.get(k, 0) + n
            bar.update(1)
        cached.save()
    bar.close()

    def block(split_name: str, lang: str | None) -> dict[str, Any]:
        def mine(r: Mapping[str, Any]) -> bool:
            return r["split"] == split_name and (lang is None or r["lang"] == lang)

        c: dict[str, int] = {}
        for (s, la), tally in counts.items():
            if s == split_name and (lang is None or la == lang):
                for k, n in tally.items():
                    c[k] = c.get(k, 0) + n
        convs = sum(1 for name, scs in sets if name == split_name for sc in scs if lang is None or sc.lang == lang)
        return _figures([r for r in rows if mine(r)], [s for s in stored if mine(s)], c, convs)

    splits: dict[str, Any] = {}
    for name, scenarios in sets:
        tags = sorted({t for r in rows if r["split"] == name and "empty" not in r for t in r["tags"]})
        splits[name] = {
            "overall": block(name, None),
            "by_language": {lang: block(name, lang) for lang in LANGUAGES if any(s.lang == lang for s in scenarios)},
            "by_tag": {t: _figures([r for r in rows if r["split"] == name and t in r["tags"] and "empty" not in r],
                                   [], {}, 0) for t in tags},
        }
    return {
        "suite": str(path) if path is not None else "packaged",
        "embedder": cached.name,
        "top_k": settings.top_k,
        "min_score": settings.min_score,
        "splits": splits,
        "questions": rows,
        "stored": stored,
        "model": {"model": settings.llm_model, **model} if model else None,
        "oracle": oracle,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def format_report(report: Mapping[str, Any]) -> str:
    """One table: per split, each language and both together; then the question tags of each split."""
    lines = [
        f"scenario suite ({report['suite']}{', oracle statements' if report.get('oracle') else ''}): "
        f"embedder {report['embedder']}, top_k {report['top_k']}, "
        f"min_score {report['min_score']:g}; {report['seconds']} s",
        f"{'':12}{'conv':>5}{'asked':>6}{'top-1':>7}{'in prompt':>10}{'stale':>7}{'precision':>10}{'lines':>6}"
        f"{'questions stored':>18}{'filler stored':>15}{'none: empty':>13}{'statements lost':>17}",
    ]

    def row(label: str, f: Mapping[str, Any]) -> str:
        empty = f"{_pct(f['unstored_empty'])} of {f['unstored_questions']}" if f["unstored_questions"] else "-"
        questions = f"{f['questions_stored']} of {f['question_turns']}"
        filler = f"{f['filler_stored']} of {f['filler_turns']}"
        mean = "-" if f["mean_lines"] is None else f"{f['mean_lines']:.1f}"
        lost = f"{f['statements_lost']} of {f['statement_turns']}"
        return (f"{label:12}{f['conversations']:>5}{f['questions']:>6}{_pct(f['top1_right']):>7}"
                f"{_pct(f['answer_in_prompt']):>10}{f['stale_in_prompt']:>7}{_pct(f['prompt_precision']):>10}"
                f"{mean:>6}{questions:>18}{filler:>15}{empty:>13}{lost:>17}")

    def table(render: Any) -> None:  # a row per split and language, then the split's languages together
        for name, split in report["splits"].items():
            for lang, figs in split["by_language"].items():
                lines.append(render(f"{name} {lang}", figs))
            lines.append(render(f"{name} all", split["overall"]))

    table(row)
    lines.append(f"{'':12}{'changed values marked':>24}{'stale unmarked':>16}{'facts marked earlier':>22}"
                 f"{'fact lines marked':>19}{'never said, personal: empty':>29}{'general: empty':>16}")

    def currency_row(label: str, f: Mapping[str, Any]) -> str:
        def of(share: str, n: str) -> str:
            return f"{_pct(f[share])} of {f[n]}" if f[n] else "-"
        return (f"{label:12}{of('changes_marked', 'changes'):>24}{_pct(f['stale_unmarked']):>16}"
                f"{of('facts_marked', 'facts'):>22}{of('fact_lines_marked', 'fact_lines'):>19}"
                f"{of('personal_empty', 'personal_unstored'):>29}"
                f"{of('general_empty', 'general_unstored'):>16}")

    table(currency_row)
    for name, split in report["splits"].items():
        parts = [f"{t} {f['questions']}: {_pct(f['top1_right'])}/{_pct(f['answer_in_prompt'])}/{f['stale_in_prompt']}"
                 for t, f in split["by_tag"].items()]
        lines.append(f"{name} by tag (questions: top-1/in prompt/stale): " + "; ".join(parts))
    if report.get("model"):
        m = report["model"]
        lines.append(f"model {m['model']}: {m['calls']:g} calls for {m['turns']:g} turns "
                     f"({m['calls'] / max(m['turns'], 1):.2f} a turn), {m['ok']:g} answered, {m['invalid']:g} invalid, "
                     f"{m['fallbacks']:g} turns formed by the rules instead, {m['seconds']:g} s of model time")
    lines.append("stale: questions whose prompt holds a stale value on a line without the current one; "
                 "precision: share of prompt lines bearing on the answer; none: questions about nothing stored")
    return "\n".join(lines)


def format_failures(report: Mapping[str, Any]) -> str:
    """Each question that missed (top-1 wrong, answer not in the prompt, a stale line, or a prompt for
    a question about nothing stored) with its prompt lines; then the stored question and filler turns."""
    out = []
    for r in report["questions"]:
        if "empty" in r:
            if r["empty"]:
                continue
            flags = "recalled for a question about nothing stored"
        else:
            flags = ", ".join(f for f, bad in (("top-1 wrong", not r["top1"]),
                                               ("answer not in prompt", not r["answer_in_prompt"]),
                                               ("stale in prompt", r["stale_in_prompt"])) if bad)
            if not flags:
                continue
            flags += f" (answer {r['answer'][0]!r}" + (f", stale {r['stale'][0]!r})" if r["stale"] else ")")
        out.append(f"[{r['split']} {r['conversation']}] {r['question']}  -- {flags}")
        out.extend(f"    {i}. {line[:160]}" for i, line in enumerate(r["lines"], 1))
        if not r["lines"]:
            out.append("    (nothing recalled)")
    for s in report["stored"]:
        if s["kind"] == "lost":
            out.append(f"[{s['split']} {s['conversation']}] statement left no memory: {s['turn']!r}")
        else:
            out.append(f"[{s['split']} {s['conversation']}] {s['kind']} turn stored as {s['type']}: {s['turn']!r}")
    return "\n".join(out)


# ---------------------------------------------------------------------- the CLI's eval scenarios
def add_arguments(p: Any) -> None:
    p.add_argument("--split", choices=[*SPLITS, *HELD_OUT, "all"], default="dev",
                   help="which half of the suite, a set of held-out conversations, or all of them (default: dev)")
    p.add_argument("--scenarios", help="a JSON Lines file of conversations instead of the packaged suite")
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--failures", action="store_true",
                   help="also print each question that missed, with its prompt, and the stored question turns")
    p.add_argument("--json", action="store_true", help="print one JSON object (with every question's prompt)")
    p.add_argument("--maintain", action="store_true",
                   help="run maintenance at the questions' time first, as the scheduled maintainer would")
    p.add_argument("--conversations", help="only these conversations (ids, comma-separated): a model takes "
                                           "seconds per turn")
    p.add_argument("--llm-url", help="form memories with this OpenAI-compatible chat model (base URL ending in /v1; "
                                     "the key from PORTAMEM_LLM_API_KEY)")
    p.add_argument("--llm-model", help="the model's name at --llm-url")
    p.add_argument("--oracle", action="store_true",
                   help="read each dev turn as its hand-written statements (dev.oracle.jsonl): what reconciliation "
                        "and recall reach from perfect extraction")


def run(args: Any) -> int:
    """Play the scenario suite into fresh stores and judge recall: top-1 right, answer in the prompt,
    stale values in the prompt, prompt precision, questions stored as facts, empty recall for questions
    about nothing stored; per split and language."""
    settings = Settings.load(getattr(args, "config", None), tenant_id=getattr(args, "tenant", None))
    if args.embedder:
        settings = settings.replace(embedder=args.embedder)
    if args.llm_url or args.llm_model:
        settings = settings.replace(llm_url=args.llm_url or settings.llm_url,
                                    llm_model=args.llm_model or settings.llm_model)
    chosen = [c.strip() for c in args.conversations.split(",") if c.strip()] if args.conversations else None
    report = evaluate_scenarios(args.split, path=args.scenarios, settings=settings,
                                embedding_cache=args.embedding_cache,
                                show_progress=not args.json or sys.stderr.isatty(), maintain=args.maintain,
                                conversations=chosen, oracle=args.oracle)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(format_report(report))
    if args.failures:
        print()
        print(format_failures(report))
    return 0
