"""Load on ``portamem serve``: many concurrent simulated users on loopback, beside the in-process library.

Each simulated user runs a closed loop of a realistic mix (add_turn 40 %, save 30 %, search 30 %)
for a fixed time; the same users and mix then run against the in-process library (the async
twins of ``Memory``) in the same run, on a store of their own. Printed for both: acknowledged
writes per second (saves and turns answered with success), search p50/p99, errors, and lost
writes, counted afterwards by looking every acknowledged save up in the store after the server
stopped. Bounded: ``--users`` simulated users, ``--seconds`` per phase, and it stops by itself.

    python benchmarks/load.py --users 500 --seconds 20
    python benchmarks/load.py --users 500 --seconds 20 --embedder multilingual-e5-small-q4

``--open-loop``: users that think instead. Each user's events arrive as a Poisson process (``--think``
seconds apart on average, 30 by default), each event a turn and then a recall (a search) once the
turn is answered, whether or not the user's previous event is still waiting: the offered rate is
users / think, whatever the server's speed, so latency is the server's, not Little's law over a
closed loop. Printed beside the figures above: turn and search p50/p99 from each request's send, and
the index lag of the memories the turns wrote (from the turn's answer until the store marks them
indexed, polled every 0.25 s).

    python benchmarks/load.py --open-loop --users 500 --think 30 --seconds 120 --embedder multilingual-e5-small-q4

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
import sqlite3
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
    #: open loop: turn latencies, events offered, and (answer time, memory ids) of the turns' memories
    turns: list[float] = field(default_factory=list)
    offered: int = 0
    written: list[tuple[float, list[str]]] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text[:200])

    def pct(self, p: float, values: list[float] | None = None) -> float:
        xs = sorted(self.searches if values is None else values)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000

    def open_line(self) -> str:
        return (f"{'':>12}  open loop: {self.offered / self.seconds:.1f} events/s offered; turn p50 "
                f"{self.pct(50, self.turns):.1f} ms p99 {self.pct(99, self.turns):.1f} ms; index lag p50 "
                f"{self.pct(50, self.lags) / 1000:.2f} s p99 {self.pct(99, self.lags) / 1000:.2f} s "
                f"({len(self.lags)} memories written by {len(self.turns)} turns)")

    def line(self) -> str:
        requests = self.writes + len(self.searches)
        cpu = f"  {self.cpu_s * 1000 / requests:.1f} ms CPU/request" if self.cpu_s is not None and requests else ""
        return (f"{self.name:>12}: {self.writes / self.seconds:8.1f} acknowledged writes/s  "
                f"search p50 {self.pct(50):7.1f} ms  p99 {self.pct(99):7.1f} ms  ({len(self.searches)} searches)  "
                f"errors {self.errors}  429s {self.rejected}  lost writes {self.lost}{cpu}")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process and its live children (the embedding workers) so far
    (from /proc; None elsewhere)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            root = psutil.Process(pid)
            return sum(t.user + t.system for t in (p.cpu_times() for p in [root, *root.children(recursive=True)]))
        except psutil.Error:
            return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


#: shares of add_turn, save and search in each user's loop (``--mix``)
MIX = (0.4, 0.3, 0.3)


def _turn(user: str, i: int, topic: str, city: str) -> dict[str, Any]:
    return {"user_id": user, "session_id": "chat", "user": f"Can you help with my {topic} in {city}? It is about item {i}.",
            "assistant": f"Sure, I noted the {topic} in {city}."}


def _recall(user: str, topic: str, city: str) -> dict[str, Any]:
    return {"user_id": user, "query": f"when is my {topic} in {city}?", "top_k": 5}


def _action(rng: random.Random, user: str, i: int) -> tuple[str, dict[str, Any]]:
    topic, city = rng.choice(TOPICS), rng.choice(CITIES)
    roll = rng.random() * sum(MIX)
    if roll < MIX[0]:
        return "turn", _turn(user, i, topic, city)
    if roll < MIX[0] + MIX[1]:
        text = (f"{rng.choice(ZH)}，第{i}次。" if rng.random() < 0.2 else
                f"My {topic} appointment {i} is in {city} on day {rng.randint(1, 28)}.")
        return "save", {"user_id": user, "content": text}
    return "search", _recall(user, topic, city)


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


async def _open_users(users: int, seconds: float, think: float, step: Any, figures: Figures, db_path: str) -> None:
    """Open loop: each user's events (a turn, then a recall once it is answered) arrive as a Poisson
    process ``think`` seconds apart on average, whether or not the user's earlier ones are answered."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + seconds
    events: set[asyncio.Task[None]] = set()

    async def event(n: int, i: int, rng: random.Random) -> None:
        user, topic, city = f"user{n:04d}", rng.choice(TOPICS), rng.choice(CITIES)
        if await step(n, "turn", _turn(user, i, topic, city), time.perf_counter()):
            await step(n, "search", _recall(user, topic, city), time.perf_counter())

    async def one(n: int) -> None:
        rng = random.Random(n)
        at, i = start + rng.expovariate(1 / think), 0
        while at < deadline:
            await asyncio.sleep(max(0.0, at - loop.time()))
            figures.offered += 1
            task = asyncio.create_task(event(n, i, random.Random(n * 100_003 + i)))
            events.add(task)
            task.add_done_callback(events.discard)
            i += 1
            at += rng.expovariate(1 / think)

    watcher = asyncio.create_task(_watch_lag(figures, db_path))
    await asyncio.gather(*(one(n) for n in range(users)))
    while events:
        await asyncio.gather(*list(events))
    figures.seconds = loop.time() - start
    watcher.cancel()
    await _settle_lags(figures, db_path, timeout=120.0)


