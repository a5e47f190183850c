"""Dialogue acts by rule: a question or a request that also states something keeps what it states."""

from __future__ import annotations

import pytest
from portamem_plugins.acts import utterances

from portamem import Memory


@pytest.mark.parametrize(("text", "stated"), [
    ("my sister is vegetarian btw, anywhere good near the hotel?", ["my sister is vegetarian btw"]),
    ("My bike's gears keep slipping, it's a Trek FX 3, any idea why?", ["My bike's gears keep slipping", "it's a Trek FX 3"]),
    ("Can you book a table for 4, we are vegans", ["we are vegans"]),
    ("帮我找找公司附近的充电桩，公司在望京SOHO", ["公司在望京SOHO"]),
    ("婚纱照想去厦门拍，你觉得怎么样？", ["婚纱照想去厦门拍"]),
])
def test_a_clause_that_states_something_is_a_statement(text: str, stated: list[str]) -> None:
    acts = utterances(text)
    assert [s for s, act in acts if act == "statement"] == stated
    assert any(act in ("question", "request") for _, act in acts), "the question or request stays one"


@pytest.mark.parametrize("text", [
    "my husband wants a boiling water tap, is it worth it?",  # the question is about what the clause says
    "If I move to Paris, will my rent go up?",
    "For dinner tonight, what do you suggest?",
    "Given my budget, what can I afford?",
    "Hope you're well, can you check my order?",
    "I have a question, what time is it?",
    "Tom, can you help?",
    "What is my budget, again?",
    "我想问一下，明天会下雨吗？",
    "如果下雨，我们还去吗？",
    "帮我查一下瓷砖的物流，订单号CZ20240331-778",
])
def test_a_clause_that_leans_on_the_question_stays_in_it(text: str) -> None:
    assert [act for _, act in utterances(text)] in (["question"], ["request"])


def test_the_statement_in_a_question_is_remembered_and_the_question_is_not(memory: Memory) -> None:
    memory.add_turn("my sister is vegetarian btw, anywhere good near the hotel?", "Try Jardim 23, all veggie.",
                    user_id="u", session_id="s")
    memory.flush()
    contents = [r.content for r in memory.list_memories(user_id="u")]
    assert "my sister is vegetarian btw" in contents
    assert not any("?" in c for c in contents)


@pytest.mark.parametrize("run", ["哈", "哦", "嗯"])
def test_a_long_run_of_a_chinese_interjection_is_read_in_linear_time(run: str) -> None:
    import time

    from portamem_plugins.acts import is_small_talk

    assert is_small_talk(run * 3) and is_small_talk(run * 2 + "好吧。")
    started = time.process_time()
    assert not is_small_talk(run * 20_000 + "，吗？")  # quadratic: ~18 s; linear: milliseconds
    assert time.process_time() - started < 2.0


@pytest.mark.parametrize(("text", "choice"), [
    # the user choosing among what was offered is a decision, though it opens as a request or ends like a reaction
    ("Let's take the Ryanair one at 9:40", True),
    ("ok I'll go with the blue one", True),
    ("那就豆腐猫砂吧", True),
    ("好的，那就不续了", True),
    ("还是选黑色吧", True),
    # a request, an intention, a back-reference or a close of the talk choose nothing
    ("Let's get started", False),
    ("I'll have a look", False),
    ("let's go with it", False),
    ("就这样吧", False),
    ("好吧", False),
])
def test_a_choice_is_a_statement(text: str, choice: bool) -> None:
    from portamem_plugins.classify import is_choice

    assert is_choice(text) is choice
    if choice:
        assert [act for _, act in utterances(text)] == ["statement"]


def test_a_request_that_opens_like_a_choice_stays_one() -> None:
    assert [act for _, act in utterances("Let's get started")] == ["request"]
    assert [act for _, act in utterances("Let's book a table for two at 8?")] == ["request"]


def test_a_choice_is_remembered_and_recalled(memory: Memory) -> None:
    from portamem.recall import recall

    memory.add_turn("我家猫用什么猫砂好？", "豆腐猫砂和膨润土猫砂都可以，豆腐猫砂可以冲马桶。", user_id="li", session_id="a")
    memory.add_turn("那就豆腐猫砂吧", "好的。", user_id="li", session_id="a")
    memory.flush(60)
    assert any("豆腐猫砂" in r.content for r in memory.list_memories(user_id="li"))
    assert any("豆腐猫砂" in h.content for h in recall(memory, "我用什么猫砂？", user_id="li", session_id="b"))
