"""Abuse of ``portamem serve`` by request bodies: what they cost the server in memory and in latency.

Each scenario runs against a fresh real ``portamem serve`` subprocess on loopback (a store of its own,
one tenant-wide API key made before it starts), with the server's resident memory sampled every
20 ms (psutil) and ``GET /v1/health`` timed every 50 ms throughout:

- ``unauth``: 32 unauthenticated 4 MiB ``POST /v1/memories`` at once, beside 64 connections that
  trickle unauthenticated 4 MiB bodies (16 KiB every 75 ms, a new connection when the server closes
  one) for ``--seconds`` (20 by default);
- ``auth``: 8 concurrent authenticated 4 MiB ``POST /v1/memories`` (a 4 MiB content, which the API
  refuses with 422 once parsed: what a body costs before any memory work);
- ``shapes``: for each shape, 8 concurrent authenticated 4 MiB ``POST /v1/memories`` whose metadata is
  what costs the most to parse for its size: ``keys`` (~470k tiny keys), ``items`` (a list of ~2M
  zeros), ``strings`` (a list of ~700k two-letter strings), ``deep`` (lists nested ~2M deep), ``long``
  (one 4 MiB string), ``bound`` (just under the server's bounds: 99,900 keys and 1 MB strings,
  which it parses); one server, the shapes one after the other;
- ``import``: one ``POST /v1/import`` whose body is a single 100 MiB line (``{"format": "xxx...x"}``:
  JSON, but no export header), sent as fast as loopback takes it: the time until the server answers,
  and its status.

RSS growth is the peak during the scenario minus the resident size just before it. Printed: one row
per scenario beside its target (growth <= 50 MiB, 64 for the shapes; health p99 <= 200 ms), and ``--json`` writes the
figures. Bounded: every loop ends with the scenario's deadline, and the script stops by itself.

    nice -n 5 python benchmarks/server_abuse.py
    nice -n 5 python benchmarks/server_abuse.py --only import --json /tmp/abuse.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from portamem import Settings
from portamem_conformance.remote import ServerProcess, mint_key

MIB = 1024 * 1024
RSS_TARGET_MIB = 50.0
#: the shapes' target: 8 keyed bodies parse, where the other scenarios' bodies are refused unparsed
SHAPES_RSS_TARGET_MIB = 64.0
HEALTH_P99_TARGET_MS = 200.0


def _body(size: int) -> bytes:
    """A JSON save of ``size`` bytes: one huge content."""
    head, tail = b'{"user_id": "abuser", "content": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def _fill(head: bytes, unit: bytes, tail: bytes, size: int, sep: bytes = b",") -> bytes:
    n = (size - len(head) - len(tail)) // (len(unit) + len(sep))
    return head + sep.join([unit] * n) + tail


def shape_body(shape: str, size: int) -> bytes:
    """A save of about ``size`` bytes whose metadata has the ``shape`` (module docstring)."""
    head = b'{"user_id": "abuser", "content": "A fact.", "metadata": '
    if shape == "keys":  # distinct keys: a dict entry and a string object each
        n = (size - len(head)) // 12
        return head + b"{" + b",".join(b'"k%d":0' % i for i in range(n)) + b"}}"
    if shape == "items":
        return _fill(head + b'{"l": [', b"0", b"]}}", size)
    if shape == "strings":
        return _fill(head + b'{"l": [', b'"ab"', b"]}}", size)
    if shape == "deep":
        depth = (size - len(head) - 12) // 2
        return head + b'{"l": ' + b"[" * depth + b"]" * depth + b"}}"
    if shape == "bound":  # as costly as the server still parses: just under its bounds, padded to the size
        from portamem.server.shape import MAX_STRING_BYTES, MAX_VALUES

        keys = b",".join(b'"k%d":0' % i for i in range(MAX_VALUES - 100))
        pad = b'"' + b"x" * (MAX_STRING_BYTES - 1000) + b'"'
        n = max(0, (size - len(head) - len(keys) - 64) // (len(pad) + 8))
        return head + b"{" + keys + b"".join(b',"p%d":' % i + pad for i in range(n)) + b"}}"
    if shape == "long":
        return head + b'{"note": "' + b"x" * (size - len(head) - 14) + b'"}}'
    raise ValueError(shape)


SHAPES = ("keys", "items", "strings", "deep", "long", "bound")


@dataclass
class Figures:
    scenario: str
    rss_before_mib: float = 0.0
    rss_peak_mib: float = 0.0
    health_ms: list[float] = field(default_factory=list)
    health_failures: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""
    rss_target_mib: float = RSS_TARGET_MIB

    @property
    def growth(self) -> float:
        return self.rss_peak_mib - self.rss_before_mib

    def pct(self, q: float) -> float:
        if not self.health_ms:
            return float("nan")
        ordered = sorted(self.health_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    def count(self, status: Any) -> None:
        self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("health_ms")
        out.update(rss_growth_mib=round(self.growth, 1), health_p50_ms=round(self.pct(50), 1),
                   health_p99_ms=round(self.pct(99), 1), health_samples=len(self.health_ms))
        return out


class Watch:
    """The server's RSS sampled every 20 ms and /v1/health timed every 50 ms, until ``stop``."""

    def __init__(self, pid: int, url: str, figures: Figures) -> None:
        self.proc = psutil.Process(pid)
        self.host, self.port = url.split("//", 1)[1].rsplit(":", 1)
        self.figures = figures
        self.done = threading.Event()
        figures.rss_before_mib = figures.rss_peak_mib = self._rss()
        self.threads = [threading.Thread(target=self._sample, daemon=True),
                        threading.Thread(target=self._probe, daemon=True)]
        for t in self.threads:
            t.start()

    def _rss(self) -> float:
        return self.proc.memory_info().rss / MIB

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            try:
                self.figures.rss_peak_mib = max(self.figures.rss_peak_mib, self._rss())
            except psutil.Error:
                return

    def _probe(self) -> None:
        while not self.done.wait(0.05):
            start = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(self.host, int(self.port), timeout=30)
                conn.request("GET", "/v1/health")
                ok = conn.getresponse().status == 200
                conn.close()
            except OSError:
                ok = False
            if ok:
                self.figures.health_ms.append((time.perf_counter() - start) * 1000)
            else:
                self.figures.health_failures += 1

    def stop(self) -> None:
        self.done.set()
        for t in self.threads:
            t.join(timeout=35)
        self.figures.rss_peak_mib = max(self.figures.rss_peak_mib, self._rss())


