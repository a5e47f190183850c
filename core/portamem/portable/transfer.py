"""Portable export/import of memory as JSON lines: another install reads it back identically.

Format (version 2): a header line, one line per record and per window turn, and a trailer line
``{"trailer": {"records": N, "turns": M, "sha256": H}}`` where H is the SHA-256 of every byte before
the trailer. An export to a path goes to a temporary file in the same directory, is fsynced and
renamed over the target only when complete, so a crash never replaces a good backup.

An import is all or nothing: a file whose counts or checksum disagree, that lacks its trailer, holds
invalid UTF-8 or a bad line is refused whole with ``ImportFormatError``. Version 1 files (no trailer)
are accepted when their record count matches the header's (they carry no checksum, so an edited
line or a cut among the turns goes unnoticed). Every imported record goes through the guard and PII
redaction again. Its ``source``, ``trust`` and ``status`` are the file's only in a trusted restore
(``trusted=True``); otherwise the file may hold a record back (pending, quarantined, deleted, lower
trust, the web source) but never release or raise one, and the metadata keys the write path owns
(``portamem.write.validation.RESERVED_METADATA_KEYS``: guard verdicts, redactions and sealed
originals, trust notes, how a memory was written) are dropped, not believed; a trusted restore keeps
them as the file has them (the guard and redaction still run again and add their own). A record whose id another
scope holds (another tenant, user, or agent of the user: ``portamem.write.scope``) is given a fresh id
derived from its owner and the file's id (kept in ``metadata["imported_id"]``); the other scope's record
is neither touched nor reported. Only a record's own scope meets ``on_conflict``, its cold records too,
so an export read back into its scope keeps every id.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from ..background.upkeep import index_now
from ..components import Components
from ..errors import ImportFormatError, PermissionDeniedError, PortamemError, StoreError, ValidationError
from ..filters import SearchFilters
from ..records import DEFAULT_TRUST, IMPORTED_ID_KEY, TRUST_RANK, MemoryRecord, Source, Status, Tier, Turn, from_iso, \
    utcnow
from ..write import validation as check
from ..write.privacy import redact_turn
from ..write.save import screen, stricter, write_context
from ..write.scope import same_scope
from ..write.validation import ProgressFactory, check_key, join_namespace

__all__ = ["export_jsonl", "export_lines", "import_jsonl", "parse_export", "EXPORT_FORMAT", "EXPORT_VERSION", "IMPORTED_ID_KEY"]

EXPORT_FORMAT = "portamem-export"
EXPORT_VERSION = 2
#: ``IMPORTED_ID_KEY`` (``portamem.records``): metadata key holding the file's id of a record that was given a
#: fresh one on import
_CONFLICTS = ("error", "skip", "replace")


# ---------------------------------------------------------------------------- export
def export_jsonl(
    parts: Components,
    fp: IO[str] | str | Path,
    *,
    user_id: str | None = None,
    include_embeddings: bool = True,
    include_deleted: bool = False,
    tenant_id: str | None = None,
) -> int:
    """Write memories (one user's, or the tenant's) and their working windows as JSON lines.

    To a path, atomically (temporary file, fsync, rename); to a stream, line by line.
    """
    tenant_id = check.check_tenant(parts.settings, tenant_id, parts.tenant_id)
    user_id = check.check_id(parts.settings, "user_id", user_id, optional=True)
    include_embeddings = check.check_flag("include_embeddings", include_embeddings)
    include_deleted = check.check_flag("include_deleted", include_deleted)
    if isinstance(fp, str) and not fp.strip():
        raise ValidationError("export needs a file path, got an empty string")
    if isinstance(fp, (str, Path)) and "\x00" in str(fp):
        raise ValidationError("an export path cannot hold a NUL character")
    if not isinstance(fp, (str, Path)) and not callable(getattr(fp, "write", None)):
        raise ValidationError(f"export needs a path or a text stream, got {type(fp).__name__}")
    records, lines = _export_lines(parts, tenant_id, user_id, include_embeddings, include_deleted)
    if isinstance(fp, (str, Path)):
        _write_atomically(Path(fp), lines)
    else:
        for line, _ in lines:
            fp.write(line)
    return records


def _export_lines(
    parts: Components, tenant_id: str, user_id: str | None, include_embeddings: bool, include_deleted: bool
) -> tuple[int, Iterator[tuple[str, bytes]]]:
    statuses = tuple(Status) if include_deleted else (Status.ACTIVE, Status.PENDING, Status.QUARANTINED)
    records = parts.store.list(tenant_id, user_id, SearchFilters(statuses=statuses))
    # the cold tier travels too, marked cold (an import puts it back in the archive)
    records += [r for r in parts.store.cold_records(tenant_id, user_id) if r.status in statuses]
    owners = sorted({r.user_id for r in records} | ({user_id} if user_id else set()))
    turns = [{"tenant_id": tenant_id, "user_id": uid, "session_id": sid, "user": t.user, "assistant": t.assistant,
              "created_at": t.created_at.isoformat(), "metadata": t.metadata}
             for uid in owners for sid in parts.store.session_ids(tenant_id, uid)
             for t in parts.store.turns(tenant_id, uid, sid)]
    header = {"tenant_id": tenant_id, "user_id": user_id, "embedding_model": parts.embedder.name,
              "embedding_dim": parts.embedder.dim, "exported_at": utcnow().isoformat()}
    return len(records), _encoded(header, (r.to_dict(include_embedding=include_embeddings) for r in records),
                                  len(records), turns)


def export_lines(
    header: Mapping[str, Any], records: Sequence[Mapping[str, Any]], turns: Sequence[Mapping[str, Any]] = ()
) -> Iterator[str]:
    """The lines of a version-2 export: ``header`` (format, version and counts filled in), one line per
    record (``MemoryRecord.to_dict`` form) and per turn, then the trailer that counts and hashes them."""
    return (line for line, _ in _encoded(header, records, len(records), turns))


def _encoded(
    header: Mapping[str, Any], records: Iterable[Mapping[str, Any]], n_records: int, turns: Sequence[Mapping[str, Any]]
) -> Iterator[tuple[str, bytes]]:
    """Each line as text and as the UTF-8 bytes the trailer's checksum covers."""
    head = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, **header, "records": n_records, "turns": len(turns)}
    objects = itertools.chain([head], ({"record": r} for r in records), ({"turn": t} for t in turns))
    digest = hashlib.sha256()
    for obj in objects:
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError as exc:
            what = obj["record"].get("memory_id") if "record" in obj else "a window turn"
            raise StoreError(f"cannot export: {what} holds text that is not valid Unicode ({exc.reason}); "
                             "nothing was replaced") from exc
        digest.update(data)
        yield line, data
    trailer = json.dumps({"trailer": {"records": n_records, "turns": len(turns), "sha256": digest.hexdigest()}}) + "\n"
    yield trailer, trailer.encode("utf-8")


