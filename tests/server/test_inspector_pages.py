"""The inspector's HTML builder and form parsing, without a browser (the pages in Chromium: tests/ui)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portamem.errors import ValidationError
from portamem.records import MemoryRecord, ScoreBreakdown, SearchHit, utcnow
from portamem.server import pages
from portamem.server.inspector import timeline_filters


def test_text_and_attribute_values_are_escaped_and_only_el_makes_markup() -> None:
    out = pages.el("a", {"href": '"><script>x()</script>', "data-x": None, "hidden": True}, "<b>&", pages.el("i"))
    assert out == '<a href="&quot;&gt;&lt;script&gt;x()&lt;/script&gt;" hidden>&lt;b&gt;&amp;<i></i></a>'
    assert pages.el("p", None, ["a", ["<", 3]], None, False) == "<p>a&lt;3</p>"
    assert pages.href("/ui/memory", user='o"neil & 用户', id=None) == "/ui/memory?user=o%22neil+%26+%E7%94%A8%E6%88%B7"


def _hit(content: str, days_ago: float, conflicts: tuple[str, ...] = ()) -> SearchHit:
    record = MemoryRecord(content=content, user_id="u1", created_at=utcnow() - timedelta(days=days_ago))
    parts = {"vector": 0.8, "keyword": 0.5, "entity": 0.0, "recency": 0.9, "importance": 0.5}
    return SearchHit(record, 0.7, ScoreBreakdown(0.7, parts, {"vector": 0.5}), ("vector", "keyword"), conflicts)


def test_search_page_links_each_conflict_and_shows_every_component_as_a_bar() -> None:
    old = _hit("I live in Berlin.", 300)
    new = _hit("I live in <Munich>.", 1, (old.memory_id,))
    old.conflicts_with = (new.memory_id,)
    html = pages.search_page("u1", "where do I live", [new, old], "prompt <text>", csrf="t", who="k")
    assert html.count("<meter") == 10 and "× 0.5" in html
    assert f'<a href="/ui/memory?user=u1&amp;id={old.memory_id}">I live in Berlin.</a>' in html
    assert "I live in &lt;Munich&gt;." in html and "<Munich>" not in html
    assert "<pre class=\"prompt\">prompt &lt;text&gt;</pre>" in html


def test_timeline_filters_read_the_form_and_refuse_a_bad_time() -> None:
    assert timeline_filters({}) == {"statuses": ["active", "pending"]}
    assert timeline_filters({"type": "episodic", "status": "deleted", "agent": "a1", "since": "2026-01-02T03:04"}) == {
        "statuses": ["deleted"], "types": ["episodic"], "agent_id": "a1", "created_after": "2026-01-02T03:04:00+00:00"}
    with pytest.raises(ValidationError, match="until must be a date"):
        timeline_filters({"until": "tomorrow"})
