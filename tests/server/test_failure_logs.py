"""A request that fails inside the server is logged as one line (its route, a request id the client also
reads, the error's type and a short message), never with the SQL statement or its bound values: the
tenant, the user, a filter's values and a saved text stay out of the log."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from portamem.config import Settings
from portamem.server.failures import describe
from portamem_conformance.remote import ServerProcess, mint_key

SECRETS = ("TENANT-7f3a", "USER-c91e", "FILTER-5d2b", "CONTENT-a83c", "QUERY-e4f0")


def test_describe_keeps_the_type_and_drops_the_statement_and_values() -> None:
    engine = sa.create_engine("sqlite://")
    with pytest.raises(sa.exc.OperationalError) as caught, engine.connect() as conn:
        conn.execute(sa.text("SELECT * FROM gone WHERE user_id = :u AND note = 'FILTER-5d2b'"), {"u": "USER-c91e"})
    assert "USER-c91e" in str(caught.value) and "SELECT" in str(caught.value)  # what used to reach the log
    line = describe(caught.value)
    assert line.startswith("OperationalError (sqlite3.OperationalError): no such table: gone")
    assert "USER-c91e" not in line and "FILTER" not in line and "SELECT" not in line and "\n" not in line
    assert describe(ValueError("bad value 'FILTER-5d2b'\n[SQL: SELECT 1]")).startswith("ValueError: bad value '…'")


def test_a_failing_request_logs_no_statement_and_no_value(tmp_path: Path) -> None:
    path = tmp_path / "store"
    key = mint_key(Settings(path=str(path)).resolved_db_url, SECRETS[0])
    server = ServerProcess(path)
    auth = {"Authorization": f"Bearer {key}"}
    try:
        saved = httpx.post(server.url + "/v1/memories", headers=auth, timeout=60,
                           json={"user_id": SECRETS[1], "content": "Dana's locker code is in the safe."})
        assert saved.status_code == 201, saved.text
        # the store's table goes away under the server: every query of it fails from now on
        db = sqlite3.connect(Settings(path=str(path)).resolved_db_url[len("sqlite:///"):])
        db.execute("ALTER TABLE memories RENAME TO memories_elsewhere")
        db.commit()
        db.close()
        before = len("".join(server.output))
        ids = []
        for route, body in (
            ("/v1/memories/list", {"user_id": SECRETS[1], "filters": {"metadata": {"project": SECRETS[2]}}}),
            ("/v1/search", {"user_id": SECRETS[1], "query": SECRETS[4], "filters": {"metadata": {"p": SECRETS[2]}}}),
            ("/v1/memories", {"user_id": SECRETS[1], "content": f"Note {SECRETS[3]} for later."}),
        ):
            r = httpx.post(server.url + route, headers=auth, json=body, timeout=60)
            assert r.status_code == 500 and r.json()["error"]["type"] == "PortamemError", r.text
            request_id = r.headers["x-request-id"]
            assert request_id in r.json()["error"]["message"] and "OperationalError" in r.json()["error"]["message"]
            ids.append(request_id)
        time.sleep(1.0)  # the server's output is read by a thread
    finally:
        server.stop()
    log = "".join(server.output)[before:]
    for request_id in ids:
        [line] = [x for x in log.splitlines() if request_id in x]
        assert "failed" in line and "OperationalError" in line and "no such table" in line
    for secret in SECRETS:
        assert secret not in log, secret
    assert "[SQL" not in log and "[parameters" not in log and "Exception in ASGI application" not in log
