"""Erasing a user over HTTP (``POST /v1/users/erase``, ``RemoteMemory.erase_user``): a read-write key with the
``admin`` scope erases everything of one user of its tenant, and nobody else can."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import timedelta

import httpx
import pytest

from portamem import RemoteMemory
from portamem.errors import AuthenticationError, NotFoundError, PermissionDeniedError
from portamem.lifecycle.erasure import Erasure
from portamem_conformance.remote import ServerProcess, mint_key


def test_an_admin_key_erases_one_user_of_its_tenant(server: ServerProcess) -> None:
    admin = RemoteMemory(server.url, mint_key(server.db_url, "erase-http", scopes=["admin"]))
    try:
        kept = admin.save_memory("I love the cellist Hildegunnvar.", user_id="eve", wait=True)
        gone = admin.save_memory("My bike lock word is quokkafeather.", user_id="dana", wait=True)
        admin.save_memory("我的保险箱密码藏在翡翠鹦鹉雕像里。", user_id="dana", wait=True)
        admin.set_tier(gone.memory_id, "cold", user_id="dana")
        admin.add_turn("Remind me the gate code is plumbquartzite.", "Noted.", user_id="dana", session_id="s")
        done = admin.erase_user(user_id="dana")
        assert isinstance(done, Erasure) and done.memories == 2 and done.user_id == "dana"
        assert done.rows["memories_cold"] == 1 and done.rows["turns"] == 1
        for query in ("quokkafeather", "翡翠鹦鹉"):
            assert admin.search_memory(query, user_id="dana", tiers=["hot", "warm", "cold"]) == []
        with pytest.raises(NotFoundError):
            admin.get_memory(gone.memory_id, user_id="dana")
        assert admin.context(user_id="dana", session_id="s") == []
        assert admin.user_ids() == ["eve"]
        assert [h.memory_id for h in admin.search_memory("Hildegunnvar", user_id="eve")] == [kept.memory_id]
        again = asyncio.run(admin.aerase_user(user_id="dana"))  # nothing left: an erasure of nothing
        assert again.memories == 0
    finally:
        admin.close()


@pytest.mark.parametrize("scope", [
    {},  # no admin scope
    {"scopes": ["admin"], "read_only": True},
    {"scopes": ["admin"], "users": ["eve"]},  # not a key for that user
])
def test_other_keys_cannot_erase(server: ServerProcess, scope: dict) -> None:
    writer = RemoteMemory(server.url, mint_key(server.db_url, "erase-refused"))
    other = RemoteMemory(server.url, mint_key(server.db_url, "erase-refused", **scope))
    try:
        rec = writer.save_memory("I keep a pet axolotl named Zorblaxion.", user_id="dana", wait=True)
        with pytest.raises(PermissionDeniedError):
            other.erase_user(user_id="dana")
        assert writer.get_memory(rec.memory_id, user_id="dana").content == rec.content
    finally:
        writer.close()
        other.close()


def test_no_key_no_erasure(server: ServerProcess) -> None:
    answer = httpx.post(f"{server.url}/v1/users/erase", json={"user_id": "dana"})
    assert answer.status_code == 401 and answer.json()["error"]["type"] == AuthenticationError.__name__


def test_the_cli_erases_through_the_server_and_asks_for_yes(server: ServerProcess) -> None:
    key = mint_key(server.db_url, "erase-cli", scopes=["admin"])
    with RemoteMemory(server.url, key) as mem:
        rec = mem.save_memory("My bike lock word is quokkafeather.", user_id="dana", wait=True)
        env = {**os.environ, "PORTAMEM_API_KEY": key}
        run = [sys.executable, "-m", "portamem", "--url", server.url, "erase-user", "--user", "dana"]
        refused = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300, check=False)
        assert refused.returncode == 2 and "--yes" in refused.stderr
        assert mem.get_memory(rec.memory_id, user_id="dana").content == rec.content
        done = subprocess.run([*run, "--yes", "--json"], capture_output=True, text=True, env=env, timeout=300,
                              check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["memories"] == 1
        with pytest.raises(NotFoundError):
            mem.get_memory(rec.memory_id, user_id="dana")


def test_a_forgotten_memory_cannot_go_cold_over_http(server: ServerProcess) -> None:
    """``POST /v1/memories/tier`` refuses a forgotten memory as ``set_tier`` does: it would outlive its purge."""
    key = mint_key(server.db_url, "forget-tier")
    with RemoteMemory(server.url, key) as mem:
        rec = mem.save_memory("My locker code is 7731.", user_id="dana", wait=True)
        mem.forget_memory(rec.memory_id, user_id="dana")
        answer = httpx.post(f"{server.url}/v1/memories/tier", headers={"Authorization": f"Bearer {key}"},
                            json={"user_id": "dana", "memory_ids": [rec.memory_id], "tier": "cold"})
        assert answer.status_code == 422 and answer.json()["error"]["type"] == "ValidationError"
        assert "forgotten" in answer.json()["error"]["message"]
        assert mem.purge_deleted(older_than=timedelta(0)) == 1
        with pytest.raises(NotFoundError):
            mem.get_memory(rec.memory_id, user_id="dana")
