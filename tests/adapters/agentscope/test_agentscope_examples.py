"""The AgentScope 2.x example runs offline and shows memory carried across runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("agentscope.middleware", reason="needs AgentScope 2.x")


def test_agentscope_agent_example(run_example: Callable[[str], str]) -> None:
    out = run_example("agentscope_agent.py")
    assert "run 1 bot: (offline model) I have no memories about this yet." in out
    assert "run 2 bot: (offline model) From memory: Remember that I am allergic to peanuts." in out
