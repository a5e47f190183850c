"""What a new user meets first: store options after the subcommand, an empty result that says where it
looked, the right AgentScope class named, and no stray log lines (pymilvus on open, httpx under MCP)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from portamem.cli import build_parser
from portamem_conformance.remote import ServerProcess


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "portamem", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_store_options_are_taken_after_the_subcommand_too() -> None:
    parser = build_parser()
    after = parser.parse_args(["search", "q", "--user", "u", "--path", "/x", "--tenant", "t", "--config", "c.toml"])
    before = parser.parse_args(["--path", "/x", "--tenant", "t", "--config", "c.toml", "search", "q", "--user", "u"])
    for args in (after, before):
        assert (args.path, args.tenant, args.config, args.url, args.api_key) == ("/x", "t", "c.toml", None, None)
    nested = parser.parse_args(["keys", "create", "--for-tenant", "a", "--url", "http://h:1", "--api-key", "k"])
    assert (nested.url, nested.api_key, nested.path) == ("http://h:1", "k", None)


def test_an_empty_search_says_which_tenant_and_user_it_searched(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    done = _cli("search", "anything", "--user", "dana", "--path", store, "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    assert "nothing recalled for user 'dana' in tenant 'acme'" in done.stdout


def test_an_empty_search_through_a_server_names_the_keys_tenant(server: ServerProcess) -> None:
    key = server.key("empty-tenant")
    done = _cli("search", "anything", "--user", "dana", "--url", server.url, "--api-key", key)
    assert done.returncode == 0, done.stderr
    assert "nothing recalled for user 'dana' in tenant 'empty-tenant' of " + server.url in done.stdout


def test_search_debug_through_the_server_prints_the_candidate_table(server: ServerProcess) -> None:
    from portamem_conformance.remote import mint_key

    key = mint_key(server.db_url, "debug-cli", scopes=["debug"])
    from portamem import RemoteMemory

    with RemoteMemory(server.url, key) as mem:
        mem.save_memory("Dana is allergic to hazelnuts.", user_id="dana")
    done = _cli("--url", server.url, "search", "hazelnuts", "--user", "dana", "--debug", env={"PORTAMEM_API_KEY": key})
    assert done.returncode == 0, done.stderr
    assert "query: 'hazelnuts'" in done.stderr and "kept: Dana is allergic to hazelnuts." in done.stderr
    plain = _cli("--url", server.url, "search", "hazelnuts", "--user", "dana", "--debug",
                 env={"PORTAMEM_API_KEY": server.key("debug-cli")})
    assert plain.returncode == 2 and "debug" in plain.stderr  # a key without the scope is told why


def test_agentscope_2_names_the_class_to_use() -> None:
    with pytest.raises(ImportError, match="PortamemMiddleware") as caught:
        from portamem_agentscope import PortamemLongTermMemory  # noqa: F401
    assert "portamem_agentscope.v1" in str(caught.value)


def test_opening_a_store_logs_no_traceback_when_the_app_configures_logging(tmp_path: Path) -> None:
    code = ("import logging, sys\n"
            "logging.basicConfig(level=logging.INFO, stream=sys.stderr)\n"
            "from portamem import Memory\n"
            f"with Memory({str(tmp_path / 'store')!r}) as m:\n"
            "    m.save_memory('hello there', user_id='u', wait=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "NotImplementedError" not in done.stderr, done.stderr[-2000:]


async def test_portamem_mcp_logs_no_line_per_call(server: ServerProcess) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    key = server.key("mcp-quiet", users=["dana"])
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "portamem", "--url", server.url, "mcp", "--user", "dana"],
                                   env={**os.environ, "PORTAMEM_API_KEY": key})
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(3):
                result = await session.call_tool("search_memory", {"query": "anything"})
                assert not result.isError if hasattr(result, "isError") else not result.is_error
            text = result.content[0].text
            assert "nothing found for user 'dana' in tenant 'mcp-quiet'" in text
        errlog.seek(0)
        logged = errlog.read()
    assert "HTTP Request" not in logged, logged[-2000:]
