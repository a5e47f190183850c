"""The scenario suite: multi-session conversations in English and Chinese, written the way people talk
to an assistant (facts said once, corrections, preference changes, numbers and dates that move, questions,
requests, small talk, tool calls), each followed by questions in a new session that name the current
value and the stale values that must not be presented as current.

``dev.jsonl`` is the half to tune on, ``test.jsonl`` the half only reported; ``holdout.jsonl`` holds
conversations written after the rules, in phrasings none was written against, to measure how they
generalise (only reported, never tuned on), and ``unseen.jsonl`` more of them, written later still and
measured once on arrival. ``portamem eval scenarios``
plays each conversation into a fresh store and measures what recall puts in front of a model
(``portamem.scenarios.harness``).
"""

from __future__ import annotations

from .harness import (
    ACTS,
    FILLER_ACTS,
    HELD_OUT,
    SPLITS,
    Scenario,
    ScenarioQuestion,
    ScenarioSession,
    ScenarioTurn,
    ToolCall,
    add_arguments,
    evaluate_scenarios,
    format_report,
    holds,
    judge_prompt,
    load_scenarios,
    play,
    prompt_lines,
    run,
    stored_turns,
    suite_path,
)

__all__ = [
    "ACTS",
    "FILLER_ACTS",
    "HELD_OUT",
    "SPLITS",
    "Scenario",
    "ScenarioQuestion",
    "ScenarioSession",
    "ScenarioTurn",
    "ToolCall",
    "add_arguments",
    "evaluate_scenarios",
    "format_report",
    "holds",
    "judge_prompt",
    "load_scenarios",
    "play",
    "prompt_lines",
    "run",
    "stored_turns",
    "suite_path",
]
