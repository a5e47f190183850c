"""Storage tiers: hot (vector index and read replica), warm (keyword and entity indexes, the vector on
disk), cold (out of the record store's tables, in the compressed archive).

Maintenance plans the moves from age, use and kind (``plan``): a memory unused for
``Settings.warm_after_days`` (or its half-life, when longer) goes warm, one unused for
``cold_after_days`` (or three half-lives) and rarely used (``cold_max_access``) goes cold; a warm
memory used since its move comes back hot. Identity,
preferences, keyed and abstract memories and the user's current statements (``portamem.language.statements``:
"the budget is 12000 now") stay hot by age alone: archiving a six-month-old preference is how an
agent "forgets" it. A memory an abstract one stands for (``abstracted_into``) goes warm once unused for
``tier_abstracted_days``. Every move is audited (action ``tier``) and reversible (``move`` to any tier;
the cold archive comes back whole).

May import: the data model, ``portamem.components``, storage, the background path's upkeep and the
lifecycle's abstraction.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..background.upkeep import index_now
from ..components import Components
from ..config import Settings
from ..errors import NotFoundError, ValidationError
from ..records import MemoryRecord, Status, Tier, utcnow
from ..language.statements import statements_of
from .abstraction import ABSTRACT_KEY, ABSTRACTED_INTO

__all__ = ["ColdLoader", "Move", "PINNED_KINDS", "plan", "move", "pinned", "last_use"]

log = logging.getLogger(__name__)

#: kinds that stay hot whatever their age (the memories that say who the user is and what they like)
PINNED_KINDS = frozenset({"identity", "preference"})

_ORDER = {Tier.HOT: 0, Tier.WARM: 1, Tier.COLD: 2}


@dataclass(frozen=True)
class Move:
    """One planned or made move: a memory, its tier before and after, and why."""

    memory_id: str
    source: Tier
    target: Tier
    reason: str


def pinned(record: MemoryRecord) -> bool:
    """A memory no age moves out of the hot tier: who the user is, what they like, a keyed or abstract
    memory, and a current statement of an attribute ("the guest list is 95 now": the value a question
    months later asks for, found by its meaning rather than its words)."""
    return record.kind in PINNED_KINDS or record.key is not None or ABSTRACT_KEY in record.metadata \
        or bool(statements_of(record))


def last_use(record: MemoryRecord) -> datetime:
    """When the memory was last written or changed (a promotion to long-term memory, a refresh), read,
    or moved up a tier."""
    times = [record.created_at, record.updated_at, record.last_accessed_at]
    if record.tier is Tier.HOT and record.tiered_at is not None:
        times.append(record.tiered_at)
    return max(t for t in times if t is not None)


def plan(records: Sequence[MemoryRecord], now: datetime, settings: Settings) -> list[Move]:
    """The moves maintenance makes among one user's active hot and warm memories."""
    s = settings
    warm_after = timedelta(days=s.warm_after_days)
    cold_after = timedelta(days=s.cold_after_days)
    abstracted_after = timedelta(days=s.tier_abstracted_days)
    moves: list[Move] = []
    for r in records:
        if r.status is not Status.ACTIVE or r.tier is Tier.COLD:
            continue
        if r.tier is Tier.WARM and r.tiered_at is not None and r.last_accessed_at is not None \
                and r.last_accessed_at > r.tiered_at:
            moves.append(Move(r.memory_id, Tier.WARM, Tier.HOT, "used since it went warm"))
            continue
        idle = now - last_use(r)
        # a kind that decays slowly stays hot as long: a fact (half-life 90 days) for 90 days unused
        half_life = timedelta(days=r.half_life_days)
        warm_at, cold_at = max(warm_after, half_life), max(cold_after, 3 * half_life)
        target, reason = r.tier, ""
        if ABSTRACTED_INTO in r.metadata and idle >= abstracted_after and not r.key:
            target, reason = Tier.WARM, "an abstract memory stands for it"
        if not pinned(r) and idle >= warm_at:
            target, reason = Tier.WARM, f"unused for {idle.days} days"
            if idle >= cold_at and r.access_count <= s.cold_max_access:
                target, reason = Tier.COLD, f"unused for {idle.days} days, used {r.access_count} times"
        if _ORDER[target] > _ORDER[r.tier]:
            moves.append(Move(r.memory_id, r.tier, target, reason))
    return moves


