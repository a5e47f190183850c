"""Forget means gone: after forget + purge, and after a user's erasure, the erased text is in no table
(every table and column the store has, read back from the database itself), no file of an embedded
vector index, no vector index entry, no replica, no keyword cache, no export and no response, for
memories placed in each tier (hot, warm, cold). Runs on every backend ``PORTAMEM_TEST_BACKEND`` names."""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import NotFoundError
from portamem.lifecycle.erasure import ERASE_ACTION
from portamem.read.preload import PRELOAD
from portamem.storage.pgvector import is_pgvector_uri
from portamem.recall import recall
from portamem.records import Status
from portamem.language.text import tokenize

#: the user's memories, one word in each that no other text of the store holds; by the tier each goes to
HOT = "My bike lock word is quokkafeather."
WARM = "I keep a pet axolotl named Zorblaxion."
COLD = "我的保险箱密码藏在翡翠鹦鹉雕像里。"
OLD_TEXT = "The wifi password is marzipanlocker."  # the hot memory's text before an update
TRAVEL = "My frequent flyer number is Velkorinth-7781."  # a task preloads it
TURN = "Remind me that the gate code is plumbquartzite."  # only said in the working window
NEEDLES = ("quokkafeather", "Zorblaxion", "翡翠鹦鹉", "marzipanlocker", "Velkorinth", "plumbquartzite")
#: another user's memory, which must survive both
KEPT = "I love the cellist Hildegunnvar."


def _strings(needles: Iterable[str]) -> set[str]:
    """The needles and their search tokens (the keyword index holds the tokens)."""
    out = set(needles)
    for n in needles:
        out |= {t for t in tokenize(n) if len(t) >= 2 and not t.isdigit()}
    return out


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes):
        try:
            return zlib.decompress(value).decode("utf-8", "replace")
        except zlib.error:
            return value.decode("utf-8", "replace")
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _tables(mem: Memory) -> dict[str, list[dict[str, str]]]:
    """Every row of every table in the record store's database, as text per column."""
    meta = sa.MetaData()
    meta.reflect(mem.store.engine)
    out: dict[str, list[dict[str, str]]] = {}
    with mem.store.engine.connect() as conn:
        for table in meta.sorted_tables:
            out[table.name] = [{k: _text(v) for k, v in row._mapping.items()} for row in conn.execute(sa.select(table))]
    return out


def _found_in_tables(mem: Memory, needles: Iterable[str]) -> list[tuple[str, str, str]]:
    strings = _strings(needles)
    return [(name, col, s) for name, rows in _tables(mem).items() for row in rows
            for col, text in row.items() for s in strings if s.lower() in text.lower()]


def _index_files(mem: Memory) -> list[Path]:
    uri = mem.settings.resolved_vector_uri
    if uri.startswith(("http://", "https://", "tcp://", "unix:")) or is_pgvector_uri(uri):
        return []  # a server's, or a table of the database (its rows are read with the other tables')
    base = Path(uri)
    return [p for p in base.parent.rglob("*") if p.is_file() and p.name.startswith(base.name)] + \
        ([p for p in base.rglob("*") if p.is_file()] if base.is_dir() else [])