def _indexed(db_path: str, ids: list[str]) -> set[str]:
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        out: set[str] = set()
        for lo in range(0, len(ids), 500):
            chunk = ids[lo:lo + 500]
            out.update(r[0] for r in db.execute(
                f"SELECT memory_id FROM memories WHERE indexed = 1 AND memory_id IN ({','.join('?' * len(chunk))})",
                chunk))
        return out
    finally:
        db.close()


async def _poll_lags(figures: Figures, db_path: str) -> None:
    waiting = [(at, m) for at, ids in figures.written for m in ids]
    if not waiting:
        return
    done = await asyncio.to_thread(_indexed, db_path, [m for _, m in waiting])
    now = time.perf_counter()
    figures.lags.extend(now - at for at, m in waiting if m in done)
    figures.written = [(at, [m for m in ids if m not in done]) for at, ids in figures.written]
    figures.written = [(at, ids) for at, ids in figures.written if ids]


async def _watch_lag(figures: Figures, db_path: str) -> None:
    while True:
        await asyncio.sleep(0.25)
        await _poll_lags(figures, db_path)


async def _settle_lags(figures: Figures, db_path: str, timeout: float) -> None:
    """After the phase: wait (bounded) for the memories still being indexed."""
    deadline = time.perf_counter() + timeout
    while figures.written and time.perf_counter() < deadline:
        await _poll_lags(figures, db_path)
        await asyncio.sleep(0.25)


def _sqlite_path(db_url: str) -> str:
    return db_url.removeprefix("sqlite:///")


async def served(url: str, key: str, users: int, seconds: float, pid: int, think: float | None = None,
                 db_path: str = "") -> Figures:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    figures = Figures("server")
    cpu_before = cpu_seconds(pid)
    connections = [Connection(host, int(port), key) for _ in range(users)]
    idle: list[Connection] = []  # open loop: a user's events may overlap, each takes a free connection

    async def step(n: int, kind: str, body: dict[str, Any], t0: float) -> bool:
        conn = connections[n] if think is None else (idle.pop() if idle else Connection(host, int(port), key))
        try:
            try:
                status, answer = await conn.request("POST", PATHS[kind], body)
            except ConnectionError:
                if think is None or conn.writer is None:
                    raise
                # uvicorn closes a keep-alive connection idle for 5 s before any request reached it:
                # a thinking user's next request goes on a new one, as HTTP clients do
                conn.close()
                conn = Connection(host, int(port), key)
                status, answer = await conn.request("POST", PATHS[kind], body)
        except (OSError, ConnectionError, ValueError, asyncio.IncompleteReadError) as exc:
            figures.error(f"{kind}: {exc!r}")
            conn.close()
            if think is None:
                connections[n] = Connection(host, int(port), key)
            return False
        if think is not None:
            idle.append(conn)
        if status == 429:
            figures.rejected += 1
            await asyncio.sleep(0.05)
            return False
        if status >= 300:
            figures.error(f"{kind}: HTTP {status} {answer}")
            return False
        if kind == "search":
            figures.searches.append(time.perf_counter() - t0)
            return True
        figures.writes += 1
        if kind == "save":
            figures.saved.append((body["user_id"], answer["memory_id"]))
        else:
            ids = [m["memory_id"] for m in answer["memories"]]
            figures.turns.append(time.perf_counter() - t0)
            figures.saved.extend((body["user_id"], m) for m in ids)
            if ids:
                figures.written.append((time.perf_counter(), ids))
        return True

    try:
        if think is None:
            await _run_users(users, seconds, step, figures)
        else:
            await _open_users(users, seconds, think, step, figures, db_path)
    finally:
        for c in connections + idle:
            c.close()
    cpu_after = cpu_seconds(pid)
    if cpu_before is not None and cpu_after is not None:
        figures.cpu_s = cpu_after - cpu_before
    return figures


