"""CPU per request by operation, in process and through ``portamem serve``, beside the floor.

For each embedder and each of save, add_turn, search with a cached query and search with a unique
one, the CPU milliseconds one request costs: in process (``Memory`` called in a loop) and through
``portamem serve`` driven by wrk (one thread, 50 connections, Lua-made bodies). CPU is that of the
process doing the work and of its children (the embedding workers), read from /proc; a write's
figure runs until the indexer has drained it ("drained": its embedding, review and indexing
included), a search's is the measured window. Every figure is printed beside the floor of the same
work (``benchmarks/floor.py``) measured in the same run, with the ratio; medians of ``--repeats``.

``null-hash`` is a near-free pseudo-embedder: its rows measure everything but the model.

wrk: ``apt-get install wrk`` (Debian/Ubuntu), ``brew install wrk``, or build
https://github.com/wg/wrk; without it the server rows are skipped (``--modes in-process``).

    python benchmarks/cpu.py                                   # null-hash, both modes, 3 repeats
    python benchmarks/cpu.py --embedders null-hash,multilingual-e5-small-q4 --seconds 6
    python benchmarks/cpu.py --modes in-process --stages       # and where each request's CPU goes

``--stages`` repeats the in-process run with the request path's stages timed (``benchmarks/stages.py``:
guard, redaction, extraction, triggers, SQL, outbox, embedding, review, formation's reconciliation
probe, ...) and prints, per operation, each stage's CPU ms per request and share of the timed run's
total, on the acknowledged path ("ack", the caller's thread) and in the background (indexer and
formation threads, drained), beside the plain totals.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor import CITIES, OPS, TOPICS, bodies, measure  # noqa: E402
from stages import STAGES, Stages  # noqa: E402

from portamem import Memory, Settings  # noqa: E402
from portamem.embedding.embedders import get_embedder  # noqa: E402
from portamem_conformance.remote import ServerProcess  # noqa: E402

PATHS = {"save": "/v1/memories", "add_turn": "/v1/turns", "search_cached": "/v1/search",
         "search_unique": "/v1/search"}


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
            if p is root:
                total += t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


# ---------------------------------------------------------------------- in process
def in_process(embedder: str, requests: int, users: int, folder: Path, workers: int | None,
               stages: dict[str, dict[tuple[str, str], float]] | None = None) -> dict[str, float]:
    """CPU ms per request of each operation, called one after another on one Memory; with ``stages``
    (a dict to fill) the stages are timed too: per operation, (path, stage) -> CPU ms per request."""
    out: dict[str, float] = {}
    timer = Stages() if stages is not None else None
    me = os.getpid()
    extra = {} if workers is None else {"embed_workers": workers}
    settings = Settings(path=str(folder), embedder=embedder, **extra)
    with Memory(settings=settings) as mem:
        for op in OPS:
            body = bodies(op, users)
            if op == "search_cached":  # the cache holds the questions: what is measured are hits
                for i in range(80):
                    b = body(i)
                    mem.search_memory(b["query"], user_id=b["user_id"], top_k=5)
            with timer or contextlib.nullcontext():
                before = timer.snapshot() if timer is not None else {}
                start = tree_cpu(me)
                for i in range(requests):
                    b = body(i)
                    if op == "save":
                        mem.save_memory(b["content"], user_id=b["user_id"])
                    elif op == "add_turn":
                        mem.add_turn(b["user"], b["assistant"], user_id=b["user_id"], session_id=b["session_id"])
                    else:
                        mem.search_memory(b["query"], user_id=b["user_id"], top_k=5)
                mem.flush()
                out[op] = (tree_cpu(me) - start) * 1000 / requests
                if timer is not None and stages is not None:
                    after = timer.snapshot()
                    stages[op] = {k: (v - before.get(k, 0.0)) * 1000 / requests for k, v in after.items()
                                  if v - before.get(k, 0.0) > 0}
                    stages[op][("all", "total (timed run)")] = out[op]
    return out


def print_stages(runs: list[dict[str, dict[tuple[str, str], float]]], plain: dict[str, float] | None) -> None:
    """Each stage's CPU ms per request (median of the runs) and share of the timed total, per operation."""
    order = list(STAGES)
    for op in OPS:
        total = statistics.median(r[op][("all", "total (timed run)")] for r in runs)
        keys = {k for r in runs for k in r[op] if k[0] != "all"}
        med = {k: statistics.median(r[op].get(k, 0.0) for r in runs) for k in keys}
        plain_s = f", untimed {plain[op]:.2f}" if plain else ""
        print(f"\n{op}: CPU ms per request by stage, medians of {len(runs)} (timed total {total:.2f}{plain_s})")
        print(f"  {'path':<11} {'stage':<44} {'ms/req':>7} {'share':>6}")
        for path in ("ack", "background"):
            rows = sorted((k for k in keys if k[0] == path), key=lambda k: order.index(k[1]))
            staged = 0.0
            for k in rows:
                staged += med[k]
                if med[k] >= 0.005:
                    print(f"  {path:<11} {k[1]:<44} {med[k]:7.3f} {med[k] / total:6.1%}")
            if path == "ack":
                ack = staged
        other = total - sum(med.values())
        print(f"  {'':<11} {'staged, acknowledged path':<44} {ack:7.3f} {ack / total:6.1%}")
        print(f"  {'':<11} {'staged, background':<44} {sum(med.values()) - ack:7.3f} "
              f"{(sum(med.values()) - ack) / total:6.1%}")
        print(f"  {'':<11} {'other (unstaged, both paths)':<44} {other:7.3f} {other / total:6.1%}")


