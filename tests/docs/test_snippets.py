"""Every Python and shell snippet of README.md and docs/ runs here, as a reader would copy it.

Python blocks run through pytest-examples: what a snippet prints must match the ``#>`` comments
under its ``print`` (``pytest tests/docs --update-examples`` rewrites them after a deliberate change).
Shell blocks (``bash``, ``sh``, ``console``) run in bash with ``-euo pipefail`` and must exit 0.
Each snippet runs in a fresh working directory, so ``./portamem-data`` is new every time.

A fence's info string may say more (the pytest-examples prefix settings):

* ``test="skip" reason="..."``: not run here, for the reason given (a real LLM's key, a server
  that runs until stopped, a fresh virtual environment); a skip without a reason fails.
* ``setup="memory"``: the snippet continues from an open ``Memory`` bound to ``mem``.
* ``setup="server"``: a real ``portamem serve`` (one per test session) answers at the snippet's
  ``http://localhost:8765``, and ``$PORTAMEM_API_KEY`` holds a key of a tenant of the snippet's own.
* ``expect="..."``: a shell snippet's output must contain this text.
* ``cwd="repo"``: a shell snippet runs in the repository's root (``python examples/...``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_examples", reason="the docs extra: pip install -e '.[docs]'")

from pytest_examples import CodeExample, EvalExample, find_examples  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", ROOT / "docs"]
SHELL = ("bash", "sh", "console", "shell")
_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```", re.M | re.S)
_SETTING = re.compile(r"""([^{\s]+?)=(['"])(.+?)\2""")


def _python_examples() -> list[CodeExample]:
    return list(find_examples(*SOURCES))


@dataclass
class ShellSnippet:
    path: Path
    line: int
    info: str
    source: str

    def settings(self) -> dict[str, str]:
        return {m.group(1): m.group(3) for m in _SETTING.finditer(self.info)}

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _shell_snippets() -> list[ShellSnippet]:
    found = []
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            info = m.group("info").strip()
            if info.split(" ", 1)[0].lower() in SHELL:
                found.append(ShellSnippet(path, text[: m.start()].count("\n") + 1, info, m.group("body")))
    return found


def _fence_settings(example: CodeExample) -> dict[str, str]:
    """The fence's settings as written (pytest-examples lowercases its prefix, and with it a skip's reason)."""
    fence = example.path.read_text(encoding="utf-8").splitlines()[example.start_line - 1]
    return {m.group(1): m.group(3) for m in _SETTING.finditer(fence)}


def _where(example: CodeExample, exc: BaseException) -> str:
    """Python cannot print a traceback through a Markdown file's lines, so name the line by hand."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(".md"):
            line = tb.tb_lineno
        tb = tb.tb_next
    shown = "".join(traceback.format_exception_only(exc)).strip()
    return f"{example.path.relative_to(ROOT)}:{line or example.start_line}: {shown}"


def _skip_if_marked(settings: dict[str, str], where: str) -> None:
    if settings.get("test") == "skip":
        reason = settings.get("reason")
        assert reason, f"{where}: a skipped snippet says why (reason=\"...\")"
        pytest.skip(reason)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    for name in [n for n in os.environ if n.startswith("PORTAMEM_")]:
        monkeypatch.delenv(name)
    yield tmp_path


#: the address the docs use for a server; a snippet with setup="server" reaches the test's server there
DOCS_URL = "http://localhost:8765"


@pytest.fixture(scope="session")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real server for the snippets that talk to one (started only when such a snippet runs)."""
    pytest.importorskip("fastapi", reason="the server snippets need the `server` extra")
    from portamem_conformance.remote import ServerProcess

    server = ServerProcess(tmp_path_factory.mktemp("docs-server") / "store")
    yield server
    server.stop()


def _server_for(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tenant: str) -> str:
    """The test server's URL, with ``$PORTAMEM_API_KEY`` set to a new key of ``tenant``."""
    server = request.getfixturevalue("docs_server")
    monkeypatch.setenv("PORTAMEM_API_KEY", server.key(tenant))
    return str(server.url).rstrip("/")


def _tenant(where: str) -> str:
    return "docs-" + re.sub(r"[^a-z0-9]+", "-", where.lower()).strip("-")


def test_snippets_found() -> None:
    """The collector reads the fences these files use: an empty parametrisation would pass silently."""
    assert len(_python_examples()) >= 10
    assert len(_shell_snippets()) >= 5


@pytest.mark.parametrize("example", _python_examples(), ids=str)
def test_python_snippet(example: CodeExample, eval_example: EvalExample, in_tmp: Path,
                        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _fence_settings(example)
    _skip_if_marked(settings, str(example))
    if settings.get("setup") == "server":
        url = _server_for(request, monkeypatch, _tenant(str(example)))
        example = dataclasses.replace(example, source=example.source.replace(DOCS_URL, url))
    module_globals: dict[str, Any] = {}
    opened = []
    if settings.get("setup") == "memory":
        from portamem import Memory

        mem = Memory(str(in_tmp / "portamem-data"))
        opened.append(mem)
        module_globals["mem"] = mem
    eval_example.set_config(line_length=120)  # the width at which a printed line is wrapped in the #> comment
    searches = _recording_searches(monkeypatch)
    failure = None
    try:
        if eval_example.update_examples:
            eval_example.run_print_update(example, module_globals=module_globals)
        else:
            eval_example.run_print_check(example, module_globals=module_globals)
    except Exception as exc:  # the snippet raised: say where in the Markdown, in words pytest can print
        failure = _where(example, exc)
    finally:
        for mem in opened:
            mem.close()
    if failure:  # outside the except block, so no traceback through the Markdown's lines is chained to it
        pytest.fail(failure, pytrace=False)
    close = _close_calls(example, searches)
    assert not close, f"{example}: a shown answer leads the next by less than {SHOWN_MARGIN}: {close}"


#: how far a search's first hit must score above its second when the snippet shows that first hit: a
#: closer call can turn over under another machine's numerics (the LangGraph page once showed
#: 'allergy' first by 0.0005 and printed 'diet' elsewhere)
SHOWN_MARGIN = 0.05


def _recording_searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[Any]]]:
    """Every ``Memory.search_memory`` the snippet runs in this process: its query and its hits."""
    from portamem import Memory

    searches: list[tuple[str, list[Any]]] = []
    search = Memory.search_memory

    def recorded(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        hits = search(self, query, *args, **kwargs)
        searches.append((query, list(hits)))
        return hits

    monkeypatch.setattr(Memory, "search_memory", recorded)
    return searches


def _close_calls(example: CodeExample, searches: list[tuple[str, list[Any]]]) -> list[str]:
    """The searches whose first hit the snippet shows (its text in a ``#>`` line, or its key as one)
    and whose second hit scores within ``SHOWN_MARGIN`` of it."""
    shown = [line.strip()[2:].strip() for line in example.source.splitlines() if line.strip().startswith("#>")]
    out = []
    for query, hits in searches:
        if len(hits) < 2:
            continue
        top = hits[0].record
        if not any(top.content in line or (top.key is not None and line == top.key) for line in shown):
            continue
        lead = hits[0].score - hits[1].score
        if lead < SHOWN_MARGIN:
            out.append(f"{query!r}: {top.key or top.content!r} {hits[0].score:.4f}, next "
                       f"{hits[1].record.key or hits[1].record.content!r} {hits[1].score:.4f}")
    return out


@pytest.mark.parametrize("snippet", _shell_snippets(), ids=str)
def test_shell_snippet(snippet: ShellSnippet, in_tmp: Path, request: pytest.FixtureRequest,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    settings = snippet.settings()
    _skip_if_marked(settings, str(snippet))
    source = snippet.source
    if settings.get("setup") == "server":
        source = source.replace(DOCS_URL, _server_for(request, monkeypatch, _tenant(str(snippet))))
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    bash = shutil.which("bash")
    assert bash, "bash is needed to run the shell snippets"
    cwd = ROOT if settings.get("cwd") == "repo" else in_tmp
    done = subprocess.run([bash, "-euo", "pipefail", "-c", source], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{snippet} exited {done.returncode}:\n{output[-4000:]}"
    if "expect" in settings:
        assert settings["expect"] in output, f"{snippet}: {settings['expect']!r} not in its output:\n{output[-4000:]}"