def _database_files(mem: Memory) -> list[Path]:
    """An SQLite store's database file and its write-ahead log and shared-memory files (none on
    PostgreSQL: see docs/security.md for what its server keeps)."""
    if not mem.store.is_sqlite:
        return []
    db = Path(str(mem.store.engine.url.database))
    return [p for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")) if p.exists()]


def _export(mem: Memory, user_id: str) -> str:
    out = io.StringIO()
    mem.export(out, user_id=user_id, include_deleted=True)
    return out.getvalue()


def _responses(mem: Memory, user_id: str, *, window: bool = True) -> str:
    """What every read of the user answers: searches of each needle (every tier), recall in the open task's
    session, the list of every status and tier."""
    texts: list[str] = []
    for needle in NEEDLES:
        for hit in mem.search_memory(needle, user_id=user_id, tiers=("hot", "warm", "cold")):
            texts.append(hit.content)
    for hit in recall(mem, "Which hotels are near the Prado?", user_id=user_id, session_id="trip"):
        texts.append(hit.content)
    everything = {"statuses": [s.value for s in Status], "tiers": ["hot", "warm", "cold"]}
    texts += [r.content for r in mem.list_memories(user_id=user_id, filters=everything)]
    if window:
        texts += [t.user for t in mem.context(user_id=user_id, session_id="trip")]
    return "\n".join(texts)


@pytest.fixture
def placed(settings: Settings, embedder: Embedder) -> Iterator[tuple[Memory, dict[str, str]]]:
    """A user with a memory in each tier, an updated one, a merged duplicate, a preloaded one and a turn
    in the working window; and another user beside."""
    mem = Memory(settings=settings.replace(window_turns=10, preload=True), embedder=embedder)
    ids: dict[str, str] = {}
    hot = mem.save_memory(OLD_TEXT, user_id="dana", wait=True)
    mem.update_memory(hot.memory_id, user_id="dana", content=HOT)  # the audit log keeps the old text
    ids["hot"] = hot.memory_id
    ids["warm"] = mem.save_memory(WARM, user_id="dana", wait=True).memory_id
    ids["dup"] = mem.save_memory(WARM, user_id="dana").memory_id  # merged into the warm one by the review
    mem.flush()
    ids["cold"] = mem.save_memory(COLD, user_id="dana", wait=True).memory_id
    ids["travel"] = mem.save_memory(TRAVEL, user_id="dana", wait=True).memory_id
    mem.save_memory(KEPT, user_id="eve", wait=True)
    mem.set_tier(ids["warm"], "warm", user_id="dana")
    mem.set_tier(ids["cold"], "cold", user_id="dana")
    assert mem.get_memory(ids["dup"], user_id="dana").superseded_by == ids["warm"]
    mem.add_turn(TURN, "Noted.", user_id="dana", session_id="trip")
    # searched, recalled and preloaded: the logs, the replica and the task hold them now
    for needle in NEEDLES:
        mem.search_memory(needle, user_id="dana", touch=True)
    first = recall(mem, "Can you help me plan my business trip to Madrid next week?", user_id="dana",
                   session_id="trip")
    assert any(PRELOAD in h.found_by and "Velkorinth" in h.content for h in first)
    mem.retrieval_log.flush()
    # what the checks below look for is there before: in the tables, the replica, the keyword cache
    assert _found_in_tables(mem, ["quokkafeather"]) and _found_in_tables(mem, ["marzipanlocker"])
    assert ids["hot"] in mem.vectors.loaded_ids(mem.tenant_id, "dana")
    assert ids["hot"] in mem.index.ids()
    if _index_files(mem):  # an embedded index: its files hold the rows
        mem.index.flush()
        assert any(ids["hot"].encode() in path.read_bytes() for path in _index_files(mem))
    if mem.store.keywords.cache is not None:
        assert "quokkafeather" in mem.store.keywords.cache.cached_terms(mem.tenant_id, "dana")
    yield mem, ids
    mem.close()


def _assert_gone(mem: Memory, ids: dict[str, str], needles: Iterable[str], *,
                 deleted_rows_on_disk: bool = True) -> None:
    """``deleted_rows_on_disk`` False: the erased rows' ids (and so their vectors) are in no file of an
    embedded index either (an erasure rebuilds it; a purge leaves milvus-lite's deleted rows, vectors
    without text, to its own compaction)."""
    needles = list(needles)
    gone = set(ids.values())
    assert not _found_in_tables(mem, needles)
    for path in _index_files(mem):
        data = path.read_bytes()
        assert not [n for n in needles if n.encode("utf-8") in data], path
        if not deleted_rows_on_disk:
            assert not [m for m in gone if m.encode() in data], path
    for path in _database_files(mem):  # the pages a file-level backup copies, the write-ahead log's too
        data = path.read_bytes()
        assert not [n for n in needles if n.encode("utf-8") in data], path
    assert not gone & mem.index.ids()
    assert not gone & mem.vectors.loaded_ids(mem.tenant_id, "dana")
    cache = mem.store.keywords.cache
    if cache is not None:  # read before any search below caches the (empty) postings of a needle's words
        assert not _strings(needles) & set(cache.cached_terms(mem.tenant_id, "dana"))
    exported = _export(mem, "dana")
    assert not [n for n in needles if n in exported]
    for memory_id in gone:
        with pytest.raises(NotFoundError):
            mem.get_memory(memory_id, user_id="dana")
    answered = _responses(mem, "dana") if "plumbquartzite" in needles else _responses(mem, "dana", window=False)
    assert not [n for n in needles if n in answered]
    # the other user is untouched
    assert [h.content for h in mem.search_memory("Hildegunnvar", user_id="eve")] == [KEPT]


def test_forget_then_purge_leaves_nothing(placed: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = placed
    forgotten = [ids["hot"], ids["dup"], ids["cold"], ids["travel"]]  # the duplicate's id forgets the warm one
    assert set(mem.forget_memory(forgotten, user_id="dana")) == {ids["hot"], ids["warm"], ids["cold"], ids["travel"]}
    assert mem.purge_deleted(older_than=timedelta(0)) == 5
    # a turn is no memory: forget leaves it
    _assert_gone(mem, ids, [n for n in NEEDLES if n != "plumbquartzite"], deleted_rows_on_disk=True)


def test_erasing_a_user_leaves_one_audit_row_without_content(placed: tuple[Memory, dict[str, str]]) -> None:
    mem, ids = placed
    done = mem.erase_user(user_id="dana")
    assert done.memories == 5 and done.rows["memories"] == 4 and done.rows["memories_cold"] == 1
    _assert_gone(mem, ids, NEEDLES, deleted_rows_on_disk=False)
    # no row of any table names the user, but the erasure's own audit row
    named = [(name, row) for name, rows in _tables(mem).items() for row in rows if row.get("user_id") == "dana"]
    assert len(named) == 1 and named[0][0] == "audit_log" and named[0][1]["action"] == ERASE_ACTION
    assert mem.user_ids() == ["eve"]
    # the user can start again from nothing
    mem.save_memory("I moved to Porto.", user_id="dana", wait=True)
    assert [h.content for h in mem.search_memory("Porto", user_id="dana")] == ["I moved to Porto."]


def test_the_cli_erases_a_user_of_a_store(settings: Settings, embedder: Embedder,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from portamem.cli import main

    with Memory(settings=settings, embedder=embedder) as mem:
        mem.save_memory(HOT, user_id="dana", wait=True)
        mem.save_memory(KEPT, user_id="eve", wait=True)
    if settings.db_url is not None:  # the CLI opens the store by path; a server backend is the server tests' part
        return
    assert main(["--path", settings.path, "erase-user", "--user", "dana", "--yes"]) == 0
    assert "1 memories" in capsys.readouterr().out
    with Memory(settings=settings, embedder=embedder) as mem:
        assert mem.user_ids() == ["eve"] and not _found_in_tables(mem, ["quokkafeather"])
