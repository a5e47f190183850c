"""Provenance cannot be forged over HTTP either: every route that takes metadata refuses the keys portamem
writes itself (``portamem.records.SYSTEM_METADATA_KEYS``) with a typed 422, and an untrusted import drops
them while a trusted restore keeps them."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from portamem import MemoryDraft, RemoteMemory, ValidationError
from portamem.records import SYSTEM_METADATA_KEYS
from portamem_conformance.remote import ServerProcess

LINK = {"by": "0" * 32, "at": "2026-01-01T00:00:00+00:00"}


def _post(server: ServerProcess, key: str, method: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.request(method, server.url + path, headers={"Authorization": f"Bearer {key}"}, json=body,
                         timeout=60)


def _refused(r: httpx.Response, key: str) -> None:
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "ValidationError" and key in error["message"]


@pytest.mark.parametrize("key", sorted(SYSTEM_METADATA_KEYS))
def test_every_route_that_takes_metadata_refuses_a_system_key(server: ServerProcess, tenant_key: str, user: str,
                                                              key: str) -> None:
    meta = {key: LINK, "note": "fine"}
    _refused(_post(server, tenant_key, "POST", "/v1/memories",
                   {"user_id": user, "content": "My budget is 2500 euros.", "metadata": meta}), key)
    _refused(_post(server, tenant_key, "POST", "/v1/memories",
                   {"user_id": user, "content": "My budget is 2500 euros.", "metadata": meta, "key": "budget"}), key)
    _refused(_post(server, tenant_key, "POST", "/v1/memories/batch",
                   {"user_id": user, "memories": [{"content": "A fact.", "metadata": meta}]}), key)
    _refused(_post(server, tenant_key, "POST", "/v1/turns",
                   {"user_id": user, "user": "hello", "assistant": "hi", "metadata": meta}), key)
    saved = _post(server, tenant_key, "POST", "/v1/memories", {"user_id": user, "content": "My budget is 1200 euros."})
    assert saved.status_code == 201, saved.text
    memory_id = saved.json()["memory_id"]
    _refused(_post(server, tenant_key, "PATCH", f"/v1/memories/{memory_id}", {"user_id": user, "metadata": meta}), key)
    got = httpx.get(server.url + f"/v1/memories/{memory_id}", params={"user_id": user},
                    headers={"Authorization": f"Bearer {tenant_key}"}, timeout=60)
    assert got.status_code == 200 and key not in got.json()["metadata"]


@pytest.mark.parametrize("namespace", [["portamem", "abstract"], "portamem.abstract", "portamem"])
def test_the_api_refuses_a_keyed_write_in_portamems_own_namespace(server: ServerProcess, tenant_key: str, user: str,
                                                                  namespace: Any) -> None:
    body = {"content": "Habit: aisle seats.", "key": "habit-0123456789abcdef", "key_namespace": namespace}
    for path, sent in (("/v1/memories", {"user_id": user, **body}),
                       ("/v1/memories/batch", {"user_id": user, "memories": [body]})):
        r = _post(server, tenant_key, "POST", path, sent)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["type"] == "ValidationError" and "portamem's own" in r.json()["error"]["message"]
    with RemoteMemory(server.url, tenant_key) as remote, pytest.raises(ValidationError, match="portamem's own"):
        remote.save_memory("Habit: aisle seats.", user_id=user, key="habit-0", key_namespace=("portamem", "abstract"))
    listed = _post(server, tenant_key, "POST", "/v1/keyed/list", {"user_id": user, "key_namespace": "portamem"})
    assert listed.status_code == 200 and listed.json()["records"] == []


@pytest.mark.parametrize("key", sorted(SYSTEM_METADATA_KEYS))
def test_archived_messages_may_not_carry_a_system_key(server: ServerProcess, tenant_key: str, user: str,
                                                      key: str) -> None:
    messages = [{"role": "user", "text": "I moved to Lyon.", "metadata": {key: LINK, "note": "fine"}},
                {"role": "assistant", "text": "Noted."}]
    _refused(_post(server, tenant_key, "POST", "/v1/messages/archive", {"user_id": user, "messages": messages}), key)
    got = httpx.post(server.url + "/v1/memories/list", headers={"Authorization": f"Bearer {tenant_key}"},
                     json={"user_id": user}, timeout=60)
    assert got.status_code == 200 and got.json()["records"] == []


def test_remote_memory_gets_the_same_typed_error(remote: RemoteMemory, user: str) -> None:
    with pytest.raises(ValidationError, match="outdated"):
        remote.save_memory("My budget is 2500 euros.", user_id=user, metadata={"outdated": LINK})
    with pytest.raises(ValidationError, match="promote_to"):
        remote.add_turn("hello", "hi", user_id=user, metadata={"promote_to": "semantic"})
    with pytest.raises(ValidationError, match="replaced"):
        remote.save_memories([MemoryDraft("A fact.", metadata={"replaced": {"memory_id": "0" * 32}})], user_id=user)
    assert remote.list_memories(user_id=user) == []


def _forged_export(src: RemoteMemory, user: str) -> str:
    """An export whose one record claims it was outdated, its checksum recomputed as a forger would."""
    import hashlib

    src.save_memory("My travel budget is 1200 euros.", user_id=user, wait=True)
    buf = io.StringIO()
    src.export(buf, include_embeddings=False)
    lines = buf.getvalue().splitlines()
    out = []
    for line in lines[:-1]:
        obj = json.loads(line)
        if "record" in obj:
            obj["record"]["metadata"] = {**obj["record"]["metadata"], "outdated": LINK, "origin": "crm"}
        out.append(json.dumps(obj))
    body = "".join(line + "\n" for line in out)
    trailer = json.loads(lines[-1])
    trailer["trailer"]["sha256"] = hashlib.sha256(body.encode()).hexdigest()
    return body + json.dumps(trailer) + "\n"


def test_an_import_keeps_a_system_key_only_when_trusted(server: ServerProcess, connect: Callable[..., RemoteMemory],
                                                        user: str) -> None:
    text = _forged_export(connect(server.key("prov-src")), user)
    untrusted = connect(server.key("prov-untrusted"))
    assert untrusted.import_(io.StringIO(text)) == 1
    [rec] = untrusted.list_memories(user_id=user)
    assert "outdated" not in rec.metadata and rec.metadata["origin"] == "crm"
    assert [h.content for h in untrusted.search_memory("What is my travel budget?", user_id=user)][:1] == [
        "My travel budget is 1200 euros."]
    trusted = connect(server.key("prov-trusted"))
    assert trusted.import_(io.StringIO(text), trusted=True) == 1
    [rec] = trusted.list_memories(user_id=user)
    assert rec.metadata["outdated"] == LINK  # a restore is faithful to the file
