"""Run a driver in a fresh interpreter: the writer side of the process-restart contract.

``python -m portamem_conformance.restart`` reads one JSON job on stdin, writes through
the driver, recalls, closes, and prints what it saw as JSON on stdout.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .driver import MemoryDriver

__all__ = ["run_in_subprocess", "driver_locator", "build_driver"]


def driver_locator(driver: MemoryDriver) -> str:
    """``module:Class`` of a driver, for rebuilding it with no arguments in another process."""
    cls = type(driver)
    return f"{cls.__module__}:{cls.__qualname__}"


def run_in_subprocess(driver: MemoryDriver, path: Path, job: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    """Run ``job`` (scope, ``remember``, ``turns``, ``query``, ``k``) through a copy of ``driver`` in a child process."""
    payload = json.dumps({"driver": driver_locator(driver), "path": str(path), **job})
    proc = subprocess.run(
        [sys.executable, "-m", "portamem_conformance.restart"],
        input=payload, capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child process failed with {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_driver(locator: str) -> MemoryDriver:
    """The driver ``module:Class`` names, built with no arguments (the protocol's rule)."""
    module, _, qualname = locator.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    driver: MemoryDriver = obj()
    return driver


def _main() -> None:
    job = json.loads(sys.stdin.read())
    driver = build_driver(job["driver"])
    handle = driver.open(Path(job["path"]), **job["scope"])
    try:
        for text in job.get("remember", []):
            driver.remember(handle, text)
        for user_text, assistant_text in job.get("turns", []):
            driver.write_turn(handle, user_text, assistant_text)
        out = {"recall": driver.recall(handle, job["query"], job["k"]), "history": driver.history(handle)}
    finally:
        driver.close(handle)
    print(json.dumps(out))


if __name__ == "__main__":
    _main()
