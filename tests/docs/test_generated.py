"""The docs' generated reference pages say what the code says, and README.md's links land."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_pages_match_the_code() -> None:
    assert _generator().stale() == [], "run `python docs/generate.py` and commit docs/reference"


def test_every_setting_and_hook_is_listed() -> None:
    import dataclasses

    from portamem import Settings, hookspecs

    config = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    hooks = (ROOT / "docs" / "reference" / "hooks.md").read_text(encoding="utf-8")
    assert all(f"`PORTAMEM_{f.name.upper()}`" in config for f in dataclasses.fields(Settings))
    assert all(f"## `{name}`" in hooks for name in hookspecs.__all__ if name.startswith("portamem_"))


def test_readme_links_land() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme)
               if not t.startswith(("http://", "https://", "#", "mailto:"))]
    assert any(t.startswith("docs/") for t in targets), "README.md links into docs/"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run runs exactly the test command the README gives a new user, so the two cannot part."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = "python3 -m venv .venv && .venv/bin/pip install tox && .venv/bin/tox run-parallel"
    assert command in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in [line.strip() for line in ci.splitlines()], ".ci/run no longer runs the README's test command"


def test_no_page_names_a_commit() -> None:
    """A figure names the command that gives it, never the commit it was measured on (the docs outlive commits)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    commit = re.compile(r"`(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}`|\bcommit [0-9a-f]{7,40}\b")
    named = [f"{page.relative_to(ROOT)}: {m.group(0)}" for page in pages
             for m in commit.finditer(page.read_text(encoding="utf-8"))]
    assert not named, f"pages that name a commit: {named}"


def test_readme_is_short() -> None:
    """What it is, the two commands, a quick start, a snippet per framework, the server, where to read on."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_quick_start_fits_fifteen_lines() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quick start\n", 1)[1]
    block = section.split("```python", 1)[1].split("```", 1)[0].strip("\n").splitlines()
    assert len(block) <= 15, f"the Quick start has {len(block)} lines"
