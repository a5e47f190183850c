"""Fixtures shared by the adapter tests: running an example script the way a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def run_example(tmp_path: Path) -> Callable[[str], str]:
    """Run ``examples/<name>`` offline on a fresh store; return its stdout (it must exit 0)."""

    def run(name: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "PORTAMEM_EXAMPLE_MODEL"}
        proc = subprocess.run([sys.executable, str(EXAMPLES / name), str(tmp_path / "example-store")],
                              capture_output=True, text=True, env=env, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    return run
