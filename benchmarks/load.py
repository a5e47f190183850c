"""Load on ``portamem serve``: many concurrent simulated users on loopback, beside the in-process library.

Each simulated user runs a closed loop of a realistic mix (add_turn 40 %, save 30 %, search 30 %)
for a fixed time; the same users and mix then run against the in-process library (the async
twins of ``Memory``) in the same run, on a store of their own. Printed for both: acknowledged
writes per second (saves and turns answered with success), search p50/p99, errors, and lost
writes, counted afterwards by looking every acknowledged save up in the store after the server
stopped. Bounded: ``--users`` simulated users, ``--seconds`` per phase, and it stops by itself.

    python benchmarks/load.py --users 500 --seconds 20
    python benchmarks/load.py --users 500 --seconds 20 --embedder multilingual-e5-small-q4

The default embedder is the fast one (use-multilingual-v3, ~900 texts/s on 2 cores): with
synchronous indexing a save waits for its embedding, so the e5 model (~36 texts/s) bounds the
write rate far below the queue's. The client is a minimal HTTP/1.1 keep-alive client over asyncio
streams, one connection per user, so the load generator takes little of the CPU it shares.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.errors import OverloadedError, PortamemError
from portamem_conformance.remote import ServerProcess

TOPICS = ["coffee", "flight", "invoice", "dentist", "garden", "piano", "budget", "hotel", "museum", "bicycle"]
CITIES = ["Berlin", "Lyon", "Porto", "Osaka", "Hangzhou", "Quito", "Tartu", "Graz"]
ZH = ["我喜欢喝乌龙茶", "明天去杭州出差", "订单已经确认", "周五下午开会", "孩子下个月开学"]


@dataclass
class Figures:
    """What one phase measured."""

    name: str
    seconds: float = 0.0
    writes: int = 0
    searches: list[float] = field(default_factory=list)
    errors: int = 0
    rejected: int = 0
    error_samples: list[str] = field(default_factory=list)
    saved: list[tuple[str, str]] = field(default_factory=list)
    lost: int | None = None
    #: CPU seconds the serving process used during the phase (Linux), None where unknown
    cpu_s: float | None = None

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text[:200])

    def pct(self, p: float) -> float:
        if not self.searches:
            return float("nan")
        xs = sorted(self.searches)
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000

    def line(self) -> str:
        requests = self.writes + len(self.searches)
        cpu = f"  {self.cpu_s * 1000 / requests:.1f} ms CPU/request" if self.cpu_s is not None and requests else ""
        return (f"{self.name:>12}: {self.writes / self.seconds:8.1f} acknowledged writes/s  "
                f"search p50 {self.pct(50):7.1f} ms  p99 {self.pct(99):7.1f} ms  ({len(self.searches)} searches)  "
                f"errors {self.errors}  429s {self.rejected}  lost writes {self.lost}{cpu}")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (from /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


#: shares of add_turn, save and search in each user's loop (``--mix``)
MIX = (0.4, 0.3, 0.3)


def _action(rng: random.Random, user: str, i: int) -> tuple[str, dict[str, Any]]:
    topic, city = rng.choice(TOPICS), rng.choice(CITIES)
    roll = rng.random() * sum(MIX)
    if roll < MIX[0]:
        return "turn", {"user_id": user, "session_id": "chat",
                        "user": f"Can you help with my {topic} in {city}? It is about item {i}.",
                        "assistant": f"Sure, I noted the {topic} in {city}."}
    if roll < MIX[0] + MIX[1]:
        text = (f"{rng.choice(ZH)}，第{i}次。" if rng.random() < 0.2 else
                f"My {topic} appointment {i} is in {city} on day {rng.randint(1, 28)}.")
        return "save", {"user_id": user, "content": text}
    return "search", {"user_id": user, "query": f"when is my {topic} in {city}?", "top_k": 5}


# ---------------------------------------------------------------------- a small HTTP/1.1 client
class Connection:
    """One keep-alive connection; JSON in, (status, JSON) out."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.host, self.port, self.key = host, port, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        data = json.dumps(body).encode()
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode()
        self.writer.write(head + data)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        status = int(status_line.split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding" and "chunked" in value:
                chunked = True
        if chunked:
            parts = []
            while size := int((await self.reader.readline()).strip(), 16):
                parts.append(await self.reader.readexactly(size))
                await self.reader.readline()
            await self.reader.readline()
            payload = b"".join(parts)
        else:
            payload = await self.reader.readexactly(length)
        return status, json.loads(payload) if payload else None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


PATHS = {"turn": "/v1/turns", "save": "/v1/memories", "search": "/v1/search"}


async def _run_users(users: int, seconds: float, step: Any, figures: Figures) -> None:
    deadline = time.perf_counter() + seconds

    async def one(n: int) -> None:
        rng = random.Random(n)
        user, i = f"user{n:04d}", 0
        while time.perf_counter() < deadline:
            kind, body = _action(rng, user, i)
            i += 1
            t0 = time.perf_counter()
            await step(n, kind, body, t0)

    start = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(users)))
    figures.seconds = time.perf_counter() - start


