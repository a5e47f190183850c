"""The JSON forms the HTTP API speaks, shared by ``portamem serve`` and ``RemoteMemory``.

Records, hits, turns, explanations, audit findings and maintenance reports go out with ``dump_*``
and come back as the same Python objects with ``load_*``, and a typed error travels as
``{"error": {"type": "NotFoundError", "message": ...}}`` with an HTTP status from ``STATUS``, so a
client re-raises the very ``portamem.errors`` class the server raised.
"""

from __future__ import annotations

import dataclasses

from typing import Any

from .. import errors
from ..lifecycle.audit import AuditFinding
from ..lifecycle.explain import Explanation, Retrieval
from ..lifecycle.maintenance import MaintenanceReport
from ..read.candidates import Candidate
from ..read.trace import TraceEntry
from ..records import MemoryRecord, ScoreBreakdown, SearchHit, Turn, from_iso, to_iso

__all__ = [
    "STATUS",
    "status_for",
    "error_body",
    "raise_error",
    "dump_record",
    "load_record",
    "dump_hit",
    "load_hit",
    "dump_turn",
    "load_turn",
    "load_explanation",
    "dump_finding",
    "load_finding",
    "dump_report",
    "load_report",
    "dump_history",
    "load_history",
    "dump_trace",
    "load_trace",
]

#: HTTP status of each error class; a subclass takes its nearest listed ancestor's
STATUS: dict[type[errors.PortamemError], int] = {
    errors.PayloadTooLargeError: 413,
    errors.HostNotAllowedError: 421,
    errors.ValidationError: 422,
    errors.ConfigError: 422,
    errors.VaultError: 422,
    errors.NotFoundError: 404,
    errors.AuthenticationError: 401,
    errors.PermissionDeniedError: 403,
    errors.OverloadedError: 429,
    errors.StoreLockedError: 503,
    errors.StoreError: 503,
    errors.EmbeddingModelMismatchError: 409,
    errors.PortamemError: 500,
}


def status_for(exc: errors.PortamemError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]  # type: ignore[index]
    return 500


def error_body(exc: BaseException) -> dict[str, Any]:
    """The stable error body: the class name (a ``portamem.errors`` one, or ``PortamemError``) and the message."""
    name = type(exc).__name__ if isinstance(exc, errors.PortamemError) else "PortamemError"
    if name not in errors.__all__:
        name = next(c.__name__ for c in type(exc).__mro__ if c.__name__ in errors.__all__)
    return {"error": {"type": name, "message": str(exc) or name}}


def raise_error(status: int, body: Any) -> None:
    """Raise the ``portamem.errors`` class a server error body names (``PortamemError`` when it names none)."""
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        raise errors.StoreError(f"server answered HTTP {status} without an error body: {str(body)[:300]}")
    name, message = str(detail.get("type", "")), str(detail.get("message", ""))
    cls = getattr(errors, name, None) if name in errors.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, errors.PortamemError)):
        cls = errors.PortamemError
    exc = cls.__new__(cls)  # PluginError and FrameworkNotInstalledError build their message themselves
    Exception.__init__(exc, message)
    raise exc


# ---------------------------------------------------------------------- records and hits
def dump_record(record: MemoryRecord, *, embedding: bool = False) -> dict[str, Any]:
    return record.to_dict(include_embedding=embedding)


_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(MemoryRecord))


def load_record(data: dict[str, Any]) -> MemoryRecord:
    """A record as ``dump_record`` sent it; one from a server without storage tiers (no ``tier`` or
    ``tiered_at``) is hot, never moved, and fields a newer server added are left out (a client keeps
    working against a server one release ahead)."""
    data = {k: v for k, v in data.items() if k in _RECORD_FIELDS and not (k == "tier" and v is None)}
    return MemoryRecord.from_dict(data)


def dump_hit(hit: SearchHit) -> dict[str, Any]:
    return {
        "record": dump_record(hit.record),
        "score": hit.score,
        "breakdown": {"final": hit.breakdown.final, "components": dict(hit.breakdown.components),
                      "weights": dict(hit.breakdown.weights)},
        "found_by": list(hit.found_by),
        "conflicts_with": list(hit.conflicts_with),
        **({"replaces": [list(r) for r in hit.replaces]} if hit.replaces else {}),
    }


