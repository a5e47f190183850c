"""The pre-think gate (``portamem.recall.needs_recall``) on a labelled set of messages, in English and
Chinese: a message recalls when it refers back to something said before or names what the user's
memories hold, not for a bare pronoun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from portamem import Memory
from portamem.recall import needs_recall

LABELLED = [json.loads(line) for line in
            (Path(__file__).parents[1] / "data" / "recall_gate.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def known(memory: Memory) -> Memory:
    for text in ("We fly to Lisbon on Friday.", "Caroline is coming to dinner on Saturday.", "王芳是我的同事。"):
        memory.save_memory(text, user_id="u")
    return memory


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_gate_decides_the_labelled_messages(known: Memory, lang: str) -> None:
    rows = [r for r in LABELLED if r["lang"] == lang]
    wrong = [r["text"] for r in rows if needs_recall(known, r["text"], user_id="u") != r["recall"]]
    assert len(rows) >= 20 and len(wrong) <= len(rows) // 10, wrong


def test_a_bare_pronoun_is_no_reference_and_a_mentioned_thing_is(known: Memory) -> None:
    assert not needs_recall(known, "Can you explain it more simply?", user_id="u")
    assert not needs_recall(known, "那个好吃吗？", user_id="u")
    assert needs_recall(known, "What about the thing I mentioned?", user_id="u")
    assert needs_recall(known, "我之前说的那件事怎么样了？", user_id="u")
    # an entity the user's memories hold is a reference too; another user's is not
    assert needs_recall(known, "Is the flight to Lisbon still on Friday?", user_id="u")
    assert not needs_recall(known, "Is the flight to Lisbon still on Friday?", user_id="someone-else")


@pytest.mark.parametrize("shown", [None, "a text", [1]])
def test_recall_refuses_shown_that_is_not_a_list_of_texts(memory: Memory, shown) -> None:
    from portamem import recall
    from portamem.errors import ValidationError
    with pytest.raises(ValidationError, match="shown"):
        recall(memory, "tea", user_id="u", shown=shown)
