"""A driver run by another environment's interpreter, in a child process: how the switching matrix reaches a
framework whose requirements conflict with the others' (CrewAI, AgentScope 1.x beside 2.x).

``python -m portamem_conformance.child`` builds one driver and answers its actions as JSON lines, one
reply per call, for as long as its stdin stays open; ``ChildDriver`` is the ``MemoryDriver`` that sends
them. The store is the one on disk both sides open in turn, as every driver closes before the next opens.
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .driver import MemoryDriver
from .restart import build_driver

__all__ = ["ChildDriver", "ChildDriverError", "FrameworkProcesses"]

#: the environment variables an ``open`` carries to the child: the store's settings, which a test may
#: change after the child started (``portamem_conformance.fixtures`` points them at each test's store)
_CARRIED_PREFIX = "PORTAMEM_"


class ChildDriverError(RuntimeError):
    """The child failed an action, or stopped answering; the message holds its traceback or stderr."""


@dataclass(frozen=True)
class _Handle:
    id: int


class ChildDriver:
    """A ``MemoryDriver`` whose every action runs in a child process, on the driver built there."""

    #: the sync actions suffice for the matrix; the async twins run them
    supports_async = False

    def __init__(self, name: str, python: str, locator: str, log: Path, timeout: float = 300.0) -> None:
        self.name = name
        self.timeout = timeout
        self._log_path = log
        self._log: IO[bytes] = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self._proc = subprocess.Popen(
            [python, "-m", "portamem_conformance.child", locator],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, bufsize=0,
        )
        self._pending = b""
        remote = self._call("name")
        if remote != name:
            raise ChildDriverError(f"{python} built driver {remote!r} for {locator}, expected {name!r}")

    # ------------------------------------------------------------------ the wire
    def _call(self, op: str, *args: Any) -> Any:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps({"op": op, "args": args}).encode() + b"\n")
        except BrokenPipeError:
            raise self._died(op) from None
        reply = json.loads(self._read_line(op))
        if "error" in reply:
            raise ChildDriverError(f"{self.name} child, {op}: {reply['error']}\n{reply['traceback']}")
        return reply["result"]

    def _read_line(self, op: str) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._pending:
                if not sel.select(self.timeout):
                    self.stop()
                    raise ChildDriverError(f"{self.name} child gave no answer to {op} in {self.timeout:.0f} s:\n"
                                             f"{self._stderr_tail()}")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise self._died(op)
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _died(self, op: str) -> ChildDriverError:
        code = self._proc.wait(timeout=30)
        return ChildDriverError(f"{self.name} child exited with {code} during {op}:\n{self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        self._log.flush()
        return self._log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """End the child: its stdin closed, it ends its loop; killed if it does not within 30 s."""
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    # ------------------------------------------------------------------ the driver
    def open(self, path: Path, *, user_id: str, session_id: str = "default", tenant_id: str = "default") -> _Handle:
        carried = {k: v for k, v in os.environ.items() if k.startswith(_CARRIED_PREFIX)}
        scope = {"user_id": user_id, "session_id": session_id, "tenant_id": tenant_id}
        return _Handle(self._call("open", str(path), scope, carried))

    def close(self, handle: _Handle) -> None:
        self._call("close", handle.id)

    def remember(self, handle: _Handle, text: str) -> str:
        return str(self._call("remember", handle.id, text))

    def recall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return list(self._call("recall", handle.id, query, k))

    def forget(self, handle: _Handle, ref: str) -> None:
        self._call("forget", handle.id, ref)

    def write_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        self._call("write_turn", handle.id, user_text, assistant_text)

    def history(self, handle: _Handle) -> list[tuple[str, str]]:
        return [(role, text) for role, text in self._call("history", handle.id)]

    async def aremember(self, handle: _Handle, text: str) -> str:
        return self.remember(handle, text)

    async def arecall(self, handle: _Handle, query: str, k: int) -> list[str]:
        return self.recall(handle, query, k)

    async def awrite_turn(self, handle: _Handle, user_text: str, assistant_text: str) -> None:
        self.write_turn(handle, user_text, assistant_text)

    async def ahistory(self, handle: _Handle) -> list[tuple[str, str]]:
        return self.history(handle)


class FrameworkProcesses:
    """One child per framework for a whole test session, started on first use; ``stop`` ends them all."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._drivers: dict[str, ChildDriver] = {}

    def driver(self, name: str, python: str, locator: str) -> ChildDriver:
        if name not in self._drivers:
            self._drivers[name] = ChildDriver(name, python, locator, self._log_dir / f"{name}.stderr")
        return self._drivers[name]

    def stop(self) -> None:
        for driver in self._drivers.values():
            driver.stop()
        self._drivers.clear()


# ---------------------------------------------------------------------- the child's side
def _serve(driver: MemoryDriver, requests: IO[str], replies: IO[str]) -> None:
    handles: dict[int, Any] = {}
    ids = itertools.count(1)
    for line in requests:
        call = json.loads(line)
        op, args = call["op"], call["args"]
        try:
            if op == "name":
                result: Any = driver.name
            elif op == "open":
                path, scope, carried = args
                for key in [k for k in os.environ if k.startswith(_CARRIED_PREFIX) and k not in carried]:
                    del os.environ[key]
                os.environ.update(carried)
                handle_id = next(ids)
                handles[handle_id] = driver.open(Path(path), **scope)
                result = handle_id
            elif op == "close":
                driver.close(handles.pop(args[0]))
                result = None
            elif op in ("remember", "recall", "forget", "write_turn", "history"):
                result = getattr(driver, op)(handles[args[0]], *args[1:])
            else:
                raise ValueError(f"unknown action {op!r}")
            reply: dict[str, Any] = {"result": result}
        except Exception as exc:  # the parent raises it, with this traceback
            reply = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def _main() -> None:
    # the replies get their own copy of stdout; whatever a framework prints goes to stderr instead
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _serve(build_driver(sys.argv[1]), sys.stdin, replies)


if __name__ == "__main__":
    _main()
