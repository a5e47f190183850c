"""Several processes on one store: the CLI talks to the server that owns it instead of failing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from portamem import RemoteMemory
from portamem.client import discover
from portamem_conformance.remote import ServerProcess


def portamem(*args: str, key: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PORTAMEM_API_KEY": key}
    return subprocess.run([sys.executable, "-m", "portamem", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def test_the_cli_uses_the_server_that_owns_the_store(server: ServerProcess, remote: RemoteMemory,
                                                     tenant_key: str) -> None:
    saved = remote.save_memory("The spare key is under the third flower pot.", user_id="cli-user")
    assert discover(server.path) == server.url
    found = portamem("--path", str(server.path), "search", "where is the spare key", "--user", "cli-user", "--json",
                     key=tenant_key)
    assert found.returncode == 0, found.stderr
    assert "using the server" in found.stderr
    assert [h["memory_id"] for h in json.loads(found.stdout)][:1] == [saved.memory_id]
    shown = portamem("--url", server.url, "show", saved.memory_id, "--user", "cli-user", key=tenant_key)
    assert shown.returncode == 0, shown.stderr
    assert "third flower pot" in shown.stdout


def test_keys_commands_create_list_and_revoke(server: ServerProcess) -> None:
    created = portamem("--path", str(server.path), "keys", "create", "--for-tenant", "cli-tenant", "--user", "ann",
                       "--read-only", "--json", key="")
    assert created.returncode == 0, created.stderr
    made = json.loads(created.stdout)
    with RemoteMemory(server.url, made["api_key"]) as mem:
        assert (mem.tenant_id, mem.key_id) == ("cli-tenant", made["key_id"])
    listed = portamem("--path", str(server.path), "keys", "list", "--json", key="")
    assert made["key_id"] in {k["key_id"] for k in json.loads(listed.stdout)}
    # the secret is what follows the key id (split as the server parses a key: the secret may hold "_")
    assert "api_key" not in listed.stdout and made["api_key"].split("_", 2)[2] not in listed.stdout
    revoked = portamem("--path", str(server.path), "keys", "revoke", made["key_id"], key="")
    assert revoked.returncode == 0, revoked.stderr
    assert made["key_id"] not in {k["key_id"] for k in json.loads(
        portamem("--path", str(server.path), "keys", "list", "--json", key="").stdout)}


def test_serve_refuses_a_public_address_without_keys(tmp_path: os.PathLike[str]) -> None:
    refused = portamem("--path", str(tmp_path), "serve", "--host", "0.0.0.0", "--port", "0", key="")
    assert refused.returncode == 2
    assert "refusing to serve" in refused.stderr
