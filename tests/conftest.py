"""Shared fixtures: one real embedder per test session, a fresh real store per test.

The store is on the backend combination ``PORTAMEM_TEST_BACKEND`` names (SQLite + milvus-lite by
default; see ``portamem_conformance.fixtures``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from portamem import Memory, Settings  # noqa: E402
from portamem.embeddings import Embedder, get_embedder  # noqa: E402
import numpy as np  # noqa: E402

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


class StuckIndexer:
    """The real embedder; the indexer thread's call holding the text "blocker" waits for ``gate`` (a long
    batch ahead), and every call is noted with the thread that made it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.gate = threading.Event()
        self.calls: list[tuple[str, str, list[str]]] = []

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        self.calls.append((threading.current_thread().name, kind, list(texts)))
        if threading.current_thread().name == "portamem-indexer" and "blocker" in texts:
            self.gate.wait()
        return self.inner.embed(texts, kind=kind)

    def texts(self, thread: str) -> list[str]:
        return [t for name, kind, texts in self.calls if name == thread and kind == "passage" for t in texts]


@pytest.fixture
def stuck(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Memory, StuckIndexer]]:
    """A memory whose indexer is busy with another user's batch until ``gate`` is set."""
    emb = StuckIndexer(embedder)
    mem = Memory(settings=Settings(path=str(tmp_path / "stuck")), embedder=emb)  # type: ignore[arg-type]
    mem.save_memory("blocker", user_id="someone else")
    while "blocker" not in emb.texts("portamem-indexer"):
        time.sleep(0.01)
    yield mem, emb
    emb.gate.set()
    mem.close()
