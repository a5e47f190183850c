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
from portamem_plugins.summarize import LLMSummarizer, extractive_episode, extractive_summary

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


@pytest.mark.parametrize("text", [
    "She gets an upset tum with Harringtons so we've moved her onto Lily's Kitchen",
    "so the guest list has crept back up to 95",
    "we're not doing the Sunday lunch any more",
    "年糕吃皇家的软便，改喂渴望了",
    "疫苗往后挪到5月17号",
])
def test_a_reported_change_goes_to_long_term_memory_at_once(text: str) -> None:
    vote = triggers.portamem_write_trigger(text, CTX)
    assert vote is not None and "a change" in vote.reason and vote.strength >= triggers.LASTING


@pytest.mark.parametrize("text", ["I moved the sofa a bit", "我换个说法"])
def test_words_of_change_without_a_change_are_not_one(text: str) -> None:
    vote = triggers.portamem_write_trigger(text, CTX)
    assert vote is None or "a change" not in vote.reason


def test_a_name_the_text_gives_in_chinese_is_an_entity() -> None:
    from portamem.language.entities import extract_entities

    assert extract_entities("我刚领养了一只橘猫，叫年糕🐱") == ["年糕"]
    assert extract_entities("狗狗取名叫豆豆了") == ["豆豆"]
    assert extract_entities("医生叫我少吃辣") == []  # "叫" as "tell": no name


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
    # a preference said once lasts: its kind's half-life, not a working candidate's
    liked = memory.add_turn("I really prefer window seats.", "Noted.", user_id="u")
    assert [r.type for r in liked] == [MemoryType.SEMANTIC]
    assert liked[0].half_life_days == memory.settings.half_lives["preference"]
    # a plain fact said once is kept for good, with its time; said again, it is the same memory
    first = memory.add_turn("We fly to Lisbon on Friday.", "Nice.", user_id="u")
    assert [r.type for r in first] == [MemoryType.SEMANTIC]
    assert first[0].half_life_days == memory.settings.half_lives["fact"]
    again = memory.add_turn("We fly to Lisbon on Friday!", "Sure.", user_id="u", session_id="other", wait=True)
    assert again[0].memory_id == first[0].memory_id and again[0].frequency == 2
    # what only describes the moment is a candidate that a second sighting or the session's end promotes
    moment = memory.add_turn("I'm exhausted today.", "Rest up.", user_id="u")
    assert [r.type for r in moment] == [MemoryType.WORKING]
    assert memory.add_turn("ok thanks", "bye", user_id="u") == []


@pytest.mark.parametrize("text", [
    "I've taken up bouldering on Wednesday nights",
    "my dad was diagnosed with type 2 diabetes",
    "They promoted me to team lead",
    "I take oat milk in everything",
    "I'm vegan",
    "教练姓王",
    "它现在吃皇家的猫粮",
    "医生把我的药量减到每天半片",
    "我开始学游泳了",
])
def test_a_plain_statement_about_the_users_world_is_kept(text: str) -> None:
    vote = triggers.portamem_write_trigger(text=text, context=CTX)
    assert vote is not None and vote.remember and "a statement" in vote.reason
    assert vote.strength >= triggers.LASTING and vote.type is MemoryType.SEMANTIC


@pytest.mark.parametrize("text", [
    "thanks, speak soon",
    "thanks for the help",
    "ok thanks, that's helpful",
    "hope you're well",
    "that sounds perfect",
    "Yes tofu scramble works.",
    "lol the dog will hate the noise",
    "谢啦",
    "写得真好，谢谢",
    "差这么多啊",
    "拍婚纱照要提前多久减肥哈哈",
    "你好，帮我看看手机套餐",
    "What should I pack?",
])
def test_what_is_not_memory_gets_no_statement_vote(text: str) -> None:
    vote = triggers.portamem_write_trigger(text=text, context=CTX)
    assert vote is None or "a statement" not in vote.reason


