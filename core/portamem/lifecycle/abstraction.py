"""Abstraction: a user's repeated memories become one abstract memory with its support.

Ten bookings of a window seat say more together than each says alone: "window seat, 8 of 10 similar
memories since March". The maintainer (``portamem.lifecycle.maintenance``) groups a user's settled
memories whose vectors are close (above ``Settings.abstract_similarity`` and above the user's own
90th percentile of pairwise cosines, since an embedder's cosines between unrelated texts are not
near zero), and for each group of at least ``abstract_min_support`` finds the words most of its
members share and few other memories of the user hold (the habit: "window", "seat"). It writes one
abstract memory per habit as a keyed memory of the maintainer (``key_namespace`` ``("portamem",
"abstract")``, so a later run updates it in place and dedupe never merges it away), with
``metadata["abstract"]``: the support (members holding the habit), the group's size, the confidence
(their share), since when, the habit words and the members it was derived from. The members stay;
``recall`` shows the abstract memory in their place (``portamem.read.prompt``) and its metadata lists
them for whoever wants to expand it.

An abstract memory is derived, so it keeps the limits of its members (``portamem.write.scope.derived``):
the trust and source of the least trusted (six web snippets make a low-trust web habit, not a system
one), the narrowest scope (a group is found within one agent's private memories or within the shared
layer, never across them, so a private memory is never quoted where other agents read) and the
shortest half-life. Its example is the sentence of a member that holds the habit, not the whole member.

The text comes from the ``portamem_summarize_habit`` hook: a summariser plugin (``LLMHabitSummarizer``
in ``portamem_plugins.summarize``, strict JSON) first, the rule template (``habit_template``: the habit
words and their support, English or Chinese after the members) last and as the fallback.

May import: everything below lifecycle.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from datetime import datetime
from typing import Any

import numpy as np

from ..components import Components
from ..pipeline import Habit, WriteContext
from ..records import ABSTRACT_KEY, ABSTRACTED_INTO, SYSTEM_NAMESPACE, MemoryRecord, MemoryType, Status, to_iso
from ..language.statements import content_words
from ..language.text import has_cjk
from ..write.requests import MemoryDraft
from ..write.save import write
from ..write.scope import derived

__all__ = ["ABSTRACT_KEY", "ABSTRACTED_INTO", "ABSTRACT_NAMESPACE", "abstract", "habits", "habit_template"]

# ``ABSTRACT_KEY`` (``portamem.records``), metadata key of an abstract memory: {"support", "of", "confidence",
# "since", "words", "derived_from"} (``derived_from``: the group's memories, those with the habit and those
# without); ``ABSTRACTED_INTO``, metadata key of a member: the id of the abstract memory that stands for it
#: the key namespace the maintainer writes abstract memories under
ABSTRACT_NAMESPACE = (SYSTEM_NAMESPACE, "abstract")
#: a habit word is held by at least this share of a group, and this share of its holders are in the group
_SHARE = 0.6
_OWN = 0.7
_MAX_WORDS = 4
_MAX_MEMBERS = 50
_NOT_A_WORD = re.compile(r"\d|^.$")


def _words(record: MemoryRecord) -> frozenset[str]:
    return frozenset(w for w in content_words(record.content) if not _NOT_A_WORD.search(w))


def habits(parts: Components, pool: list[MemoryRecord]) -> list[dict[str, Any]]:
    """The habits among a user's memories: each a dict with the habit words, the members holding them,
    the group they were found in, and an example member."""
    s = parts.settings
    records = [r for r in pool if r.status is Status.ACTIVE and r.key is None and r.embedding is not None
               and r.embedding_model == parts.embedder.name and ABSTRACT_KEY not in r.metadata
               and r.type in (MemoryType.SEMANTIC, MemoryType.EPISODIC)]
    if len(records) < s.abstract_min_support:
        return []
    matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    sims = matrix @ matrix.T
    off = sims[~np.eye(len(records), dtype=bool)]
    tau = max(s.abstract_similarity, float(np.quantile(off, 0.9)))
    words = [_words(r) for r in records]
    held = Counter(w for ws in words for w in ws)
    taken = np.zeros(len(records), dtype=bool)
    out: list[dict[str, Any]] = []
    # the memories with the most close neighbours seed the groups
    for i in np.argsort(-(sims >= tau).sum(axis=1), kind="stable"):
        if taken[i]:
            continue
        # a group stays in one agent scope (portamem.write.scope): no private memory joins, and so is
        # quoted by, a habit the shared layer or another agent reads
        group = [j for j in np.flatnonzero(sims[i] >= tau)
                 if not taken[j] and records[j].agent_id == records[i].agent_id]
        if len(group) < s.abstract_min_support:
            continue
        count = Counter(w for j in group for w in words[j])
        habit = [w for w, n in count.most_common() if n / len(group) >= _SHARE and n / held[w] >= _OWN]
        # the word the group owns most first ("window" before "seat" a train booking has too)
        habit = sorted(habit, key=lambda w: (-count[w] / held[w], -count[w]))[:_MAX_WORDS]
        if len(habit) < 2:  # one shared word is a topic ("sister", "酒店"), a habit is a choice in a frame
            continue
        members = [records[j] for j in group if set(habit) <= words[j]]
        if len(members) < s.abstract_min_support:
            continue
        taken[group] = True
        out.append({"words": habit, "members": members, "group": [records[j] for j in group]})
    return out


def abstract(parts: Components, pool: list[MemoryRecord], *, user_id: str, tenant_id: str,
             now: datetime) -> list[str]:
    """Write (or update) one abstract memory per habit of the user's pool; their ids."""
    if not parts.settings.abstract:
        return []
    found = habits(parts, pool)
    if not found:
        return []
    drafts = []
    for h in found:
        limits = derived(h["group"])  # the habit inherits its members' lowest trust and shortest half-life
        context = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings, source=limits.source,
                               agent_id=limits.agent_id, explicit=False)
        drafts.append(_draft(parts, h, context))
    written = write(parts, drafts, user_id=user_id, tenant_id=tenant_id, explicit=False)
    # each member names its abstract, so a recall that finds a member shows the abstract (portamem.recall)
    rows = [{"memory_id": r.memory_id, "metadata": {**r.metadata, ABSTRACTED_INTO: a.memory_id}}
            for h, a in zip(found, written) for r in h["group"] if r.metadata.get(ABSTRACTED_INTO) != a.memory_id]
    if rows:
        with parts.store.transaction() as conn:
            parts.store.update_each(conn, rows)
    return [a.memory_id for a in written]


