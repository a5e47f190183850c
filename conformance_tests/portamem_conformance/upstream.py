"""Run a framework's own test suite on a portamem adapter: the tests its authors run on their implementations.

The test files are taken, unmodified, from the framework's source distribution on PyPI (pinned by
version and sha256, fetched once with ``pip download`` into a cache), so the project ships none
of their code: ``Suite`` names where each file comes from and under which licence. ``adopt`` puts
a loaded module's tests and fixtures into a pytest module, with the ones that check an extra of one
implementation skipped for a written reason, and ``replace`` points the names the tests build their
stores from at a factory of portamem ones.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

__all__ = ["Suite", "fetch", "load", "adopt"]


@dataclass(frozen=True)
class Suite:
    """Test files of one source distribution, and the helper modules they import by name."""

    dist: str
    version: str
    sha256: str
    #: where the files live upstream, and the licence they are under
    source: str
    licence: str
    files: tuple[str, ...]
    helpers: Mapping[str, str] = field(default_factory=dict)


def _cache() -> Path:
    root = os.environ.get("PORTAMEM_UPSTREAM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "portamem", "upstream")
    return Path(root)


def fetch(suite: Suite) -> Path:
    """The unpacked source distribution (downloaded and checked once, then read from the cache)."""
    base = f"{suite.dist.replace('-', '_')}-{suite.version}"
    target = _cache() / suite.sha256[:16] / base
    if target.is_dir():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"{suite.dist}=={suite.version}", "--dest", tmp],
            capture_output=True, text=True, timeout=600, check=False,
        )
        archives = list(Path(tmp).glob("*.tar.gz"))
        if proc.returncode != 0 or len(archives) != 1:
            raise RuntimeError(f"cannot download the {suite.dist} {suite.version} sdist: {proc.stderr[-2000:]}")
        digest = hashlib.sha256(archives[0].read_bytes()).hexdigest()
        if digest != suite.sha256:
            raise RuntimeError(f"{archives[0].name} has sha256 {digest}, expected {suite.sha256}")
        with tarfile.open(archives[0]) as tar:
            tar.extractall(Path(tmp) / "x", filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(Path(tmp) / "x" / base, target)
    return target


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load(suite: Suite, relpath: str) -> ModuleType:
    """Import one of the suite's test files, its helper modules first under the names it imports them by."""
    if relpath not in suite.files:
        raise ValueError(f"{relpath} is not one of {suite.dist}'s listed test files")
    root = fetch(suite)
    for name, helper in suite.helpers.items():
        if name not in sys.modules or not getattr(sys.modules[name], "__file__", "").startswith(str(root)):
            _module(name, root / helper)
    return _module(f"upstream_{suite.dist.replace('-', '_')}_{Path(relpath).stem}", root / relpath)


def adopt(module: ModuleType, into: dict[str, Any], *, skip: Mapping[str, str],
          replace: Mapping[str, Any] = {}) -> list[str]:
    """Put the module's tests and fixtures into a test module's namespace; ``skip`` maps a test to why.

    ``replace`` rebinds names of the upstream module (the store class a test builds) before any runs.
    Returns the adopted test names. A skip naming no test is an error, so the list cannot go stale.
    """
    for name, value in replace.items():
        if not hasattr(module, name):
            raise AttributeError(f"{module.__name__} has no {name} to replace")
        setattr(module, name, value)
    tests = [n for n, v in vars(module).items() if n.startswith(("test_", "Test")) and callable(v)]
    unknown = set(skip) - set(tests)
    if unknown:
        raise ValueError(f"skip list names tests {module.__name__} does not have: {sorted(unknown)}")
    for name, value in vars(module).items():
        if name in tests or hasattr(value, "_pytestfixturefunction") or type(value).__name__ == "FixtureFunctionDefinition":
            if name not in into:
                into[name] = pytest.mark.skip(reason=skip[name])(value) if name in skip else value
    return tests
