"""The formation worker: each user turn's memories are formed in the background, after the write path
acknowledged the turn and the indexer's rule pass settled what it captured.

``add_turn`` (and ``save_many``'s turns) queue the turn with its session context in the transaction
that writes it (``portamem.storage.formation``); that is all a model costs the acknowledged path. This
thread drains the queue in order, in bounded batches, one turn at a time:

1. it waits until the indexer settled the turn's memories (the rule pass: recall already serves them);
2. it asks the extract hook once for the turn (``WriteContext.formation``: a model extractor answers
   only here, and never again on the memories the turn wrote), and drafts any statement the rules
   missed that they read as a statement;
3. it shows each statement the user's nearest current memories in its scope and asks the
   ``portamem_reconcile`` hook (the model reconciler when a model is configured, else the rules);
4. it checks every decision (``portamem.write.forming.check``) and applies the accepted ones through
   supersession and commits the drafted statements, the changes, one audit row per decision and the
   turn's FORMED mark in one transaction (rolled back when the turn left the queue meanwhile: its user
   erased), then updates the vector index.

A crash before that commit forms the turn again on the next open; after it, never. A model that cannot
be reached (connection refused, HTTP 5xx, 408 or 429) leaves the turn queued and is tried again after a
growing pause (at most 30 s), for ``MODEL_WAIT_S``; after that the rules form the turn. A model server
that refuses the request (another HTTP 4xx: a wrong key or model name) will not take it later: the rules
form the turn at once (``portamem.models.client``). On PostgreSQL the workers of several processes claim
rows as the indexers do (``storage.claims``). A failing round (the store unreachable, a plugin raising)
leaves the turn queued and is retried after ``poll_s``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..components import Components
from ..errors import IndexingTimeoutError
from ..pipeline import WriteContext
from ..records import MemoryRecord, MemoryType, Source, Status
from ..storage import formation as queue
from ..storage.claims import FORMATION_SPACE, OutboxClaims
from ..language.text import same_passage
from ..write.forming import Applied, apply, candidates_for, check, formation_turn
from ..write.requests import MemoryDraft
from ..write.save import drafted, stage
from .upkeep import index_now

__all__ = ["Former", "FormationStats"]

log = logging.getLogger(__name__)

#: seconds of history behind ``FormationStats.formed_per_s``
_RATE_WINDOW = 60.0
#: how long a turn waits for an unreachable model (connection refused, HTTP 5xx, 408 or 429) before the rules
#: form it: the rule pass serves recall meanwhile, and a model back within this time still forms it
MODEL_WAIT_S = 600.0
#: the longest pause between two tries of an unreachable model
_MODEL_RETRY_MAX_S = 30.0
#: how long ``stop`` (``Memory.close``) waits for the turn in hand: a model call cannot be interrupted
STOP_WAIT_S = 5.0
#: the reconciler whose decisions count as the model's (a fallback is any other deciding while a model is set)
MODEL_RECONCILER = "model_reconciler"


@dataclass(frozen=True)
class FormationStats:
    """How far formation is behind the acknowledged turns (``Memory.stats().formation``)."""

    #: turns queued and not formed yet
    pending: int
    #: seconds since the oldest of them was queued; 0 when none
    oldest_pending_s: float
    #: turns formed per second over the last minute
    formed_per_s: float
    #: turns this worker formed since it opened
    formed_total: int
    #: reconciler calls made with a model configured, and those the rules decided instead (the model
    #: failed, timed out or its answer broke the contract)
    reconciled_by_model: int
    fallbacks: int
    #: decisions refused by the checks (``portamem.write.forming.check``)
    refused: int
    #: the last round's failure, until a round succeeds
    last_error: str | None


def _calls(stats: Any, outcome: str | None = None) -> int:
    """Calls a model's counters (``portamem.models.ModelStats``) have seen (those that ended with
    ``outcome``); 0 without counters."""
    calls = getattr(stats, "calls", None)
    if not isinstance(calls, dict):
        return 0
    return sum(calls.values()) if outcome is None else int(calls.get(outcome, 0))


class _ModelDown(Exception):
    """Every call of a turn's reconciliation found the model unreachable: the turn waits for it."""


class _Gone(Exception):
    """The turn left the queue while it was formed (its user erased, or another worker formed it)."""


