"""The switching matrix: memory written through one framework is read, unchanged and equally ranked, through another."""

from __future__ import annotations

import importlib
import itertools
import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

from .child import FrameworkProcesses
from .contracts import CHANGE, CHANGE_QUESTION, FACTS, TURNS, StoreTests, opened
from .driver import MemoryDriver

__all__ = [
    "BUILTIN_DRIVERS",
    "STRICT_ENV",
    "FRAMEWORKS_ENV",
    "OTHER_ENVS",
    "PYTHONS_ENV",
    "framework_pythons",
    "load_driver",
    "load_drivers",
    "matrix_driver",
    "matrix_drivers",
    "matrix_frameworks",
    "ordered_pairs",
    "relay_chains",
    "SwitchingTests",
    "RelaySwitchingTests",
    "ConversationSwitchingTests",
    "SharedStoreSwitchingTests",
]

#: the registry of the matrix: adapter name -> ``module:Class`` of its driver (each adapter ships
#: ``portamem_<name>.conformance``). Adding a framework to the matrix is one entry here.
BUILTIN_DRIVERS: dict[str, str] = {
    "loop": "portamem_loop.conformance:LoopDriver",
    "langchain": "portamem_langchain.conformance:LangChainDriver",
    "llamaindex": "portamem_llamaindex.conformance:LlamaIndexDriver",
    "agentscope": "portamem_agentscope.conformance:AgentScopeDriver",
    "openai-agents": "portamem_openai_agents.conformance:OpenAIAgentsDriver",
    "autogen": "portamem_autogen.conformance:AutoGenDriver",
    "adk": "portamem_adk.conformance:ADKDriver",
    "crewai": "portamem_crewai.conformance:CrewAIDriver",
    "agentscope1": "portamem_agentscope.v1.conformance:AgentScope1Driver",
}

#: the registered frameworks that cannot be installed beside the others (CrewAI's requirements conflict with
#: openai-agents', adk's and AgentScope 2.x's; AgentScope 1.x and 2.x share a distribution): name -> the tox
#: env that installs it. Where the framework cannot be imported, the matrix drives it in a child process
#: run by that env's interpreter, which ``PORTAMEM_FRAMEWORK_PYTHONS`` names.
OTHER_ENVS: dict[str, str] = {"crewai": "crewai", "agentscope1": "agentscope1"}

#: set (as the ``switching`` tox env does) to fail instead of skip when an adapter cannot be imported
STRICT_ENV = "PORTAMEM_CONFORMANCE_STRICT"
#: comma-separated names of ``BUILTIN_DRIVERS`` the matrix runs over (all of them when unset), for an
#: environment that can hold only some frameworks (two whose requirements conflict need two environments)
FRAMEWORKS_ENV = "PORTAMEM_SWITCHING_FRAMEWORKS"
#: ``name=/path/to/python,...``: the interpreter of the environment that has each of ``OTHER_ENVS``
#: (``tox -e switching`` sets it to the tox envs' own)
PYTHONS_ENV = "PORTAMEM_FRAMEWORK_PYTHONS"

QUESTIONS = ["What is my cat like?", "Can I eat peanuts?", "Wann fahren wir nach Wien?"]
SCOPE = {"user_id": "alice", "session_id": "s1", "tenant_id": "acme"}


def load_driver(locator: str, **kwargs: Any) -> MemoryDriver:
    """Build the driver named by ``module:Class``; skip the test when its adapter or framework is not installed.

    An adapter whose framework is missing raises ``FrameworkNotInstalledError`` (an ``ImportError``),
    so the skip message names the extra to install. With ``PORTAMEM_CONFORMANCE_STRICT`` set, it fails instead.
    """
    module, _, name = locator.partition(":")
    if os.environ.get(STRICT_ENV):
        loaded = importlib.import_module(module)
    else:  # FrameworkNotInstalledError is an ImportError, not a ModuleNotFoundError: say so, or pytest 9 re-raises
        loaded = pytest.importorskip(module, exc_type=ImportError)
    driver: MemoryDriver = getattr(loaded, name)(**kwargs)
    return driver


