"""Metadata filters over HTTP (``RemoteMemory``, the raw route) and through the MCP search tool:
the same hits and the same typed errors as in process."""

from __future__ import annotations

import json

import httpx
import pytest
from portamem import Memory, RemoteMemory
from portamem.errors import ValidationError
from portamem.filters import SearchFilters
from portamem_conformance.remote import ServerProcess

NOTES = [("The rocket launch checklist is in the shared drive", {"project": "apollo", "priority": 3}),
         ("The rocket launch checklist lives in Notion", {"project": "gemini", "priority": 5}),
         ("Rocket launch checklist: check the fuel lines", {"project": "apollo", "priority": 1}),
         ("火箭发射检查清单放在共享盘里", {"project": "apollo", "priority": 4, "owner": {"team": "核心"}})]


def _fill(mem: Memory | RemoteMemory, user: str) -> None:
    for content, meta in NOTES:
        mem.save_memory(content, user_id=user, metadata=meta)
    mem.flush()


def test_remote_search_and_list_filter_by_metadata(remote: RemoteMemory, user: str) -> None:
    _fill(remote, user)
    f = {"metadata": {"project": "apollo", "priority": {"$gte": 2}}}
    hits = remote.search_memory("rocket launch checklist", user_id=user, filters=f, top_k=10)
    assert {h.record.content for h in hits} == {NOTES[0][0], NOTES[3][0]}
    same = remote.search_memory("rocket launch checklist", user_id=user, top_k=10,
                                filters=SearchFilters.coerce(f))  # the typed form travels as JSON too
    assert [h.memory_id for h in same] == [h.memory_id for h in hits]
    listed = remote.list_memories(user_id=user, filters={"metadata": {"owner.team": "核心"}})
    assert [r.content for r in listed] == [NOTES[3][0]]
    some = remote.list_memories(user_id=user, filters={"metadata": {"priority": {"$in": [1, 5]}}})
    assert sorted(r.metadata["priority"] for r in some) == [1, 5]


def test_remote_bad_metadata_filter_is_a_typed_error(remote: RemoteMemory, server: ServerProcess,
                                                     tenant_key: str, user: str) -> None:
    with pytest.raises(ValidationError, match=r"unknown operator '\$regex'"):
        remote.search_memory("x", user_id=user, filters={"metadata": {"p": {"$regex": "a"}}})
    with pytest.raises(ValidationError, match="levels deep"):
        remote.list_memories(user_id=user, filters={"metadata": {"a.b.c.d.e.f.g": 1}})
    raw = httpx.post(server.url + "/v1/search", headers={"Authorization": f"Bearer {tenant_key}"}, timeout=30,
                     json={"user_id": user, "query": "x", "filters": {"metadata": {"p": {"$gt": None}}}})
    assert raw.status_code == 422 and "finite number or a string" in raw.text
    schema = httpx.get(server.url + "/openapi.json", timeout=30).json()
    assert "$gte" in json.dumps(schema["components"]["schemas"]["SearchRequest"])


async def test_mcp_search_tool_takes_a_metadata_filter(memory: Memory) -> None:
    pytest.importorskip("mcp")
    from mcp import Client
    from portamem.server.mcp_tools import build_mcp

    _fill(memory, "alice")
    async with Client(build_mcp(memory, user_id="alice")) as client:
        found = await client.call_tool("search_memory", {"query": "rocket launch checklist", "top_k": 10,
                                                         "metadata": {"project": "gemini"}})
        assert not found.is_error
        text = json.dumps(found.structured_content) if found.structured_content else found.content[0].text
        assert "Notion" in text and "shared drive" not in text
        bad = await client.call_tool("search_memory", {"query": "x", "metadata": {"p": {"$foo": 1}}})
        assert bad.is_error and "ValidationError" in bad.content[0].text
