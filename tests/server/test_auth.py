"""API keys: no key, a wrong or revoked one, another tenant's, a user or agent outside the scope, read-only."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
import sqlalchemy as sa

from portamem import RemoteMemory
from portamem.errors import AuthenticationError, NotFoundError, PermissionDeniedError, ValidationError
from portamem_conformance.remote import ServerProcess


def key_id(token: str) -> str:
    return token.split("_")[1]


def call(server: ServerProcess, key: str | None, method: str, path: str, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [None, "pm_000000000000_wrong", "not-a-key", "pm__x"],
                         ids=["none", "unknown", "malformed", "empty-id"])
def test_a_request_without_a_valid_key_is_refused(server: ServerProcess, tenant_key: str, key: str | None) -> None:
    r = call(server, key, "POST", "/v1/search", json={"user_id": "alice", "query": "cat"})
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "AuthenticationError"
    assert r.headers["www-authenticate"] == "Bearer"


def test_the_right_id_with_a_wrong_secret_is_refused(server: ServerProcess, tenant_key: str) -> None:
    forged = tenant_key[:-4] + ("aaaa" if not tenant_key.endswith("aaaa") else "bbbb")
    r = call(server, forged, "GET", "/v1/whoami")
    assert r.status_code == 401
    assert r.json() == call(server, "pm_000000000000_x", "GET", "/v1/whoami").json()


def test_a_revoked_key_stops_working_within_a_second(server: ServerProcess, connect: Callable[..., RemoteMemory],
                                                     user: str) -> None:
    """Keys are checked from the server's memory, which looks for revocations twice a second."""
    import time

    from portamem.server.auth import KeyStore

    key = server.key("acme")
    mem = connect(key)
    mem.save_memory("I keep bees on the roof.", user_id=user)
    keys = KeyStore(server.db_url)
    try:
        keys.revoke(key_id(key))
    finally:
        keys.close()
    time.sleep(1.0)
    with pytest.raises(AuthenticationError):
        mem.search_memory("bees", user_id=user)
    with pytest.raises(AuthenticationError):
        RemoteMemory(server.url, key)


