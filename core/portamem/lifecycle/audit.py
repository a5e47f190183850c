"""Audit scan: memories whose weight rose sharply, that came from low-trust sources, or that wait for review.

A poisoning attempt that gets past the guard usually has to repeat itself or be reinforced to win
at retrieval, so the scan reads the audit log for weight that at least doubled within a window
(importance by ``refresh``, frequency by repeats and merges) and lists every low-trust or pending
memory beside them, each with its reasons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..filters import SearchFilters
from ..records import MemoryRecord, Status, Trust, to_iso

if TYPE_CHECKING:
    from ..storage.sql import RecordStore

__all__ = ["AuditFinding", "audit_scan", "sharp_rises"]

#: audit actions that report a memory's frequency after the event
_FREQUENCY_ACTIONS = ("dedupe", "confirm", "repeat")


@dataclass
class AuditFinding:
    """One memory to review, with every reason it was listed."""

    record: MemoryRecord
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        r = self.record
        return {"memory_id": r.memory_id, "user_id": r.user_id, "status": r.status.value, "source": r.source.value,
                "trust": r.trust.value, "importance": r.importance, "frequency": r.frequency,
                "created_at": to_iso(r.created_at), "content": r.content, "reasons": list(self.reasons)}


def _baseline(points: Sequence[tuple[datetime, float]], at: datetime) -> float:
    """The value a memory had at ``at``: the last point not after it, else its first known value."""
    before = [v for t, v in points if t <= at]
    return before[-1] if before else points[0][1]


def sharp_rises(
    events: Sequence[dict[str, Any]], *, window: timedelta, factor: float, min_importance_rise: float,
    min_frequency_rise: int, since: datetime | None = None,
) -> dict[str, list[str]]:
    """Memory id -> reasons, from audit rows (oldest first): a value at least ``factor`` times the one a window earlier."""
    importance: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    frequency: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for e in events:
        mid, ts, detail = e["memory_id"], e["ts"], e["detail"] or {}
        if mid is None:
            continue
        if e["action"] in ("save", "compress_turns", "import") and mid not in frequency:
            frequency[mid].append((ts, 1.0))
        elif e["action"] == "refresh" and "importance_after" in detail:
            if not importance[mid]:
                importance[mid].append((ts, float(detail["importance_before"])))
            importance[mid].append((ts, float(detail["importance_after"])))
        elif e["action"] in _FREQUENCY_ACTIONS and "frequency" in detail:
            frequency[mid].append((ts, float(detail["frequency"])))
    hours = window.total_seconds() / 3600
    out: dict[str, list[str]] = {}
    for name, series, min_rise, fmt in (("importance", importance, min_importance_rise, "{:.2f}"),
                                        ("frequency", frequency, min_frequency_rise, "{:.0f}")):
        for mid, points in series.items():
            best: tuple[float, float, datetime] | None = None
            for ts, value in points:
                if since is not None and ts < since:
                    continue
                base = _baseline(points, ts - window)
                rose = value - base >= min_rise and value >= factor * max(base, 1e-9)
                if rose and (best is None or value / max(base, 1e-9) > best[1] / max(best[0], 1e-9)):
                    best = (base, value, ts)
            if best is not None:
                base, value, ts = best
                out.setdefault(mid, []).append(
                    f"{name} rose from {fmt.format(base)} to {fmt.format(value)} within {hours:g} h "
                    f"(by {ts:%Y-%m-%d %H:%M})")
    return out


def audit_scan(
    store: RecordStore, *, tenant_id: str, user_id: str | None = None, since: datetime | None = None,
    window: timedelta = timedelta(days=1), factor: float = 2.0, min_importance_rise: float = 0.2,
    min_frequency_rise: int = 2, include_quarantined: bool = False,
) -> list[AuditFinding]:
    """Records to review: sharp weight rises, low-trust sources, pending (and, asked, quarantined) ones."""
    if factor <= 1.0 or window <= timedelta(0):
        raise ValidationError("factor must be > 1 and window positive")
    events = store.audit_events(tenant_id, user_id=user_id,
                                    actions=("save", "compress_turns", "import", "refresh", *_FREQUENCY_ACTIONS))
    rises = sharp_rises(events, window=window, factor=factor, min_importance_rise=min_importance_rise,
                        min_frequency_rise=min_frequency_rise, since=since)
    owners = {e["memory_id"]: e["user_id"] for e in events if e["memory_id"] in rises}
    found: dict[str, AuditFinding] = {}
    by_user: dict[str, list[str]] = defaultdict(list)
    for mid, uid in owners.items():
        by_user[uid].append(mid)
    for uid, ids in by_user.items():
        for mid, record in store.get(tenant_id, uid, ids).items():
            if record.status is not Status.DELETED:
                found[mid] = AuditFinding(record, list(rises[mid]))
    held = (Status.PENDING, Status.QUARANTINED) if include_quarantined else (Status.PENDING,)
    listed = {r.memory_id: r for r in store.list(
        tenant_id, user_id, SearchFilters(statuses=(Status.ACTIVE, Status.PENDING), trusts=(Trust.LOW,)))}
    listed.update((r.memory_id, r) for r in store.list(tenant_id, user_id, SearchFilters(statuses=held)))
    for record in listed.values():
        reasons = []
        if record.trust is Trust.LOW:
            reasons.append(f"low-trust source ({record.source.value})")
        if record.status is Status.PENDING:
            note = record.metadata.get("trust") or record.metadata.get("guard") or {}
            reasons.append(f"pending: {note.get('reason', 'awaits confirmation')}")
        if record.status is Status.QUARANTINED:
            reasons.append(f"quarantined: {record.metadata.get('guard', {}).get('reason', '')}")
        if reasons:
            found.setdefault(record.memory_id, AuditFinding(record)).reasons.extend(reasons)
    return sorted(found.values(), key=lambda f: (-len(f.reasons), f.record.created_at))
