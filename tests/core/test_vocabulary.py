"""One vocabulary of change words and value kinds (``portamem.language.vocabulary``), read the same way
by the extractor's templates, formation's judgement without slots and the prompt's current lines."""

from __future__ import annotations

import pytest

from portamem.language.vocabulary import AMOUNT, CHANGE, CHANGE_OR_FORMER, DATE, value_kinds


@pytest.mark.parametrize("text", [
    "We pushed the wedding back to June.",
    "The budget was raised to 15k.",
    "I'm vegetarian now.",
    "I no longer eat meat.",
    "Let's go with the blue one instead.",
    "预算改成15万了",
    "我现在住在成都",
    "我不再喝咖啡",
    "她的体重涨到29公斤",
])
def test_a_change_is_read_in_either_language(text: str) -> None:
    assert CHANGE.search(text)
    assert CHANGE_OR_FORMER.search(text)


@pytest.mark.parametrize("text", ["I live in Lyon.", "My cat is called Miso.", "我住在北京", "The knowledge base is ready."])
def test_a_plain_statement_says_no_change(text: str) -> None:
    assert not CHANGE_OR_FORMER.search(text)


@pytest.mark.parametrize("text", ["I used to run every morning.", "我以前住在上海", "我不喝酒了"])
def test_what_held_before_counts_for_formation_only(text: str) -> None:
    assert CHANGE_OR_FORMER.search(text)
    assert not CHANGE.search(text)


def test_words_inside_other_words_are_not_changes() -> None:
    assert not CHANGE.search("The nowhere man cuts no corners; a leftover lostness.")


@pytest.mark.parametrize(("text", "kinds"), [
    ("Rehearsals are on Thursdays from now on.", {"weekday"}),
    ("The flight is on 14 June at 9:30am.", {"date", "clock"}),
    ("Rent is £450 a month.", {"money"}),
    ("婚礼改到6月14号下午三点", {"date", "clock"}),
    ("每周六去游泳", {"weekday"}),
    ("预算15万", {"money"}),
    ("I sat in the sun.", set()),
])
def test_value_kinds(text: str, kinds: set[str]) -> None:
    assert value_kinds(text) == kinds


def test_dates_and_amounts_are_found_in_either_language() -> None:
    assert [m.group(0) for m in DATE.finditer("moved to 14 June 2025, at 3pm, then Sat")] == ["14 June 2025", "3pm", "Sat"]
    assert [m.group(0).strip() for m in DATE.finditer("改到7月8号，下周三")] == ["7月8号", "下周三"]
    found = [(m.group(0).strip(), m.group("unit") or m.group("zh") or m.group("zhw")) for m in AMOUNT.finditer(
        "120 guests and 15万 budget, 三百块")]
    assert found == [("120 guests", "guests"), ("15万", "万"), ("三百块", "块")]
