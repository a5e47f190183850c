"""``PortamemStore`` refuses a put under portamem's own key namespace (the maintainer's habits), as every
write path does, with the same ``ValidationError``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from portamem_langchain import PortamemStore  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.embedding.embedders import Embedder  # noqa: E402
from portamem.errors import ValidationError  # noqa: E402


@pytest.fixture
def memory(tmp_path: Path, embedder: Embedder) -> Iterator[Memory]:
    with Memory(tmp_path / "store", embedder=embedder) as mem:
        yield mem


def test_a_put_under_the_habits_namespace_is_refused(memory: Memory) -> None:
    store = PortamemStore(memory)
    with pytest.raises(ValidationError, match="portamem's own"):
        store.put(("portamem", "alice", "abstract"), "habit-0123456789abcdef", {"content": "Habit: aisle seats."})
    assert memory.list_keyed(user_id="alice", key_namespace="portamem") == []
    store.put(("memories", "alice"), "seat", {"content": "Prefers aisle seats."})
    assert store.get(("memories", "alice"), "seat") is not None