def _write_atomically(path: Path, lines: Iterable[tuple[str, bytes]]) -> None:
    """Write to a temporary file beside ``path``, fsync it and rename it over ``path`` when complete."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise StoreError(f"cannot write an export into {directory}: {exc}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            for _, data in lines:
                out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write the export {path}: {exc}") from exc
        raise
    try:  # the rename itself survives power loss once the directory is synced
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------------------- import
def import_jsonl(
    parts: Components,
    fp: IO[str] | IO[bytes] | str | Path,
    *,
    tenant_id: str | None = None,
    on_conflict: str = "error",
    progress: ProgressFactory | None = None,
    trusted: bool = False,
) -> int:
    """Read an export back (all or nothing). Vectors of another model are recomputed with this one.

    ``on_conflict`` decides about an id or key the record's own scope (tenant, user and agent) already
    holds: ``"error"`` aborts the import, ``"skip"`` keeps the stored record, ``"replace"`` replaces it
    (``_settle_ids``: another scope's record is never replaced). ``trusted`` marks a
    restore of one's own backup: the file's source, trust and status are kept (guard and redaction
    still apply).
    """
    if on_conflict not in _CONFLICTS:
        raise ValidationError("on_conflict must be 'error', 'skip' or 'replace'")
    tenant_id = check.check_id(parts.settings, "tenant_id", tenant_id, optional=True)
    progress = check.check_progress(progress)
    trusted = check.check_flag("trusted", trusted)
    if isinstance(fp, (str, Path)):
        try:
            handle = open(fp, "rb")
        except (OSError, ValueError) as exc:  # ValueError: a path with a NUL in it
            raise ImportFormatError(f"cannot read {fp!r}: {exc}") from exc
        with handle:
            try:
                records, turns = parse_export(parts, handle, tenant_id, trusted=trusted)
            except OSError as exc:
                raise ImportFormatError(f"cannot read {fp!r}: {exc}") from exc
    elif callable(getattr(fp, "readline", None)):
        records, turns = parse_export(parts, fp, tenant_id, trusted=trusted)
    else:
        raise ValidationError(f"import needs a path or a stream, got {type(fp).__name__}")
    for r in records:
        _into_tables_if_unarchivable(r)
    with parts.lock:
        records, replaced = _settle_ids(parts, records, on_conflict)
        bar = check.SafeProgress(progress, len(records), "import")
        for start in range(0, len(records), 256):
            parts.attach_embeddings(records[start:start + 256])
            bar.update(len(records[start:start + 256]))
        bar.close()
        with parts.store.transaction() as conn:
            for (tenant, user), ids in replaced.items():
                parts.store.purge(conn, ids, tenant_id=tenant, user_id=user)
            parts.store.insert(conn, [r for r in records if r.tier is not Tier.COLD])
            parts.store.archive(conn, [r for r in records if r.tier is Tier.COLD], archived_at=utcnow().timestamp())
            for scope, turn in turns:
                parts.store.add_turn(conn, *scope, turn)
            parts.store.audit_many(
                conn,
                [{"action": "import", "tenant_id": r.tenant_id, "user_id": r.user_id, "memory_id": r.memory_id,
                  "detail": {"trusted": trusted, "status": r.status.value,
                             **({IMPORTED_ID_KEY: r.metadata[IMPORTED_ID_KEY]}
                                if IMPORTED_ID_KEY in r.metadata else {})}}
                 for r in records],
            )
        gone = sorted(m for ids in replaced.values() for m in ids)
        if gone:
            index_now(parts, [], deleted=gone)
        index_now(parts, records)
    return len(records)


def _into_tables_if_unarchivable(record: MemoryRecord) -> None:
    """A record the file marks cold that the archive does not hold (``portamem.lifecycle.tiers.move``
    never puts one there) comes back into the tables: a keyed memory to the hot tier (its key is looked
    up there, and it is pinned), a forgotten one to the warm tier (it waits there for its purge, out of
    the vector index). A keyed record archived used to be invisible to ``get_by_key``, and a forgotten
    one aborted the whole import."""
    if record.tier is not Tier.COLD:
        return
    if record.key is not None:
        record.tier = Tier.HOT
    elif record.status is Status.DELETED:
        record.tier = Tier.WARM


def _derived_id(record: MemoryRecord, file_id: str, attempt: int) -> str:
    seed = "\x1f".join(("portamem-import", record.tenant_id, record.user_id, file_id, str(attempt)))
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]


def _held(parts: Components, records: Sequence[MemoryRecord]) -> dict[str, MemoryRecord]:
    """The stored records (hot, warm or cold) that the records' ids name among their own tenants' and users'."""
    by_owner: dict[tuple[str, str], list[str]] = {}
    for r in records:
        by_owner.setdefault((r.tenant_id, r.user_id), []).append(r.memory_id)
    held: dict[str, MemoryRecord] = {}
    for (tenant, user), ids in by_owner.items():
        held.update(parts.store.get(tenant, user, ids))
        held.update((c.memory_id, c) for c in parts.store.cold_records(tenant, user, ids, vectors=False))
    return held


def _settle_ids(
    parts: Components, records: list[MemoryRecord], on_conflict: str
) -> tuple[list[MemoryRecord], dict[tuple[str, str], list[str]]]:
    """Give every record an id free of other scopes; apply ``on_conflict`` to its own scope's ids and keys.

    A scope is a tenant, a user and an agent (``portamem.write.scope.same_scope``): an id another
    scope holds gets the record a fresh one, so an import never replaces another scope's record, while
    an export read back into its own scope keeps every id. Whether an id is held by another tenant or
    user never changes the outcome a caller can see beyond the fresh id itself: no error, no skip, no
    count. A key (one per user) held by another agent scope of the user cannot move aside: it is a
    conflict as any other, and ``"replace"`` refuses it (``PermissionDeniedError``).
    """
    pending = records
    for attempt in range(8):
        taken = parts.store.taken_ids([r.memory_id for r in pending])
        if not taken:
            break
        held = _held(parts, [r for r in pending if r.memory_id in taken])
        foreign = [r for r in pending if r.memory_id in taken
                   and not (r.memory_id in held and same_scope(r, held[r.memory_id]))]
        if not foreign:
            break
        for r in foreign:
            file_id = str(r.metadata.get(IMPORTED_ID_KEY, r.memory_id))
            r.metadata[IMPORTED_ID_KEY] = file_id
            r.memory_id = _derived_id(r, file_id, attempt)
        pending = foreign
    else:
        raise StoreError("could not find free ids for the imported records; nothing was imported")
    # the own scope's records each imported one would replace: the same id, or the same key
    clashes: dict[int, set[str]] = {}
    held = _held(parts, records)
    for r in records:
        ids = {r.memory_id} if r.memory_id in held else set()
        if r.key is not None:
            keyed = parts.store.get_by_key(r.tenant_id, r.user_id, r.key_namespace or "", r.key)
            if keyed is not None:
                if on_conflict == "replace" and not same_scope(r, keyed):
                    raise PermissionDeniedError(
                        f"key {r.key!r} (namespace {r.key_namespace!r}) of user {r.user_id!r} is held by "
                        f"{'the shared layer' if keyed.agent_id is None else 'agent ' + repr(keyed.agent_id)}, "
                        f"the imported record is {'shared' if r.agent_id is None else 'agent ' + repr(r.agent_id)}'s: "
                        "an import replaces records of their own scope only; nothing was imported")
                ids.add(keyed.memory_id)
        if ids:
            clashes[id(r)] = ids
    if clashes and on_conflict == "error":
        ids = sorted(m for v in clashes.values() for m in v)
        raise ImportFormatError(f"{len(ids)} memories already exist for their users (e.g. {ids[0]}, by id or key); "
                                "use on_conflict='skip' or 'replace'; nothing was imported")
    if on_conflict == "skip":
        return [r for r in records if id(r) not in clashes], {}
    replaced: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if id(r) in clashes:
            replaced.setdefault((r.tenant_id, r.user_id), []).extend(sorted(clashes[id(r)]))
    return records, replaced


def _lines(fp: Any) -> Iterator[bytes]:
    """The stream's lines as bytes; a text stream that cannot decode its file is an ImportFormatError."""
    lines = iter(fp)
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"the file is not UTF-8 ({exc.reason}); nothing was imported") from exc
        if isinstance(line, str):
            try:
                data = line.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ImportFormatError(f"the file holds text that is not valid Unicode ({exc.reason}); "
                                        "nothing was imported") from exc
            yield data
        elif isinstance(line, bytes):
            yield line
        else:
            raise ImportFormatError(f"the stream gave {type(line).__name__}, not lines of text; nothing was imported")


