"""The snippets answer the questions they ask: the README Quick start's search and ``portamem demo``'s
recall questions each get the answer the reader is shown (the Quick start once printed nothing for
"what can't she eat?", and the demo left "I'm a pastry chef in Lyon." out of "What does Dana do for a
living?")."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from portamem.cli import DEMO_PROMPT_QUESTION, DEMO_QUERIES, main

ROOT = Path(__file__).resolve().parents[2]

#: what each demo question must find first
DEMO_ANSWERS = {
    "What is the user allergic to?": "hazelnuts",
    "ORD-58213": "ORD-58213",
    "how does she take her coffee?": "oat milk",
    "她什么时候去上海？": "三月十二号",
    "What does Dana do for a living?": "pastry chef",
}


def _quick_start() -> str:
    """The README's Quick start code block, verbatim."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"^```python\n(.*?)^```", section, re.M | re.S)
    assert match, "README.md's Quick start has a python block"
    return match.group(1)


def test_the_readme_quick_start_finds_the_allergy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_quick_start(), "README.md (Quick start)", "exec"), {"__name__": "__quickstart__"})
    lines = out.getvalue().splitlines()
    # the search's first hit is the allergy, printed first (after its score, where the snippet prints one)
    assert lines and re.match(r"^(\d\.\d\d )?I'm allergic to hazelnuts\. ", lines[0]), lines[:3]
    assert (tmp_path / "dana.jsonl").exists()


def test_every_demo_question_gets_its_answer(tmp_path: Path) -> None:
    assert set(DEMO_QUERIES) == set(DEMO_ANSWERS), "each demo question names its answer here"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--path", str(tmp_path / "demo"), "demo"]) == 0
    recall = out.getvalue().split("\nRecall:\n", 1)[1]
    for question, answer in DEMO_ANSWERS.items():
        block = recall.split(f"? {question}", 1)[1].split("\n? ", 1)[0]
        first = next((line for line in block.splitlines() if re.match(r"^\s+1\. \[", line)), None)
        assert first is not None and answer in first, f"{question!r}: {block.strip()[:300]}"
    # the next day's prompt shows the order's cancellation first, as what replaced the order
    prompt = out.getvalue().split(f"{DEMO_PROMPT_QUESTION!r} (recall):\n", 1)[1].splitlines()
    assert len(prompt) >= 2 and "cancel the mixer order" in prompt[1] and "replaces" in prompt[1], prompt