class Former:
    """One daemon thread per Memory that drains the formation queue (the module docstring)."""

    def __init__(self, parts: Components, indexer: Any, *, batch: int = 16, poll_s: float = 0.5,
                 model: Any = None) -> None:
        self._parts = parts
        self._indexer = indexer
        self._batch = max(1, batch)
        self._poll = poll_s
        #: the chat model the reconciler and extractor may ask (``portamem.models.ChatModel``), or None
        self.model = model
        self._cond = threading.Condition()
        self._wake = True
        self._stop = False
        #: ``stop`` stopped waiting for the turn in hand: it commits nothing (checked under ``parts.lock``)
        self._left = False
        self._done: deque[tuple[float, int]] = deque()
        self._total = 0
        self._by_model = 0
        self._fallbacks = 0
        self._refused = 0
        self._error: str | None = None
        #: the pause before trying an unreachable model again (doubles up to ``_MODEL_RETRY_MAX_S``)
        self._backoff = poll_s
        self._claims = OutboxClaims(parts.store.engine, FORMATION_SPACE)
        self._thread = threading.Thread(target=self._run, name="portamem-formation", daemon=True)

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the turn in hand, waiting for it at most ``STOP_WAIT_S``: a turn still in hand then
        (a model call that does not end) commits nothing when its call ends; it and the rest stay queued
        for the next open."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(STOP_WAIT_S)
            if self._thread.is_alive():
                with self._parts.lock:
                    self._left = True
                log.warning("memory formation stopped after %.0f s with a turn in hand (a model call still "
                            "running): the turn stays queued for the next open", STOP_WAIT_S)
        self._claims.close()

    def notify(self) -> None:
        """Turns were queued: look now rather than at the next poll."""
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def flush(self, timeout: float | None) -> None:
        """Block until every turn queued before this call is formed; ``IndexingTimeoutError`` after
        ``timeout`` seconds (the turns stay queued and their rule-pass memories serve recall)."""
        target = queue.last_pk(self._parts.store.engine)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._stop or not self._thread.is_alive():
                return
            left = queue.waiting_upto(self._parts.store.engine, target)  # without the lock: the worker reports
            if not left:
                return
            if deadline is not None and time.monotonic() >= deadline:
                why = f"; last error: {self._error}" if self._error else ""
                raise IndexingTimeoutError(
                    f"memory formation is still {left} turns behind after {timeout} s{why} (the turns are "
                    "stored and their rule-pass memories serve recall; the worker keeps going)")
            with self._cond:
                self._wake = True
                self._cond.notify_all()
                wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
                self._cond.wait(wait)

    def stats(self) -> FormationStats:
        now = time.monotonic()
        n, oldest = queue.backlog(self._parts.store.engine)
        with self._cond:
            while self._done and self._done[0][0] < now - _RATE_WINDOW:
                self._done.popleft()
            span = min(_RATE_WINDOW, now - self._done[0][0]) if self._done else 0.0
            rate = sum(k for _, k in self._done) / span if span > 0 else 0.0
            return FormationStats(pending=n, oldest_pending_s=max(0.0, time.time() - oldest) if n and oldest else 0.0,
                                  formed_per_s=rate, formed_total=self._total, reconciled_by_model=self._by_model,
                                  fallbacks=self._fallbacks, refused=self._refused, last_error=self._error)

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stop or self._wake, self._poll)
                if self._stop:
                    return
                self._wake = False
            try:
                self._round()
                self._backoff = self._poll
            except _ModelDown as down:  # the turn stays queued; try the model again a little later each time
                log.warning("%s", down)
                with self._cond:
                    self._error = str(down)
                    self._cond.notify_all()
                    self._wake = False  # a turn queued meanwhile (or flush) tries again at once
                    self._cond.wait_for(lambda: self._stop or self._wake, self._backoff)
                    self._backoff = min(_MODEL_RETRY_MAX_S, 2 * self._backoff)
                    self._wake = True
            except Exception as exc:  # the turns stay queued: retried on the next round
                log.exception("memory formation failed; the turns stay queued and will be retried")
                with self._cond:
                    self._error = f"{type(exc).__name__}: {exc}"
                    self._cond.notify_all()
                    self._cond.wait_for(lambda: self._stop, self._poll)
                    self._wake = True

    def _round(self) -> None:
        """Form what is queued, a batch at a time, until the queue is empty or a turn must wait."""
        after = 0
        while not self._stop:
            rows = queue.pending(self._parts.store.engine, self._batch, after=after)
            if not rows:
                return
            after = rows[-1].pk
            mine = self._claims.claim([r.pk for r in rows])
            try:
                if self._claims.shared:  # ours alone, as they stand now that they are ours
                    rows = queue.pending(self._parts.store.engine, len(mine), pks=sorted(mine)) if mine else []
                for row in rows:
                    if self._stop:
                        return
                    if not self._settled(row.memory_ids):
                        self._wake = True  # its rule pass is not done: look again soon, in order
                        return
                    formed = self._form(row)
                    with self._cond:
                        self._done.append((time.monotonic(), 1))
                        self._total += formed
                        self._error = None
                        self._cond.notify_all()
            finally:
                self._claims.release(sorted(mine))

    def _settled(self, memory_ids: Sequence[str]) -> bool:
        """Whether the indexer settled these memories (waits a poll for them)."""
        if not memory_ids:
            return True
        try:
            self._indexer.wait_ids(list(memory_ids), self._poll)
        except IndexingTimeoutError:
            return False
        return True

    def _form(self, row: queue.QueuedTurn) -> int:
        """Form one queued turn; 1 when this worker marked it formed."""
        parts = self._parts
        turn = formation_turn(row.turn, row.session_id)
        ctx = WriteContext(tenant_id=row.tenant_id, user_id=row.user_id, settings=parts.settings,
                           session_id=row.session_id, source=Source.USER, explicit=False, formation=True,
                           model=self.model if parts.settings.llm_extract else None)
        stored = parts.store.get(row.tenant_id, row.user_id, row.memory_ids)
        added = self._extracted(row, turn.user, ctx, list(stored.values()))
        statements = [r for r in (stored.get(i) for i in row.memory_ids)
                      if r is not None and r.status is Status.ACTIVE and r.key is None
                      and r.type is not MemoryType.EPISODIC and r.source is Source.USER]
        by, decisions = "rules", []
        if statements:
            candidates = candidates_for(parts, statements)
            model = self.model
            counters = getattr(model, "stats", None)
            asked, unreachable = _calls(counters), _calls(counters, "http")
            found = parts.hooks.reconcile(statements, candidates, turn, ctx, model)
            if found is not None:
                by, decisions = found
            calls = _calls(counters) - asked
            if calls and _calls(counters, "http") - unreachable == calls \
                    and time.time() - row.queued_at < MODEL_WAIT_S:
                raise _ModelDown(f"the model cannot be reached; turns wait for it (at most {MODEL_WAIT_S:.0f} s, "
                                 "then the rules form them)")
            if model is not None and (by == MODEL_RECONCILER or _calls(counters) > asked):
                with self._cond:  # the model was asked: its answer counts, or the rules decided instead
                    self._by_model += 1
                    self._fallbacks += by != MODEL_RECONCILER
            by_id = {s.memory_id: s for s in statements}
            checked = [(d, check(parts, d, by_id, candidates, turn, ctx)) for d in decisions]
        else:
            checked = []
        with parts.lock:
            if self._left:  # ``stop`` stopped waiting: the next open forms the turn
                return 0
            applied = apply(parts, row.tenant_id, row.user_id, checked, by)
            result = {"by": by, "decisions": applied.counts, "statements": len(statements),
                      **({"added": len(added)} if added else {})}
            try:
                formed = self._commit(row, applied, by, result, added)
            except _Gone:
                return 0  # erased, or formed by another worker meanwhile: nothing of this round stays
            # the index follows what was committed, never the other way round
            index_now(parts, applied.changed)
        with self._cond:
            self._refused += applied.counts.get("refused", 0)
        return int(formed)

    def _commit(self, row: queue.QueuedTurn, applied: Applied, by: str, result: dict[str, Any],
                added: Sequence[MemoryRecord]) -> bool:
        """The statements the extractor added, the decisions, their audit rows and the turn's formed mark in
        one transaction; ``_Gone`` (rolled back) when the turn is no longer queued."""
        parts = self._parts
        try:
            with parts.store.transaction() as conn:
                stage(parts, conn, added)
                applied.superseded.write(parts, conn, set())
                for r in applied.restored:
                    parts.store.update_fields(conn, [r.memory_id], reindex=False, status=r.status.value,
                                              superseded_by=r.superseded_by, supersedes=r.supersedes,
                                              metadata=r.metadata, updated_at=time.time())
                parts.store.audit_many(conn, applied.audit + [
                    {"action": "restore", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
                     "detail": {"by": by, "reason": "the reconciler kept it beside the new statement"}}
                    for r in applied.restored if r.status is Status.ACTIVE and r.memory_id not in row.memory_ids])
                if not queue.mark_formed(conn, row.pk, result):
                    raise _Gone
        except BaseException:
            parts.outbox.forget([r.memory_id for r in added])  # as ``write.save.commit`` does
            raise
        return True

    def _extracted(self, row: queue.QueuedTurn, text: str, ctx: WriteContext,
                   wrote: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Ask the extract hook once for the turn (a model extractor answers only with ``formation``) and
        draft the statements whose clause the turn's memories do not hold, where the rules read the
        clause as a statement (a model's word does not make a question a fact). They go through the
        write path (guard, redaction; the indexer's rule pass after ``_commit``, which writes them with
        the turn's formed mark, so a turn formed again writes them once)."""
        parts = self._parts
        found = parts.hooks.extract_by(text, ctx)
        if found is None or found[0] == "rule_extractor" or not found[1].statements:
            return []
        rules = WriteContext(tenant_id=row.tenant_id, user_id=row.user_id, settings=parts.settings,
                             session_id=row.session_id, source=Source.USER, explicit=False)
        drafts = []
        for clause in dict.fromkeys(st.text for st in found[1].statements if st.text):
            if any(same_passage(clause, r.content) for r in wrote) or not same_passage(clause, text):
                continue
            reading = parts.hooks.extract(clause, rules)
            if reading is not None and reading.utterances and not any(a == "statement" for _, a in reading.utterances):
                continue
            drafts.append(MemoryDraft(content=clause[: parts.settings.max_content_chars], type=MemoryType.SEMANTIC,
                                      session_id=row.session_id, created_at=formation_turn(row.turn, "").created_at,
                                      metadata={"trigger": f"formed by {found[0]}"}))
        return drafted(parts, drafts, user_id=row.user_id, tenant_id=row.tenant_id, explicit=False) if drafts else []