async def served(url: str, key: str, users: int, seconds: float, pid: int) -> Figures:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    figures = Figures("server")
    cpu_before = cpu_seconds(pid)
    connections = [Connection(host, int(port), key) for _ in range(users)]

    async def step(n: int, kind: str, body: dict[str, Any], t0: float) -> None:
        try:
            status, answer = await connections[n].request("POST", PATHS[kind], body)
        except (OSError, ConnectionError, ValueError, asyncio.IncompleteReadError) as exc:
            figures.error(f"{kind}: {exc!r}")
            connections[n].close()
            connections[n] = Connection(host, int(port), key)
            return
        if status == 429:
            figures.rejected += 1
            await asyncio.sleep(0.05)
        elif status >= 300:
            figures.error(f"{kind}: HTTP {status} {answer}")
        elif kind == "search":
            figures.searches.append(time.perf_counter() - t0)
        else:
            figures.writes += 1
            if kind == "save":
                figures.saved.append((body["user_id"], answer["memory_id"]))

    try:
        await _run_users(users, seconds, step, figures)
    finally:
        for c in connections:
            c.close()
    cpu_after = cpu_seconds(pid)
    if cpu_before is not None and cpu_after is not None:
        figures.cpu_s = cpu_after - cpu_before
    return figures


async def in_process(mem: Memory, users: int, seconds: float) -> Figures:
    figures = Figures("in-process")
    cpu_before = time.process_time()

    async def step(n: int, kind: str, body: dict[str, Any], t0: float) -> None:
        try:
            if kind == "turn":
                await mem.aadd_turn(body["user"], body["assistant"], user_id=body["user_id"],
                                    session_id=body["session_id"])
                figures.writes += 1
            elif kind == "save":
                record = await mem.asave_memory(body["content"], user_id=body["user_id"])
                figures.writes += 1
                figures.saved.append((body["user_id"], record.memory_id))
            else:
                await mem.asearch_memory(body["query"], user_id=body["user_id"], top_k=body["top_k"])
                figures.searches.append(time.perf_counter() - t0)
        except OverloadedError:
            figures.rejected += 1
        except PortamemError as exc:
            figures.error(f"{kind}: {exc!r}")

    await _run_users(users, seconds, step, figures)
    figures.cpu_s = time.process_time() - cpu_before  # the simulated users' share included
    return figures


def count_lost(db_url: str, saved: list[tuple[str, str]]) -> int:
    """Acknowledged saves whose memory id is not in the store (read after the writer is gone)."""
    engine = sa.create_engine(db_url)
    found: set[str] = set()
    ids = [m for _, m in saved]
    try:
        with engine.connect() as conn:
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                rows = conn.execute(sa.text("SELECT memory_id FROM memories WHERE memory_id IN :ids")
                                    .bindparams(sa.bindparam("ids", expanding=True)), {"ids": chunk})
                found.update(r[0] for r in rows)
    finally:
        engine.dispose()
    return len(set(ids) - found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--embedder", default="use-multilingual-v3")
    parser.add_argument("--mix", default="40,30,30",
                        help="shares of add_turn, save and search (default 40,30,30; e.g. 0,1,0 for saves alone)")
    parser.add_argument("--dir", help="where the two stores go (default: a temporary directory)")
    parser.add_argument("--only", choices=("in-process", "server"),
                        help="run one phase alone (profiling); the ratio needs both")
    args = parser.parse_args(argv)
    if not 1 <= args.users <= 5000 or not 0 < args.seconds <= 600:
        parser.error("--users must be 1..5000 and --seconds 0..600")
    root = Path(args.dir or tempfile.mkdtemp(prefix="portamem-load-"))
    os.environ["PORTAMEM_EMBEDDER"] = args.embedder
    global MIX
    try:
        mix = tuple(float(x) for x in args.mix.split(","))
    except ValueError:
        mix = ()
    if len(mix) != 3 or min(mix) < 0 or not sum(mix):
        parser.error("--mix takes three non-negative shares: add_turn,save,search")
    MIX = mix  # type: ignore[assignment]
    print(f"{args.users} simulated users, {args.seconds:g} s per phase, mix {args.mix} (turn,save,search), "
          f"embedder {args.embedder}, "
          f"{os.cpu_count()} CPUs, stores in {root}", flush=True)

    local = Figures("in-process")
    if args.only != "server":
        settings = Settings.load(path=str(root / "in-process"))
        with Memory(settings=settings) as mem:
            local = asyncio.run(in_process(mem, args.users, args.seconds))
        local.lost = count_lost(settings.resolved_db_url, local.saved)
        print(local.line(), flush=True)
    if args.only == "in-process":
        return 0

    server = ServerProcess(root / "served", args=("--max-queue", "4096"))
    try:
        key = server.key("load")
        remote = asyncio.run(served(server.url, key, args.users, args.seconds, server.proc.pid))
        queue = httpx.get(server.url + "/v1/stats", headers={"Authorization": f"Bearer {key}"},
                          timeout=60).json()["queue"]
    finally:
        code = server.stop()
    remote.lost = count_lost(server.db_url, remote.saved)
    print(remote.line(), flush=True)
    print(f"{'':>12}  server queue: {queue}; exit code {code}")
    ratio = remote.pct(99) / local.pct(99) if local.searches and remote.searches else float("nan")
    print(f"{'':>12}  search p99 server / in-process: {ratio:.2f}x")
    for f in (local, remote):
        for sample in f.error_samples:
            print(f"{f.name} error: {sample}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