# ---------------------------------------------------------------------- through the server
_LUA = r"""
local path, key, users, op = "%(path)s", "%(key)s", %(users)d, "%(op)s"
local topics = {%(topics)s}
local cities = {%(cities)s}
local zh = {}
local i = 0
local headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}

request = function()
  local u = string.format("user%%04d", i %% users)
  local topic = topics[(math.floor(i / users) + i) %% #topics + 1]
  local city = cities[(i * 7) %% #cities + 1]
  local body
  if op == "save" then
    body = string.format('{"user_id":"%%s","content":"My %%s appointment %%d is in %%s on day %%d."}',
                         u, topic, i, city, i %% 28 + 1)
  elseif op == "add_turn" then
    body = string.format('{"user_id":"%%s","session_id":"chat","user":"Can you help with my %%s in %%s? It is about item %%d.","assistant":"Sure, I noted the %%s in %%s."}',
                         u, topic, city, i, topic, city)
  elseif op == "search_cached" then
    body = string.format('{"user_id":"%%s","query":"when is my %%s in %%s?","top_k":5}', u, topic, city)
  else
    body = string.format('{"user_id":"%%s","query":"when is my %%s %%d in %%s?","top_k":5}', u, topic, i, city)
  end
  i = i + 1
  return wrk.format("POST", path, headers, body)
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %%d %%d %%d %%d %%d %%d %%d\n", summary.requests,
    e.connect + e.read + e.write + e.timeout, e.status, latency:percentile(50), latency:percentile(99),
    summary.duration, 0))
end
"""


def _lua(op: str, key: str, users: int, folder: Path) -> Path:
    script = folder / f"{op}.lua"
    script.write_text(_LUA % {"path": PATHS[op], "key": key, "users": users, "op": op,
                              "topics": ", ".join(f'"{t}"' for t in TOPICS),
                              "cities": ", ".join(f'"{c}"' for c in CITIES)})
    return script


def _pending(url: str, key: str) -> int:
    got = httpx.get(url + "/v1/stats", headers={"Authorization": f"Bearer {key}"}, timeout=60).json()
    return int(got["queue"]["pending"]) + int(got.get("memory", {}).get("pending", 0))


def served(embedder: str, seconds: float, users: int, connections: int, folder: Path,
           workers: int | None) -> dict[str, dict[str, float]]:
    """Per operation: CPU ms per request in wrk's window and drained, requests/s, p50/p99 ms, errors,
    and wrk's own CPU ms per request."""
    env = {"PORTAMEM_EMBEDDER": embedder}
    if workers is not None:
        env["PORTAMEM_EMBED_WORKERS"] = str(workers)
    server = ServerProcess(folder / "served", args=("--max-queue", "8192"), env=env)
    out: dict[str, dict[str, float]] = {}
    try:
        key = server.key("default")
        pid = server.proc.pid
        for op in OPS:
            if op == "search_cached":  # warm the query cache with the 80 questions
                body = bodies(op, users)
                with httpx.Client(timeout=120) as client:
                    for i in range(80):
                        client.post(server.url + "/v1/search", json=body(i), headers={"Authorization": f"Bearer {key}"})
            script = _lua(op, key, users, folder)
            start = tree_cpu(pid)
            before = os.times()
            run = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "30s",
                                  "-s", str(script), server.url], capture_output=True, text=True, timeout=seconds + 120)
            after = os.times()
            window = tree_cpu(pid) - start
            found = re.search(r"^RESULT (.*)$", run.stdout, re.M)
            if found is None:
                raise RuntimeError(f"wrk failed: {run.stdout}\n{run.stderr}")
            n, socket_errors, status_errors, p50, p99, duration_us, _ = (int(x) for x in found.group(1).split())
            deadline = time.monotonic() + 900
            while _pending(server.url, key) and time.monotonic() < deadline:
                time.sleep(0.2)
            drained = tree_cpu(pid) - start
            wrk_cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
            out[op] = {"window": window * 1000 / max(n, 1), "drained": drained * 1000 / max(n, 1),
                       "rps": n / (duration_us / 1e6), "p50": p50 / 1000, "p99": p99 / 1000,
                       "errors": socket_errors + status_errors, "client": wrk_cpu * 1000 / max(n, 1)}
    finally:
        server.stop()
    return out


