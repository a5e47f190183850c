"""Shared fixtures: one real embedder per test session, a fresh real store per test.

The store is on the backend combination ``PORTAMEM_TEST_BACKEND`` names (SQLite + milvus-lite by
default; see ``portamem_conformance.fixtures``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from portamem import Memory, Settings  # noqa: E402
from portamem.embeddings import Embedder, get_embedder  # noqa: E402

pytest_plugins = ["portamem_conformance.fixtures"]


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return get_embedder(Settings().embedder)


@pytest.fixture
def settings(tmp_path: Path, backend) -> Settings:  # type: ignore[no-untyped-def]
    return backend.settings(tmp_path / "store")


@pytest.fixture
def memory(settings: Settings, embedder: Embedder) -> Iterator[Memory]:
    mem = Memory(settings=settings, embedder=embedder)
    yield mem
    mem.close()