def load_drivers(names: list[str], **kwargs: Any) -> dict[str, MemoryDriver]:
    """The drivers of the named adapters that are installed (all of them, or a failure, when strict);
    the test is skipped when none is."""
    drivers, _ = matrix_drivers(names, None, **kwargs)
    if not drivers:
        pytest.skip(f"none of {names} is installed")
    return drivers


def framework_pythons() -> dict[str, str]:
    """``PORTAMEM_FRAMEWORK_PYTHONS`` read: framework name -> interpreter path."""
    pairs = [p.partition("=") for p in os.environ.get(PYTHONS_ENV, "").split(",") if p.strip()]
    return {name.strip(): python.strip() for name, _, python in pairs}


def _unreachable(message: str) -> NoReturn:
    if os.environ.get(STRICT_ENV):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def matrix_driver(name: str, processes: FrameworkProcesses | None, **kwargs: Any) -> MemoryDriver:
    """The driver of the registered framework ``name``: in this process when its adapter imports here, else,
    for one of ``OTHER_ENVS``, in a child process (one per framework, from ``processes``) run by the
    interpreter ``PORTAMEM_FRAMEWORK_PYTHONS`` names. A framework reachable neither way skips the test with
    what to create, or fails it under ``PORTAMEM_CONFORMANCE_STRICT``."""
    locator = BUILTIN_DRIVERS[name]
    if name not in OTHER_ENVS:
        return load_driver(locator, **kwargs)
    try:
        importlib.import_module(locator.partition(":")[0])
    except ImportError as exc:
        env, python = OTHER_ENVS[name], framework_pythons().get(name)
        if processes is None or not python or not Path(python).is_file():
            _unreachable(
                f"{name} is not importable here ({exc}) and has no interpreter in {PYTHONS_ENV} "
                f"(found {python!r}): create its environment with `tox -e {env}`, then run "
                f"`tox -e switching` (or set {PYTHONS_ENV}={name}=.tox/{env}/bin/python)"
            )
        return processes.driver(name, python, locator)
    return load_driver(locator, **kwargs)


def matrix_drivers(
    names: list[str], processes: FrameworkProcesses | None, **kwargs: Any
) -> tuple[dict[str, MemoryDriver], dict[str, str]]:
    """``matrix_driver`` of each name: the drivers, and name -> why for those that cannot be reached (a
    failure instead, when strict)."""
    drivers: dict[str, MemoryDriver] = {}
    unreached: dict[str, str] = {}
    for name in names:
        try:
            drivers[name] = matrix_driver(name, processes, **kwargs)
        except pytest.skip.Exception as exc:
            unreached[name] = str(exc.msg)
    return drivers, unreached


def matrix_frameworks() -> list[str]:
    """The adapters the matrix covers: ``PORTAMEM_SWITCHING_FRAMEWORKS`` when set, else every registered one."""
    chosen = [n.strip() for n in os.environ.get(FRAMEWORKS_ENV, "").split(",") if n.strip()]
    unknown = sorted(set(chosen) - set(BUILTIN_DRIVERS))
    if unknown:
        raise pytest.UsageError(f"{FRAMEWORKS_ENV} names {unknown}; registered: {sorted(BUILTIN_DRIVERS)}")
    return chosen or list(BUILTIN_DRIVERS)


def ordered_pairs(names: list[str] | None = None) -> list[tuple[str, str]]:
    """Every (writer, reader) pair of distinct adapters: n * (n - 1) of them."""
    return list(itertools.permutations(names or matrix_frameworks(), 2))


def _circuit(pairs: list[tuple[str, str]]) -> list[str]:
    """A walk that takes every pair once (Hierholzer's algorithm): the pairs of a complete directed graph, or of
    any set closed under reversal and connected, have one."""
    onward: dict[str, list[str]] = {}
    for a, b in reversed(pairs):
        onward.setdefault(a, []).append(b)
    stack, walk = [pairs[0][0]], []
    while stack:
        if onward.get(stack[-1]):
            stack.append(onward[stack[-1]].pop())
        else:
            walk.append(stack.pop())
    return walk[::-1]