def _post(host: str, port: int, path: str, body: bytes, headers: dict[str, str], figures: Figures,
          timeout: float = 60) -> None:
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        response.read()
        figures.count(response.status)
        conn.close()
    except OSError as exc:
        figures.count(type(exc).__name__)


def _trickle(host: str, port: int, size: int, deadline: float, figures: Figures) -> None:
    """Send ``size``-byte bodies 16 KiB every 75 ms until ``deadline``, reconnecting when the server closes."""
    piece = b"x" * (16 * 1024)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                sock.sendall(f"POST /v1/memories HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json"
                             f"\r\nContent-Length: {size}\r\n\r\n".encode())
                sent = 0
                while sent < size and time.monotonic() < deadline:
                    sock.sendall(piece[:size - sent])
                    sent += len(piece)
                    time.sleep(0.075)
                figures.count("trickle-closed-by-client" if sent < size else "trickle-sent-whole")
        except OSError:
            figures.count("trickle-closed-by-server")
            time.sleep(0.1)


def scenario_unauth(server: ServerProcess, seconds: float) -> Figures:
    figures = Figures("unauth 32 x 4 MiB + 64 trickling")
    host, port = server.url.split("//", 1)[1].rsplit(":", 1)
    body = _body(4 * MIB)
    watch = Watch(server.proc.pid, server.url, figures)
    start = time.monotonic()
    deadline = start + seconds
    threads = [threading.Thread(target=_post, args=(host, int(port), "/v1/memories", body, {}, figures), daemon=True)
               for _ in range(32)]
    threads += [threading.Thread(target=_trickle, args=(host, int(port), 4 * MIB, deadline, figures), daemon=True)
                for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.monotonic() + 60))
    figures.seconds = time.monotonic() - start
    watch.stop()
    return figures


