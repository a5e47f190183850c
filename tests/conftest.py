"""Shared fixtures: one real embedder per test session, a fresh real store per test.

The store is on the backend combination ``PORTAMEM_TEST_BACKEND`` names (SQLite + milvus-lite by
default; see ``portamem_conformance.fixtures``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# CrewAI offline (its own suite and the switching matrix's child that drives it): no telemetry, no tracing prompt
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
# the embedded vector index inline: a child process per store costs about 0.8 s to start, and the suites
# open thousands; tests/core/test_index_process.py and the switching env (tox.ini) run the child
os.environ.setdefault("PORTAMEM_VECTOR_PROCESS", "inline")

from portamem import Memory, Settings  # noqa: E402
from portamem.embedding.embedders import Embedder, get_embedder  # noqa: E402
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


class Recording:
    """The real embedder, every call noted with its kind and texts."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim
        self.calls: list[tuple[str, list[str]]] = []

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        self.calls.append((kind, list(texts)))
        return self.inner.embed(texts, kind=kind)

    def passages(self) -> list[str]:
        return [t for kind, texts in self.calls if kind == "passage" for t in texts]


@pytest.fixture
def stuck(tmp_path: Path, embedder: Embedder) -> Iterator[tuple[Memory, Recording, threading.Event]]:
    """A memory whose indexer is held (before it reads the outbox) until the returned event is set."""
    emb = Recording(embedder)
    mem = Memory(settings=Settings(path=str(tmp_path / "stuck")), embedder=emb)  # type: ignore[arg-type]
    mem.flush()
    gate, entered = threading.Event(), threading.Event()
    outbox = mem.store.outbox

    def held(*args: object, **kwargs: object) -> object:
        if threading.current_thread().name == "portamem-indexer" and not gate.is_set():
            entered.set()
            gate.wait()
        return outbox(*args, **kwargs)  # type: ignore[arg-type]

    mem.store.outbox = held  # type: ignore[method-assign]
    mem.save_memory("blocker", user_id="someone else")
    assert entered.wait(30)
    yield mem, emb, gate
    gate.set()
    mem.close()
