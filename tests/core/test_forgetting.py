"""Forgetting reaches whatever holds the memory: a task's preload, the cold archive, and the older
duplicate a save was merged into."""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import NotFoundError, ValidationError
from portamem.read.preload import PRELOAD
from portamem.recall import recall
from portamem.records import Status, Tier
from portamem.storage.schema import cold_t

PROFILE = ["I live in Leeds.", "I always take an aisle seat on flights.", "My Avios number is 4417-2208.",
           "My dentist is Dr Shah.", "I love jazz."]


@pytest.fixture
def profiled(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    mem = Memory(settings=settings.replace(preload=True), embedder=embedder)
    for text in PROFILE:
        mem.save_memory(text, user_id="dana")
    mem.flush()
    yield mem
    mem.close()


def _exported(mem: Memory) -> str:
    out = io.StringIO()
    mem.export(out, user_id="dana", include_deleted=True, include_embeddings=False)
    return out.getvalue()


def test_a_preloaded_memory_forgotten_leaves_the_next_recalls(profiled: Memory) -> None:
    first = recall(profiled, "Can you help me plan my business trip to Madrid next week?", user_id="dana",
                   session_id="trip")
    avios = next(h for h in first if "Avios" in h.content and PRELOAD in h.found_by)
    seat = next(h for h in first if "aisle" in h.content and PRELOAD in h.found_by)
    profiled.forget_memory(avios.memory_id, user_id="dana")
    profiled.set_tier(seat.memory_id, "cold", user_id="dana")  # archived: a search no longer reads it
    for _ in range(3):  # the task's next turns reuse what it preloaded, re-checked at every recall
        hits = recall(profiled, "Which hotels are near the Prado?", user_id="dana", session_id="trip")
        assert any(PRELOAD in h.found_by for h in hits)  # the others are still there
        assert not any("4417-2208" in h.content for h in hits)
        assert not any(h.memory_id == seat.memory_id for h in hits)


def test_a_preloaded_memory_changed_since_is_shown_as_it_is_now(profiled: Memory) -> None:
    first = recall(profiled, "Can you help me plan my business trip to Madrid next week?", user_id="dana",
                   session_id="trip")
    home = next(h for h in first if "Leeds" in h.content)
    profiled.update_memory(home.memory_id, user_id="dana", content="I live in York.")
    hits = recall(profiled, "Which hotels are near the Prado?", user_id="dana", session_id="trip")
    assert not any("Leeds" in h.content for h in hits)


def test_a_forgotten_memory_cannot_go_cold_and_purge_removes_it(memory: Memory) -> None:
    rec = memory.save_memory("My locker code is 7731.", user_id="dana", wait=True)
    memory.forget_memory(rec.memory_id, user_id="dana")
    with pytest.raises(ValidationError, match="forgotten"):
        memory.set_tier(rec.memory_id, "cold", user_id="dana")
    assert memory.purge_deleted(older_than=timedelta(0)) == 1
    with memory.store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(cold_t)).scalar() == 0
    with pytest.raises(NotFoundError):
        memory.get_memory(rec.memory_id, user_id="dana")
    assert "locker" not in _exported(memory)


def test_purge_reaches_a_forgotten_memory_an_older_store_archived(memory: Memory) -> None:
    """A store written before the refusal may hold forgotten rows in its archive: purge finds them there."""
    rec = memory.save_memory("My locker code is 7731.", user_id="dana", wait=True)
    keep = memory.save_memory("I love jazz.", user_id="dana", wait=True)
    memory.set_tier([rec.memory_id, keep.memory_id], "cold", user_id="dana")
    with memory.store.transaction() as conn:  # what the old set_tier after forget left behind
        doc = conn.execute(sa.select(cold_t.c.document).where(cold_t.c.memory_id == rec.memory_id)).scalar_one()
        data = json.loads(zlib.decompress(doc))
        data.update(status="deleted", deleted_at="2020-01-01T00:00:00+00:00")
        conn.execute(cold_t.update().where(cold_t.c.memory_id == rec.memory_id)
                     .values(document=zlib.compress(json.dumps(data).encode())))
    assert memory.purge_deleted() == 1
    with pytest.raises(NotFoundError):
        memory.get_memory(rec.memory_id, user_id="dana")
    assert memory.get_memory(keep.memory_id, user_id="dana").tier is Tier.COLD
    assert "locker" not in _exported(memory)


def test_forgetting_by_the_id_a_merged_save_returned_forgets_what_was_said(memory: Memory) -> None:
    older = memory.save_memory("My favourite colour is teal.", user_id="dana", wait=True)
    again = memory.save_memory("My favourite colour is teal.", user_id="dana")
    memory.flush()
    merged = memory.get_memory(again.memory_id, user_id="dana")
    assert merged.status is Status.DELETED and merged.superseded_by == older.memory_id  # the review merged it
    assert memory.forget_memory(again.memory_id, user_id="dana") == [older.memory_id]
    assert memory.get_memory(older.memory_id, user_id="dana").status is Status.DELETED
    assert not [h for h in memory.search_memory("favourite colour teal", user_id="dana")]


def test_forgetting_an_older_value_leaves_the_newer_one(memory: Memory) -> None:
    """A value superseded by a newer statement is not a merged duplicate: its forget stays its own."""
    old = memory.save_memory("Our budget is 1200 euros.", user_id="dana", wait=True)
    new = memory.save_memory("Our budget is 2500 euros now.", user_id="dana", wait=True)
    memory.forget_memory(old.memory_id, user_id="dana")
    assert memory.get_memory(new.memory_id, user_id="dana").status is Status.ACTIVE