# ---------------------------------------------------------------------- the run
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedders", default="null-hash", help="comma-separated embedder names")
    ap.add_argument("--modes", default="in-process,server")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=0,
                    help="in-process requests per operation (default 1000 for null-hash, 150 for a model)")
    ap.add_argument("--seconds", type=float, default=6.0, help="wrk's window per operation")
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--workers", type=int, default=None, help="embed_workers (default: the setting's default)")
    ap.add_argument("--stages", action="store_true",
                    help="also time the request path's stages (an extra in-process run per repetition)")
    ap.add_argument("--json", help="write every run's figures to this file")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if "server" in modes and shutil.which("wrk") is None:
        print("wrk not found (apt-get install wrk): server rows skipped", file=sys.stderr)
        modes = [m for m in modes if m != "server"]
    loads = [os.getloadavg()[0]]
    results: dict[str, Any] = {}
    for name in args.embedders.split(","):
        requests = args.requests or (1000 if name == "null-hash" else 150)
        floors, local, remote, staged = [], [], [], []
        for rep in range(args.repeats):  # interleaved: each repetition runs floor, in process, server
            with tempfile.TemporaryDirectory(prefix="portamem-cpu-") as tmp:
                floors.append(measure(get_embedder(name), requests=requests, users=args.users, folder=tmp))
                if "in-process" in modes:
                    local.append(in_process(name, requests, args.users, Path(tmp) / "local", args.workers))
                if args.stages:
                    staged.append({})
                    in_process(name, requests, args.users, Path(tmp) / "staged", args.workers, stages=staged[-1])
                if "server" in modes:
                    remote.append(served(name, args.seconds, args.users, args.connections, Path(tmp), args.workers))
            loads.append(os.getloadavg()[0])
            print(f"  {name}: repetition {rep + 1} done, load {loads[-1]:.1f}", file=sys.stderr, flush=True)
        results[name] = {"floor": floors, "in-process": local, "server": remote,
                         "stages": [{op: {"/".join(k): v for k, v in run[op].items()} for op in run} for run in staged]}
        floor = {op: statistics.median(f[op] for f in floors) for op in OPS}
        print(f"\n{name}: CPU ms per request, medians of {args.repeats} (load {min(loads):.1f}-{max(loads):.1f}, "
              f"{os.cpu_count()} CPUs)")
        print(f"{'operation':<14} {'mode':<11} {'CPU ms/req':>10} {'floor':>7} {'ratio':>7}   "
              f"{'window':>7} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'wrk ms':>6}")
        for op in OPS:
            if local:
                v = statistics.median(r[op] for r in local)
                print(f"{op:<14} {'in-process':<11} {v:10.2f} {floor[op]:7.3f} {v / floor[op]:7.1f}")
            if remote:
                med = {k: statistics.median(r[op][k] for r in remote) for k in remote[0][op]}
                v = med["drained"] if op in ("save", "add_turn") else med["window"]
                print(f"{op:<14} {'server':<11} {v:10.2f} {floor[op]:7.3f} {v / floor[op]:7.1f}   "
                      f"{med['window']:7.2f} {med['rps']:7.0f} {med['p50']:7.1f} {med['p99']:7.1f} "
                      f"{int(sum(r[op]['errors'] for r in remote)):6d} {med['client']:6.2f}")
        if staged:
            print_stages(staged, {op: statistics.median(r[op] for r in local) for op in OPS} if local else None)
    if args.json:
        Path(args.json).write_text(json.dumps({"loads": loads, "results": results}, indent=1))


if __name__ == "__main__":
    main()
