"""Built-in write-trigger (portamem_write_trigger), importance bands (portamem_score_importance),
rule extractor (portamem_extract) and turn summaries (portamem_summarize_turns)."""

from __future__ import annotations

import json

import pytest

from portamem import Memory, MemoryType, Settings
from portamem.pipeline import WriteContext
from portamem.plugins import Hooks, get_plugin_manager
from portamem.records import MemoryRecord, Turn
from portamem_plugins import importance, triggers
from portamem_plugins.summarize import LLMSummarizer, extractive_summary

CTX = WriteContext(tenant_id="t", user_id="u", settings=Settings())


@pytest.mark.parametrize(
    "text,reason",
    [
        ("My order number is ORD-58213.", "entities"),
        ("The invoice of $1,250.00 is due on 3 March 2027.", "entities"),
        ("I had lunch with Caroline Baker yesterday.", "entities"),
        ("Please cancel the subscription.", "decision"),
        ("OK, I confirm the booking.", "decision"),
        ("This is unacceptable, I'm furious!!", "emotion"),
        ("Remember that my gate code is the same as last year.", "explicit"),
        ("I really prefer aisle seats.", "preference"),
        ("我的订单号是A12345。", "entities"),
        ("确认一下，就订周五的票。", "decision"),
        ("气死我了，快递又丢了！", "emotion"),
        ("记住，我对花生过敏。", "explicit"),
    ],
)
def test_trigger_fires_on_signals(text: str, reason: str) -> None:
    vote = triggers.portamem_write_trigger(text, CTX)
    assert vote is not None and vote.remember and vote.strength >= 0.5
    assert reason in vote.reason or (reason == "decision" and "decision" in vote.reason)


@pytest.mark.parametrize("text", ["ok", "haha nice", "how are you?", "好的", "嗯嗯，谢谢"])
def test_trigger_abstains_on_small_talk(text: str) -> None:
    assert triggers.portamem_write_trigger(text, CTX) is None


def test_explicit_vote_is_marked_explicit() -> None:
    assert triggers.portamem_write_trigger("Please remember I take my tea black.", CTX).explicit
    assert not triggers.portamem_write_trigger("I take my tea black, I really prefer it.", CTX).explicit


@pytest.mark.parametrize(
    "text,low,high",
    [
        ("Right now I'm waiting for the bus.", 1, 20),
        ("The library closes at 8 pm on weekdays.", 21, 50),
        ("I really prefer oat milk in my coffee.", 51, 80),
        ("My name is Dana Whitfield and I am allergic to hazelnuts.", 81, 100),
        ("今天我有点累。", 1, 20),
        ("我喜欢喝乌龙茶。", 51, 80),
        ("我叫王芳，我对青霉素过敏。", 81, 100),
    ],
)
def test_importance_bands(text: str, low: int, high: int) -> None:
    band = importance.portamem_score_importance(MemoryRecord(content=text, user_id="u"), CTX)
    assert low <= band <= high


def test_importance_signals_stay_inside_the_band() -> None:
    plain = importance.score(MemoryRecord(content="I like jazz.", user_id="u"))
    stressed = importance.score(MemoryRecord(content="Remember: I like jazz, I decided!", user_id="u"))
    assert 51 <= plain < stressed <= 80


def test_extractor_hook_structures_chinese_and_english() -> None:
    hooks = Hooks(get_plugin_manager(load_entrypoints=False))
    ex = hooks.extract("My name is Zhang Wei and I live in Berlin. I am allergic to peanuts.", CTX)
    assert ["user", "name", "Zhang Wei"] in ex.triples and ["user", "lives_in", "Berlin"] in ex.triples
    assert ex.kind == "identity" and "berlin" in ex.entities
    zh = hooks.extract("我叫王芳，我住在杭州。", CTX)
    assert ["user", "name", "王芳"] in zh.triples and ["user", "lives_in", "杭州"] in zh.triples


def test_capture_routes_by_stress_and_second_sighting(memory: Memory) -> None:
    stressed = memory.add_turn("Please remember that my locker is number 4417.", "Will do.", user_id="u")
    assert [r.type for r in stressed] == [MemoryType.SEMANTIC]
    first = memory.add_turn("I really prefer window seats.", "Noted.", user_id="u")
    assert [r.type for r in first] == [MemoryType.WORKING]  # seen once: a candidate only
    again = memory.add_turn("I really prefer window seats!", "Sure.", user_id="u", session_id="other", wait=True)
    assert again[0].memory_id == first[0].memory_id
    assert again[0].type is MemoryType.SEMANTIC and again[0].frequency == 2
    assert again[0].half_life_days == memory.settings.half_lives["preference"]
    assert memory.add_turn("ok thanks", "bye", user_id="u") == []


def test_extractive_summary_keeps_user_words_and_best_reply_sentence() -> None:
    turns = [Turn("I moved to Graz on 4 May 2025.", "Congrats! Graz is lovely. Ask me about ORD-1 anytime.")]
    text = extractive_summary(turns)
    assert "User: I moved to Graz on 4 May 2025." in text
    assert "Assistant: Ask me about ORD-1 anytime." in text


def test_llm_summarizer_strict_json_two_retries_then_fallback(tmp_path, embedder) -> None:
    answers = iter(["not json", '{"summary": 3}', json.dumps({"summary": "Dana moved to Graz."})])
    calls: list[str] = []

    def llm(prompt: str) -> str:
        calls.append(prompt)
        return next(answers)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(LLMSummarizer(llm), name="llm_summary")
    settings = Settings(path=str(tmp_path / "s"), window_turns=1, auto_capture=False)
    with Memory(settings=settings, embedder=embedder, plugins=pm) as mem:
        mem.add_turn("I moved to Graz.", "Nice!", user_id="u")
        out = mem.add_turn("What's new?", "Not much.", user_id="u")
        assert len(calls) == 3 and out[0].content == "Dana moved to Graz."
        # a model that never answers in the contract: three tries, then the extractive summary
        pm.unregister(name="llm_summary")
        pm.register(LLMSummarizer(lambda p: calls.append(p) or "{}"), name="llm_summary")
        out = mem.add_turn("bye", "bye!", user_id="u")
        assert len(calls) == 6 and out[0].content.startswith("User: What's new?")
