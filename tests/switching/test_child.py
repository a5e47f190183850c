"""The child-process driver the matrix reaches CrewAI and AgentScope 1.x through, tried on the loop adapter in
a child run by this interpreter, and the matrix's answer where a framework's interpreter is missing."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from portamem_conformance import BUILTIN_DRIVERS, FACTS, opened
from portamem_conformance.child import ChildDriverError, FrameworkProcesses
from portamem_conformance.switching import PYTHONS_ENV, STRICT_ENV, matrix_driver
from portamem_loop.conformance import LoopDriver

from portamem.embedding.embedders import Embedder

SCOPE = {"user_id": "alice", "session_id": "s1", "tenant_id": "acme"}


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[FrameworkProcesses]:
    p = FrameworkProcesses(tmp_path)
    yield p
    p.stop()


def test_what_the_child_writes_and_forgets_is_what_this_process_reads(
    processes: FrameworkProcesses, embedder: Embedder, tmp_path: Path
) -> None:
    store_path = tmp_path / "store"
    child = processes.driver("loop", sys.executable, BUILTIN_DRIVERS["loop"])
    here = LoopDriver(embedder=embedder)
    with opened(child, store_path, **SCOPE) as h:
        refs = [child.remember(h, text) for text in FACTS]
        child.write_turn(h, "東京はどうですか？", "Spring, for the\n\"cherry\" blossom.")
        seen = child.recall(h, "What is my cat like?", k=2)
    with opened(here, store_path, **SCOPE) as h:
        assert here.recall(h, "What is my cat like?", k=2) == seen and seen[0] == next(iter(FACTS))
        assert here.history(h) == [("user", "東京はどうですか？"), ("assistant", "Spring, for the\n\"cherry\" blossom.")]
    with opened(child, store_path, **SCOPE) as h:
        child.forget(h, refs[0])
    with opened(here, store_path, **SCOPE) as h:
        assert next(iter(FACTS)) not in here.recall(h, "What is my cat like?", k=5)
    assert processes.driver("loop", sys.executable, BUILTIN_DRIVERS["loop"]) is child  # one child per framework


def test_a_failed_action_comes_back_with_the_childs_traceback(processes: FrameworkProcesses, tmp_path: Path) -> None:
    child = processes.driver("loop", sys.executable, BUILTIN_DRIVERS["loop"])
    h = child.open(tmp_path / "store", **SCOPE)
    child.close(h)
    with pytest.raises(ChildDriverError, match=r"(?s)loop child, recall: KeyError.*Traceback"):
        child.recall(h, "anything", k=1)


def test_a_child_that_cannot_build_its_driver_says_why(processes: FrameworkProcesses) -> None:
    with pytest.raises(ChildDriverError, match=r"(?s)exited with 1.*ModuleNotFoundError.*portamem_nowhere"):
        processes.driver("nowhere", sys.executable, "portamem_nowhere.conformance:Driver")


@pytest.mark.parametrize("name", ["crewai", "agentscope1"])
def test_a_framework_without_its_interpreter_skips_naming_its_env_or_fails_when_strict(
    name: str, processes: FrameworkProcesses, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        importlib.import_module(BUILTIN_DRIVERS[name].partition(":")[0])
    except ImportError:
        pass
    else:
        pytest.skip(f"{name} is importable here: the matrix drives it in this process")
    monkeypatch.setenv(PYTHONS_ENV, f"{name}={tmp_path / 'absent' / 'python'}")
    monkeypatch.delenv(STRICT_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=rf"create its environment with `tox -e {name}`"):
        matrix_driver(name, processes)
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=rf"`tox -e {name}`"):
        matrix_driver(name, processes)
