"""LangGraph's own store tests (those it runs on its ``InMemoryStore``), run on ``PortamemStore``.

The file is langgraph-checkpoint's ``tests/test_store.py`` (MIT licence, langchain-ai/langgraph
``libs/checkpoint/tests``), read unmodified from the pinned sdist by ``portamem_conformance.upstream``;
each ``InMemoryStore(...)`` it builds is a ``langgraph_upstream.UpstreamStore``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.base")
pytest.importorskip("pytest_mock")

from langgraph_upstream import UpstreamStore, shared_memory  # noqa: E402,F401
from portamem_conformance.upstream import Suite, adopt, load  # noqa: E402

SUITE = Suite(
    dist="langgraph-checkpoint", version="4.3.2",
    sha256="fcab8468c7e965d7055e2a35c253d73a145624ef4728b150ca7c361f4afca286",
    source="langchain-ai/langgraph libs/checkpoint/tests", licence="MIT",
    files=("tests/test_store.py",), helpers={"tests.embed_test_utils": "tests/embed_test_utils.py"},
)

#: tests of one implementation's extras, each with why it does not apply to a portamem store
SKIP = {
    "test_vector_store_initialization":
        "reads InMemoryStore.index_config: a caller-supplied embed function; portamem embeds with its own model",
    "test_embed_with_path":
        "InMemoryStore's IndexConfig 'fields' and one vector per field with max pooling (equal scores for "
        "equal fields); a portamem item is one memory text, scored by the hybrid ranking",
}

UPSTREAM = adopt(load(SUITE, "tests/test_store.py"), globals(), skip=SKIP, replace={"InMemoryStore": UpstreamStore})
