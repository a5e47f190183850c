"""Turns leaving the window: episodes with their key facts, small talk dropped, tool results as
source=tool memories; agent scopes; the pre-think gate."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.messages import Message, add_messages
from portamem.recall import needs_recall, recall
from portamem.records import MemoryType, Source

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


def test_small_talk_leaves_no_episode_and_facts_do(settings: Settings, embedder: Embedder) -> None:
    with Memory(settings=settings.replace(window_turns=1, auto_capture=False), embedder=embedder) as mem:
        mem.add_turn("What's the weather like for a walk later?", "Sunny, a good day for it.", user_id="u")
        assert mem.add_turn("We land in Oslo at 14:05 on flight SK-4410.", "Noted.", user_id="u") == []
        written = mem.add_turn("ok", "ok", user_id="u")
        assert [r.type for r in written] == [MemoryType.EPISODIC]
        assert "sk-4410" in written[0].entities
        assert written[0].metadata["episode"]["key_facts"] == ["We land in Oslo at 14:05 on flight SK-4410."]


def test_a_tool_result_becomes_a_tool_memory_not_episode_metadata(settings: Settings, embedder: Embedder) -> None:
    forecast = "Forecast for Bergen, 12 May: rain 14 mm, wind 9 m/s, 11 C. " * 40
    with Memory(settings=settings.replace(window_turns=1, auto_capture=False), embedder=embedder) as mem:
        add_messages(mem, [
            Message("user", "Will it rain in Bergen on 12 May?", created_at=T0),
            Message("assistant", "", calls_tools=True),
            Message("tool", forecast, name="weather"),
            Message("assistant", "Yes, 14 mm of rain is expected in Bergen."),
        ], user_id="u")
        written = mem.add_turn("Thanks.", "Anytime.", user_id="u", created_at=T0 + timedelta(minutes=1))
        tool = [r for r in written if r.source is Source.TOOL]
        assert len(tool) == 1 and tool[0].trust.value == "high"
        text = tool[0].content
        assert "Tool weather was called for: Will it rain in Bergen on 12 May?" in text
        assert "It returned: Forecast for Bergen" in text and "The reply used: Yes, 14 mm" in text
        assert len(text) < 700
        # a question answered from a tool is no event of its own: the tool memory is all that stays
        assert [r for r in written if r.source is not Source.TOOL] == []


def test_an_agent_sees_its_own_and_the_shared_layer_private_first(memory: Memory) -> None:
    shared = memory.save_memory("The office wifi password is on the fridge.", user_id="u")
    sales = memory.save_memory("The office wifi for visitors is called Guest-5.", user_id="u", agent_id="sales")
    support = memory.save_memory("The office wifi router is in the server room.", user_id="u", agent_id="support")
    seen = recall(memory, "Where is the office wifi?", user_id="u", agent_id="sales")
    ids = [h.memory_id for h in seen]
    assert ids[0] == sales.memory_id and shared.memory_id in ids and support.memory_id not in ids
    for source in ("vector", "keyword"):  # each candidate source keeps the shared layer in the agent's scope
        alone = {h.memory_id for h in memory.search_memory("Where is the office wifi?", user_id="u", sources=[source],
                                                           filters={"agent_id": "sales"})}
        assert alone <= {shared.memory_id, sales.memory_id} and shared.memory_id in alone, source
    everyone = [h.memory_id for h in memory.search_memory("Where is the office wifi?", user_id="u")]
    assert {shared.memory_id, sales.memory_id, support.memory_id} <= set(everyone)


def test_the_pre_think_gate_is_off_by_default_and_skips_messages_with_no_reference(
    settings: Settings, embedder: Embedder
) -> None:
    with Memory(settings=settings.replace(recall_gate=True), embedder=embedder) as mem:
        mem.save_memory("Order ORD-5531 goes to Rotterdam.", user_id="u")
        assert not needs_recall(mem, "How do plants make food?", user_id="u")
        assert recall(mem, "Tell me about Rotterdam deliveries", user_id="u")  # an entity the memories hold
        assert needs_recall(mem, "What did we agree last time?", user_id="u")
        assert needs_recall(mem, "上次说的那个订单呢？", user_id="u")
        assert recall(mem, "How do plants make food?", user_id="u") == []
    assert Settings().recall_gate is False
