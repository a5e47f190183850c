"""Predictive preload: what a task will need, in the first prompt of the task, found by one search.

A message that opens a task ("Can you help me plan my business trip to Madrid next week?", "帮我订周五
晚上的餐厅") will need memories the user has not asked for yet: the home city, the seat they like, the
budget, a loyalty number, a diet. The ``portamem_preload`` hook (the built-in rule engine in
``portamem_plugins.preload``, or a plugin's classifier) names the task and its needs; ``recall`` runs
one search whose query is every need's words together, and keeps the hits that meet a need (their
words, or a statement relation the need names), the best for each need first, at most
``Settings.preload_k``. They reach the prompt after the question's own hits, marked as preloaded
(``found_by`` holds ``"preload"``), and the session's next ``preload_turns`` recalls reuse them without
searching again while they stay on the task (a message sharing no word with the task's opening, needs
or preloaded lines ends it: ``Tasks``). Off by default (``Settings.preload``): on the test half of
``portamem eval preload`` a fifth to two fifths of the preloaded lines meet no need.

May import: the data model.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ..pipeline import Need, Preload
from ..records import SearchHit
from ..language.statements import content_words

__all__ = ["PRELOAD", "preload_query", "pick", "task_words", "Tasks", "TASKS"]

#: the provenance a preloaded hit carries in ``SearchHit.found_by``
PRELOAD = "preload"


def preload_query(plan: Preload) -> str:
    """The one search's query: the plan's own (a short phrase of what the task needs, in the message's
    language: a bag of every need's words scores each memory as a share of all of them), else the words
    of every need, most important need first."""
    return plan.query or " ".join(dict.fromkeys(w for need in plan.needs for w in need.words))


def _meets(hit: SearchHit, need: Need, words: frozenset[str]) -> bool:
    relations = {str(t[1]).lower() for t in hit.record.triples if len(t) >= 3}
    return bool(words & content_words(hit.record.content)) or any(r in relations for r in need.relations)


def pick(plan: Preload, hits: Sequence[SearchHit], k: int) -> list[SearchHit]:
    """The hits that meet a need of the plan, at most ``k``: first the best hit of each need in order,
    then the next best of each, marked as preloaded."""
    words = {need.name: content_words(" ".join(need.words)) for need in plan.needs}
    chosen: list[SearchHit] = []
    taken: set[str] = set()
    for _round in range(2):
        for need in plan.needs:
            if len(chosen) >= k:
                break
            best = next((h for h in hits if h.memory_id not in taken and _meets(h, need, words[need.name])), None)
            if best is not None:
                taken.add(best.memory_id)
                chosen.append(dataclasses.replace(best, found_by=(*best.found_by, PRELOAD)))
    return chosen


@dataclass
class _Task:
    task: str
    hits: list[SearchHit]
    left: int
    #: the words of the task: its opening message's, its needs' and its preloaded lines'
    words: frozenset[str] = frozenset()


def task_words(message: str, plan: Preload, hits: Sequence[SearchHit]) -> frozenset[str]:
    """What a message must share with a task to stay on it: the words of the message that opened it, of
    its needs and of the lines it preloaded."""
    texts = [message, *(w for need in plan.needs for w in need.words), *(h.record.content for h in hits)]
    return frozenset(content_words(" ".join(texts)))


class Tasks:
    """The open task of each session, per memory object: its preloaded hits and how many more recalls
    reuse them. Bounded (the least recently used sessions are forgotten first)."""

    def __init__(self, sessions: int = 4096) -> None:
        self._by_memory: weakref.WeakKeyDictionary[object, OrderedDict[Hashable, _Task]] = weakref.WeakKeyDictionary()
        self._sessions = sessions
        self._lock = threading.Lock()

    def open(self, memory: object, session: Hashable, task: str, hits: list[SearchHit], turns: int,
             words: frozenset[str] = frozenset()) -> None:
        """A task opened in ``session``: ``hits`` are reused by its next ``turns`` recalls while they
        stay on it (share one of ``words``; no words: every recall is on it)."""
        with self._lock:
            tasks = self._by_memory.setdefault(memory, OrderedDict())
            tasks[session] = _Task(task, list(hits), turns, words)
            tasks.move_to_end(session)
            while len(tasks) > self._sessions:
                tasks.popitem(last=False)

    def reuse(self, memory: object, session: Hashable, message: str | None = None) -> tuple[str, list[SearchHit]] | None:
        """The open task of ``session`` and its preloaded hits, counting one recall; None when there is
        none, its turns are spent, or ``message`` shares no word with it (a message on another topic
        ends the task: its lines were in the prompt that opened it, and would ride along on anything)."""
        with self._lock:
            tasks = self._by_memory.get(memory)
            task = tasks.get(session) if tasks is not None else None
            if task is None:
                return None
            off_task = message is not None and task.words and not task.words & content_words(message)
            if task.left <= 0 or off_task:
                del tasks[session]
                return None
            task.left -= 1
            tasks.move_to_end(session)
            return task.task, list(task.hits)

    def drop_user(self, memory: object, tenant_id: str, user_id: str) -> None:
        """Close every open task of one user (an erased user; ``recall`` keys a task by (tenant or None,
        user, session, agent))."""
        with self._lock:
            tasks = self._by_memory.get(memory)
            if tasks is None:
                return
            for key in [k for k in tasks if isinstance(k, tuple) and len(k) > 1 and k[1] == user_id
                        and k[0] in (tenant_id, None)]:
                del tasks[key]

    def close(self, memory: object, session: Hashable) -> None:
        with self._lock:
            tasks = self._by_memory.get(memory)
            if tasks is not None:
                tasks.pop(session, None)


#: the process's open tasks (``recall`` keeps them here)
TASKS = Tasks()
