"""A fresh store's first search against its tenth, each in a fresh process.

The process opens a new store with the default embedder, saves three memories, waits for them to
be indexed, then runs ten searches with ten different questions (no query cache helps), timing
each. Run twice: with the packaged hubness reference (``portamem/read/hubness``), and with it set
aside so that the first search embeds the background set as it used to (the baseline).

    python benchmarks/first_search.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time

QUESTIONS = ["What is Dana allergic to?", "Where does she work?", "How does she take her coffee?",
             "When is the trip to Shanghai?", "What does Dana do for a living?", "Which city does she live in?",
             "她什么时候去上海？", "What is her sister's name?", "Which nuts can't she eat?", "What car does she drive?"]

CHILD = """
import json, sys, time
from portamem import Memory
from portamem.read import calibration
if sys.argv[2] == "measured":
    calibration.shipped_hubness = lambda embedder: None
with Memory(sys.argv[1]) as mem:
    for text in ("I'm allergic to hazelnuts.", "I'm a pastry chef in Lyon.", "我三月十二号去上海。"):
        mem.save_memory(text, user_id="dana")
    mem.flush()
    times = []
    for q in json.loads(sys.argv[3]):
        t = time.perf_counter()
        mem.search_memory(q, user_id="dana")
        times.append(time.perf_counter() - t)
print(json.dumps(times))
"""


def run(mode: str) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", CHILD, f"{tmp}/store", mode, json.dumps(QUESTIONS)],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print(f"{'reference':28} {'first s':>8} {'tenth s':>8} {'first/tenth':>12}")
    for mode, label in (("measured", "measured at first search"), ("shipped", "packaged")):
        times = run(mode)
        print(f"{label:28} {times[0]:8.3f} {times[9]:8.3f} {times[0] / times[9]:12.1f}")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t:.0f} s)")