async def in_process(mem: Memory, users: int, seconds: float, think: float | None = None) -> Figures:
    figures = Figures("in-process")
    cpu_before = cpu_seconds(os.getpid()) or time.process_time()

    async def step(n: int, kind: str, body: dict[str, Any], t0: float) -> bool:
        try:
            if kind == "turn":
                records = await mem.aadd_turn(body["user"], body["assistant"], user_id=body["user_id"],
                                              session_id=body["session_id"])
                figures.writes += 1
                figures.turns.append(time.perf_counter() - t0)
                figures.saved.extend((body["user_id"], r.memory_id) for r in records)
                if records:
                    figures.written.append((time.perf_counter(), [r.memory_id for r in records]))
            elif kind == "save":
                record = await mem.asave_memory(body["content"], user_id=body["user_id"])
                figures.writes += 1
                figures.saved.append((body["user_id"], record.memory_id))
            else:
                await mem.asearch_memory(body["query"], user_id=body["user_id"], top_k=body["top_k"])
                figures.searches.append(time.perf_counter() - t0)
            return True
        except OverloadedError:
            figures.rejected += 1
        except PortamemError as exc:
            figures.error(f"{kind}: {exc!r}")
        return False

    if think is None:
        await _run_users(users, seconds, step, figures)
    else:
        await _open_users(users, seconds, think, step, figures, _sqlite_path(mem.settings.resolved_db_url))
    # the simulated users' share included, and the embedding worker processes
    figures.cpu_s = (cpu_seconds(os.getpid()) or time.process_time()) - cpu_before
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
    parser.add_argument("--open-loop", action="store_true",
                        help="users that think: Poisson events of a turn and a recall (see --think)")
    parser.add_argument("--think", type=float, default=30.0, help="open loop: mean seconds between a user's events")
    args = parser.parse_args(argv)
    think = args.think if args.open_loop else None
    if think is not None and not think > 0:
        parser.error("--think must be a positive number of seconds")
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
    shape = (f"open loop, a turn and a recall every {think:g} s per user on average" if think is not None
             else f"closed loop, mix {args.mix} (turn,save,search)")
    print(f"{args.users} simulated users, {args.seconds:g} s per phase, {shape}, embedder {args.embedder}, "
          f"{os.cpu_count()} CPUs, stores in {root}", flush=True)

    local = Figures("in-process")
    if args.only != "server":
        settings = Settings.load(path=str(root / "in-process"))
        with Memory(settings=settings) as mem:
            local = asyncio.run(in_process(mem, args.users, args.seconds, think))
        local.lost = count_lost(settings.resolved_db_url, local.saved)
        print(local.line(), flush=True)
        if think is not None:
            print(local.open_line(), flush=True)
    if args.only == "in-process":
        return 0

    server = ServerProcess(root / "served", args=("--max-queue", "4096"))
    try:
        key = server.key("load")
        remote = asyncio.run(served(server.url, key, args.users, args.seconds, server.proc.pid, think,
                                    _sqlite_path(server.db_url)))
        queue = httpx.get(server.url + "/v1/stats", headers={"Authorization": f"Bearer {key}"},
                          timeout=60).json()["queue"]
    finally:
        code = server.stop()
    remote.lost = count_lost(server.db_url, remote.saved)
    print(remote.line(), flush=True)
    if think is not None:
        print(remote.open_line(), flush=True)
    print(f"{'':>12}  server queue: {queue}; exit code {code}")
    ratio = remote.pct(99) / local.pct(99) if local.searches and remote.searches else float("nan")
    print(f"{'':>12}  search p99 server / in-process: {ratio:.2f}x")
    for f in (local, remote):
        for sample in f.error_samples:
            print(f"{f.name} error: {sample}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
