"""The Agents SDK example runs offline and shows memory carried across runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("agents")


def test_openai_agents_example(run_example: Callable[[str], str]) -> None:
    out = run_example("openai_agents_agent.py")
    assert "run 1 bot: (offline model) I have no memories about this yet." in out
    assert "run 2 bot: (offline model) From memory: Remember that I am allergic to peanuts." in out
