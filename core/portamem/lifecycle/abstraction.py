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
from ..records import ABSTRACT_KEY, ABSTRACTED_INTO, MemoryRecord, MemoryType, Source, Status, to_iso
from ..statements import content_words
from ..text import has_cjk
from ..write.requests import MemoryDraft
from ..write.save import write

__all__ = ["ABSTRACT_KEY", "ABSTRACTED_INTO", "ABSTRACT_NAMESPACE", "abstract", "habits", "habit_template"]

# ``ABSTRACT_KEY`` (``portamem.records``), metadata key of an abstract memory: {"support", "of", "confidence",
# "since", "words", "derived_from"} (``derived_from``: the group's memories, those with the habit and those
# without); ``ABSTRACTED_INTO``, metadata key of a member: the id of the abstract memory that stands for it
#: the key namespace the maintainer writes abstract memories under
ABSTRACT_NAMESPACE = ("portamem", "abstract")
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
        group = [j for j in np.flatnonzero(sims[i] >= tau) if not taken[j]]
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
    context = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=parts.settings, source=Source.SYSTEM,
                           explicit=False)
    written = write(parts, [_draft(parts, h, context) for h in found], user_id=user_id, tenant_id=tenant_id,
                    explicit=False)
    # each member names its abstract, so a recall that finds a member shows the abstract (portamem.recall)
    rows = [{"memory_id": r.memory_id, "metadata": {**r.metadata, ABSTRACTED_INTO: a.memory_id}}
            for h, a in zip(found, written) for r in h["group"] if r.metadata.get(ABSTRACTED_INTO) != a.memory_id]
    if rows:
        with parts.store.transaction() as conn:
            parts.store.update_each(conn, rows)
    return [a.memory_id for a in written]


def habit_template(habit: Habit) -> str:
    """The rule template's text of a habit: its words and support, and its latest member as the example."""
    example = " ".join(habit.members[-1].split())[:160]
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
    key = "habit-" + hashlib.sha1("|".join(sorted(words)).encode()).hexdigest()[:16]
    meta = {ABSTRACT_KEY: {"support": n, "of": m, "confidence": round(n / m, 2), "since": to_iso(since),
                           "words": words,
                           "derived_from": [r.memory_id for r in sorted(group, key=lambda r: r.created_at)][-_MAX_MEMBERS:]}}
    return MemoryDraft(content=text, type=MemoryType.SEMANTIC, kind="preference", source=Source.SYSTEM,
                       importance=min(0.9, 0.5 + 0.05 * n), metadata=meta, key=key,
                       key_namespace=ABSTRACT_NAMESPACE, created_at=members[-1].created_at)
