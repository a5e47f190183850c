"""Copy a whole record store to another backend: streamed in batches, resumable, verified.

Each batch of memories travels with its entity and keyword rows in one destination transaction, so
an interrupted copy resumes after the last whole batch (the destination remembers its source). The
other tables follow by primary key, the keyword counters are recounted from the copied postings, and
every table is then compared by row count and an order-independent checksum of its rows. The vector
index is not copied: it is derived, and the destination's index is filled from the copied records
(with their embeddings) when it is next opened, or re-embedded there if its model differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import StoreError
from .schema import audit_t, cold_entities_t, cold_t, entities_t, formation_t, memories, meta_t, retrievals_t, \
    turns_t
from .sql import RecordStore
from .dialect import reset_sequences, safe_url, upsert
from .keywords import df_t, postings_t, users_t

__all__ = ["migrate", "MigrationReport"]

#: tables with their own integer key, copied after the memories in key order
_KEYED = (turns_t, audit_t, retrievals_t, cold_t, cold_entities_t, formation_t)
#: meta rows that describe the store itself, not its contents
_OWN_META = ("schema_version", "migration_source")
_CHECKED = (memories, entities_t, postings_t, df_t, users_t, turns_t, audit_t, retrievals_t, cold_t, cold_entities_t,
            formation_t, meta_t)


@dataclass
class MigrationReport:
    """Rows per table in source and destination, and whether their checksums agree."""

    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    checksums_match: dict[str, bool] = field(default_factory=dict)
    copied: int = 0
    resumed_after: int = 0

    @property
    def ok(self) -> bool:
        return all(a == b for a, b in self.counts.values()) and all(self.checksums_match.values())


def _canonical(value: Any) -> Any:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float):
        return repr(value)
    return value


def _table_digest(conn: Connection, table: sa.Table, skip: tuple[str, ...] = ()) -> tuple[int, int]:
    """(rows, sum of row hashes mod 2**256): equal for equal contents whatever the row order or backend."""
    cols = [c for c in table.c if c.name not in skip]
    q = sa.select(*cols)
    if table is meta_t:
        q = q.where(meta_t.c.key.not_in(_OWN_META))
    elif table is df_t:  # a counter dropped to zero and one never made say the same
        q = q.where(df_t.c.df > 0)
    elif table is users_t:
        q = q.where(users_t.c.n > 0)
    n, total = 0, 0
    for row in conn.execution_options(stream_results=True, yield_per=5000).execute(q):
        blob = json.dumps([_canonical(v) for v in row], sort_keys=True, ensure_ascii=False, default=str)
        total = (total + int.from_bytes(hashlib.sha256(blob.encode()).digest(), "big")) % (1 << 256)
        n += 1
    return n, total


def _rows(conn: Connection, q: Any) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(q)]


def _max(conn: Connection, column: Any) -> int:
    return int(conn.execute(sa.select(sa.func.max(column))).scalar() or 0)


def migrate(
    src_url: str,
    dst_url: str,
    *,
    batch: int = 1000,
    progress: Callable[[str, int], None] | None = None,
) -> MigrationReport:
    """Copy the store at ``src_url`` into ``dst_url`` (empty, or a copy of it interrupted earlier)."""
    if batch < 1:
        raise StoreError("batch must be at least 1")
    src, dst = RecordStore(src_url), RecordStore(dst_url)
    report = MigrationReport()
    try:
        origin = safe_url(src_url)
        with dst.transaction() as conn:
            recorded = conn.execute(sa.select(meta_t.c.value).where(meta_t.c.key == "migration_source")).scalar()
            if recorded is None and _max(conn, memories.c.pk):
                raise StoreError(f"{safe_url(dst_url)} already holds memories; migrate into an empty store")
            if recorded is not None and recorded != origin:
                raise StoreError(f"{safe_url(dst_url)} holds a copy of {recorded}, not of {origin}")
            upsert(conn, meta_t, ("key",), {"key": "migration_source", "value": origin})
        report.resumed_after = _copy_memories(src, dst, batch, report, progress)
        for table in _KEYED:
            _copy_keyed(src, dst, table, batch, report, progress)
        with src.engine.connect() as s, dst.transaction() as d:
            for row in _rows(s, sa.select(meta_t).where(meta_t.c.key.not_in(_OWN_META))):
                upsert(d, meta_t, ("key",), row)
            dst.keywords.recount(d)
            reset_sequences(d, [memories, *_KEYED])
        with src.engine.connect() as s, dst.engine.connect() as d:
            for table in _CHECKED:
                skip = ("indexed",) if table is memories else ()
                (n_src, h_src), (n_dst, h_dst) = _table_digest(s, table, skip), _table_digest(d, table, skip)
                report.counts[table.name] = (n_src, n_dst)
                report.checksums_match[table.name] = h_src == h_dst
        if not report.ok:
            bad = [t for t in report.counts if report.counts[t][0] != report.counts[t][1] or not report.checksums_match[t]]
            raise StoreError(f"the copy in {safe_url(dst_url)} differs from its source in {bad}; run migrate again")
        return report
    finally:
        src.close()
        dst.close()


def _batches(src: RecordStore, table: sa.Table, last: int, batch: int) -> Iterator[list[dict[str, Any]]]:
    while True:
        with src.engine.connect() as conn:
            rows = _rows(conn, sa.select(table).where(table.c.pk > last).order_by(table.c.pk).limit(batch))
        if not rows:
            return
        last = rows[-1]["pk"]
        yield rows


def _copy_memories(src: RecordStore, dst: RecordStore, batch: int, report: MigrationReport,
                   progress: Callable[[str, int], None] | None) -> int:
    """Memories with their entities and postings, a batch per transaction; returns where it resumed."""
    with dst.engine.connect() as conn:
        start = _max(conn, memories.c.pk)
    for rows in _batches(src, memories, start, batch):
        low, high = rows[0]["pk"], rows[-1]["pk"]
        with src.engine.connect() as s:
            ents = _rows(s, sa.select(entities_t).where(entities_t.c.pk.between(low, high)))
            posts = _rows(s, sa.select(postings_t).where(postings_t.c.record.between(low, high)))
        with dst.transaction() as d:
            d.execute(memories.insert(), [{**r, "indexed": 0} for r in rows])  # the destination index fills on open
            if ents:
                d.execute(entities_t.insert(), ents)
            if posts:
                d.execute(postings_t.insert(), posts)
        report.copied += len(rows)
        if progress is not None:
            progress("memories", len(rows))
    return start


def _copy_keyed(src: RecordStore, dst: RecordStore, table: sa.Table, batch: int, report: MigrationReport,
                progress: Callable[[str, int], None] | None) -> None:
    with dst.engine.connect() as conn:
        start = _max(conn, table.c.pk)
    for rows in _batches(src, table, start, batch):
        with dst.transaction() as d:
            d.execute(table.insert(), rows)
        if progress is not None:
            progress(table.name, len(rows))