def test_the_tenant_comes_from_the_key(server: ServerProcess, connect: Callable[..., RemoteMemory], user: str) -> None:
    a, b = connect(server.key("tenant-a")), connect(server.key("tenant-b"))
    assert (a.tenant_id, b.tenant_id) == ("tenant-a", "tenant-b")
    secret = b.save_memory("Tenant B's launch date is March 3rd.", user_id=user)
    assert secret.tenant_id == "tenant-b"
    # same user id, other tenant: nothing, and a memory id of B answers as a missing one does
    assert a.search_memory("launch date", user_id=user) == []
    with pytest.raises(NotFoundError) as found_elsewhere:
        a.get_memory(secret.memory_id, user_id=user)
    with pytest.raises(NotFoundError) as missing:
        a.get_memory("0" * 32, user_id=user)
    assert str(found_elsewhere.value) == str(missing.value).replace("0" * 32, secret.memory_id)
    for action in (lambda: a.forget_memory([secret.memory_id], user_id=user),
                   lambda: a.update_memory(secret.memory_id, user_id=user, content="hijacked"),
                   lambda: a.explain(secret.memory_id, user_id=user)):
        with pytest.raises(NotFoundError):
            action()
    assert b.get_memory(secret.memory_id, user_id=user).content == secret.content
    # naming another tenant is refused before any request, and a body may not carry one
    with pytest.raises(PermissionDeniedError):
        a.search_memory("launch", user_id=user, tenant_id="tenant-b")
    r = call(server, server.key("tenant-a"), "POST", "/v1/search",
             json={"user_id": user, "query": "launch", "tenant_id": "tenant-b"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "ValidationError"


def test_a_user_outside_the_scope_looks_like_a_missing_memory(server: ServerProcess,
                                                              connect: Callable[..., RemoteMemory]) -> None:
    admin = connect(server.key("scoped"))
    theirs = admin.save_memory("Bob's locker code is in the blue folder.", user_id="bob")
    key = server.key("scoped", users=["alice"])
    alice_only = connect(key)
    mine = alice_only.save_memory("I like hiking in the Alps.", user_id="alice")
    assert alice_only.get_memory(mine.memory_id, user_id="alice").content == mine.content

    outside = call(server, key, "GET", f"/v1/memories/{theirs.memory_id}", params={"user_id": "bob"})
    absent = call(server, key, "GET", f"/v1/memories/{'f' * 32}", params={"user_id": "alice"})
    assert outside.status_code == absent.status_code == 404
    assert outside.json()["error"]["message"] == absent.json()["error"]["message"].replace("f" * 32, theirs.memory_id)
    assert set(outside.headers) == set(absent.headers)
    # user-level calls for a user outside the scope are refused outright (they reveal nothing stored)
    with pytest.raises(PermissionDeniedError):
        alice_only.search_memory("locker", user_id="bob")
    with pytest.raises(PermissionDeniedError):
        alice_only.save_memory("planted", user_id="bob")
    with pytest.raises(PermissionDeniedError):
        alice_only.export("/dev/null")  # a whole-tenant export needs a tenant-wide key


def test_a_read_only_key_reads_but_never_writes(server: ServerProcess, connect: Callable[..., RemoteMemory],
                                                user: str) -> None:
    writer = connect(server.key("ro"))
    saved = writer.save_memory("The office wifi is called Pelican.", user_id=user)
    reader = connect(server.key("ro", read_only=True))
    assert [h.memory_id for h in reader.search_memory("wifi", user_id=user)] == [saved.memory_id]
    for action in (lambda: reader.save_memory("nope", user_id=user),
                   lambda: reader.forget_memory([saved.memory_id], user_id=user),
                   lambda: reader.add_turn("hi", "hello", user_id=user)):
        with pytest.raises(PermissionDeniedError):
            action()
    assert writer.get_memory(saved.memory_id, user_id=user).status.value == "active"


def test_an_agent_key_writes_as_its_agent_only(server: ServerProcess, connect: Callable[..., RemoteMemory],
                                               user: str) -> None:
    support = connect(server.key("agents", agents=["support"]))
    assert support.save_memory("Customer prefers email.", user_id=user).agent_id == "support"
    with pytest.raises(PermissionDeniedError):
        support.save_memory("Customer prefers phone.", user_id=user, agent_id="sales")


def test_every_read_and_write_is_audited_with_the_key_id(server: ServerProcess,
                                                         connect: Callable[..., RemoteMemory], user: str) -> None:
    key = server.key("audited")
    mem = connect(key)
    saved = mem.save_memory("My dentist is Dr. Alvarez.", user_id=user)
    mem.search_memory("dentist", user_id=user)
    mem.forget_memory([saved.memory_id], user_id=user)
    trail = {row["action"]: row["actor"] for row in connect(key).history(saved.memory_id, user_id=user)}
    assert trail["save"] == trail["forget"] == key_id(key)
    engine = sa.create_engine(server.db_url)
    deadline = time.monotonic() + 30
    try:
        while True:  # reads are committed with the next write batch, or within a second
            with engine.connect() as conn:
                rows = conn.execute(sa.text("SELECT action, actor FROM audit_log WHERE user_id = :u AND action LIKE 'read.%'"),
                                    {"u": user}).all()
            if {("read.search", key_id(key)), ("read.history", key_id(key))} <= set(map(tuple, rows)):
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.2)
    finally:
        engine.dispose()


def test_keys_are_stored_hashed(server: ServerProcess) -> None:
    key = server.key("hashed")
    engine = sa.create_engine(server.db_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(sa.text("SELECT * FROM api_keys WHERE key_id = :k"), {"k": key_id(key)}).one()
    finally:
        engine.dispose()
    secret = key.split("_", 2)[2]
    assert secret not in " ".join(str(v) for v in stored)
    import hashlib

    assert stored.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()


def test_a_bad_tenant_for_a_key_is_a_validation_error(server: ServerProcess) -> None:
    with pytest.raises(ValidationError):
        server.key("")
