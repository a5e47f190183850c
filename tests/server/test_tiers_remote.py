"""Storage tiers over HTTP: maintenance on a real server moves old memories and reports it; a cold memory is
listed, fetched and searched through ``RemoteMemory`` with ``tiers=["cold"]`` and brought back with
``set_tier``; the moves are audited with the key as actor; refusals are the typed errors of ``Memory``;
the wire carries ``tier``, ``tiered_at`` and ``tiered``, and reads payloads without them.

A server maintains at its own time (``RemoteMemory.maintain`` takes no ``now``), so the old memories
arrive as a trusted import of records written and last changed 1000 days ago (far past any tier's
threshold; semantic memories are never evicted by decay)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from portamem import Memory, RemoteMemory
from portamem.errors import NotFoundError, PermissionDeniedError, ValidationError
from portamem.lifecycle.maintenance import MaintenanceReport
from portamem.portable import wire
from portamem.portable.transfer import export_lines
from portamem.records import MemoryRecord, Tier, utcnow
from portamem_conformance.remote import ServerProcess

OLD = [  # ordinary facts and events nobody asks about again
    "Picked up the dry cleaning from Bellwether Cleaners on Tuesday.",
    "The plumber Kowalski fixed the kitchen tap for 80 euros.",
    "Watched the documentary about octopuses with Sam.",
    "Returned the blue jacket to Zalando, refund pending.",
]


def aged_export(user_id: str, days: float, **records: dict) -> tuple[str, dict[str, str]]:
    """An export (JSON lines) of records written and last changed ``days`` ago, and their ids by name."""
    past = utcnow() - timedelta(days=days)
    made = {name: MemoryRecord(user_id=user_id, created_at=past, updated_at=past, **fields)
            for name, fields in records.items()}
    lines = export_lines({"user_id": user_id}, [r.to_dict(include_embedding=False) for r in made.values()])
    return "".join(lines), {name: r.memory_id for name, r in made.items()}


@pytest.fixture(scope="module")
def aged(server: ServerProcess) -> Iterator[tuple[RemoteMemory, str, dict[str, str]]]:
    """A tenant of its own (maintenance is tenant-wide) with memories of 1000 days ago, and one recent."""
    key = server.key("tiers-remote")
    mem = RemoteMemory(server.url, key)
    text, ids = aged_export("u", 1000, **{t: {"content": t} for t in OLD},
                            identity={"content": "My name is Dana Whitfield.", "kind": "identity"},
                            keyed={"content": "Loyalty number LH-99812.", "key": "loyalty", "key_namespace": ""})
    assert mem.import_(io.StringIO(text), trusted=True) == len(ids)
    ids["recent"] = mem.save_memory("Booked the dentist, Dr Okafor, for next Thursday.", user_id="u",
                                    wait=True).memory_id
    yield mem, key, ids
    mem.close()


@pytest.fixture(scope="module")
def maintained(aged: tuple[RemoteMemory, str, dict[str, str]]) -> MaintenanceReport:
    mem, _, _ = aged
    return mem.maintain()


def test_maintenance_over_http_moves_old_memories_cold_and_reports_it(
        aged: tuple[RemoteMemory, str, dict[str, str]], maintained: MaintenanceReport) -> None:
    mem, _, ids = aged
    old = {ids[t] for t in OLD}
    assert set(maintained.tiered) == {"cold"}, maintained
    assert set(maintained.tiered["cold"]) == old
    assert mem.tier_counts(user_id="u") == {"hot": 3, "warm": 0, "cold": 4}
    assert mem.tier_counts() == {"hot": 3, "warm": 0, "cold": 4}  # the tenant's, with a tenant-wide key
    # listed only when the cold tier is named
    assert {r.memory_id for r in mem.list_memories(user_id="u", filters={"tiers": ["cold"]})} == old
    assert not old & {r.memory_id for r in mem.list_memories(user_id="u")}
    for text in OLD:
        got = mem.get_memory(ids[text], user_id="u")
        assert got.content == text and got.tier is Tier.COLD and got.tiered_at is not None
    for name in ("identity", "keyed", "recent"):
        assert mem.get_memory(ids[name], user_id="u").tier is Tier.HOT
    trail = [h for h in mem.history(ids[OLD[0]], user_id="u") if h["action"] == "tier"]
    assert [(h["detail"]["from"], h["detail"]["to"], h["actor"]) for h in trail] == [("hot", "cold", "maintain")]


def test_a_cold_memory_is_searched_on_request_and_restored_with_set_tier(
        aged: tuple[RemoteMemory, str, dict[str, str]], maintained: MaintenanceReport) -> None:
    mem, _, ids = aged
    target = ids[OLD[2]]
    query = "documentary about octopuses"
    hits = mem.search_memory(query, user_id="u", tiers=["cold"])
    assert hits[0].memory_id == target and hits[0].record.tier is Tier.COLD
    assert mem.search_memory(query, user_id="u", filters={"tiers": ["hot", "warm", "cold"]})[0].memory_id == target

    assert mem.set_tier(target, "hot", user_id="u") == [target]
    assert mem.set_tier([target], Tier.HOT, user_id="u") == []  # already there
    back = mem.get_memory(target, user_id="u")
    assert back.tier is Tier.HOT and back.content == OLD[2]
    mem.flush()
    assert mem.search_memory(query, user_id="u", tiers="hot")[0].memory_id == target
    assert mem.tier_counts(user_id="u")["cold"] == 3
    moves = [h for h in mem.history(target, user_id="u") if h["action"] == "tier"]
    assert [(h["detail"]["to"], h["actor"]) for h in moves] == [("cold", "maintain"), ("hot", mem.key_id)]
    assert mem.set_tier(target, "cold", user_id="u") == [target]  # and back to the archive
    assert mem.tier_counts(user_id="u")["cold"] == 4


def test_set_tier_refusals_are_typed_and_change_nothing(
        server: ServerProcess, aged: tuple[RemoteMemory, str, dict[str, str]], maintained: MaintenanceReport) -> None:
    mem, key, ids = aged
    target = ids["recent"]
    with pytest.raises(ValidationError):
        mem.set_tier(ids["keyed"], "cold", user_id="u")
    with pytest.raises(ValidationError):
        mem.set_tier(target, "lukewarm", user_id="u")
    with pytest.raises(ValidationError):
        mem.search_memory("dentist", user_id="u", tiers=[])
    with pytest.raises(ValidationError):
        mem.set_tier(target, "warm", user_id="u", now=utcnow())
    with pytest.raises(NotFoundError):
        mem.set_tier(target, "warm", user_id="someone-else")
    with pytest.raises(NotFoundError):
        mem.set_tier([target, "0" * 32], "warm", user_id="u")
    with RemoteMemory(server.url, server.key("tiers-remote", read_only=True)) as reader:
        with pytest.raises(PermissionDeniedError):
            reader.set_tier(target, "warm", user_id="u")
        assert reader.tier_counts(user_id="u")["hot"] >= 3
    with RemoteMemory(server.url, server.key("tiers-remote", users=["v"])) as bound:
        with pytest.raises(NotFoundError):  # a user outside the key's scope is answered as a missing memory
            bound.set_tier(target, "warm", user_id="u")
        with pytest.raises(PermissionDeniedError):
            bound.tier_counts(user_id="u")
        with pytest.raises(PermissionDeniedError):
            bound.tier_counts()
        assert bound.tier_counts(user_id="v") == {"hot": 0, "warm": 0, "cold": 0}
    assert mem.get_memory(target, user_id="u").tier is Tier.HOT
    # the raw API answers an unknown tier with the typed 422 body
    headers = {"Authorization": f"Bearer {key}"}
    for path, body in (("/v1/memories/tier", {"user_id": "u", "memory_ids": [target], "tier": "lukewarm"}),
                       ("/v1/search", {"user_id": "u", "query": "dentist", "tiers": ["lukewarm"]}),
                       ("/v1/search", {"user_id": "u", "query": "dentist", "tiers": []}),
                       ("/v1/search", {"user_id": "u", "query": "dentist", "filters": {"tier": "lukewarm"}})):
        r = httpx.post(server.url + path, json=body, headers=headers, timeout=60)
        assert r.status_code == 422, (path, body, r.text)
        assert r.json()["error"]["type"] == "ValidationError"


async def test_async_twins(aged: tuple[RemoteMemory, str, dict[str, str]], maintained: MaintenanceReport) -> None:
    mem, _, ids = aged
    target = ids[OLD[3]]
    assert await mem.aset_tier(target, "warm", user_id="u") == [target]
    assert (await mem.atier_counts(user_id="u"))["warm"] >= 1
    assert await mem.aset_tier(target, "cold", user_id="u") == [target]


def test_the_openapi_schema_lists_the_tier_routes(server: ServerProcess) -> None:
    schema = httpx.get(server.url + "/openapi.json", timeout=30).json()
    assert "post" in schema["paths"]["/v1/memories/tier"] and "get" in schema["paths"]["/v1/tiers"]
    assert schema["components"]["schemas"]["Tier"]["enum"] == ["hot", "warm", "cold"]
    assert "tiers" in schema["components"]["schemas"]["SearchRequest"]["properties"]


def test_the_wire_carries_the_tier_and_reads_payloads_without_it() -> None:
    now = utcnow()
    record = MemoryRecord(content="x", user_id="u", tier=Tier.WARM, tiered_at=now)
    sent = wire.dump_record(record)
    assert sent["tier"] == "warm" and sent["tiered_at"] is not None
    back = wire.load_record(sent)
    assert back.tier is Tier.WARM and back.tiered_at == now
    older = {k: v for k, v in sent.items() if k not in ("tier", "tiered_at")}
    assert (wire.load_record(older).tier, wire.load_record(older).tiered_at) == (Tier.HOT, None)
    assert wire.load_record({**older, "tier": None}).tier is Tier.HOT
    # a field a newer server adds does not break this client
    assert wire.load_record({**sent, "shelf_life": 3}).content == "x"

    report = MaintenanceReport(evicted=["a"], tiered={"cold": ["b", "c"], "hot": ["d"]})
    assert wire.load_report(wire.dump_report(report)) == report
    assert wire.dump_report(report)["tiered"] == {"cold": ["b", "c"], "hot": ["d"]}
    old = {"evicted": [], "purged": 0, "consolidated": []}
    assert wire.load_report(old).tiered == {} and wire.load_report(old).abstracted == []


async def test_the_mcp_search_tool_reads_the_archive_when_asked(memory: Memory) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from portamem.server.mcp_tools import build_mcp

    def payload(result: object) -> dict:
        assert not result.is_error, result  # type: ignore[attr-defined]
        data = result.structured_content  # type: ignore[attr-defined]
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data

    saved = memory.save_memory("Watched the documentary about octopuses with Sam.", user_id="alice")
    memory.flush()
    assert memory.set_tier(saved.memory_id, "cold", user_id="alice") == [saved.memory_id]
    async with Client(build_mcp(memory, user_id="alice")) as client:
        found = payload(await client.call_tool("search_memory", {"query": "documentary about octopuses",
                                                                 "archive": True}))
        assert [(m["memory_id"], m["tier"]) for m in found["memories"]] == [(saved.memory_id, "cold")]