def load_hit(data: dict[str, Any]) -> SearchHit:
    b = data["breakdown"]
    return SearchHit(
        record=load_record(data["record"]),
        score=float(data["score"]),
        breakdown=ScoreBreakdown(final=float(b["final"]), components=dict(b["components"]), weights=dict(b["weights"])),
        found_by=tuple(data["found_by"]),
        conflicts_with=tuple(data.get("conflicts_with", ())),
        replaces=tuple((str(text), str(at)) for text, at in data.get("replaces", ())),
    )


def dump_turn(turn: Turn) -> dict[str, Any]:
    return {"user": turn.user, "assistant": turn.assistant, "created_at": to_iso(turn.created_at),
            "metadata": turn.metadata, "seq": turn.seq}


def load_turn(data: dict[str, Any]) -> Turn:
    return Turn(user=data["user"], assistant=data["assistant"], created_at=from_iso(data["created_at"]),  # type: ignore[arg-type]
                metadata=dict(data.get("metadata") or {}), seq=int(data.get("seq") or 0))


# ---------------------------------------------------------------------- history, explanations, audit, maintenance
def dump_history(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "ts": to_iso(r["ts"])} for r in rows]


def load_history(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "ts": from_iso(r["ts"])} for r in rows]


def load_explanation(data: dict[str, Any]) -> Explanation:
    """An ``Explanation`` from the JSON ``Explanation.to_dict`` gives plus the record (``"record"``)."""
    return Explanation(
        record=load_record(data["record"]),
        written_at=from_iso(data["written_at"]),  # type: ignore[arg-type]
        written_by=data["written_by"],
        session_id=data.get("session_id"),
        turns=list(data.get("turns") or []),
        guard=data.get("guard"),
        trust_note=data.get("trust_note"),
        redactions=list(data.get("redactions") or []),
        history=load_history(list(data.get("history") or [])),
        retrievals=[Retrieval(from_iso(x["at"]), x["query"], int(x["rank"]), float(x["score"]), x["search_id"])  # type: ignore[arg-type]
                    for x in data.get("retrievals") or []],
    )


def dump_finding(finding: AuditFinding) -> dict[str, Any]:
    return {"record": dump_record(finding.record), "reasons": list(finding.reasons)}


def load_finding(data: dict[str, Any]) -> AuditFinding:
    return AuditFinding(load_record(data["record"]), list(data["reasons"]))


def dump_report(report: MaintenanceReport) -> dict[str, Any]:
    return {"evicted": list(report.evicted), "purged": report.purged,
            "consolidated": [[kept, list(merged)] for kept, merged in report.consolidated],
            "abstracted": list(report.abstracted),
            "tiered": {tier: list(ids) for tier, ids in report.tiered.items()}}


def load_report(data: dict[str, Any]) -> MaintenanceReport:
    """A report as ``dump_report`` sent it; an older server's lacks ``abstracted`` and ``tiered`` (empty)."""
    return MaintenanceReport(evicted=list(data["evicted"]), purged=int(data["purged"]),
                             consolidated=[(k, list(m)) for k, m in data["consolidated"]],
                             abstracted=list(data.get("abstracted") or []),
                             tiered={str(t): list(ids) for t, ids in (data.get("tiered") or {}).items()})


# ---------------------------------------------------------------------- a search's candidate table
def dump_trace(entry: TraceEntry) -> dict[str, Any]:
    """One candidate of a search as ``search_memory(trace=...)`` collects it (its vector left out)."""
    c = entry.candidate
    return {"memory_id": c.memory_id, "components": dict(c.components), "found_by": sorted(c.found_by),
            "raw": dict(c.raw), "unknown_entities": c.unknown_entities,
            "unknown_asked": c.unknown_asked,
            "record": None if c.record is None else dump_record(c.record),
            "final": entry.final, "fate": entry.fate, "rank": entry.rank}


def load_trace(data: dict[str, Any]) -> TraceEntry:
    record = data.get("record")
    candidate = Candidate(memory_id=str(data["memory_id"]), components=dict(data["components"]),
                          found_by=set(data["found_by"]), record=None if record is None else load_record(record),
                          raw=dict(data.get("raw") or {}), unknown_entities=float(data.get("unknown_entities", 0.0)),
                          unknown_asked=float(data.get("unknown_asked", 0.0)))
    return TraceEntry(candidate=candidate, final=float(data["final"]), fate=str(data["fate"]), rank=data.get("rank"))
