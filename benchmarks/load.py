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

``--llm local``: the formation stage with a real model. The benchmark starts llama.cpp's
OpenAI-compatible server with Qwen2.5-0.5B-Instruct (``portamem_conformance.local_model``: the model
assembled into ``PORTAMEM_MODEL_CACHE``, the interpreter ``--llama-python`` or ``PORTAMEM_LLAMA_PYTHON``
names, one with ``llama-cpp-python[server]``; ``--llama-threads``, 1 by default) and the server under
test with ``--llm-url``/``--llm-model`` pointing at it; ``--llm-url URL --llm-model NAME`` takes an
endpoint already running instead. The model server runs on the same CPUs as everything else.
``--hog`` runs a process spinning one core for each phase. Without a model the formation stage runs
too (the rules form each turn); either way each phase prints what formation did: the offered turn
rate (users / think), turns formed per second (decided by the model, by the rules after asking it,
by the rules without asking), model calls per second and their latency, the formation backlog
(turns pending) at the phase's start and end and its growth per minute, and the CPU seconds the
model server and the hog took beside the serving process.

    python benchmarks/load.py --open-loop --users 500 --think 30 --seconds 120 --only server \
        --embedder multilingual-e5-small-q4 --llm local --hog

The stores are wherever the environment's settings put them: ``PORTAMEM_DB_URL`` (a PostgreSQL
database, empty) and ``PORTAMEM_VECTOR_URI`` (``pgvector``, or a Milvus server) run the server phase on
them; with both phases they would share that database, so use ``--only server`` there.

    PORTAMEM_DB_URL=postgresql+psycopg://postgres@127.0.0.1:5432/load PORTAMEM_VECTOR_URI=pgvector \
        python benchmarks/load.py --open-loop --users 500 --think 30 --seconds 120 --only server

