"""Storage tiers: maintenance moves memories hot -> warm -> cold by age, use and kind; warm memories
leave the vector index but stay searchable by keyword and entity; cold ones leave the record store's
tables for the archive, are listed, exported, searched on request and restored whole; every move is
audited and reversible."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import NotFoundError, ValidationError
from portamem.portable.transfer import export_lines
from portamem.records import Tier
from portamem.language.statements import statements_of

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
OLD = [  # ordinary facts and events nobody asks about again
    "Picked up the dry cleaning from Bellwether Cleaners on Tuesday.",
    "The plumber Kowalski fixed the kitchen tap for 80 euros.",
    "Watched the documentary about octopuses with Sam.",
    "Returned the blue jacket to Zalando, refund pending.",
]


def _ids(mem: Memory, tier: str) -> set[str]:
    return {r.memory_id for r in mem.list_memories(user_id="u", filters={"tiers": [tier]})}


@pytest.fixture
def aged(settings: Settings, embedder: Embedder) -> Iterator[tuple[Memory, dict[str, str]]]:
    mem = Memory(settings=settings, embedder=embedder)
    ids = {text: mem.save_memory(text, user_id="u", created_at=T0).memory_id for text in OLD}
    ids["identity"] = mem.save_memory("My name is Dana Whitfield.", user_id="u", kind="identity",
                                      created_at=T0).memory_id
    ids["preference"] = mem.save_memory("I prefer aisle seats on long flights.", user_id="u", kind="preference",
                                        created_at=T0).memory_id
    ids["keyed"] = mem.save_memory("Loyalty number LH-99812.", user_id="u", key="loyalty",
                                   created_at=T0).memory_id
    ids["recent"] = mem.save_memory("Booked the dentist, Dr Okafor, for next Thursday.", user_id="u",
                                    created_at=T0 + timedelta(days=250)).memory_id
    mem.flush()
    yield mem, ids
    mem.close()


def test_old_unused_memories_go_warm_then_cold_and_pinned_kinds_stay_hot(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    report = mem.maintain(now=T0 + timedelta(days=100))
    old = {ids[t] for t in OLD}
    assert set(report.tiered["warm"]) == old
    assert old <= _ids(mem, "warm")
    # warm rows left the vector index (and the replica), their vectors stay on disk
    assert not old & mem.index.ids()
    assert {ids["identity"], ids["preference"], ids["keyed"], ids["recent"]} <= mem.index.ids()

    report = mem.maintain(now=T0 + timedelta(days=280))
    assert set(report.tiered["cold"]) == old
    assert _ids(mem, "cold") == old
    # out of the record store's tables, still the same memories
    assert not mem.store.get("default", "u", list(old))
    for text in OLD:
        got = mem.get_memory(ids[text], user_id="u")
        assert got.content == text and got.tier is Tier.COLD and got.embedding is not None
    # identity, preference and keyed memories never leave hot by age
    for name in ("identity", "preference", "keyed"):
        assert mem.get_memory(ids[name], user_id="u").tier is Tier.HOT
    counts = mem.tier_counts(user_id="u")
    assert counts == {"hot": 4, "warm": 0, "cold": 4}
    trail = [e for e in mem.store.audit_trail("default", ids[OLD[0]]) if e["action"] == "tier"]
    assert [(e["detail"]["from"], e["detail"]["to"]) for e in trail] == [("hot", "warm"), ("warm", "cold")]


def test_warm_memories_answer_when_the_hot_evidence_is_thin(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    mem.maintain(now=T0 + timedelta(days=100))
    hits = mem.search_memory("How much did Kowalski charge for the tap?", user_id="u")
    assert hits and hits[0].memory_id == ids[OLD[1]]
    assert hits[0].record.tier is Tier.WARM
    # asked explicitly for the hot tier only, the warm memory is not there
    hot = mem.search_memory("How much did Kowalski charge for the tap?", user_id="u", tiers=["hot"])
    assert ids[OLD[1]] not in {h.memory_id for h in hot}


def test_a_warm_memory_used_again_comes_back_hot(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    now = T0 + timedelta(days=100)
    mem.maintain(now=now)
    mem.search_memory("What did I return to Zalando?", user_id="u", touch=True, now=now + timedelta(days=1))
    mem.retrieval_log.flush()
    report = mem.maintain(now=now + timedelta(days=2))
    assert ids[OLD[3]] in report.tiered["hot"]
    assert mem.get_memory(ids[OLD[3]], user_id="u").tier is Tier.HOT
    assert ids[OLD[3]] in mem.index.ids()


def test_cold_memories_are_searched_only_on_request(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    mem.maintain(now=T0 + timedelta(days=280))
    query = "documentary about octopuses"
    assert ids[OLD[2]] not in {h.memory_id for h in mem.search_memory(query, user_id="u")}
    hits = mem.search_memory(query, user_id="u", tiers=["cold"])
    assert hits[0].memory_id == ids[OLD[2]] and hits[0].record.tier is Tier.COLD
    both = mem.search_memory(query, user_id="u", filters={"tiers": ["hot", "warm", "cold"]})
    assert both[0].memory_id == ids[OLD[2]]


def test_a_query_naming_what_only_the_cold_tier_holds_loads_it(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    mem.maintain(now=T0 + timedelta(days=280))
    mem.search_memory("What did Kowalski fix?", user_id="u")  # names him: the archive is read in the background
    mem.flush()
    assert mem.get_memory(ids[OLD[1]], user_id="u").tier is Tier.HOT
    hits = mem.search_memory("What did Kowalski fix?", user_id="u")
    assert hits[0].memory_id == ids[OLD[1]]
    assert any(e["actor"] == "cold-load" for e in mem.store.audit_trail("default", ids[OLD[1]]))


def test_every_move_is_reversible_and_keyed_memories_stay_in_the_store(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    target = ids[OLD[0]]
    before = mem.get_memory(target, user_id="u")
    assert mem.set_tier(target, "cold", user_id="u") == [target]
    assert mem.set_tier(target, "cold", user_id="u") == []  # already there
    assert mem.set_tier([target], "hot", user_id="u") == [target]
    after = mem.get_memory(target, user_id="u")
    assert after.tier is Tier.HOT and target in mem.index.ids()
    assert (after.content, after.entities, after.created_at, after.embedding) == \
        (before.content, before.entities, before.created_at, before.embedding)
    with pytest.raises(ValidationError):
        mem.set_tier(ids["keyed"], "cold", user_id="u")
    with pytest.raises(ValidationError):
        mem.set_tier(target, "lukewarm", user_id="u")
    with pytest.raises(NotFoundError):
        mem.set_tier(target, "warm", user_id="someone-else")
    assert mem.get_memory(target, user_id="u").tier is Tier.HOT  # the refusals changed nothing


def test_forgetting_a_cold_memory_soft_deletes_it(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    target = ids[OLD[0]]
    mem.set_tier(target, "cold", user_id="u")
    assert mem.forget_memory(target, user_id="u") == [target]
    assert mem.tier_counts(user_id="u")["cold"] == 0
    assert mem.restore_memory(target, user_id="u").content == OLD[0]


def test_a_current_statement_stays_hot_by_age(settings: Settings, embedder: Embedder) -> None:
    with Memory(settings=settings, embedder=embedder) as mem:
        saved = mem.save_memory("My budget for the kitchen renovation is 12000 euros.", user_id="u", created_at=T0)
        mem.flush()
        record = mem.get_memory(saved.memory_id, user_id="u")
        assert statements_of(record), record.triples
        mem.maintain(now=T0 + timedelta(days=400))
        assert mem.get_memory(saved.memory_id, user_id="u").tier is Tier.HOT


def test_export_and_import_carry_the_tier(aged: tuple[Memory, dict[str, str]], tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    mem, ids = aged
    mem.maintain(now=T0 + timedelta(days=100))
    mem.set_tier(ids[OLD[0]], "cold", user_id="u")
    buf = io.StringIO()
    assert mem.export(buf, user_id="u") == 8
    other = Settings(path=str(tmp_path / "copy"))
    with Memory(settings=other, embedder=embedder) as copy:
        copy.import_(io.StringIO(buf.getvalue()), trusted=True)
        copy.flush()
        assert copy.tier_counts(user_id="u") == {"hot": 4, "warm": 3, "cold": 1}
        assert copy.get_memory(ids[OLD[0]], user_id="u").content == OLD[0]
        assert not {ids[t] for t in OLD} & copy.index.ids()


def test_tiers_off_moves_nothing(settings: Settings, embedder: Embedder) -> None:
    settings.tiers = False
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.save_memory(OLD[0], user_id="u", created_at=T0)
        mem.flush()
        assert mem.maintain(now=T0 + timedelta(days=400)).tiered == {}
        assert mem.tier_counts(user_id="u")["hot"] == 1


def test_a_store_of_schema_5_opens_with_every_memory_hot(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(path=str(tmp_path / "old"))
    with Memory(settings=settings, embedder=embedder) as mem:
        saved = mem.save_memory(OLD[1], user_id="u")
        mem.flush()
        db = mem.store.url.split("///", 1)[1]
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX ix_memories_tier")  # schema 7's
    conn.execute("ALTER TABLE memories DROP COLUMN tier")
    conn.execute("ALTER TABLE memories DROP COLUMN tiered_at")
    conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with Memory(settings=settings, embedder=embedder) as mem:
        assert mem.get_memory(saved.memory_id, user_id="u").tier is Tier.HOT
        assert mem.search_memory("Kowalski tap", user_id="u")[0].memory_id == saved.memory_id
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'ix_memories_tier'").fetchone()
    plan = " ".join(str(r) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT memory_id FROM memories WHERE tenant_id = 't' AND user_id = 'u' "
        "AND status = 'active' AND tier = 'warm'"))
    conn.close()
    assert "ix_memories_tier" in plan  # a user's warm rows are found without reading its hot ones


def test_the_warm_vectors_on_disk_answer_a_question_by_its_meaning(aged: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = aged
    mem.maintain(now=T0 + timedelta(days=100))
    query = "Who repaired the faucet, and what did it cost?"  # no word of the memory
    assert ids[OLD[1]] not in {h.memory_id for h in mem.search_memory(query, user_id="u", tiers=["hot"])}
    hits = mem.search_memory(query, user_id="u", tiers=["hot", "warm"], sources=["vector"])
    assert hits[0].memory_id == ids[OLD[1]] and hits[0].found_by == ("vector",)
    # the filters hold on the disk scan as on the index
    assert not mem.search_memory(query, user_id="u", tiers=["warm"], sources=["vector"],
                                 filters={"sources": ["tool"]})


def test_an_index_that_lost_half_its_rows_to_the_lower_tiers_is_rebuilt(
        aged: tuple[Memory, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    import portamem.lifecycle.maintenance as maintenance

    mem, ids = aged
    if not mem.index.lite:
        pytest.skip("a Milvus server compacts its own deletes: only milvus-lite's index is rebuilt")
    monkeypatch.setattr(maintenance, "REBUILD_MIN", 1)
    rebuilt = []
    real = maintenance.reindex
    monkeypatch.setattr(maintenance, "reindex", lambda parts, **kw: rebuilt.append(real(parts, **kw)))
    mem.maintain(now=T0 + timedelta(days=100))  # 4 of 8 rows leave the index
    assert rebuilt == [4]
    assert mem.index.ids() == {ids["identity"], ids["preference"], ids["keyed"], ids["recent"]}
    assert mem.search_memory("aisle seats", user_id="u")[0].memory_id == ids["preference"]


def _marked_cold(mem: Memory, memory_ids: set[str]) -> str:
    """The user's export (forgotten records too) with these records marked cold, as a file written
    elsewhere may have them."""
    every = {"statuses": ["active", "deleted"], "tiers": ["hot", "warm", "cold"]}
    records = [r.to_dict() for r in mem.list_memories(user_id="u", filters=every)]
    for record in records:
        if record["memory_id"] in memory_ids:
            record["tier"] = "cold"
    header = {"embedding_model": mem.embedder.name, "embedding_dim": mem.embedder.dim}
    return "".join(export_lines(header, records))


def test_an_import_puts_what_the_archive_cannot_hold_into_the_tables(
        aged: tuple[Memory, dict[str, str]], tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    """A keyed record marked cold comes back hot (it was archived, invisible to ``get_by_key``, and a
    new write under its key made a second row) and a forgotten one warm (it aborted the whole import)."""
    mem, ids = aged
    mem.forget_memory(ids[OLD[1]], user_id="u")
    every = {"statuses": ["active", "deleted"], "tiers": ["hot", "warm", "cold"]}
    with Memory(settings=Settings(path=str(tmp_path / "copy")), embedder=embedder) as copy:
        copy.import_(io.StringIO(_marked_cold(mem, {ids["keyed"], ids[OLD[1]]})), trusted=True)
        copy.flush()
        keyed = copy.get_by_key("loyalty", user_id="u")
        assert keyed is not None and keyed.memory_id == ids["keyed"] and keyed.tier is Tier.HOT
        copy.save_memory("Loyalty number LH-11111.", user_id="u", key="loyalty")
        rows = [r for r in copy.list_memories(user_id="u", filters=every) if r.key == "loyalty"]
        assert [r.content for r in rows] == ["Loyalty number LH-11111."]
        forgotten = copy.get_memory(ids[OLD[1]], user_id="u")
        assert forgotten.status.value == "deleted" and forgotten.tier is Tier.WARM
        assert copy.purge_deleted(older_than=timedelta(0)) == 1


def test_an_archived_keyed_memory_whose_key_was_taken_stays_archived_with_a_typed_error(
        aged: tuple[Memory, dict[str, str]]) -> None:
    """A store an older import filled may hold a keyed memory in the archive: bringing it back while
    another memory holds its key is a ValidationError, not the database's IntegrityError."""
    mem, ids = aged
    old = mem.get_memory(ids["keyed"], user_id="u")
    with mem.store.transaction() as conn:  # as that import left it: archived, its key free in the tables
        mem.store.archive(conn, [old], archived_at=T0.timestamp())
    mem.save_memory("Loyalty number LH-11111.", user_id="u", key="loyalty")
    mem.flush()
    with pytest.raises(ValidationError, match="key another memory"):
        mem.set_tier(ids["keyed"], "hot", user_id="u")
    assert mem.get_by_key("loyalty", user_id="u").content == "Loyalty number LH-11111."