def scenario_auth(server: ServerProcess, key: str, shape: str | None = None) -> Figures:
    figures = Figures("auth 8 x 4 MiB" + ("" if shape is None else f", metadata {shape}"))
    host, port = server.url.split("//", 1)[1].rsplit(":", 1)
    body = _body(4 * MIB) if shape is None else shape_body(shape, 4 * MIB)
    if shape is not None:
        figures.rss_target_mib = SHAPES_RSS_TARGET_MIB
    watch = Watch(server.proc.pid, server.url, figures)
    start = time.monotonic()
    threads = [threading.Thread(target=_post, args=(host, int(port), "/v1/memories", body,
                                                    {"Authorization": f"Bearer {key}"}, figures, 120), daemon=True)
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    figures.seconds = time.monotonic() - start
    time.sleep(1.0)  # what the server still holds once every answer came
    watch.stop()
    return figures


def scenario_import(server: ServerProcess, key: str, size: int) -> Figures:
    """One line of ``size`` bytes as an import body: the seconds until the server answers."""
    figures = Figures(f"import one {size // MIB} MiB line")
    host, port = server.url.split("//", 1)[1].rsplit(":", 1)
    watch = Watch(server.proc.pid, server.url, figures)
    sock = socket.create_connection((host, int(port)), timeout=120)
    sock.sendall(f"POST /v1/import HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
                 f"Content-Type: application/x-ndjson\r\nContent-Length: {size}\r\n\r\n".encode())
    stop = threading.Event()

    def send() -> None:
        # one JSON object on one line, {"format": "xxx...x"}: valid JSON, not an export header
        head, filler, tail = b'{"format": "', b"x" * MIB, b'"}'
        sent = 0
        try:
            sock.sendall(head)
            sent += len(head)
            while sent < size - len(tail) and not stop.is_set():
                part = filler[:size - len(tail) - sent]
                sock.sendall(part)
                sent += len(part)
            if not stop.is_set():
                sock.sendall(tail)
        except OSError:
            pass

    start = time.monotonic()
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    data = b""
    try:
        while b"\r\n" not in data:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    except OSError as exc:
        figures.count(type(exc).__name__)
    figures.seconds = time.monotonic() - start
    stop.set()
    if data.startswith(b"HTTP/1.1 "):
        figures.count(int(data.split()[1]))
        try:
            while len(data) < 65536:
                got = sock.recv(65536)
                if not got:
                    break
                data += got
        except OSError:
            pass
        figures.note = data.split(b"\r\n\r\n", 1)[-1][:160].decode("utf-8", "replace")
    sock.close()
    sender.join(timeout=30)
    time.sleep(1.0)
    watch.stop()
    return figures


def _start(root: Path, name: str) -> tuple[ServerProcess, str]:
    path = root / name
    key = mint_key(Settings(path=str(path)).resolved_db_url, "abuse")
    server = ServerProcess(path)
    # warm: a save and a search load the embedder and the store's caches before anything is measured
    conn = http.client.HTTPConnection(*server.url.split("//", 1)[1].rsplit(":", 1), timeout=120)
    for route, payload in (("/v1/memories", {"user_id": "warm", "content": "The spare key is under the pot."}),
                           ("/v1/search", {"user_id": "warm", "query": "where is the key"})):
        conn.request("POST", route, body=json.dumps(payload),
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        conn.getresponse().read()
    conn.close()
    time.sleep(1.0)
    return server, key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["unauth", "auth", "shapes", "import"], action="append")
    parser.add_argument("--shape", choices=SHAPES, action="append", help="with shapes: only these (default all)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the trickle lasts (default 20)")
    parser.add_argument("--import-mib", type=int, default=100, help="the import line's size (default 100)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    chosen = args.only or ["unauth", "auth", "shapes", "import"]
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="portamem-abuse-") as tmp:
        root = Path(tmp)
        print(f"portamem serve abuse on {os.cpu_count()} CPUs (load average {' '.join(open('/proc/loadavg').read().split()[:3])}"
              f"), stores in {root}", flush=True)
        for name in chosen:
            server, key = _start(root, name)
            try:
                if name == "unauth":
                    rows.append(scenario_unauth(server, args.seconds))
                elif name == "auth":
                    rows.append(scenario_auth(server, key))
                elif name == "shapes":
                    for shape in args.shape or SHAPES:
                        rows.append(scenario_auth(server, key, shape))
                        print(f"  {rows[-1].scenario}: done in {rows[-1].seconds:.1f} s, answers {rows[-1].statuses}",
                              flush=True)
                    continue
                else:
                    rows.append(scenario_import(server, key, args.import_mib * MIB))
            finally:
                server.stop()
            print(f"  {rows[-1].scenario}: done in {rows[-1].seconds:.1f} s, answers {rows[-1].statuses}", flush=True)
    print()
    print(f"{'scenario':<34} {'RSS +MiB':>9} {'target':>7} {'health p50':>11} {'p99 ms':>8} {'target':>7} {'secs':>6}")
    for f in rows:
        ok_rss = "ok" if f.growth <= f.rss_target_mib else "OVER"
        ok_p99 = "ok" if f.pct(99) <= HEALTH_P99_TARGET_MS else "OVER"
        print(f"{f.scenario:<34} {f.growth:>9.1f} {f'<={f.rss_target_mib:.0f} ' + ok_rss:>7} {f.pct(50):>11.1f} {f.pct(99):>8.1f} "
              f"{'<=200 ' + ok_p99:>7} {f.seconds:>6.1f}")
        if f.health_failures:
            print(f"{'':<34} health failures: {f.health_failures}")
        if f.note:
            print(f"{'':<34} answer: {f.note}")
    if args.json:
        Path(args.json).write_text(json.dumps([f.to_dict() for f in rows], indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
