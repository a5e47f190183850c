"""The rule statement extractor: the ways people state and change things, in English and Chinese, read
as (attribute, qualifier, value, polarity, previous); questions, requests and small talk state nothing."""

from __future__ import annotations

import pytest

from portamem_plugins.statements import extract_statements


def _read(text: str) -> list[tuple[str, str, str, bool, str | None]]:
    return [(s.attribute, s.qualifier, s.value, s.polarity, s.previous) for s in extract_statements(text)]


@pytest.mark.parametrize(("text", "statements"), [
    ("Big news: I moved from Lyon to Paris last month.", [("lives_in", "", "Paris", True, "Lyon")]),
    ("My budget for the kitchen renovation is now 15000 euros.",
     [("budget", "kitchen renovation", "15000 euros", True, None)]),
    ("I've gone off spicy food. Mild dishes from now on.",
     [("preference", "", "spicy food", False, None), ("preference", "", "Mild dishes", True, None)]),
    ("I switched from Spotify to Apple Music.", [("uses", "music", "Apple Music", True, "Spotify")]),
    ("I'll have tea instead of coffee.", [("preference", "", "tea", True, "coffee")]),
    ("I no longer eat meat.", [("preference", "", "meat", False, None)]),
    ("I'm not into jazz anymore.", [("preference", "", "jazz", False, None)]),
    ("I sold the Golf.", [("has", "", "Golf", False, None)]),
    ("So I quit Zalando!", [("works_at", "", "Zalando", False, None)]),
    ("The flight has been moved to Friday.", [("flight", "", "Friday", True, None)]),
    ("I'm allergic to peanuts.", [("allergic_to", "", "peanuts", True, None)]),
    ("My name is Dana Whitfield.", [("name", "", "Dana Whitfield", True, None)]),
    # an occupation at an employer states both
    ("I work as a data analyst at Zalando, been there three years.",
     [("occupation", "", "data analyst", True, None), ("works_at", "", "Zalando", True, None)]),
    ("Starting as a machine learning engineer at Delivery Hero on 1 September",
     [("occupation", "", "machine learning engineer", True, None), ("works_at", "", "Delivery Hero", True, None)]),
    ("From now on I'm charging £55 an hour for new clients.", []),  # not a liking of "I'm charging ..."
    ("我搬到杭州了。", [("lives_in", "", "杭州", True, None)]),
    ("我不再吃辣了。", [("preference", "", "辣", False, None)]),
    ("我现在住在深圳。", [("lives_in", "", "深圳", True, None)]),
    ("我对花生过敏。", [("allergic_to", "", "花生", True, None)]),
    ("我叫王小明。", [("name", "", "王小明", True, None)]),
    # X 改成/换成/推迟到/涨到 Y: the attribute named before the change
    ("预算改成15万了。", [("budget", "", "15万", True, None)]),
    ("牛奶也换成燕麦奶了。", [("牛奶", "", "燕麦奶", True, None)]),
    ("师傅说材料没到，开工推迟到4月15号。", [("开工", "", "4月15号", True, None)]),
    ("每桌价格也涨到9888了", [("价格", "每桌", "9888", True, None)]),
    ("医院说那天约满了，疫苗往后挪到5月17号", [("疫苗", "", "5月17号", True, None)]),
    # what a value replaced, said right after it; a change said without a subject
    ("turns out the class is on Tuesdays, not Mondays, I misread the timetable",
     [("class", "", "Tuesdays", True, "Mondays")]),
    ("My budget is 15000, not 12000.", [("budget", "", "15000", True, "12000")]),
    ("预算改成15万了，不是12万", [("budget", "", "15万", True, "12万")]),
    ("I love tea, not the point though.", [("preference", "", "tea", True, None)]),  # "not" between two words
    ("traded the Jazz Bass for a Music Man StingRay, couldn't resist",
     [("uses", "stingray", "Music Man StingRay", True, "Jazz Bass")]),
    ("Also switched to Hoka Clifton, the Brooks were giving me blisters", [("uses", "clifton", "Hoka Clifton", True, None)]),
    ("also done with oat milk, going with almond now",
     [("preference", "", "oat milk", False, None), ("uses", "almond", "almond", True, None)]),
    ("quit coffee completely, two weeks in", [("preference", "", "coffee", False, None)]),
])
def test_statements_and_changes(text: str, statements: list[tuple[str, str, str, bool, str | None]]) -> None:
    assert _read(text) == statements


@pytest.mark.parametrize("text", [
    "What's my budget?", "Can you book a table for two?", "Thanks, talk later!", "我的预算是多少？", "帮我订个位子",
    "好的谢谢", "我换个说法",
])
def test_questions_requests_and_small_talk_state_nothing(text: str) -> None:
    assert extract_statements(text) == []


def test_each_statement_keeps_the_clause_it_was_read_from() -> None:
    got = extract_statements("Big news: I moved from Lyon to Paris last month.")
    assert [s.text for s in got] == ["Big news: I moved from Lyon to Paris last month."]
    got = extract_statements("I work as a barista for Costa now")
    assert {s.text for s in got} == {"I work as a barista for Costa now."}
