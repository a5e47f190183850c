"""No answer of the server carries the personal data a memory or a query held: what a save redacted stays
redacted in every read route, what a turn captures keeps no piece of it, and a debug search's candidate
table (sent back, printed by the client, kept in its logs) shows the query redacted."""

from __future__ import annotations

import io
from typing import Any

import httpx

from portamem import RemoteMemory
from portamem_conformance.remote import ServerProcess, mint_key

EMAIL = "dana.smith@example.com"
SECRETS = [EMAIL, "dana.smith", "smith@example", "13812345678", "3704 0044", "X1234567"]


def _clean(r: httpx.Response) -> None:
    assert r.status_code < 400, r.text
    assert not [s for s in SECRETS if s in r.text], (r.request.url, r.text[:500])


def test_no_read_route_echoes_what_a_save_or_a_turn_held(server: ServerProcess, user: str) -> None:
    key = mint_key(server.db_url, "pii-echo", scopes=["debug"])
    c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    saved = c.post("/v1/memories", json={"user_id": user, "wait": True, "metadata": {"contact": EMAIL},
                                         "content": f"Email me at {EMAIL} or call 13812345678"})
    _clean(saved)
    _clean(c.post("/v1/memories", json={"user_id": user, "wait": True,
                                        "content": "My IBAN is DE89 3704 0044 0532 0130 00."}))
    for said in (f"My email is {EMAIL} and my phone is 13812345678", "My passport no. X1234567 expires in May."):
        _clean(c.post("/v1/turns", json={"user_id": user, "session_id": "s", "user": said, "assistant": "Noted."}))
    _clean(c.post("/v1/flush", json={}))
    memory_id = saved.json()["memory_id"]
    q: dict[str, Any] = {"user_id": user}
    _clean(c.post("/v1/search", json={"user_id": user, "query": f"is {EMAIL} my e-mail?", "debug": True}))
    _clean(c.post("/v1/search", json={"user_id": user, "query": "what is my e-mail?", "window_session": "s"}))
    _clean(c.post("/v1/memories/list", json={"user_id": user}))
    _clean(c.get(f"/v1/memories/{memory_id}", params=q))
    _clean(c.get(f"/v1/memories/{memory_id}/history", params=q))
    _clean(c.get(f"/v1/memories/{memory_id}/explain", params=q))
    _clean(c.get("/v1/context", params={**q, "session_id": "s"}))
    _clean(c.post("/v1/audit", json=q))
    _clean(c.get("/v1/export"))
    c.close()


def test_a_debug_search_shows_its_query_redacted(server: ServerProcess, user: str) -> None:
    key = mint_key(server.db_url, "pii-debug", scopes=["debug"])
    r = httpx.post(server.url + "/v1/search", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                   json={"user_id": user, "query": f"is {EMAIL} my e-mail?", "debug": True})
    assert r.status_code == 200 and r.json()["query"] == "is [EMAIL] my e-mail?"
    printed = io.StringIO()
    with RemoteMemory(server.url, key) as remote:
        remote.save_memory(f"Email me at {EMAIL}", user_id=user, wait=True)
        remote.search_memory(f"is {EMAIL} my e-mail?", user_id=user, debug=printed)
    assert "query: 'is [EMAIL] my e-mail?'" in printed.getvalue() and EMAIL not in printed.getvalue()
