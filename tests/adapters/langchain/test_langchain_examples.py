"""The LangChain examples run offline and show memory carried across runs and frameworks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("langchain.agents")


def test_langchain_agent_example(run_example: Callable[[str], str]) -> None:
    out = run_example("langchain_agent.py")
    assert "run 2 bot: (offline model) From memory: Remember that I am allergic to peanuts." in out


def test_switch_framework_example(run_example: Callable[[str], str]) -> None:
    out = run_example("switch_framework.py")
    assert ("[langchain] bot:  (offline model) I have no memories about this yet. Earlier you said: "
            "Remember that I never fly: I travel by train. | I want to visit Vienna in May.") in out
    assert out.rstrip().splitlines()[-2] == "  user: How should I get there?"
