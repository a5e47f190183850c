"""The largest metadata filters the validator accepts, timed on one user's memories.

The store holds ``--n`` memories of one user (null-hash vectors: the filter's cost does not depend on
the model), each with a few metadata fields. Each filter is timed on the paths a search takes: the
store's SQL (``admitted_ids``: the rows a vector search is confined to), a listing of the first 100
rows through SQLAlchemy, and a whole search (the read replica's columns and the keyword retriever).
The baseline, measured in the same run, is the same call without a metadata filter.

    python benchmarks/metadata_filters.py --n 100000
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from portamem import Memory, Settings
from portamem.filters import METADATA_MAX_CONDITIONS, METADATA_MAX_LIST, SearchFilters
from portamem.plugins import get_plugin_manager
from portamem.portable.transfer import export_lines
from portamem.records import MemoryRecord

WORDS = ["rocket", "launch", "checklist", "garden", "budget", "review", "trip", "coffee", "report", "lens"]

#: each maximal filter, by name
FILTERS: dict[str, dict[str, Any]] = {
    "$in 1000 strings": {"project": {"$in": [f"p{i}" for i in range(METADATA_MAX_LIST)]}},
    "$in 1000 numbers": {"priority": {"$in": [i * 0.5 for i in range(METADATA_MAX_LIST)]}},
    "$nin 1000 mixed": {"project": {"$nin": [f"p{i}" for i in range(METADATA_MAX_LIST - 2)] + [3, None]}},
    "64 x $nin 1000": {f"k{j}": {"$nin": [f"v{i}" for i in range(METADATA_MAX_LIST)]}
                       for j in range(METADATA_MAX_CONDITIONS)},
    "64 x $in 1000 (some present)": {("project" if j == 0 else "team.name" if j == 1 else f"k{j}"):
                                     {"$in": [f"p{i}" for i in range(METADATA_MAX_LIST - 1)] + [None]}
                                     for j in range(METADATA_MAX_CONDITIONS)},
}


def fill(mem: Memory, n: int) -> float:
    records = []
    for i in range(n):
        text = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)) + f" note {i}"
        records.append(MemoryRecord(content=text, user_id="u", metadata={
            "project": f"p{i % 2000}", "priority": i % 10, "team": {"name": f"p{i % 7}"}}).to_dict())
    t = time.perf_counter()
    header = {"embedding_model": mem.embedder.name, "embedding_dim": mem.embedder.dim}
    for lo in range(0, n, 10_000):
        mem.import_(io.StringIO("".join(export_lines(header, records[lo:lo + 10_000]))), trusted=True)
    mem.flush()
    return time.perf_counter() - t


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="memories of the one user")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(settings=Settings(path=str(Path(tmp) / "store"), embedder="null-hash", evict_below=0.0),
                     plugins=get_plugin_manager(block=("guard", "pii_redaction")))
        fill_s = fill(mem, args.n)
        print(f"{args.n} memories of one user filled in {fill_s:.1f} s")
        tenant = mem.tenant_id
        query = "rocket launch checklist"
        mem.search_memory(query, user_id="u")  # the replica loaded, the first search's costs paid
        paths: dict[str, Callable[[dict[str, Any] | None], Any]] = {
            "store SQL (admitted ids)": lambda f: mem.store.admitted_ids(
                tenant, "u", SearchFilters.coerce({"metadata": f} if f else None)),
            "listing (100 rows)": lambda f: mem.list_memories(user_id="u", filters={"metadata": f} if f else None,
                                                               limit=100),
            "search (top 10)": lambda f: mem.search_memory(query, user_id="u", top_k=10,
                                                           filters={"metadata": f} if f else None),
        }
        print(f"\n{'filter':30} {'path':26} {'seconds':>8} {'no filter':>10} {'ratio':>7} {'rows':>7}")
        worst = 0.0
        for path, call in paths.items():
            base, _ = timed(lambda: call(None), args.repeat)
            for name, f in FILTERS.items():
                s, out = timed(lambda: call(f), args.repeat)
                worst = max(worst, s)
                print(f"{name:30} {path:26} {s:8.3f} {base:10.3f} {s / base:7.1f} {len(out):7d}")
        print(f"\nslowest maximal filter: {worst:.3f} s ({'under' if worst < 1.0 else 'OVER'} the 1 s aimed at)")
        mem.close()


if __name__ == "__main__":
    main()
