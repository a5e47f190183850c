"""``add_turn`` acknowledgement latency with a chat model configured, against none.

The model is asked only by the formation worker, in the background (``portamem.background.formation``):
a turn is acknowledged once it and its formation row are committed. This measures that for three
models, each on a fresh store, the same turns (English and Chinese statements, corrections, questions
and small talk, cycling over ``--users`` users):

- ``none``: no model (the rule reconciler forms in the background);
- ``slow``: a model that takes ``--slow-s`` seconds (5 by default) for every call and answers an
  empty decision list;
- ``nonsense``: a model that answers prose at once (every answer refused, the rules decide).

It prints add_turn p50/p99 and mean for each, the p99 ratio to ``none``, the model calls per user turn
and the backlog left when the timed turns were done (then drains it, ``flush``, and says how long
that took; ``--no-drain`` skips it for the slow model, whose backlog takes turns x slow-s).

    python benchmarks/formation_latency.py --turns 200
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from portamem import Memory, Settings
from portamem.models import CallableChatModel

SAID = [
    "I live in Lyon and work as a nurse.", "My budget for the kitchen is 5000 euros.",
    "Actually the kitchen budget is now 8000 euros.", "What's the weather like tomorrow?",
    "Thanks, that helps!", "I moved to Paris last month.", "My daughter Mia starts school in September.",
    "我住在上海，在一家银行工作。", "我的预算改成一万二了。", "我女儿下个月开始学钢琴。",
    "I've gone off spicy food lately.", "Can you book a table for two at 8?", "I play tennis every Sunday.",
    "These days I go bouldering on Sundays instead.", "Hello there!", "My father has high blood pressure.",
]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _model(kind: str, slow_s: float, calls: list[int]) -> Any:
    def slow(prompt: str) -> str:
        calls.append(1)
        time.sleep(slow_s)
        return json.dumps({"decisions": []})

    def nonsense(prompt: str) -> str:
        calls.append(1)
        return "Sure! I think the user likes turtles. S1 is great."

    return {"none": None, "slow": CallableChatModel(slow), "nonsense": CallableChatModel(nonsense)}[kind]


def run(kind: str, turns: int, users: int, slow_s: float, drain: bool) -> dict[str, Any]:
    calls: list[int] = []
    with tempfile.TemporaryDirectory() as path, Memory(settings=Settings(path=path)) as mem:
        mem.formation.model = _model(kind, slow_s, calls)
        for i in range(8):  # warm the embedder, the extractor and the store
            mem.add_turn(SAID[i % len(SAID)], "Noted.", user_id="warm")
        mem.flush(300)
        spent = []
        for i in range(turns):
            text = SAID[i % len(SAID)]
            start = time.perf_counter()
            mem.add_turn(text, "Noted.", user_id=f"user{i % users}", session_id=f"s{i % users}")
            spent.append(time.perf_counter() - start)
        backlog = mem.stats().formation
        drained = None
        if drain:
            start = time.perf_counter()
            mem.flush(3600)
            drained = time.perf_counter() - start
        formed = mem.stats().formation
    return {"model": kind, "turns": turns, "p50_ms": 1000 * statistics.median(spent),
            "p99_ms": 1000 * _percentile(spent, 0.99), "mean_ms": 1000 * statistics.fmean(spent),
            "backlog_after_turns": backlog.pending, "drain_s": drained,
            "model_calls_per_turn": len(calls) / (turns + 8) if calls else 0.0,
            "fallbacks": formed.fallbacks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--slow-s", type=float, default=5.0)
    ap.add_argument("--no-drain", action="store_true", help="leave the slow model's backlog undrained")
    args = ap.parse_args()
    rows = [run(kind, args.turns, args.users, args.slow_s, drain=not (args.no_drain and kind == "slow"))
            for kind in ("none", "slow", "nonsense")]
    base = rows[0]["p99_ms"]
    for r in rows:
        r["p99_vs_none"] = r["p99_ms"] / base
        print(json.dumps(r))


if __name__ == "__main__":
    main()
