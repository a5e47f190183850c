"""The Python snippets of docs/frameworks/crewai.md run here, where CrewAI is installed, and print what
their ``#>`` comments say (the docs env cannot install CrewAI beside the server extra)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("crewai.memory.storage.backend")

PAGE = Path(__file__).resolve().parents[3] / "docs" / "frameworks" / "crewai.md"
SNIPPETS = re.findall(r"^```python[^\n]*\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.M | re.S)


def test_the_page_has_snippets() -> None:
    assert len(SNIPPETS) == 2


@pytest.mark.parametrize("source", SNIPPETS, ids=[f"snippet-{i}" for i in range(len(SNIPPETS))])
def test_snippet_prints_what_it_says(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    expected = [line.strip()[3:] for line in source.splitlines() if line.strip().startswith("#> ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(PAGE), "exec"), {"__name__": "__docs__"})
    printed = [line for line in out.getvalue().splitlines() if line in expected]
    assert printed == expected, out.getvalue()[-2000:]
