"""Fixtures of the backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from portamem_conformance import servers

from portamem.storage.sql import RecordStore


@pytest.fixture
def store(pgvector_url: str) -> Iterator[RecordStore]:
    """A record store on a fresh database of the PostgreSQL with pgvector (``pgvector_url``: skips without one)."""
    with servers.fresh_database(pgvector_url) as url:
        s = RecordStore(url)
        try:
            yield s
        finally:
            s.close()