def parse_export(
    parts: Components, fp: IO[str] | IO[bytes] | Iterable[Any], tenant_id: str | None, *, trusted: bool = False,
) -> tuple[list[MemoryRecord], list[tuple[tuple[str, str, str], Turn]]]:
    """Every record and turn of an export, checked, guarded and redacted; ImportFormatError on any fault."""
    records: list[MemoryRecord] = []
    turns: list[tuple[tuple[str, str, str], Turn]] = []
    header: dict[str, Any] | None = None
    trailer: dict[str, Any] | None = None
    digest = hashlib.sha256()
    for lineno, raw in enumerate(_lines(fp), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"line {lineno}: not UTF-8 ({exc.reason}); nothing was imported") from exc
        if not line.strip():
            digest.update(raw)
            continue
        if trailer is not None:
            raise ImportFormatError(f"line {lineno}: data after the trailer; nothing was imported")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"line {lineno}: not JSON ({exc.msg}); nothing was imported") from exc
        if header is None:
            header = _header(obj)
            digest.update(raw)
            continue
        if not isinstance(obj, dict):
            raise ImportFormatError(f"line {lineno}: expected a JSON object; nothing was imported")
        if "trailer" in obj and header["version"] >= 2:
            trailer = obj["trailer"] if isinstance(obj["trailer"], dict) else {}
            continue
        digest.update(raw)
        try:
            if "record" in obj:
                records.append(_record(parts, obj["record"], tenant_id, trusted))
            elif "turn" in obj:
                turns.append(_turn(parts, obj["turn"], tenant_id))
            else:
                raise ValidationError("expected a 'record' or a 'turn' object")
        except (PortamemError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ImportFormatError(f"line {lineno}: {exc}; nothing was imported") from exc
    if header is None:
        raise ImportFormatError("empty export file; nothing was imported")
    _verify(header, trailer, digest.hexdigest(), len(records), len(turns))
    ids = [r.memory_id for r in records]
    if len(set(ids)) != len(ids):
        raise ImportFormatError("the file repeats a memory id; nothing was imported")
    keys = [(r.tenant_id, r.user_id, r.key_namespace, r.key) for r in records if r.key is not None]
    if len(set(keys)) != len(keys):
        raise ImportFormatError("the file repeats a key of one user; nothing was imported")
    return records, turns


def _header(obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"line 1 is not a {EXPORT_FORMAT} header; nothing was imported")
    if obj.get("version") not in (1, EXPORT_VERSION):
        raise ImportFormatError(f"export version {obj.get('version')!r} is not supported")
    return obj


def _verify(header: dict[str, Any], trailer: dict[str, Any] | None, digest: str, records: int, turns: int) -> None:
    claimed = header.get("records")
    if header["version"] == 1:
        if claimed != records:
            raise ImportFormatError(f"the header claims {claimed!r} records but the file holds {records}: "
                                    "it is cut short or edited; nothing was imported")
        return
    if trailer is None:
        raise ImportFormatError("the export has no trailer: it is cut short; nothing was imported")
    if trailer.get("sha256") != digest:
        raise ImportFormatError("the export's checksum does not match its lines: it was edited or damaged; "
                                "nothing was imported")
    if not (claimed == trailer.get("records") == records and header.get("turns") == trailer.get("turns") == turns):
        raise ImportFormatError(f"the export claims {claimed!r} records and {header.get('turns')!r} turns but "
                                f"holds {records} and {turns}; nothing was imported")


def _record(parts: Components, raw: Any, tenant_id: str | None, trusted: bool) -> MemoryRecord:
    s = parts.settings
    if not isinstance(raw, dict):
        raise ValidationError("a record must be a JSON object")
    data = dict(raw)
    if tenant_id is not None:
        data["tenant_id"] = tenant_id
    rec = MemoryRecord.from_dict(data)
    for name in ("user_id", "tenant_id", "memory_id"):
        check.check_id(s, name, getattr(rec, name))
    for name in ("session_id", "agent_id", "supersedes", "superseded_by", "embedding_model", "embedding_version",
                 "kind"):
        check.check_id(s, name, getattr(rec, name), optional=True)
    check.check_opaque_ids(parts.hooks, s, rec.tenant_id, rec.user_id, session_id=rec.session_id,
                           agent_id=rec.agent_id)
    if rec.key is not None:
        rec.key = check_key(rec.key, max_chars=s.max_id_chars)
        rec.key_namespace = join_namespace(rec.key_namespace or ())
    elif rec.key_namespace:
        raise ValidationError("a key namespace without a key")
    check.check_content(s, rec.content)
    check.check_summary(s, rec.summary)
    rec.entities = check.check_entities(s, rec.entities) or []
    rec.metadata = check.check_json(s, "metadata", rec.metadata)
    if not trusted:  # the file's guard verdicts, sealed originals and notes are not taken on its word
        rec.metadata = check.check_provenance("metadata", rec.metadata, strip=True)
    if not isinstance(rec.triples, list) or not all(isinstance(t, list) for t in rec.triples):
        raise ValidationError("triples must be a list of lists of strings")
    for t in rec.triples:
        for part in t:
            check.check_text("a triple part", part, allow_blank=True, limit=s.max_entity_chars)
    check.check_unit("importance", rec.importance)
    check.check_int("importance_band", rec.importance_band, 1, 100)
    check.check_number("half_life_days", rec.half_life_days, 1e-9, 1e9)
    check.check_int("access_count", rec.access_count, 0)
    check.check_int("frequency", rec.frequency, 1)
    if rec.kind is not None and rec.kind not in s.half_lives:
        raise ValidationError(f"kind must be one of {sorted(s.half_lives)}, got {rec.kind!r}")
    for name in ("created_at", "updated_at", "last_accessed_at", "deleted_at", "tiered_at"):
        check.check_datetime(name, getattr(rec, name), optional=name not in ("created_at", "updated_at"))
    if not trusted:
        # the file may hold a record back, never release it or raise its trust
        rec.source = Source.WEB if rec.source is Source.WEB else Source.USER
        default = DEFAULT_TRUST[rec.source]
        rec.trust = rec.trust if TRUST_RANK[rec.trust] < TRUST_RANK[default] else default
        floor = Status.PENDING if TRUST_RANK[rec.trust] == 0 else Status.ACTIVE
        rec.status = stricter(rec.status, floor)
    before = rec.content
    screen(parts, rec, write_context(parts, rec, explicit=True))
    if rec.status is Status.DELETED and rec.deleted_at is None:
        rec.deleted_at = utcnow()
    if rec.embedding is not None and rec.embedding_model == parts.embedder.name and rec.content == before:
        if not isinstance(rec.embedding, list) or len(rec.embedding) != parts.embedder.dim or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in rec.embedding):
            raise ValidationError(f"embedding must be {parts.embedder.dim} finite numbers")
    else:
        rec.embedding = None  # another model's vector, or the text changed: recomputed with ours
    return rec


def _turn(parts: Components, raw: Any, tenant_id: str | None) -> tuple[tuple[str, str, str], Turn]:
    s = parts.settings
    if not isinstance(raw, dict):
        raise ValidationError("a turn must be a JSON object")
    scope = (tenant_id or raw["tenant_id"], raw["user_id"], raw["session_id"])
    for name, value in zip(("tenant_id", "user_id", "session_id"), scope):
        check.check_id(s, name, value)
    user, assistant, meta = check.check_turn(s, raw["user"], raw["assistant"], raw.get("metadata") or {})
    created = from_iso(raw["created_at"])
    if not isinstance(created, datetime):
        raise ValidationError("a turn needs its created_at time")
    check.check_opaque_ids(parts.hooks, s, scope[0], scope[1], session_id=scope[2])
    turn = Turn(user, assistant, created, meta)
    if s.redact_window:
        ctx = write_context(parts, MemoryRecord(content="-", tenant_id=scope[0], user_id=scope[1],
                                                session_id=scope[2]), explicit=True)
        turn = redact_turn(parts.hooks, turn, ctx)
    return scope, turn
