"""A client in another language: a Node.js script using only fetch saves and searches through the API."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from portamem_conformance.remote import ServerProcess

SCRIPT = Path(__file__).with_name("fetch_client.mjs")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_fetch_saves_and_searches(server: ServerProcess) -> None:
    proc = subprocess.run(["node", str(SCRIPT), server.url, server.key("node"), "node-user"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["saved"]["status"] == 201 and len(out["saved"]["memory_id"]) == 32
    assert out["batch"] == {"status": 201, "count": 2}
    assert out["top"][0]["memory_id"] == out["saved"]["memory_id"]
    assert out["top"][0]["found_by"] and out["top"][0]["final"] > 0
    assert out["chinese"] == [out["saved"]["memory_id"]]
    assert out["missing"] == {"status": 404, "type": "NotFoundError"}
    assert out["no_key"] == 401