#: where a member's sentences end, for quoting the one that holds the habit
_SENTENCES = re.compile(r"(?<=[.!?。！？；;])\s*")


def _example(member: str, words: tuple[str, ...]) -> str:
    """The sentence of ``member`` that holds the most habit words: the habit's own example, not whatever
    else the member carried (a web snippet's appended instruction is not repeated as the user's habit)."""
    sentences = [s for s in _SENTENCES.split(" ".join(member.split())) if s.strip()] or [member]
    return max(sentences, key=lambda s: len(content_words(s) & set(words)))


def habit_template(habit: Habit) -> str:
    """The rule template's text of a habit: its words and support, and the sentence of its latest member
    that holds the habit as the example."""
    example = _example(habit.members[-1], habit.words)[:160]
    since = habit.since
    if habit.chinese:
        return f"习惯：{'、'.join(habit.words)}（自{since:%Y-%m-%d}起{habit.of}条相似记忆中有{habit.support}条）；例如“{example}”"
    return (f"Habit: {', '.join(habit.words)} ({habit.support} of {habit.of} similar memories since "
            f"{since:%Y-%m-%d}); e.g. \"{example}\"")


def _draft(parts: Components, habit: dict[str, Any], context: WriteContext) -> MemoryDraft:
    members: list[MemoryRecord] = sorted(habit["members"], key=lambda r: r.created_at)
    group: list[MemoryRecord] = habit["group"]
    n, m = len(members), len(group)
    since = min(r.created_at for r in group)
    words = habit["words"]
    found = Habit(words=tuple(words), members=tuple(r.content for r in members), support=n, of=m, since=since,
                  chinese=has_cjk(" ".join(r.content for r in members)))
    # a summariser plugin (an LLM) first, the rule template when every one passes
    text = (parts.hooks.summarize_habit(found, context) or habit_template(found)).strip()
    text = text[: parts.settings.max_content_chars]
    limits = derived(group)
    # one key per habit and scope: an agent's habit never overwrites the shared layer's of the same words
    scope = [] if limits.agent_id is None else [f"agent:{limits.agent_id}"]
    key = "habit-" + hashlib.sha1("|".join(scope + sorted(words)).encode()).hexdigest()[:16]
    meta = {ABSTRACT_KEY: {"support": n, "of": m, "confidence": round(n / m, 2), "since": to_iso(since),
                           "words": words,
                           "derived_from": [r.memory_id for r in sorted(group, key=lambda r: r.created_at)][-_MAX_MEMBERS:]}}
    # derived, it carries its members' limits (portamem.write.scope): the source and trust of the least
    # trusted, the private agent among them, their shortest half-life
    return MemoryDraft(content=text, type=MemoryType.SEMANTIC, kind="preference", source=limits.source,
                       trust=limits.trust, agent_id=limits.agent_id, session_id=limits.session_id,
                       half_life_days=limits.half_life_days,
                       importance=min(0.9, 0.5 + 0.05 * n), metadata=meta, key=key,
                       key_namespace=ABSTRACT_NAMESPACE, created_at=members[-1].created_at)