def move(parts: Components, tenant_id: str, user_id: str, memory_ids: Sequence[str], target: Tier, *,
         now: datetime, actor: str, reason: str | Mapping[str, str]) -> list[Move]:
    """Move memories of one user to ``target`` (the caller holds the store's lock); returns the moves
    made. Hot and warm rows change their tier in place (a warm row leaves the vector index and the
    replica); a cold one leaves the tables for the archive, and comes back whole."""
    ids = list(dict.fromkeys(memory_ids))
    rows = parts.store.get(tenant_id, user_id, ids)
    cold = {r.memory_id: r for r in parts.store.cold_records(tenant_id, user_id, [m for m in ids if m not in rows])}
    missing = [m for m in ids if m not in rows and m not in cold]
    if missing:
        raise NotFoundError(f"no memories {missing} for user {user_id!r} in tenant {tenant_id!r}; nothing moved")
    if target is Tier.COLD:
        keyed = [m for m, r in rows.items() if r.key is not None]
        if keyed:
            raise ValidationError(f"keyed memories stay in the record store (their key is looked up): {keyed}")
        # a forgotten row waits in the record store for its purge (or restore): the archive is never
        # where a deletion goes to outlive its grace period
        forgotten = [m for m, r in rows.items() if r.status is Status.DELETED]
        if forgotten:
            raise ValidationError(f"forgotten memories {forgotten} cannot be archived: they are purged after the "
                                  "grace period (restore_memory first to keep one)")
    else:  # an archived keyed memory (a store an older import filled) comes back only to a free key
        taken = [m for m, r in cold.items() if r.key is not None and parts.store.get_by_key(
            tenant_id, user_id, r.key_namespace or "", r.key) is not None]
        if taken:
            raise ValidationError(f"archived memories {taken} have a key another memory of the user holds now: "
                                  "forget that memory (or put this one's value under its key) first; nothing moved")
    why = (lambda m: reason) if isinstance(reason, str) else (lambda m: reason.get(m, ""))
    moves = [Move(m, (rows.get(m) or cold[m]).tier, target, why(m)) for m in ids
             if (rows.get(m) or cold[m]).tier is not target]
    if not moves:
        return []
    stamp = now.timestamp()
    changed = [rows[m.memory_id] for m in moves if m.memory_id in rows]
    back = [cold[m.memory_id] for m in moves if m.memory_id in cold]
    for r in changed + back:
        r.tier, r.tiered_at = target, now
    with parts.store.transaction() as conn:
        if target is Tier.COLD:
            parts.store.archive(conn, changed, archived_at=stamp)
        elif changed:
            # to hot: back through the outbox; to warm: out of the index below (``index_now`` marks it)
            parts.store.update_each(conn, [{"memory_id": r.memory_id, "tier": target.value, "tiered_at": stamp,
                                            **({"indexed": 0} if target is Tier.HOT else {})} for r in changed])
        if back:
            parts.store.unarchive(conn, tenant_id, user_id, [r.memory_id for r in back])
            parts.store.insert(conn, back, indexed=0 if target is Tier.HOT else 1)
        parts.store.audit_many(conn, [{"action": "tier", "tenant_id": tenant_id, "user_id": user_id,
                                       "memory_id": m.memory_id, "actor": actor,
                                       "detail": {"from": m.source.value, "to": m.target.value, "reason": m.reason}}
                                      for m in moves])
    if target is Tier.HOT:
        index_now(parts, changed + back)
    else:  # out of the vector index and the replica (a warm row's vector stays on disk)
        leaving = [m.memory_id for m in moves if m.source is Tier.HOT]
        if leaving:
            index_now(parts, [], deleted=leaving)
    return moves


class ColdLoader:
    """Brings cold memories a query named back to the hot tier in a background thread, so the next
    searches find them (the search that named them does not wait for the archive)."""

    def __init__(self, parts: Components) -> None:
        self.parts = parts
        self._queue: queue.Queue[tuple[str, str, list[str]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.loaded = 0

    def submit(self, tenant_id: str, user_id: str, memory_ids: list[str]) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="portamem-cold-loader", daemon=True)
                self._thread.start()
        self._queue.put((tenant_id, user_id, list(memory_ids)))

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                tenant_id, user_id, ids = item
                with self.parts.lock:
                    still = [r.memory_id for r in self.parts.store.cold_records(tenant_id, user_id, ids, vectors=False)]
                    if still:
                        moved = move(self.parts, tenant_id, user_id, still, Tier.HOT, now=utcnow(), actor="cold-load",
                                     reason="a query named what only the cold tier held")
                        self.loaded += len(moved)
            except Exception:  # noqa: BLE001 - the records stay cold and a later query asks again
                log.exception("loading cold memories failed; they stay in the archive")
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait for the loads submitted so far."""
        self._queue.join()

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