The default embedder is the fast one (use-multilingual-v3, ~900 texts/s on 2 cores): with
synchronous indexing a save waits for its embedding, so the e5 model (~36 texts/s) bounds the
write rate far below the queue's. The client is a minimal HTTP/1.1 keep-alive client over asyncio
streams, one connection per user, so the load generator takes little of the CPU it shares.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.errors import OverloadedError, PortamemError
from portamem_conformance.remote import ServerProcess, mint_key

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
    #: (seconds into the phase, ``Memory.stats()`` as plain data) at its start, every ``SAMPLE_S`` and once
    #: every event was answered: the formation backlog and the model's counters
    samples: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    #: open loop: when the phase started and when each search was sent (``time.perf_counter``), beside ``searches``
    started: float = 0.0
    search_sent: list[float] = field(default_factory=list)

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
        line = (f"{'':>12}  open loop: {self.offered / self.seconds:.1f} events/s offered; turn p50 "
                f"{self.pct(50, self.turns):.1f} ms p99 {self.pct(99, self.turns):.1f} ms; index lag p50 "
                f"{self.pct(50, self.lags) / 1000:.2f} s p99 {self.pct(99, self.lags) / 1000:.2f} s "
                f"({len(self.lags)} memories written by {len(self.turns)} turns)")
        if len(self.search_sent) == len(self.searches) and self.searches:
            step = 30.0
            windows: dict[int, list[float]] = {}
            for sent, took in zip(self.search_sent, self.searches):
                windows.setdefault(int((sent - self.started) // step), []).append(took)
            line += (f"\n{'':>12}  search p99 by {step:.0f} s of the phase: "
                     + ", ".join(f"{k * step:.0f}-{(k + 1) * step:.0f} s {self.pct(99, v):.0f} ms"
                                 for k, v in sorted(windows.items())))
        return line

    def formation_lines(self, offered_turns_s: float | None) -> list[str]:
        """What formation did over the phase, from the first and last samples."""
        if len(self.samples) < 2:
            return []
        (t0, a), (t1, b) = self.samples[0], self.samples[-1]
        span = max(t1 - t0, 1e-9)
        fa, fb = a.get("formation") or {}, b.get("formation") or {}
        ma, mb = a.get("model") or {}, b.get("model") or {}

        def delta(x: dict[str, Any], y: dict[str, Any], key: str) -> float:
            return float(y.get(key) or 0) - float(x.get(key) or 0)

        formed = delta(fa, fb, "formed_total")
        asked, fell = delta(fa, fb, "reconciled_by_model"), delta(fa, fb, "fallbacks")
        pad = f"{'':>12}  "
        how = (f"{(asked - fell) / span:.2f}/s decided by the model, {fell / span:.2f}/s by the rules after "
               f"asking it, {(formed - asked) / span:.2f}/s by the rules without asking" if mb
               else "no model: the rules formed every turn")
        lines = [f"{pad}formation: {formed / span:.2f} turns formed/s over {span:.0f} s ({how})"
                 + (f"; {offered_turns_s:.2f} turns/s offered: it sustains {formed / span:.2f} of "
                    f"{offered_turns_s:.2f} ({formed / span / offered_turns_s:.1%})" if offered_turns_s else "")]
        pending = [(t, (s.get("formation") or {}).get("pending", 0)) for t, s in self.samples]
        growth = (fb.get("pending", 0) - fa.get("pending", 0)) / span * 60
        lines.append(f"{pad}formation backlog: {fa.get('pending', 0)} turns pending at the start, "
                     f"{fb.get('pending', 0)} at the end (oldest {fb.get('oldest_pending_s', 0.0):.0f} s old): "
                     f"{growth:+.0f} turns/min; over the phase "
                     + ", ".join(f"{t:.0f}s {n}" for t, n in pending))
        if mb:
            calls = delta(ma, mb, "calls")
            outcomes = {k: int(v - (ma.get("outcomes") or {}).get(k, 0)) for k, v in (mb.get("outcomes") or {}).items()}
            la, lb = ma.get("latency_s") or {}, mb.get("latency_s") or {}
            n_lat = delta(la, lb, "count")
            mean = delta(la, lb, "sum") / n_lat if n_lat else float("nan")
            p50, p99 = lb.get("p50"), lb.get("p99")
            tokens = delta(ma, mb, "prompt_tokens"), delta(ma, mb, "completion_tokens")
            lines.append(f"{pad}model: {calls / span:.2f} calls/s ({int(calls)} calls: "
                         + ", ".join(f"{k} {v}" for k, v in outcomes.items() if v)
                         + f"), latency mean {mean:.2f} s, p50 {_secs(p50)} p99 {_secs(p99)} (last 512 calls), "
                         f"{tokens[0] / max(calls, 1):.0f} prompt + {tokens[1] / max(calls, 1):.0f} completion "
                         f"tokens a call, {int(delta(ma, mb, 'fallbacks'))} answers the rules replaced")
        ca, cb = a.get("_cpu") or {}, b.get("_cpu") or {}
        cpu = [f"{name} {cb[name] - ca[name]:.1f} s ({(cb[name] - ca[name]) / span:.2f} cores)"
               for name in cb if cb.get(name) is not None and ca.get(name) is not None]
        if cpu:
            lines.append(f"{pad}CPU over those {span:.0f} s: " + ", ".join(cpu) + f", of {os.cpu_count()} cores")
        return lines

    def line(self) -> str:
        requests = self.writes + len(self.searches)
        cpu = f"  {self.cpu_s * 1000 / requests:.1f} ms CPU/request" if self.cpu_s is not None and requests else ""
        return (f"{self.name:>12}: {self.writes / self.seconds:8.1f} acknowledged writes/s  "
                f"search p50 {self.pct(50):7.1f} ms  p99 {self.pct(99):7.1f} ms  ({len(self.searches)} searches)  "
                f"errors {self.errors}  429s {self.rejected}  lost writes {self.lost}{cpu}")


def _secs(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


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


#: processes whose CPU each formation sample reads (name -> pid): the serving process, the model server, the hog
WATCH: dict[str, int] = {}
#: seconds between two samples of the server's figures during a phase
SAMPLE_S = 15.0

Probe = Callable[[], Awaitable[dict[str, Any]]]


async def _sample(figures: Figures, probe: Probe | None, start: float) -> None:
    """One sample of ``probe`` (``Memory.stats()`` as plain data) and of the watched processes' CPU."""
    if probe is None:
        return
    try:
        stats = await probe()
    except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:  # a figure missing must not end the run
        print(f"reading the server's figures failed: {exc!r}", file=sys.stderr)
        return
    stats["_cpu"] = {name: cpu_seconds(pid) for name, pid in WATCH.items()}
    figures.samples.append((time.perf_counter() - start, stats))


async def _sampling(figures: Figures, probe: Probe | None, start: float) -> None:
    while True:
        await asyncio.sleep(SAMPLE_S)
        await _sample(figures, probe, start)


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


async def _run_users(users: int, seconds: float, step: Any, figures: Figures, probe: Probe | None = None) -> None:
    t_start = time.perf_counter()
    await _sample(figures, probe, t_start)
    sampler = asyncio.create_task(_sampling(figures, probe, t_start))
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
    sampler.cancel()
    await _sample(figures, probe, t_start)


async def _open_users(users: int, seconds: float, think: float, step: Any, figures: Figures, db_path: str,
                      probe: Probe | None = None) -> None:
    """Open loop: each user's events (a turn, then a recall once it is answered) arrive as a Poisson
    process ``think`` seconds apart on average, whether or not the user's earlier ones are answered."""
    loop = asyncio.get_running_loop()
    t_start = time.perf_counter()
    await _sample(figures, probe, t_start)
    sampler = asyncio.create_task(_sampling(figures, probe, t_start))
    start = loop.time()
    figures.started = time.perf_counter()
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
    sampler.cancel()
    await _sample(figures, probe, t_start)
    await _settle_lags(figures, db_path, timeout=120.0)


_ENGINES: dict[str, sa.engine.Engine] = {}


def _indexed(db_path: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` the store marks indexed: ``db_path`` a SQLite file, or the URL of a server database."""
    if "://" in db_path:  # PostgreSQL (the server's PORTAMEM_DB_URL)
        engine = _ENGINES.get(db_path) or _ENGINES.setdefault(db_path, sa.create_engine(db_path, pool_size=1))
        query = sa.text("SELECT memory_id FROM memories WHERE indexed = 1 AND memory_id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True))
        with engine.connect() as conn:
            return {r[0] for lo in range(0, len(ids), 500) for r in conn.execute(query, {"ids": ids[lo:lo + 500]})}
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
    """The SQLite file of a ``sqlite:///`` URL; another database's URL as it is."""
    return db_url.removeprefix("sqlite:///")


async def served(url: str, key: str, users: int, seconds: float, pid: int, think: float | None = None,
                 db_path: str = "", admin_key: str | None = None) -> Figures:
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
            figures.search_sent.append(t0)
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

    probe: Probe | None = None
    if admin_key is not None:
        stats_client = httpx.AsyncClient(headers={"Authorization": f"Bearer {admin_key}"}, timeout=60)

        async def probe() -> dict[str, Any]:
            answer = await stats_client.get(url + "/v1/stats", params={"all_tenants": "true"})
            answer.raise_for_status()
            return dict(answer.json()["server"]["memory"])

    try:
        if think is None:
            await _run_users(users, seconds, step, figures, probe)
        else:
            await _open_users(users, seconds, think, step, figures, db_path, probe)
    finally:
        for c in connections + idle:
            c.close()
        if admin_key is not None:
            await stats_client.aclose()
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
                figures.search_sent.append(t0)
            return True
        except OverloadedError:
            figures.rejected += 1
        except PortamemError as exc:
            figures.error(f"{kind}: {exc!r}")
        return False

    async def probe() -> dict[str, Any]:
        return dataclasses.asdict(await asyncio.to_thread(mem.stats))

    if think is None:
        await _run_users(users, seconds, step, figures, probe)
    else:
        await _open_users(users, seconds, think, step, figures, _sqlite_path(mem.settings.resolved_db_url), probe)
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


@contextlib.contextmanager
def hogging(on: bool) -> Iterator[None]:
    """A process spinning one core while the block runs (``--hog``); killed when it ends, however it ends."""
    if not on:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    WATCH["hog"] = hog.pid
    try:
        yield
    finally:
        WATCH.pop("hog", None)
        hog.kill()
        hog.wait(30)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # the same clean stop as Ctrl-C: the finally blocks stop what was started


def start_model(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[str, str] | None:
    """The chat model endpoint (url, model name): ``--llm-url`` as given, or the local llama.cpp server
    started here (stopped by ``stack``); None without a model."""
    if args.llm_url:
        return args.llm_url.rstrip("/"), args.llm_model
    if args.llm != "local":
        return None
    from portamem_conformance.local_model import Unavailable, assemble_model, start_server

    python = args.llama_python or os.environ.get("PORTAMEM_LLAMA_PYTHON") or sys.executable
    try:
        model = assemble_model()
        print(f"starting llama.cpp ({python} -m llama_cpp.server, {args.llama_threads} thread(s)) on {model.name}",
              flush=True)
        llama = start_server(model, python=python, threads=args.llama_threads)
    except Unavailable as exc:
        raise SystemExit(f"--llm local: {exc}") from None
    stack.callback(llama.stop)
    WATCH["model server"] = llama.process.pid
    return llama.url, llama.model


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
    parser.add_argument("--server-log", help="write what the server printed (its log) to this file")
    parser.add_argument("--llm", choices=("local",),
                        help="form memories with a real model: 'local' starts llama.cpp's server with "
                             "Qwen2.5-0.5B-Instruct (portamem_conformance.local_model) on these CPUs")
    parser.add_argument("--llm-url", help="an OpenAI-compatible model endpoint already running (base URL ending in /v1)")
    parser.add_argument("--llm-model", default="qwen2.5-0.5b-instruct", help="the model name --llm-url serves")
    parser.add_argument("--llama-python", help="--llm local: an interpreter with 'llama-cpp-python[server]' "
                                               "(default: PORTAMEM_LLAMA_PYTHON, else this one)")
    parser.add_argument("--llama-threads", type=int, default=1, help="--llm local: llama.cpp's threads (default 1)")
    parser.add_argument("--hog", action="store_true", help="a process spinning one core during each phase")
    args = parser.parse_args(argv)
    think = args.think if args.open_loop else None
    if think is not None and not think > 0:
        parser.error("--think must be a positive number of seconds")
    if not 1 <= args.users <= 5000 or not 0 < args.seconds <= 600:
        parser.error("--users must be 1..5000 and --seconds 0..600")
    if args.llm and args.llm_url:
        parser.error("--llm local starts a model; --llm-url names one already running: one or the other")
    if args.llama_threads < 1:
        parser.error("--llama-threads must be at least 1")
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
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        with contextlib.ExitStack() as stack:
            return _run(args, think, root, stack)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, think: float | None, root: Path, stack: contextlib.ExitStack) -> int:
    shape = (f"open loop, a turn and a recall every {think:g} s per user on average" if think is not None
             else f"closed loop, mix {args.mix} (turn,save,search)")
    print(f"{args.users} simulated users, {args.seconds:g} s per phase, {shape}, embedder {args.embedder}, "
          f"{os.cpu_count()} CPUs, stores in {root}", flush=True)
    endpoint = start_model(args, stack)
    if endpoint is not None:
        where = ("started here on the same CPUs as the server and the users" if args.llm == "local"
                 else "already running (on these CPUs when local)")
        print(f"formation model: {endpoint[1]} at {endpoint[0]}, {where}", flush=True)
    else:
        print("formation model: none (the rules form each turn)", flush=True)
    if args.hog:
        print("a CPU hog spins one core during each phase", flush=True)
    offered_turns = (args.users / think if think is not None
                     else None)  # closed loop: the turn rate is whatever the server answers

    local = Figures("in-process")
    if args.only != "server":
        settings = Settings.load(path=str(root / "in-process"))
        if endpoint is not None:
            settings = settings.replace(llm_url=endpoint[0], llm_model=endpoint[1])
        WATCH["serving"] = os.getpid()
        with Memory(settings=settings) as mem, hogging(args.hog):
            local = asyncio.run(in_process(mem, args.users, args.seconds, think))
        local.lost = count_lost(settings.resolved_db_url, local.saved)
        print(local.line(), flush=True)
        if think is not None:
            print(local.open_line(), flush=True)
        for text in local.formation_lines(offered_turns):
            print(text, flush=True)
    if args.only == "in-process":
        return 0

    extra = ("--llm-url", endpoint[0], "--llm-model", endpoint[1]) if endpoint is not None else ()
    server = ServerProcess(root / "served", args=("--max-queue", "4096", *extra))
    WATCH["serving"] = server.proc.pid
    try:
        key = server.key("load")
        admin = mint_key(server.db_url, "load", scopes=["admin"])
        with hogging(args.hog):
            remote = asyncio.run(served(server.url, key, args.users, args.seconds, server.proc.pid, think,
                                        _sqlite_path(server.db_url), admin))
        queue = httpx.get(server.url + "/v1/stats", headers={"Authorization": f"Bearer {key}"},
                          timeout=60).json()["queue"]
    finally:
        code = server.stop()
        if args.server_log:
            Path(args.server_log).write_text("".join(server.output), encoding="utf-8")
    remote.lost = count_lost(server.db_url, remote.saved)
    print(remote.line(), flush=True)
    if think is not None:
        print(remote.open_line(), flush=True)
    for text in remote.formation_lines(offered_turns):
        print(text, flush=True)
    print(f"{'':>12}  server queue: {queue}; exit code {code}")
    if local.searches and remote.searches:  # both phases ran
        print(f"{'':>12}  search p99 server / in-process: {remote.pct(99) / local.pct(99):.2f}x")
    for f in (local, remote):
        for sample in f.error_samples:
            print(f"{f.name} error: {sample}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
