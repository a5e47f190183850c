"""Value types exchanged with write-path plugins (triggers, guards, redactors, extractors)."""

from __future__ import annotations

from datetime import datetime
from dataclasses import dataclass, field
from typing import Any, Literal

from .config import Settings
from .records import MemoryType, Source
from .language.statements import Statement

__all__ = ["WriteContext", "TriggerVote", "GuardVerdict", "Redaction", "Extraction", "GuardAction", "ACTS", "Need",
           "Preload", "FormationTurn", "Decision", "RECONCILE_ACTIONS"]

GuardAction = Literal["allow", "pending", "quarantine"]
#: dialogue acts of ``Extraction.utterances``: only statements become memories (explicit asks to remember count
#: as statements); questions, requests to the assistant and small talk (greetings, thanks, fillers) do not
ACTS = ("statement", "question", "request", "smalltalk")


@dataclass(frozen=True)
class WriteContext:
    """Who is writing, from where, under which settings."""

    tenant_id: str
    user_id: str
    settings: Settings
    session_id: str | None = None
    agent_id: str | None = None
    source: Source = Source.USER
    #: the caller asked for this memory explicitly (an API call or "remember ...")
    explicit: bool = True
    #: for turns being summarised: their statements were captured as memories of their own already,
    #: so an episode need not repeat them (it points at them)
    captured: bool = False
    #: for turns being summarised: the texts of the memories captured from them (``captured``), which
    #: the episode points at instead of repeating
    captured_texts: tuple[str, ...] = ()
    #: the formation worker calls (``portamem.background.formation``), off the acknowledged write path:
    #: a plugin that asks a model (``LLMExtractor``) answers only here, once per user turn
    formation: bool = False
    #: with ``formation``: the chat model a model extractor asks (``Settings.llm_extract``); None otherwise
    model: Any = None


@dataclass(frozen=True)
class TriggerVote:
    """A write-trigger's vote on one turn."""

    remember: bool
    strength: float = 0.5
    type: MemoryType = MemoryType.SEMANTIC
    kind: str | None = None
    reason: str = ""
    #: the user stressed it ("remember that ..."): long-term at once, not only when seen twice
    explicit: bool = False


@dataclass(frozen=True)
class GuardVerdict:
    """A guard's decision on one write. The strictest verdict of all guards applies."""

    action: GuardAction
    reason: str
    guard: str = ""
    score: float = 1.0


@dataclass(frozen=True)
class Redaction:
    """A span of text to replace with a typed placeholder such as ``[PHONE]``."""

    start: int
    end: int
    kind: str
    placeholder: str = ""

    def label(self) -> str:
        return self.placeholder or f"[{self.kind.upper()}]"


@dataclass
class Extraction:
    """Structure found in a memory's text."""

    entities: list[str] = field(default_factory=list)
    triples: list[list[str]] = field(default_factory=list)
    summary: str | None = None
    #: identity, preference, fact, episodic or task: chooses the half-life when the caller gave none
    kind: str | None = None
    #: the atomic statements the text makes, each with the clause it was read from: the write path keeps
    #: them with the memory and reconciles each with the user's current statements on its slot
    statements: list[Statement] = field(default_factory=list)
    #: the text's sentences, each with its dialogue act (``ACTS``); empty when the extractor does not
    #: tell them apart. Questions, requests and small talk are not memories
    utterances: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Need:
    """One thing a task will need from memory before the user asks for it: a name ("home city"), the
    words that find it in either language ("live", "home", "住在"), and the statement relations that
    hold it (``lives_in``)."""

    name: str
    words: tuple[str, ...]
    relations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Preload:
    """What a message that opens a task will need (``portamem_preload``): the task ("travel"), its needs,
    most important first, and the one query that finds them, in the message's language ("where I live,
    my seat and airline, loyalty numbers, budget, hotel and diet"; the needs' words when empty)."""

    task: str
    needs: tuple[Need, ...]
    query: str = ""


@dataclass(frozen=True)
class Habit:
    """A habit the maintainer found among a user's memories (``portamem_summarize_habit``): the words
    most of its memories share and few others hold ("window", "seat"), the memories holding it (oldest
    first), how many of how many similar memories hold it, since when, and whether they are Chinese."""

    words: tuple[str, ...]
    members: tuple[str, ...]
    support: int
    of: int
    since: datetime
    chinese: bool = False


#: what a reconciler may decide about a new statement and one of the user's current memories
#: (``portamem_reconcile``): ``add`` (it is new; with a target: the target still holds beside it),
#: ``update`` (it replaces the target, which is superseded, its history kept), ``outdate`` (it replaces
#: a part of the target, which stays active, marked), ``delete`` (the target no longer holds: superseded
#: by the statement saying so), ``noop`` (the statement says the target again: one more sighting)
RECONCILE_ACTIONS = ("add", "update", "outdate", "delete", "noop")


@dataclass(frozen=True)
class FormationTurn:
    """A user turn as the formation worker forms it: the message, the reply, and the turns before it
    in its session (oldest first, as ``(user, assistant)`` pairs)."""

    user: str
    assistant: str
    created_at: datetime
    session_id: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Decision:
    """A reconciler's decision about one new statement (``statement_id``, a memory the turn wrote) and
    one current memory (``target_id``, None for a plain ``add``), with the reason it gives (audited)."""

    statement_id: str
    action: str
    target_id: str | None = None
    reason: str = ""
    #: for ``outdate``: the words of the target that the statement replaces
    part: str | None = None
