"""A third-party scorer installed as its own distribution is picked up through its entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.plugins import get_plugin_manager

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_scorer"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
    )
    sys.path.insert(0, str(target))
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("portamem_pinned", None)


def _ranking(tmp_path, embedder, pm) -> list[str]:
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        if not mem.list_memories(user_id="u"):
            mem.save_memory("Deliver parcels to the front desk of the office.", user_id="u")
            mem.save_memory("Packages can also go to my neighbour at number 12.", user_id="u",
                            metadata={"pinned": True})
        return [h.content for h in mem.search_memory("where should parcels be delivered?", user_id="u")]


def test_installed_plugin_changes_ranking_without_app_changes(tmp_path, embedder, installed) -> None:
    before = _ranking(tmp_path, embedder, get_plugin_manager(load_entrypoints=False))
    assert before[0].startswith("Deliver parcels")
    pm = get_plugin_manager()  # what every application gets: built-ins plus installed entry points
    assert pm.get_plugin("pinned") is not None
    after = _ranking(tmp_path, embedder, pm)
    assert after[0].startswith("Packages can also go")
    assert sorted(after) == sorted(before)
