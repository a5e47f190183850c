"""Recall for a prompt, over any memory (``Memory`` or ``RemoteMemory``): the pre-think gate, a search
whose hits count as used, and the prompt lines (``portamem.read.prompt``)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .language.entities import extract_entities, normalize_entity
from .pipeline import Preload
from .plugins import Hooks, get_plugin_manager
from .read.asof import asked_period, held_then
from .read.current import asks_past
from .read.preload import TASKS, pick, preload_query, task_words
from .read.prompt import ASKS_HABIT, CURRENT, DEFAULT_HEADER, for_prompt, format_memories, prompt_text, relative_age
from .errors import NotFoundError
from .filters import SearchFilters, for_agent
from .records import SearchHit, Status, Tier, ended_by, utcnow
from .write.validation import check_id, check_texts

if TYPE_CHECKING:
    from .memory import Memory
    from .records import MemoryRecord

__all__ = ["format_memories", "prompt_text", "relative_age", "recall", "arecall", "needs_recall", "DEFAULT_HEADER", "REFERENCES"]

#: words that point back at something said before: a message without one (and without an entity the
#: user's memories hold) is answered without recall when ``Settings.recall_gate`` is on
REFERENCES = re.compile(
    r"\b(?:again|last time|the other day|before|earlier|previous(?:ly)?|remember|recall|as usual|the usual|"
    r"same as|like (?:last|before)|you said|i said|i told you|i mentioned|i've mentioned|mentioned|as i said|"
    r"we (?:talked|discussed|agreed|spoke|decided)|the (?:thing|one|place|guy|person|idea|plan) (?:i|we|you)|"
    r"how about my|my|mine|our|ours)\b"
    r"|上次|上回|之前|以前|刚才|那次|还记得|记得|记住|你说过|我说过|我提过|我提到|提到过|说过的|之前说的|我说的|老样子|照旧|"
    r"和上次一样|跟以前一样|我的|我们的",
    re.I,
)

def needs_recall(memory: Memory, message: str, *, user_id: str, tenant_id: str | None = None) -> bool:
    """The pre-think gate: recall only for a message that refers back ("last time", "the thing I
    mentioned", 上次, 之前说的, "my ...") or names an entity some memory of the user holds; a bare
    pronoun ("it", "that") is not a reference to memory."""
    if REFERENCES.search(message):
        return True
    entities = [normalize_entity(e) for e in extract_entities(message)]
    if not entities:
        return False
    held = memory.store.entity_counts(tenant_id or memory.tenant_id, user_id, entities)
    return any(held.values())


def recall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
    agent_id: str | None = None,
    now: datetime | None = None,
    filters: SearchFilters | Mapping[str, Any] | None = None,
) -> list[SearchHit]:
    """Search for a prompt, dropping what the prompt already shows and what does not bear on the question
    (``for_prompt``); the hits count as used. A message that opens a task ("plan my business trip")
    also gets what the task will need (``portamem.read.preload``): one more search, its hits after the
    question's, marked as preloaded (``"preload"`` in ``found_by``), and reused by the session's next
    recalls (``Settings.preload_turns``) without searching again.

    The read path keeps out memories whose text is in the session's working window or in ``shown``
    (messages the framework itself puts in front of the model), so the model does not read them twice.
    Sessions of the user that ended (``Settings.session_idle_s``) are compressed into episodes first
    (``Memory.end_idle_sessions``). With ``agent_id`` the agent sees its private memories (first) and
    the shared layer. ``filters`` (``SearchFilters``: trusts, sources, types ...) narrow the question's
    search, its preload and every line a link adds alike. With
    ``Settings.recall_gate`` a message that ``needs_recall`` says no to gets no search at all.
    """
    end = getattr(memory, "end_idle_sessions", None)
    if end is not None:  # a conversation that ended before this one: what it said is long-term memory now
        end(user_id=user_id, now=now, keep=session_id, tenant_id=tenant_id)
    settings = memory.settings
    plan = _plan(memory, query) if settings.preload else None
    if plan is None and settings.recall_gate and not needs_recall(
            memory, query, user_id=check_id(settings, "user_id", user_id), tenant_id=tenant_id):
        return []
    shown = check_texts("shown", shown)  # as search_memory checks it: a typed error, not a TypeError
    scoped = for_agent(SearchFilters.coerce(filters), agent_id)
    filters = None if filters is None and agent_id is None else scoped
    # "where did I live in March?": the value that held then, over the current one (portamem.read.asof)
    period = asked_period(query, now or utcnow()) if isinstance(query, str) else None
    if isinstance(query, str) and (asks_past(query) or period is not None) and scoped.statuses == (Status.ACTIVE,):
        # "who was my manager before?": the values a newer statement retired answer it too, marked
        scoped = filters = dataclasses.replace(scoped, statuses=(Status.ACTIVE, Status.SUPERSEDED))
    admits = scoped.admits  # a linked, preloaded or reused line is shown only where a search would show it
    hits = memory.search_memory(query, user_id=user_id, top_k=top_k, tenant_id=tenant_id,
                                window_session=session_id, shown=shown, touch=True, now=now, filters=filters)
    if ASKS_HABIT.search(query):  # "what do I usually order?": the habit that stands for the hits found
        hits = _with_linked(memory, hits, user_id, tenant_id, _abstracted_into, "abstract", admits)
    hits = _with_linked(memory, hits, user_id, tenant_id, _outdated_by, CURRENT, admits)
    if period is not None:
        hits = held_then(hits, period)
    hits = for_prompt(hits, margin=settings.prompt_margin, min_evidence=settings.prompt_min_evidence, query=query,
                      as_of=period is not None)
    if not settings.preload:
        return hits
    task = (tenant_id, user_id, session_id, agent_id)
    # the next turns of an open task read what it preloaded without searching again (also when they
    # speak of the same task: "what time should I leave for the airport?" on a trip being planned)
    reused = TASKS.reuse(memory, task, None if plan is not None else query) if session_id is not None else None
    if plan is not None and (reused is None or reused[0] != plan.task):  # a task opens: one search for its needs
        found = memory.search_memory(preload_query(plan), user_id=user_id, top_k=settings.preload_k * 4,
                                     tenant_id=tenant_id, window_session=session_id, shown=shown, touch=True,
                                     now=now, filters=filters)
        preloaded = pick(plan, found, settings.preload_k)
        if session_id is not None:
            TASKS.open(memory, task, plan.task, preloaded, settings.preload_turns,
                       task_words(query, plan, preloaded))
    else:
        preloaded = _still_held(memory, reused[1], user_id, tenant_id) if reused is not None else []
    seen = {h.memory_id for h in hits}
    return hits + [h for h in preloaded if h.memory_id not in seen and admits(h.record)]


def _still_held(memory: Memory, hits: list[SearchHit], user_id: str, tenant_id: str | None) -> list[SearchHit]:
    """The preloaded hits a later turn of the task reuses, each as its memory is now: a memory forgotten,
    superseded, merged or moved to the cold tier since the task opened is left out, as the question's
    own search leaves it out, and one rewritten shows its new text (the task keeps ids, not texts)."""
    out: list[SearchHit] = []
    for h in hits:
        try:
            record = memory.get_memory(h.memory_id, user_id=user_id, tenant_id=tenant_id)
        except NotFoundError:
            continue  # purged or erased since
        if record.status is Status.ACTIVE and record.tier is not Tier.COLD:
            out.append(dataclasses.replace(h, record=record))
    return out


def _outdated_by(hit: SearchHit) -> str | None:
    """The newer memory that outdated a part of the hit, or ended it as a statement about the same thing."""
    return next(iter(ended_by(hit.record)), None)


def _abstracted_into(hit: SearchHit) -> str | None:
    into = hit.record.metadata.get("abstracted_into")
    return into if isinstance(into, str) else None


def _with_linked(memory: Memory, hits: list[SearchHit], user_id: str, tenant_id: str | None,
                 link: Callable[[SearchHit], str | None], mark: str,
                 admits: Callable[[MemoryRecord], bool]) -> list[SearchHit]:
    """The hits, each followed by the active memory ``link`` names for it when the search did not find
    it and the caller's filters ``admits`` it (another agent's private memory never rides in on a link
    from the shared layer), with the hit's score and ``mark`` added to its ``found_by``:

    - ``_abstracted_into``, marked ``"abstract"``: the abstract memory of a member hit
      (``portamem.lifecycle.abstraction``: a habit stands for the memories it was derived from, and
      ``for_prompt`` shows it in their place);
    - ``_outdated_by``, marked ``CURRENT``: the newer memory that outdated a part of the hit
      (``portamem.write.supersession``: "the start got pushed back to 10 March" for "Tomasz can start
      on 24 February"), or that ended it as a statement about the same thing with another value
      (``portamem.write.currency``); ``for_prompt`` shows it in the older's place when the question is
      about what changed, and leaves it out otherwise.
    """
    have = {h.memory_id for h in hits}
    out: list[SearchHit] = []
    for h in hits:
        out.append(h)
        linked = link(h)
        if linked is None or linked in have:
            continue
        have.add(linked)
        try:
            record = memory.get_memory(linked, user_id=user_id, tenant_id=tenant_id)
        except NotFoundError:
            continue  # forgotten since
        if record.status is Status.ACTIVE and admits(record):
            out.append(SearchHit(record, h.score, h.breakdown, (*h.found_by, mark)))
    return out


def _plan(memory: Memory, message: str) -> Preload | None:
    """What the task ``message`` opens will need, from the memory's plugins (the default plugins for a
    memory without its own, such as ``RemoteMemory``)."""
    hooks = getattr(memory, "hooks", None)
    if hooks is None:
        hooks = _default_hooks()
    return hooks.preload(message, memory.settings)


@lru_cache(maxsize=1)
def _default_hooks() -> Hooks:
    return Hooks(get_plugin_manager())


async def arecall(
    memory: Memory,
    query: str,
    *,
    user_id: str,
    session_id: str | None = None,
    top_k: int | None = None,
    tenant_id: str | None = None,
    shown: Iterable[str] = (),
    agent_id: str | None = None,
    now: datetime | None = None,
    filters: SearchFilters | Mapping[str, Any] | None = None,
) -> list[SearchHit]:
    """Async twin of :func:`recall` (runs it in a worker thread)."""
    return await asyncio.to_thread(
        recall, memory, query, user_id=user_id, session_id=session_id, top_k=top_k, tenant_id=tenant_id,
        shown=list(shown), agent_id=agent_id, now=now, filters=filters,
    )