def test_extractive_summary_keeps_user_words_and_best_reply_sentence() -> None:
    turns = [Turn("I moved to Graz on 4 May 2025.", "Congrats! Graz is lovely. Ask me about ORD-1 anytime.")]
    text = extractive_summary(turns)
    assert "User: I moved to Graz on 4 May 2025." in text
    assert "Assistant: Ask me about ORD-1 anytime." in text


def test_llm_summarizer_strict_json_two_retries_then_fallback(tmp_path, embedder) -> None:
    good = {"summary": "Dana moved to Graz.", "key_facts": ["Dana lives in Graz"], "user_intent": None,
            "outcome": "moved", "entities": ["Dana", "Graz"]}
    answers = iter(["not json", json.dumps({"summary": "Dana moved to Graz."}),  # not the five fields
                    json.dumps(good)])
    calls: list[str] = []

    def llm(prompt: str) -> str:
        calls.append(prompt)
        return next(answers)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(LLMSummarizer(llm), name="llm_summary")
    settings = Settings(path=str(tmp_path / "s"), window_turns=1, auto_capture=False)
    with Memory(settings=settings, embedder=embedder, plugins=pm) as mem:
        mem.add_turn("I moved to Graz.", "Nice!", user_id="u")
        out = mem.add_turn("I start at Siemens in June.", "Congratulations!", user_id="u")
        assert len(calls) == 3 and out[0].content == "Dana moved to Graz."
        assert out[0].metadata["episode"] == {"key_facts": ["Dana lives in Graz"], "outcome": "moved"}
        assert set(out[0].entities) == {"Dana", "Graz"}
        # a model that never answers in the contract: three tries, then the extractive episode
        pm.unregister(name="llm_summary")
        pm.register(LLMSummarizer(lambda p: calls.append(p) or "{}"), name="llm_summary")
        out = mem.add_turn("bye", "bye!", user_id="u")
        assert len(calls) == 6 and out[0].content == "I start at Siemens in June."  # not a transcript
        assert "I start at Siemens in June." in out[0].metadata["episode"]["key_facts"]


def test_llm_summarizer_validates_each_field() -> None:
    ok = {"summary": "s", "key_facts": [], "user_intent": None, "outcome": None, "entities": []}
    assert LLMSummarizer.validate(ok) is None
    for bad in ({**ok, "summary": " "}, {**ok, "key_facts": "a fact"}, {**ok, "entities": [1]},
                {**ok, "outcome": 3}, {**ok, "extra": 1}, {k: v for k, v in ok.items() if k != "user_intent"}, []):
        assert LLMSummarizer.validate(bad) is not None


def test_rule_mode_episode_fields_and_small_talk_dropped() -> None:
    turns = [Turn("I want to book the Porto flat for 12 May.", "Booked: flat 4B in Porto, 12-15 May."),
             Turn("Great, thanks!", "You're welcome.")]
    episode = extractive_episode(turns)
    assert episode is not None and set(episode) == {"summary", "key_facts", "user_intent", "outcome", "entities"}
    assert episode["user_intent"] == "Book the Porto flat for 12 May"  # what was asked, not the sentence
    assert episode["outcome"] == "Booked: flat 4B in Porto, 12-15 May." and "porto" in episode["entities"]
    assert episode["summary"] == "Book the Porto flat for 12 May → Booked: flat 4B in Porto, 12-15 May."
    assert "thanks" not in episode["summary"].lower() and "User:" not in episode["summary"]
    assert extractive_episode([Turn("How's it going?", "Fine, and you?"), Turn("Lol.", ":)")]) is None


def test_rule_mode_episodes_leave_out_greetings_questions_and_captured_facts() -> None:
    assert extractive_episode([Turn("Good morning!", "Good morning, Dana!")]) is None
    assert extractive_episode([Turn("What is my order number?", "It is ORD-77812.")]) is None
    turns = [Turn("Big news: I moved from Lyon to Paris last month.", "Congratulations!"),
             Turn("Can you find me a gym near Bastille?", "I booked a trial at FitBastille for Monday.")]
    episode = extractive_episode(turns, facts_captured=True)
    assert episode is not None and episode["key_facts"] == ["lives in: Paris (was Lyon)"]
    # the move is its own memory: the episode points at it instead of repeating it
    assert "Lyon" not in episode["summary"]
    assert episode["summary"] == "Find me a gym near Bastille → I booked a trial at FitBastille for Monday."
    assert "Lyon" in extractive_episode(turns)["summary"]  # nothing captured: the episode keeps the fact
    zh = extractive_episode([Turn("我搬到杭州了。", "恭喜！"), Turn("谢谢！", "不客气。")])
    assert zh is not None and zh["key_facts"] == ["lives in: 杭州"] and "谢谢" not in zh["summary"]


