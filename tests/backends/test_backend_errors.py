"""Opening a backend that cannot work fails with a typed error that says what to do."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.errors import BackendNotInstalledError, StoreOpenError, StoreUnreachableError
from portamem.filters import SearchFilters
from portamem.records import MemoryRecord
from portamem.storage.schema import SCHEMA_VERSION
from portamem.storage.sql import RecordStore
from portamem.storage.vectors import MilvusVectorIndex
from portamem_conformance.backends import corpus, exact_bm25


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(BackendNotInstalledError, match=r"portamem\[postgres\]") as info:
        RecordStore("postgresql+psycopg://app@127.0.0.1:5432/memories")
    assert info.value.extra == "postgres" and isinstance(info.value, ImportError)


def test_unknown_driver_and_dialect_are_open_errors() -> None:
    with pytest.raises(BackendNotInstalledError, match=r"postgresql\+psycopg"):
        RecordStore("postgresql+nosuchdriver://x/y")
    with pytest.raises(StoreOpenError, match="unsupported record store"):
        RecordStore("mysql://x/y")


def test_unreachable_database_names_the_url_without_its_password() -> None:
    with pytest.raises(StoreUnreachableError, match=r"127\.0\.0\.1:1/memories") as info:
        RecordStore("postgresql+psycopg://app:s3cret@127.0.0.1:1/memories")
    assert "s3cret" not in str(info.value) and info.value.url == "postgresql+psycopg://app:***@127.0.0.1:1/memories"


def test_unreachable_milvus_names_the_uri(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreUnreachableError, match=r"http://127\.0\.0\.1:1") as info:
        MilvusVectorIndex("http://127.0.0.1:1", model="m", dim=4)
    assert info.value.url == "http://127.0.0.1:1"
    with pytest.raises(StoreUnreachableError):  # and through Memory, which releases its record store
        Memory(settings=Settings(path=str(tmp_path / "s"), vector_uri="http://127.0.0.1:1"), embedder=embedder)


def test_an_fts5_store_is_migrated_to_postings(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    store = RecordStore(url)
    records = corpus("ana", 25, seed=3)
    with store.transaction() as conn:
        store.insert(conn, records)
        # what a schema-2 store held: FTS5 and no postings
        for table in ("keyword_postings", "keyword_users", "keyword_df"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
        conn.exec_driver_sql("CREATE VIRTUAL TABLE memory_fts USING fts5(tokens)")
        conn.exec_driver_sql("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    store.close()
    store = RecordStore(url)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert not sa.inspect(store.engine).has_table("memory_fts")
        got = store.keyword_search("default", "ana", "tea parcel", SearchFilters(), 10)
        assert [s for _, s in got] == pytest.approx([s for _, s in exact_bm25(records, "tea parcel", 10)], rel=1e-9)
    finally:
        store.close()


def test_a_store_of_the_older_tokens_is_indexed_again(tmp_path: Path) -> None:
    """Schema 5 tokenises "dentist's" as dentist and "7月8号入职" as 7, 月, 8, ... 入职: a schema-4 store's
    postings are rebuilt when it is opened, so its old memories are found by the new query tokens."""
    url = f"sqlite:///{tmp_path / 'v4.sqlite3'}"
    store = RecordStore(url)
    records = [MemoryRecord(content="My dentist's surgery is on Kirkstall Road", user_id="ana"),
               MemoryRecord(content="新公司让我提前到7月8号入职。", user_id="ana")]
    with store.transaction() as conn:
        store.insert(conn, records)
        # the postings of schema 4 held the old tokens ("dentist's", "7月8号入职"): here, none at all
        for table in ("keyword_postings", "keyword_users", "keyword_df"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
        conn.exec_driver_sql("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    store.close()
    store = RecordStore(url)
    try:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        for query, want in (("dentist", records[0]), ("哪天入职", records[1])):
            got = store.keyword_search("default", "ana", query, SearchFilters(), 5)
            assert [m for m, _ in got][:1] == [want.memory_id], query
    finally:
        store.close()
