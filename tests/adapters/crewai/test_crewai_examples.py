"""The CrewAI example runs offline and shows memory carried across runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("crewai.memory.storage.backend")


def test_crewai_agent_example(run_example: Callable[[str], str]) -> None:
    out = run_example("crewai_agent.py")
    assert "run 1 bot: (offline model) I have no memories about this yet." in out
    assert "run 2 bot: (offline model) From memory: Remember that I am allergic to peanuts." in out
