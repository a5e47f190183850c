"""The SQLite store's tests from LangGraph, run on ``PortamemStore``.

The file is langgraph-checkpoint-sqlite's ``tests/test_store.py`` (MIT licence, langchain-ai/langgraph
``libs/checkpoint-sqlite/tests``), read unmodified from the pinned sdist by
``portamem_conformance.upstream``. Every ``SqliteStore`` it opens, and its ``store`` fixture, is a
``langgraph_upstream.UpstreamStore``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.sqlite")

from langgraph_upstream import SqliteStoreShim, UpstreamStore, shared_memory  # noqa: E402,F401
from portamem_conformance.upstream import Suite, adopt, load  # noqa: E402

SUITE = Suite(
    dist="langgraph-checkpoint-sqlite", version="3.1.2",
    sha256="4e3f376fa6f192d6ad2a1a4643b039986f1593552ef870e9e45281575de6fbf2",
    source="langchain-ai/langgraph libs/checkpoint-sqlite/tests", licence="MIT",
    files=("tests/test_store.py",),
)


@pytest.fixture
def store() -> UpstreamStore:
    return UpstreamStore()


#: tests of one implementation's extras, each with why it does not apply to a portamem store
_SCORES = ("exact cosine of the tests' CharacterEmbeddings; portamem scores with its own model and hybrid ranking")
SKIP = {
    "test_vector_store_initialization": "reads SqliteStore.index_config: a caller-supplied embed function",
    "test_embed_with_path": "SqliteStore's IndexConfig text_fields and one vector per field; " + _SCORES,
    "test_embed_with_path_operation_config": "one vector per index field, compared by score; " + _SCORES,
    "test_scores": _SCORES,
    "test_nonnull_migrations": "SqliteStore.MIGRATIONS, its own schema migrations",
    "test_sql_injection_vulnerability": "SqliteStore refuses filter keys it cannot put in its SQL JSON paths; "
                                        "PortamemStore binds keys as parameters, and checks one portamem cannot "
                                        "name on the items found instead of refusing it",
    "test_filter_keys_with_hyphens_and_digits": "SqliteStore reads a dotted filter key as a nested path "
                                                "('$.user.access-level'); PortamemStore reads it as a literal "
                                                "key, as InMemoryStore does (tests/adapters/langchain/"
                                                "test_langchain_store.py holds it to InMemoryStore)",
}

UPSTREAM = adopt(load(SUITE, "tests/test_store.py"), globals(), skip=SKIP, replace={"SqliteStore": SqliteStoreShim})