def test_rule_mode_episodes_leave_out_captured_sentences_and_answers_to_questions() -> None:
    turns = [Turn("So I've cut down to 25 km a week for the next fortnight", "Sensible."),
             Turn("Also switched to Hoka Clifton, the Brooks were giving me blisters", "Well cushioned."),
             Turn("can you remind me what time goal I set?", "Sub 3:30.")]
    kept = extractive_episode(turns, facts_captured=True)
    assert kept is not None and "25 km" in kept["summary"]  # nothing captured long-term: the episode holds it
    # both sentences are memories of their own; a request that came to nothing is not an event
    assert extractive_episode(turns, facts_captured=True, captured=[
        "So I've cut down to 25 km a week for the next fortnight",
        "Also switched to Hoka Clifton, the Brooks were giving me blisters"]) is None
    # advice given in answer to a question is not the outcome of anything the user did
    asked = [Turn("Should I cancel the Admiral insurance?", "Yes, call them to cancel; you may get a partial refund.")]
    assert extractive_episode(asked) is None


def test_llm_merger_strict_json_two_retries_then_pass() -> None:
    from portamem_plugins.summarize import LLMMerger

    older = MemoryRecord(content="My budget is 5000.", user_id="u")
    newer = MemoryRecord(content="My budget is 8000.", user_id="u")
    ctx = WriteContext(tenant_id="default", user_id="u", settings=Settings())
    pm = get_plugin_manager(load_entrypoints=False)
    assert Hooks(pm).merge_statements(older, newer, ctx) is None  # no built-in merger: rule mode keeps both
    prompts: list[str] = []
    answers = iter(['{"statement": "", "extra": 1}', "```json\n{}```", '{"statement": " Budget: 8000, was 5000. "}'])
    pm.register(LLMMerger(lambda p: prompts.append(p) or next(answers)), name="llm_merge")
    assert Hooks(pm).merge_statements(older, newer, ctx) == "Budget: 8000, was 5000."
    assert len(prompts) == 3 and "My budget is 5000." in prompts[0] and "My budget is 8000." in prompts[0]
    pm.unregister(name="llm_merge")
    pm.register(LLMMerger(lambda p: '{"statement": 5}'), name="llm_merge")
    assert Hooks(pm).merge_statements(older, newer, ctx) is None  # three bad answers: pass


def test_a_third_party_portamem_merge_statements_plugin_feeds_supersession(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from portamem import hookimpl
    from portamem.records import Status

    class Joiner:
        @hookimpl
        def portamem_merge_statements(self, older, newer, context):  # noqa: ANN001, ANN201
            return f"{newer.content} (before: {older.content})"

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Joiner(), name="joiner")
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        mem.save_memory("我的城市是上海。", user_id="u", wait=True)
        mem.save_memory("我的城市是北京。", user_id="u", wait=True)
        pending = mem.list_memories(user_id="u", filters={"statuses": ["pending"]})
        assert [p.content for p in pending] == ["我的城市是北京。 (before: 我的城市是上海。)"]
        assert pending[0].status is Status.PENDING


def test_a_long_run_of_laughter_is_read_in_linear_time() -> None:
    import time

    started = time.perf_counter()
    for n in (40, 400, 1000):
        triggers.portamem_write_trigger(text="我" + "哈" * n + "x", context=CTX)
        triggers.portamem_write_trigger(text="ok " + "haha " * n + "x", context=CTX)
    # exponential backtracking took minutes at 44 characters ("我哈…哈x"; "haha haha … x": 22 s at 22)
    assert time.perf_counter() - started < 2.0
