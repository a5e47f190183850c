"""Portable export/import of memory as JSON lines: another install reads it back identically."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .errors import ImportFormatError, ValidationError
from .filters import SearchFilters
from .records import MemoryRecord, Status, Turn, utcnow

if TYPE_CHECKING:
    from .memory import Memory, ProgressFactory

__all__ = ["export_jsonl", "import_jsonl", "parse_export", "EXPORT_FORMAT", "EXPORT_VERSION"]

EXPORT_FORMAT = "portamem-export"
EXPORT_VERSION = 1


def export_jsonl(
    mem: Memory,
    fp: IO[str] | str | Path,
    *,
    user_id: str | None = None,
    include_embeddings: bool = True,
    include_deleted: bool = False,
    tenant_id: str | None = None,
) -> int:
    """Write memories (one user's, or the tenant's) and their working windows as JSON lines."""
    mem._check_open()
    tenant_id = mem._check_id("tenant_id", tenant_id or mem.tenant_id)
    if user_id is not None:
        user_id = mem._check_id("user_id", user_id)
    if isinstance(fp, (str, Path)):
        with open(fp, "w", encoding="utf-8") as handle:
            return export_jsonl(mem, handle, user_id=user_id, include_embeddings=include_embeddings,
                               include_deleted=include_deleted, tenant_id=tenant_id)
    statuses = tuple(Status) if include_deleted else (Status.ACTIVE, Status.PENDING, Status.QUARANTINED)
    records = mem.store.list(tenant_id, user_id, SearchFilters(statuses=statuses))
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "tenant_id": tenant_id,
        "user_id": user_id,
        "embedding_model": mem.embedder.name,
        "embedding_dim": mem.embedder.dim,
        "exported_at": utcnow().isoformat(),
        "records": len(records),
    }
    fp.write(json.dumps(header, ensure_ascii=False) + "\n")
    sessions: set[tuple[str, str]] = set()
    for r in records:
        fp.write(json.dumps({"record": r.to_dict(include_embedding=include_embeddings)}, ensure_ascii=False) + "\n")
        sessions.add((r.user_id, r.session_id or "default"))
    for uid in sorted({u for u, _ in sessions} | ({user_id} if user_id else set())):
        for sid in mem.store.session_ids(tenant_id, uid):
            for t in mem.store.turns(tenant_id, uid, sid):
                fp.write(json.dumps({"turn": {
                    "tenant_id": tenant_id, "user_id": uid, "session_id": sid, "user": t.user,
                    "assistant": t.assistant, "created_at": t.created_at.isoformat(), "metadata": t.metadata,
                }}, ensure_ascii=False) + "\n")
    return len(records)


def import_jsonl(
    mem: Memory,
    fp: IO[str] | str | Path,
    *,
    tenant_id: str | None = None,
    on_conflict: str = "error",
    progress: ProgressFactory | None = None,
) -> int:
    """Read an export back (all or nothing). Vectors of another model are recomputed with this one.

    ``on_conflict``: ``"error"`` (an id already here aborts the import), ``"skip"`` or ``"replace"``.
    """
    mem._check_open()
    if on_conflict not in {"error", "skip", "replace"}:
        raise ValidationError("on_conflict must be 'error', 'skip' or 'replace'")
    if isinstance(fp, (str, Path)):
        try:
            with open(fp, encoding="utf-8") as handle:
                return import_jsonl(mem, handle, tenant_id=tenant_id, on_conflict=on_conflict, progress=progress)
        except OSError as exc:
            raise ImportFormatError(f"cannot read {fp}: {exc}") from exc
    records, turns = parse_export(mem, fp, tenant_id)
    with mem._lock:
        existing = {r.memory_id for r in records if mem.store.find_owner(r.memory_id) is not None}
        if existing and on_conflict == "error":
            raise ImportFormatError(
                f"{len(existing)} memory ids already exist (e.g. {sorted(existing)[0]}); "
                "use on_conflict='skip' or 'replace'"
            )
        if on_conflict == "skip":
            records = [r for r in records if r.memory_id not in existing]
        bar = progress(len(records), "import") if progress else None
        for start in range(0, len(records), 256):
            mem._attach_embeddings(records[start:start + 256])
            if bar is not None:
                bar.update(len(records[start:start + 256]))
        if bar is not None:
            bar.close()
        with mem.store.transaction() as conn:
            if on_conflict == "replace" and existing:
                mem.store.purge(conn, sorted(existing))
            mem.store.insert(conn, records)
            for scope, turn in turns:
                mem.store.add_turn(conn, *scope, turn)
            mem.store.audit_many(
                conn,
                [{"action": "import", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id}
                 for r in records],
            )
        if existing and on_conflict == "replace":
            mem.index.delete(sorted(existing))
        mem._index_records(records)
    return len(records)


def parse_export(
    mem: Memory, fp: IO[str], tenant_id: str | None
) -> tuple[list[MemoryRecord], list[tuple[tuple[str, str, str], Turn]]]:
    records: list[MemoryRecord] = []
    turns: list[tuple[tuple[str, str, str], Turn]] = []
    header: dict[str, Any] | None = None
    for lineno, line in enumerate(fp, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"line {lineno}: not JSON ({exc.msg}); nothing was imported") from exc
        if header is None:
            if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
                raise ImportFormatError(f"line 1 is not a {EXPORT_FORMAT} header; nothing was imported")
            if obj.get("version") != EXPORT_VERSION:
                raise ImportFormatError(f"export version {obj.get('version')} is not supported")
            header = obj
            continue
        try:
            if "record" in obj:
                data = dict(obj["record"])
                if tenant_id is not None:
                    data["tenant_id"] = tenant_id
                rec = MemoryRecord.from_dict(data)
                mem._check_id("user_id", rec.user_id)
                mem._check_id("tenant_id", rec.tenant_id)
                mem._check_id("memory_id", rec.memory_id)
                mem._check_content(rec.content)
                if rec.embedding is not None and rec.embedding_model == mem.embedder.name:
                    if len(rec.embedding) != mem.embedder.dim:
                        raise ValueError(f"embedding has {len(rec.embedding)} dimensions, not {mem.embedder.dim}")
                else:
                    rec.embedding = None  # another model's vector: recomputed with ours
                records.append(rec)
            elif "turn" in obj:
                t = obj["turn"]
                scope = (tenant_id or t["tenant_id"], t["user_id"], t["session_id"])
                for name, value in zip(("tenant_id", "user_id", "session_id"), scope):
                    mem._check_id(name, value)
                turns.append((scope, Turn(t["user"], t["assistant"],
                                          datetime.fromisoformat(t["created_at"]), dict(t["metadata"]))))
            else:
                raise ValueError("expected a 'record' or a 'turn' object")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(f"line {lineno}: {exc}; nothing was imported") from exc
    if header is None:
        raise ImportFormatError("empty export file; nothing was imported")
    ids = [r.memory_id for r in records]
    if len(set(ids)) != len(ids):
        raise ImportFormatError("the file repeats a memory id; nothing was imported")
    return records, turns
