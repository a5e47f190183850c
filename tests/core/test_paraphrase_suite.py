"""The paraphrase suite (``portamem eval paraphrase``): facts said in conversation and asked back in
words they do not share, beside greetings and small talk, plus questions about things never said."""

from __future__ import annotations

from collections import Counter

import pytest

from portamem.errors import ValidationError
from portamem.scenarios.harness import holds
from portamem.scenarios.paraphrase import evaluate_paraphrase, format_paraphrase, load_paraphrase, shared_words


def test_the_suite_meets_its_counts() -> None:
    convs = load_paraphrase(split="all")
    facts = [(c, q) for c in convs for q in c.questions if not q.unstored]
    never = [q for c in convs for q in c.questions if q.unstored]
    assert len(facts) >= 120 and len(never) >= 40
    by_lang = Counter(c.lang for c, _ in facts)
    assert abs(by_lang["en"] - by_lang["zh"]) <= 0.1 * len(facts)
    # grouped per user, so that a user's other facts are each question's distractors
    assert all(8 <= sum(not q.unstored for q in c.questions) <= 12 for c in convs)
    # every conversation opens with a greeting and a self-introduction, and has small talk and thanks
    for c in convs:
        assert {"greeting", "statement"} <= set(c.turns[0].acts)
        assert {"smalltalk", "thanks"} <= {a for t in c.turns for a in t.acts}


def test_no_question_shares_a_content_word_with_the_turn_that_answers_it() -> None:
    for c in load_paraphrase(split="all"):
        assert shared_words(c) == [], c.id
        for q in c.questions:
            if not q.unstored:  # and the answer was said
                assert any(holds(t.user, q.answer) for t in c.turns if "statement" in t.acts), q.question


def test_the_halves_split_by_user_and_hold_both_languages() -> None:
    dev, test = load_paraphrase(split="dev"), load_paraphrase(split="test")
    assert not {c.user_id for c in dev} & {c.user_id for c in test}
    for half in (dev, test):
        assert {c.lang for c in half} == {"en", "zh"}
        assert all(c.split in ("dev", "test") for c in half)
    with pytest.raises(ValidationError):
        load_paraphrase(split="train")


def test_the_report_counts_each_question_once() -> None:
    report = evaluate_paraphrase("dev", show_progress=False)
    figs = report["figures"]["dev"]["all"]
    convs = load_paraphrase(split="dev")
    assert figs["questions"] == sum(not q.unstored for c in convs for q in c.questions)
    assert figs["never_said"] == sum(q.unstored for c in convs for q in c.questions)
    assert 0.0 <= figs["top1"] <= figs["in_prompt"] <= 1.0
    assert "dev en" in format_paraphrase(report, failures=True)
