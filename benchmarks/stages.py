"""Per-stage CPU of portamem's request path, for ``benchmarks/cpu.py --stages``.

Each stage is a set of portamem functions, wrapped here (never in portamem itself) with a timer of the
calling thread's CPU (``time.thread_time``). Stages nest (extraction inside the guard's caller, SQL
inside formation): each is charged its *own* time, its callees' stages taken off, so the stages add up.
A stage is charged on the acknowledged path ("ack", the caller's thread) or in the background (the
indexer's and formation's threads). What no stage covers is "other": validation, record building,
Python call overhead of the layers between stages on the caller's thread; thread wake-ups, the vector
index's own threads (Milvus Lite's server runs in process) on the others. The wrappers cost a few
microseconds a call, charged to the stage they wrap (``--stages`` totals run a little above plain ones).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["STAGES", "Stages"]

#: stage name -> "module:qualname" of the functions it covers, in print order
STAGES: dict[str, tuple[str, ...]] = {
    "validation": ("portamem.write.validation:check_turn", "portamem.write.validation:check_draft",
                   "portamem.write.validation:check_opaque_ids"),
    "guard": ("portamem.plugins:Hooks.guard",),
    "redaction": ("portamem.plugins:Hooks.redact",),
    "extraction (split, acts, statements)": ("portamem.plugins:Hooks.extract", "portamem.plugins:Hooks.extract_by"),
    "triggers": ("portamem.plugins:Hooks.trigger_votes",),
    "importance": ("portamem.plugins:Hooks.score_importance",),
    "window and episode": ("portamem.write.window:compress",),
    "SQL writes": ("portamem.storage.sql:RecordStore.insert", "portamem.storage.sql:RecordStore.audit_many",
                   "portamem.storage.sql:RecordStore.add_turn", "portamem.storage.sql:RecordStore.drop_turns",
                   "portamem.storage.sql:RecordStore.set_embeddings", "portamem.storage.sql:RecordStore.mark_indexed",
                   "portamem.storage.sql:RecordStore.update_each", "portamem.storage.sql:RecordStore.update_fields",
                   "portamem.storage.formation:enqueue", "portamem.storage.formation:mark_formed"),
    "SQL reads": ("portamem.storage.sql:RecordStore.turns", "portamem.storage.sql:RecordStore.get",
                  "portamem.storage.sql:RecordStore.outbox", "portamem.storage.sql:RecordStore.arrival",
                  "portamem.storage.sql:RecordStore.indexed_ids", "portamem.storage.formation:pending",
                  "portamem.storage.formation:waiting_upto", "portamem.storage.formation:last_pk"),
    "SQL begin+commit": ("portamem.storage.sql:RecordStore.transaction",),
    "outbox": ("portamem.background.indexer:Indexer.enqueue",),
    "embedding": ("portamem.components:Components.embed",),
    "review (trust, dedupe, rule supersession)": ("portamem.background.indexer:settle",),
    "vector index": ("portamem.storage.vectors:MilvusVectorIndex.upsert",
                     "portamem.storage.vectors:MilvusVectorIndex.delete"),
    "replica": ("portamem.read.replica:VectorReader.apply", "portamem.read.replica:VectorReader.nearest"),
    "reconciliation probe (candidates)": ("portamem.write.forming:candidates_for",),
    "reconcile (rules or model)": ("portamem.plugins:Hooks.reconcile",),
    "formation checks and apply": ("portamem.write.forming:check", "portamem.write.forming:apply"),
    "keyword and entity look-ups": ("portamem.storage.sql:RecordStore.keyword_search",
                                    "portamem.storage.sql:RecordStore.entity_search"),
    "search": ("portamem.memory:Memory.search_memory",),
}


class Stages:
    """Wraps the ``STAGES`` functions while installed (``with Stages() as s``); ``cpu`` holds, per
    (path, stage), the CPU seconds charged, path "ack" for the caller's thread and "background" else."""

    def __init__(self) -> None:
        self.cpu: dict[tuple[str, str], float] = defaultdict(float)
        self._local = threading.local()
        self._main = threading.get_ident()
        self._undo: list[tuple[Any, str, Any]] = []

    def _stack(self) -> list[float]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _charge(self, name: str, elapsed: float, children: float) -> None:
        path = "ack" if threading.get_ident() == self._main else "background"
        self.cpu[(path, name)] += elapsed - children
        stack = self._stack()
        if stack:
            stack[-1] += elapsed

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        stack_of = self._stack

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = stack_of()
            stack.append(0.0)
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.thread_time() - t0
                self._charge(name, elapsed, stack.pop())

        return timed

    def _timed_context(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A context manager's entering and leaving charged to ``name`` (its body is not)."""
        outer = self

        @functools.wraps(fn)
        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            stack = outer._stack()
            cm = fn(*args, **kwargs)
            stack.append(0.0)
            t0 = time.thread_time()
            try:
                value = cm.__enter__()
            finally:
                outer._charge(name, time.thread_time() - t0, stack.pop())
            try:
                yield value
            except BaseException:  # noqa: BLE001 - handed to the wrapped manager, which re-raises
                stack.append(0.0)
                t0 = time.thread_time()
                try:
                    if not cm.__exit__(*sys.exc_info()):
                        raise
                finally:
                    outer._charge(name, time.thread_time() - t0, stack.pop())
            else:
                stack.append(0.0)
                t0 = time.thread_time()
                try:
                    cm.__exit__(None, None, None)
                finally:
                    outer._charge(name, time.thread_time() - t0, stack.pop())

        return timed

    def __enter__(self) -> Stages:  # noqa: PYI034
        import importlib

        for name, targets in STAGES.items():
            for target in targets:
                module_name, qualname = target.split(":")
                module = importlib.import_module(module_name)
                owner: Any = module
                *path, attr = qualname.split(".")
                for part in path:
                    owner = getattr(owner, part)
                original = owner.__dict__[attr]
                wrap = self._timed_context if attr == "transaction" else self._timed
                wrapped = wrap(name, original)
                self._undo.append((owner, attr, original))
                setattr(owner, attr, wrapped)
                if not path:  # a module function: also where other modules imported it by name
                    for other in list(sys.modules.values()):
                        if other is module or not getattr(other, "__name__", "").startswith("portamem"):
                            continue
                        if other.__dict__.get(attr) is original:
                            self._undo.append((other, attr, original))
                            setattr(other, attr, wrapped)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, original in reversed(self._undo):
            setattr(owner, attr, original)
        self._undo.clear()

    def snapshot(self) -> dict[tuple[str, str], float]:
        return dict(self.cpu)
