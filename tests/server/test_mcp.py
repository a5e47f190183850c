"""The MCP tools through the mcp client, in process: save, search, explain, forget, errors, user scope."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.server.mcp_tools import build_mcp  # noqa: E402


def payload(result: object) -> dict:
    assert not result.is_error, result  # type: ignore[attr-defined]
    data = result.structured_content  # type: ignore[attr-defined]
    if isinstance(data, dict) and set(data) == {"result"}:
        data = data["result"]
    return data if isinstance(data, dict) else json.loads(result.content[0].text)  # type: ignore[attr-defined]


async def test_the_tools_save_search_explain_and_forget_for_one_user(memory: Memory) -> None:
    memory.save_memory("Bob's flight lands at 9pm.", user_id="bob")
    async with Client(build_mcp(memory, user_id="alice")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"save_memory", "search_memory", "forget_memory", "explain_memory"}
        saved = payload(await client.call_tool("save_memory", {"content": "我对花生过敏。I am allergic to peanuts."}))
        assert saved["status"] == "active"
        found = payload(await client.call_tool("search_memory", {"query": "peanuts", "top_k": 3}))
        assert [m["memory_id"] for m in found["memories"]] == [saved["memory_id"]]
        assert saved["memory_id"] in found["prompt"]
        # the tools act for alice only: bob's memory is never found, nor reachable by id
        flight = payload(await client.call_tool("search_memory", {"query": "When does the flight land?"}))
        assert [m["memory_id"] for m in flight["memories"]] in ([], [saved["memory_id"]])
        why = payload(await client.call_tool("explain_memory", {"memory_id": saved["memory_id"]}))
        assert why["user_id"] == "alice" and why["written_by"] == "saved through the API"
        gone = payload(await client.call_tool("forget_memory", {"memory_id": saved["memory_id"]}))
        assert gone["forgotten"] == [saved["memory_id"]]
        assert payload(await client.call_tool("search_memory", {"query": "peanuts"}))["memories"] == []
        missing = await client.call_tool("explain_memory", {"memory_id": "0" * 32})
        assert missing.is_error and "no memory" in missing.content[0].text
        blank = await client.call_tool("save_memory", {"content": "   "})
        assert blank.is_error
    assert [r.content for r in memory.list_memories(user_id="alice")] == []


async def test_portamem_mcp_on_stdio_over_a_server(server: object) -> None:
    """``portamem mcp --url ...`` as an agent launches it: a subprocess on stdio, its memory on the server."""
    import os
    import sys

    from mcp import StdioServerParameters

    from portamem import RemoteMemory

    key = server.key("mcp-tenant", users=["dana"])  # type: ignore[attr-defined]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "portamem", "--url", server.url, "mcp", "--user", "dana"],  # type: ignore[attr-defined]
        env={**os.environ, "PORTAMEM_API_KEY": key},
    )
    async with Client(params) as client:
        saved = payload(await client.call_tool("save_memory", {"content": "Dana's bakery opens at 7am."}))
        found = payload(await client.call_tool("search_memory", {"query": "when does the bakery open"}))
        assert found["memories"][0]["memory_id"] == saved["memory_id"]
    with RemoteMemory(server.url, key) as mem:  # type: ignore[attr-defined]
        record = mem.get_memory(saved["memory_id"], user_id="dana")
        assert record.tenant_id == "mcp-tenant"
        assert {h["actor"] for h in mem.history(record.memory_id, user_id="dana")} == {key.split("_")[1]}


async def test_the_tools_over_a_server_read_as_the_keys_agent(server: object, user: str) -> None:
    """Over a server, the tools' reads are the key's: an agent key finds its agent's memories and the
    shared layer's, never another agent's, and explains none of those."""
    from portamem import RemoteMemory

    with RemoteMemory(server.url, server.key("mcp-agents")) as admin:  # type: ignore[attr-defined]
        shared = admin.save_memory("The studio's kiln fires on Fridays.", user_id=user, wait=True)
        theirs = admin.save_memory("The studio's kiln door sticks.", user_id=user, agent_id="support", wait=True)
    with RemoteMemory(server.url, server.key("mcp-agents", agents=["sales"])) as sales:  # type: ignore[attr-defined]
        async with Client(build_mcp(sales, user_id=user)) as client:
            found = payload(await client.call_tool("search_memory", {"query": "the studio's kiln", "top_k": 5}))
            assert [m["memory_id"] for m in found["memories"]] == [shared.memory_id]
            hidden = await client.call_tool("explain_memory", {"memory_id": theirs.memory_id})
            assert hidden.is_error and "NotFoundError" in hidden.content[0].text  # type: ignore[attr-defined]
