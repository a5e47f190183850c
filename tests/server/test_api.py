"""The whole public API over HTTP: the same results and the same typed errors as in process."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import httpx
import pytest

from portamem import MemoryDraft, RemoteMemory
from portamem.errors import ContentTooLongError, NotFoundError, ValidationError
from portamem_conformance.remote import ServerProcess


def test_openapi_schema_lists_the_api(server: ServerProcess) -> None:
    schema = httpx.get(server.url + "/openapi.json", timeout=30).json()
    for path in ("/v1/memories", "/v1/memories/batch", "/v1/search", "/v1/memories/{memory_id}", "/v1/turns",
                 "/v1/context", "/v1/export", "/v1/import", "/v1/maintain", "/v1/audit",
                 "/v1/memories/{memory_id}/explain", "/v1/memories/forget", "/v1/memories/{memory_id}/reveal",
                 "/v1/purge", "/v1/reindex", "/v1/turns/pop"):
        assert path in schema["paths"], path
    assert "tenant_id" not in json.dumps(schema["components"]["schemas"]["SaveRequest"])


def test_save_search_get_list_history(remote: RemoteMemory, user: str) -> None:
    one = remote.save_memory("My cat is called Tom and he sleeps on the piano.", user_id=user, importance=0.8,
                             metadata={"k": "v"}, session_id="s1")
    batch = remote.save_memories([MemoryDraft(content="I moved to Oslo in 2019."), "我喜欢喝茉莉花茶。",
                                  {"content": "My sister lives in Porto.", "type": "episodic"}], user_id=user)
    assert [r.content for r in batch] == ["I moved to Oslo in 2019.", "我喜欢喝茉莉花茶。", "My sister lives in Porto."]
    assert one.importance == 0.8 and one.metadata["k"] == "v" and one.session_id == "s1"
    hits = remote.search_memory("what is my cat called", user_id=user, top_k=2)
    assert hits[0].memory_id == one.memory_id
    assert set(hits[0].found_by) <= {"vector", "keyword", "entity"} and hits[0].found_by
    assert set(hits[0].breakdown.components) >= {"vector", "keyword", "recency", "importance"}
    assert hits[0].breakdown.final == pytest.approx(hits[0].score, abs=1e-6) or hits[0].score > 0
    assert remote.search_memory("茉莉花茶", user_id=user, top_k=1)[0].content == "我喜欢喝茉莉花茶。"
    assert remote.search_memory("Porto", user_id=user, filters={"types": ["episodic"]})[0].content.endswith("Porto.")
    assert remote.get_memory(one.memory_id, user_id=user) == remote.list_memories(user_id=user)[0]
    assert len(remote.list_memories(user_id=user, limit=2, offset=1)) == 2
    assert [h["action"] for h in remote.history(one.memory_id, user_id=user)] == ["save"]


def test_change_operations(remote: RemoteMemory, user: str) -> None:
    rec = remote.save_memory("The garage code is 4471.", user_id=user)
    assert remote.refresh_memory(rec.memory_id, 0.2, user_id=user).importance == pytest.approx(
        min(1.0, rec.importance + 0.2))
    updated = remote.update_memory(rec.memory_id, user_id=user, content="The garage code is 9902.")
    assert updated.memory_id == rec.memory_id and "9902" in updated.content
    assert remote.forget_memory(rec.memory_id, user_id=user) == [rec.memory_id]
    assert remote.search_memory("garage code", user_id=user) == []
    assert remote.restore_memory(rec.memory_id, user_id=user).status.value == "active"
    assert [h["action"] for h in remote.history(rec.memory_id, user_id=user)] == [
        "save", "refresh", "update", "forget", "restore"]
    pending = remote.save_memory("The CEO's password hint is 'blue'.", user_id=user, source="web")
    assert pending.status.value == "pending"
    assert remote.confirm_memory(pending.memory_id, user_id=user).status.value == "active"


def test_working_window_and_explain(remote: RemoteMemory, user: str) -> None:
    for i in range(3):
        remote.add_turn(f"question {i}", f"answer {i}", user_id=user, session_id="chat")
    written = remote.add_turn("Please remember that I am allergic to hazelnuts.", "Noted.", user_id=user,
                              session_id="chat")
    assert any("hazelnuts" in r.content for r in written)
    assert [t.user for t in remote.context(user_id=user, session_id="chat")][-1].startswith("Please remember")
    why = remote.explain(next(r for r in written if "hazelnuts" in r.content).memory_id, user_id=user)
    assert why.record.content.startswith("Please remember") and why.render()
    remote.clear_context(user_id=user, session_id="chat")
    assert remote.context(user_id=user, session_id="chat") == []


def test_pop_turn_takes_the_newest_turn_out_of_the_window(remote: RemoteMemory, user: str) -> None:
    assert remote.pop_turn(user_id=user, session_id="undo") is None
    remote.add_turn("东京怎么样？", "春天很美。", user_id=user, session_id="undo")
    remote.add_turn("And Paris?", "Lovely in May.", user_id=user, session_id="undo")
    popped = remote.pop_turn(user_id=user, session_id="undo")
    assert popped is not None and (popped.user, popped.assistant) == ("And Paris?", "Lovely in May.")
    assert [t.user for t in remote.context(user_id=user, session_id="undo")] == ["东京怎么样？"]


async def test_an_openai_agents_session_pops_items_from_a_server(remote: RemoteMemory, user: str) -> None:
    pytest.importorskip("agents")
    from portamem_openai_agents import PortamemSession

    session = PortamemSession(remote, user_id=user, session_id="agents")  # type: ignore[arg-type]
    items = [{"role": "user", "content": "What is my cat called?"}, {"role": "assistant", "content": "Tom."}]
    await session.add_items(items)
    assert await session.pop_item() == items[1]
    assert await remote.acontext(user_id=user, session_id="agents") == []  # the turn left the window
    assert await session.pop_item() == items[0] and await session.pop_item() is None


def test_audit_maintain_export_import(server: ServerProcess, connect: Callable[..., RemoteMemory], user: str) -> None:
    src = connect(server.key("export-src"))
    src.save_memory("Our fiscal year starts in April.", user_id=user)
    src.save_memory("Read on a forum: the API limit is 10 rps.", user_id=user, source="web")
    assert any("low-trust" in " ".join(f.reasons) for f in src.audit_scan(user_id=user))
    buf = io.StringIO()
    assert src.export(buf, include_embeddings=False) == 2
    assert src.import_(io.StringIO(buf.getvalue()), on_conflict="skip") == 0
    # memory ids are unique in a store: into another tenant of the same store the copies get fresh ids
    dst = connect(server.key("export-dst"))
    assert dst.import_(io.StringIO(buf.getvalue())) == 2
    assert {r.content for r in dst.list_memories(user_id=user, filters={"statuses": ["active", "pending"]})} == {
        "Our fiscal year starts in April.", "Read on a forum: the API limit is 10 rps."}
    assert all(r.tenant_id == "export-dst" for r in dst.list_memories(user_id=user))
    with pytest.raises(ValidationError):
        dst.import_(io.StringIO("not json\n"))
    report = dst.maintain()
    assert report.purged == 0 and isinstance(report.evicted, list)


def test_typed_errors_come_back_as_the_same_class(remote: RemoteMemory, server: ServerProcess, tenant_key: str,
                                                  user: str) -> None:
    with pytest.raises(NotFoundError):
        remote.get_memory("0" * 32, user_id=user)
    with pytest.raises(ValidationError):
        remote.save_memory("   ", user_id=user)
    with pytest.raises(ContentTooLongError):
        remote.save_memory("x" * 9000, user_id=user)
    with pytest.raises(ValidationError):
        remote.search_memory("cat", user_id=user, filters={"colour": "red"})
    r = httpx.post(server.url + "/v1/memories", headers={"Authorization": f"Bearer {tenant_key}"},
                   content=b"{not json", timeout=30)
    assert r.status_code == 422 and set(r.json()["error"]) == {"type", "message"}
    r = httpx.get(server.url + "/v1/no-such-route", headers={"Authorization": f"Bearer {tenant_key}"}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"
    # without a key every route but the public ones is answered 401 first: which routes exist is not told
    r = httpx.get(server.url + "/v1/no-such-route", timeout=30)
    assert r.status_code == 401 and r.json()["error"]["type"] == "AuthenticationError"


async def test_async_twins(remote: RemoteMemory, user: str) -> None:
    saved = await remote.asave_memory("I drive a green Volvo.", user_id=user)
    assert (await remote.asearch_memory("which car", user_id=user))[0].memory_id == saved.memory_id
    await remote.aadd_turn("hello", "hi", user_id=user)
    assert [t.user for t in await remote.acontext(user_id=user)] == ["hello"]
    assert await remote.aforget_memory([saved.memory_id], user_id=user) == [saved.memory_id]


def test_keyed_writes_over_http_upsert_one_key(remote: RemoteMemory, user: str) -> None:
    first = remote.save_memory("Feature A is active.", user_id=user, key="a", key_namespace=("features",))
    twin = remote.save_memory("Feature A is active.", user_id=user, key="b", key_namespace="features")
    again = remote.save_memory("Feature A is off.", user_id=user, key="a", key_namespace=["features"])
    assert twin.memory_id != first.memory_id and again.memory_id == first.memory_id
    assert (again.key_namespace, again.key, again.content) == ("features", "a", "Feature A is off.")


def test_keyed_reads_and_forgets_over_http(server: ServerProcess, remote: RemoteMemory,
                                           connect: Callable[..., RemoteMemory], user: str) -> None:
    saved = remote.save_memory("Dark mode on.", user_id=user, key="theme", key_namespace=("prefs", "ui"))
    remote.save_memory("Language: Portuguese.", user_id=user, key="lang", key_namespace="prefs")
    assert remote.get_by_key("theme", user_id=user, key_namespace="prefs.ui").memory_id == saved.memory_id
    assert [r.key for r in remote.list_keyed(user_id=user, key_namespace=("prefs",))] == ["theme", "lang"]
    assert user in remote.user_ids()
    assert remote.forget_by_key("theme", user_id=user, key_namespace=("prefs", "ui")) == saved.memory_id
    with pytest.raises(NotFoundError):
        remote.get_by_key("theme", user_id=user, key_namespace=("prefs", "ui"))
    with pytest.raises(ValidationError):
        remote.get_by_key("theme", user_id=user, key_namespace=("bad.label",))
    scoped = connect(server.key("acme", users=["someone-else"]))
    with pytest.raises(NotFoundError) as outside:
        scoped.get_by_key("lang", user_id=user, key_namespace="prefs")
    with pytest.raises(NotFoundError) as absent:
        remote.get_by_key("nope", user_id=user, key_namespace="prefs")
    assert str(outside.value) == str(absent.value).replace("nope", "lang")


def test_wait_and_flush_give_read_your_writes_on_vectors(remote: RemoteMemory, user: str) -> None:
    saved = remote.save_memory("My piano teacher is called Ingrid.", user_id=user, wait=True)
    assert remote.search_memory("who teaches me music", user_id=user, sources=["vector"])[0].memory_id == saved.memory_id
    batch = remote.save_memories(["I park on level 3.", "My locker is 117."], user_id=user, wait=True)
    remote.flush(timeout=60)
    assert {h.memory_id for h in remote.search_memory("where do I park", user_id=user, sources=["vector"],
                                                     top_k=5)} >= {batch[0].memory_id}
    assert "queue" in remote.stats()


def test_an_agent_search_over_http_returns_its_own_then_the_shared_layer(remote: RemoteMemory, user: str) -> None:
    shared = remote.save_memory("The office wifi password is on the fridge.", user_id=user, wait=True)
    mine = remote.save_memory("The office wifi for visitors is called Guest-5.", user_id=user, agent_id="sales",
                              wait=True)
    remote.save_memory("The office wifi router is in the server room.", user_id=user, agent_id="support", wait=True)
    hits = remote.search_memory("Where is the office wifi?", user_id=user, filters={"agent_id": "sales"})
    assert [h.memory_id for h in hits] == [mine.memory_id, shared.memory_id]
    assert hits[0].record.agent_id == "sales" and hits[1].record.agent_id is None
