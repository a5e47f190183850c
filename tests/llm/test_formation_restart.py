"""Formation against a real model server that goes away: killed in the middle of a backlog, and not
there when the store opens. Each test starts its own llama.cpp server over the model the session's
``local_llm`` fixture assembled (it skips, or fails under ``PORTAMEM_LLM_REQUIRE=1``, where the model
cannot be had), so that killing it leaves the other tests theirs.

What must hold: every acknowledged turn's statement is kept (the rule pass wrote it); recall serves it
while the model is away; the turns wait in the queue (not formed by the rules at once) and are formed,
each once, when the model is back, after a restart of the store too.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.storage.schema import FORMED, formation_t
from portamem_conformance.local_model import Endpoint, LlamaServer, assemble_model, free_port, start_server

TURNS = [("I live in Lyon and work as a nurse.", "Nice."), ("Actually I moved to Paris last month.", "Great!"),
         ("My budget for the kitchen is 5000 euros.", "Noted."), ("The kitchen budget is now 8000 euros.", "OK."),
         ("我每周跑20公里。", "很好。"), ("最近周跑量加到35公里了。", "厉害！")]


def _server(port: int | None = None) -> LlamaServer:
    python = os.environ.get("PORTAMEM_LLAMA_PYTHON") or sys.executable
    if python == sys.executable and importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed here (tox -e llm)")
    return start_server(assemble_model(), python=python, port=port)


def _states(mem: Memory) -> list[int]:
    with mem.store.engine.connect() as conn:
        return [r[0] for r in conn.execute(sa.select(formation_t.c.state).order_by(formation_t.c.pk))]


def _forms(mem: Memory) -> dict[str, int]:
    """How many times each statement was formed (its ``form`` audit rows, one per decision and turn)."""
    out: dict[str, int] = {}
    with mem.store.engine.connect() as conn:
        for memory_ids, in conn.execute(sa.select(formation_t.c.memory_ids)):
            for memory_id in memory_ids:
                turns = {e["ts"] for e in mem.store.audit_trail(mem.tenant_id, memory_id) if e["action"] == "form"}
                out[memory_id] = len(turns)
    return out


def _kept(mem: Memory) -> set[str]:
    return {m.content for m in mem.list_memories(user_id="u", filters={"statuses": ["active", "superseded",
                                                                                  "pending"]})}


def test_a_model_killed_mid_backlog_loses_nothing_and_formation_resumes_after_a_restart(
        local_llm: Endpoint, tmp_path: Path, embedder: Embedder) -> None:
    if local_llm.server is None:
        pytest.skip("the model runs elsewhere (PORTAMEM_TEST_LLM_URL): this test kills its own server")
    server = _server()
    settings = Settings(path=str(tmp_path / "s"), llm_url=server.url, llm_model=server.model, llm_timeout_s=60)
    try:
        with Memory(settings=settings, embedder=embedder) as mem:
            for user, assistant in TURNS:
                mem.add_turn(user, assistant, user_id="u", session_id="s")
            deadline = time.monotonic() + 240
            while mem.stats().model["outcomes"]["ok"] < 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert mem.stats().model["outcomes"]["ok"] >= 1, "the model never answered"
            server.process.send_signal(signal.SIGKILL)  # killed, mid-backlog
            server.process.wait(timeout=15)
            mem.indexer.flush(60)
            time.sleep(3)
            assert mem.stats().formation.pending >= 1  # the rest waits for the model
            assert {u for u, _ in TURNS} <= _kept(mem)  # nothing acknowledged is lost
            assert mem.search_memory("how far do I run each week", user_id="u")  # the rule pass serves recall
        again = _server(port=server.port)  # the model is back, where the settings say
        try:
            with Memory(settings=settings, embedder=embedder) as mem:
                mem.flush(timeout=600)
                assert _states(mem) == [FORMED] * len(TURNS)
                assert all(n <= 1 for n in _forms(mem).values()), _forms(mem)  # none formed twice
                assert {u for u, _ in TURNS} <= _kept(mem)
        finally:
            again.stop()
    finally:
        server.stop()


def test_a_model_down_at_start_leaves_the_rules_serving_and_the_backlog_waiting(
        local_llm: Endpoint, tmp_path: Path, embedder: Embedder) -> None:
    if local_llm.server is None:
        pytest.skip("the model runs elsewhere (PORTAMEM_TEST_LLM_URL): this test starts its own server")
    port = free_port()
    settings = Settings(path=str(tmp_path / "s"), llm_url=f"http://127.0.0.1:{port}/v1", llm_model=local_llm.model,
                        llm_timeout_s=60)
    with Memory(settings=settings, embedder=embedder) as mem:
        for user, assistant in TURNS:
            start = time.monotonic()
            mem.add_turn(user, assistant, user_id="u", session_id="s")
            assert time.monotonic() - start < 2.0
        mem.indexer.flush(60)
        time.sleep(3)
        waiting = mem.stats().formation
        assert waiting.pending >= 1 and "cannot be reached" in (waiting.last_error or "")
        assert {u for u, _ in TURNS} <= _kept(mem)
        assert mem.search_memory("where do I live", user_id="u")
        server = _server(port=port)
        try:
            mem.formation.notify()
            mem.flush(timeout=600)
            assert _states(mem) == [FORMED] * len(TURNS)
            assert mem.stats().model["outcomes"]["ok"] >= 1
        finally:
            server.stop()