def relay_chains(names: list[str] | None = None, length: int = 6) -> list[list[str]]:
    """Chains of frameworks that together hand a conversation along every ordered pair exactly once: a walk
    through all the pairs, cut every ``length`` of them (a chain of ``length + 1`` frameworks). The pairs
    within the frameworks of one environment come first, so the chains through ``OTHER_ENVS`` frameworks,
    skipped where those cannot be reached, hold only pairs that need them. ``length`` stays within the
    working window (``window_turns``), as each hand-over adds a turn."""
    pairs = ordered_pairs(names)
    chains = []
    for group in ([p for p in pairs if not set(p) & set(OTHER_ENVS)], [p for p in pairs if set(p) & set(OTHER_ENVS)]):
        if group:
            walk = _circuit(group)
            chains += [walk[i : i + length + 1] for i in range(0, len(walk) - 1, length)]
    return chains


# ---------------------------------------------------------------------------- the contracts, once each
def _write_facts(writer: MemoryDriver, path: Path) -> dict[str, list[str]]:
    with opened(writer, path, **SCOPE) as h:
        for text in FACTS:
            writer.remember(h, text)
        written = {q: writer.recall(h, q, k=3) for q in QUESTIONS}
    assert written[QUESTIONS[0]][0] == "My cat is called Tom and he sleeps on the piano."
    return written


def _reads_the_same(reader: MemoryDriver, path: Path, written: dict[str, list[str]], via: str) -> None:
    with opened(reader, path, **SCOPE) as h:
        assert {q: reader.recall(h, q, k=3) for q in QUESTIONS} == written, via


def _write_change(writer: MemoryDriver, path: Path) -> None:
    with opened(writer, path, **SCOPE) as h:
        for turn in CHANGE:
            writer.write_turn(h, *turn)


def _change_holds(reader: MemoryDriver, path: Path, via: str) -> None:
    with opened(reader, path, **SCOPE) as h:
        assert reader.recall(h, CHANGE_QUESTION, k=3) == [CHANGE[1][0]], via


class ConversationSwitchingTests(StoreTests):
    """A conversation begun through ``writer`` goes on through ``reader`` and back. Override both fixtures."""

    @pytest.fixture
    def writer(self) -> MemoryDriver:
        raise NotImplementedError("override `writer`")

    @pytest.fixture
    def reader(self) -> MemoryDriver:
        raise NotImplementedError("override `reader`")

    def test_conversation_continues_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        expected = [m for u, a in TURNS for m in (("user", u), ("assistant", a))]
        with opened(writer, store_path, **SCOPE) as h:
            for turn in TURNS[:2]:
                writer.write_turn(h, *turn)
            assert writer.history(h) == expected[:4]
        with opened(reader, store_path, **SCOPE) as h:
            assert reader.history(h) == expected[:4]
            reader.write_turn(h, *TURNS[2])
            reader.remember(h, next(iter(FACTS)))
        with opened(writer, store_path, **SCOPE) as h:
            assert writer.history(h) == expected
            assert writer.recall(h, "What is my cat like?", k=1) == [next(iter(FACTS))]


class SwitchingTests(ConversationSwitchingTests):
    """Write through ``writer``, close, reopen the same store through ``reader``. Override both fixtures."""

    def test_memories_rank_the_same_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        _reads_the_same(reader, store_path, _write_facts(writer, store_path), f"{writer.name} -> {reader.name}")

    def test_a_changed_value_stays_changed_through_the_other_framework(
        self, writer: MemoryDriver, reader: MemoryDriver, store_path: Path
    ) -> None:
        """The value the writer's turns retired is retired for the reader: formation's decisions are in
        the store, whichever framework wrote the turns."""
        _write_change(writer, store_path)
        _change_holds(reader, store_path, f"{writer.name} -> {reader.name}")


#: what each hand-over of the relay remembers and forgets: the next framework must not recall it
FORGOTTEN = ("My old bike was a red Peugeot with a squeaky bell.", "What was my old bike like?")


