"""The loop example runs offline and shows the fact of run 1 in the prompt of run 2."""

from __future__ import annotations

from collections.abc import Callable


def test_loop_agent_example(run_example: Callable[[str], str]) -> None:
    out = run_example("loop_agent.py")
    assert "bot:  (offline model) From memory: Please remember that my sister Maja lives in Porto." in out