class RelaySwitchingTests(StoreTests):
    """A conversation relayed along a chain of frameworks on one store: each opens it and finds, unchanged,
    the whole history and the memory the previous ones wrote, and not the memory the previous one forgot;
    then adds a turn, remembers a fact, remembers and forgets another, and closes. A chain of k + 1 checks
    k ordered pairs with k + 1 opens, where a store per pair (``ConversationSwitchingTests``) takes 3k;
    ``relay_chains`` gives chains that take every pair once. Override ``chain``: the drivers, in order."""

    @pytest.fixture
    def chain(self) -> list[MemoryDriver]:
        raise NotImplementedError("override `chain` (the drivers, in the order the conversation passes)")

    def test_a_conversation_is_relayed_through_every_framework_of_the_chain(
        self, chain: list[MemoryDriver], store_path: Path
    ) -> None:
        facts = list(FACTS.items())
        turns: list[tuple[str, str]] = []
        for i, driver in enumerate(chain):
            via = " -> ".join(d.name for d in chain[: i + 1])
            with opened(driver, store_path, **SCOPE) as h:
                assert driver.history(h) == [m for u, a in turns for m in (("user", u), ("assistant", a))], via
                if i:
                    text, question = facts[(i - 1) % len(facts)]
                    assert driver.recall(h, question, k=1) == [text], via
                    assert FORGOTTEN[0] not in driver.recall(h, FORGOTTEN[1], k=len(facts)), via
                if i < len(chain) - 1:
                    turns.append(TURNS[i % len(TURNS)])
                    driver.write_turn(h, *turns[-1])
                    driver.remember(h, facts[i % len(facts)][0])
                    driver.forget(h, driver.remember(h, FORGOTTEN[0]))


#: the facts the shared store holds beside the change: all but the one about a move, which formation could
#: take for the change's own subject (where the user lives)
_BESIDE_THE_CHANGE = [t for t, q in FACTS.items() if q != "When did I move to Oslo?"]


def _readings(driver: MemoryDriver, handle: Any) -> dict[str, list[str]]:
    return {q: driver.recall(handle, q, k=3) for q in [*QUESTIONS, CHANGE_QUESTION]}


class SharedStoreSwitchingTests(StoreTests):
    """The read-only contracts of ``SwitchingTests`` for one ``writer`` and many ``readers``: the writer
    writes one store (a value and its change in turns, then facts) and reads it back once settled, and each
    reader in turn reopens it and must rank every question the same (a recall changes no ranking), so a
    matrix of n frameworks opens n * (n + 1) stores here instead of 4 * n * (n - 1). Override ``writer`` and
    ``readers``, and ``unreached`` where ``readers`` leaves out some that could not be loaded."""

    @pytest.fixture
    def writer(self) -> MemoryDriver:
        raise NotImplementedError("override `writer`")

    @pytest.fixture
    def readers(self) -> dict[str, MemoryDriver]:
        raise NotImplementedError("override `readers` (name -> driver, the writer's own excluded)")

    @pytest.fixture
    def unreached(self) -> dict[str, str]:
        """Readers left out of ``readers``, name -> why: the test, once every other reader has passed, is
        skipped with those reasons, so a pair that did not run is never counted as a pass."""
        return {}

    def test_memories_and_a_changed_value_read_the_same_through_every_other_framework(
        self, writer: MemoryDriver, readers: dict[str, MemoryDriver], unreached: dict[str, str], store_path: Path
    ) -> None:
        with opened(writer, store_path, **SCOPE) as h:
            for turn in CHANGE:
                writer.write_turn(h, *turn)
            for text in _BESIDE_THE_CHANGE:
                writer.remember(h, text)
        with opened(writer, store_path, **SCOPE) as h:  # after close: formation's decisions are made
            written = _readings(writer, h)
        assert written[QUESTIONS[0]][0] == "My cat is called Tom and he sleeps on the piano.", writer.name
        # the value the turns retired is retired: the change first, the old value nowhere
        assert written[CHANGE_QUESTION][0] == CHANGE[1][0] and CHANGE[0][0] not in written[CHANGE_QUESTION]
        for name, reader in readers.items():
            with opened(reader, store_path, **SCOPE) as h:
                assert _readings(reader, h) == written, f"{writer.name} -> {name}"
        _skip_unreached(writer, unreached)


def _skip_unreached(writer: MemoryDriver, unreached: dict[str, str]) -> None:
    if unreached:
        pytest.skip("; ".join(f"{writer.name} -> {name} not run: {why}" for name, why in unreached.items()))
