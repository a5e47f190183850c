"""Decay eviction (portamem_eviction_policy, portamem_register_eviction_policies), grace period,
de-duplication threshold and consolidation, with hand-computed values."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from portamem import Memory, MemoryType, Settings, Status
from portamem.records import MemoryRecord, utcnow
from portamem_plugins.eviction import access_boost, decay_policy, retained_value

NOW = utcnow()


def _rec(age_days: float, importance: float = 0.8, half_life: float = 7.0, access: int = 0,
         type: MemoryType = MemoryType.EPISODIC) -> MemoryRecord:
    return MemoryRecord(content="x", user_id="u", importance=importance, half_life_days=half_life,
                        access_count=access, type=type, created_at=NOW - timedelta(days=age_days))


@pytest.mark.parametrize("half_lives,expected", [(0, 0.8), (1, 0.4), (3, 0.1)])
def test_decay_at_0_1_and_3_half_lives(half_lives: int, expected: float) -> None:
    assert retained_value(_rec(7.0 * half_lives), NOW) == pytest.approx(expected)


@pytest.mark.parametrize("count,boost", [(0, 0.0), (1, 0.1), (2, 0.2), (3, 0.3), (5, 0.3), (100, 0.3)])
def test_access_boost_is_capped(count: int, boost: float) -> None:
    assert access_boost(count) == pytest.approx(boost)
    assert retained_value(_rec(70, access=count), NOW) == pytest.approx(0.8 * 0.5 ** 10 + boost)


def test_decay_policy_marks_faded_records_but_never_semantic() -> None:
    faded = _rec(70, importance=0.5)  # 0.5 * 2**-10 ~ 0.0005
    fresh = _rec(1, importance=0.5)
    semantic = _rec(3650, importance=0.1, type=MemoryType.SEMANTIC)
    accessed = _rec(70, importance=0.5, access=1)  # boost 0.1 keeps it
    assert decay_policy([faded, fresh, semantic, accessed], NOW, Settings()) == [faded.memory_id]


def test_maintain_marks_then_purges_after_grace_and_restore_works(memory: Memory) -> None:
    old = memory.save_memory("We talked about the weather in Oslo.", user_id="u", type="episodic",
                             importance=0.3, created_at=NOW - timedelta(days=60))
    kept = memory.save_memory("Flat 4B has a broken heater.", user_id="u", type="episodic",
                              importance=0.3, created_at=NOW - timedelta(days=60))
    memory.refresh_memory(kept.memory_id, 0.0, user_id="u")  # one access: boost 0.1
    fact = memory.save_memory("The cat's name is Pixel.", user_id="u", type="semantic", importance=0.05,
                              created_at=NOW - timedelta(days=900))
    report = memory.maintain(now=NOW)
    assert report.evicted == [old.memory_id]
    assert memory.get_memory(old.memory_id, user_id="u").status is Status.DELETED
    assert memory.get_memory(fact.memory_id, user_id="u").status is Status.ACTIVE
    memory.restore_memory(old.memory_id, user_id="u")  # within the grace period
    assert memory.get_memory(old.memory_id, user_id="u").status is Status.ACTIVE
    memory.maintain(now=NOW)
    assert memory.maintain(now=NOW + timedelta(days=6)).purged == 0
    assert memory.maintain(now=NOW + timedelta(days=8)).purged == 1


def test_named_policy_and_unknown_policy(memory: Memory) -> None:
    from portamem import ValidationError

    memory.save_memory("Transient note about a meeting room.", user_id="u", type="episodic", importance=0.2,
                       created_at=NOW - timedelta(days=90))
    assert len(memory.maintain(now=NOW, policy="decay").evicted) == 1
    with pytest.raises(ValidationError):
        memory.maintain(policy="lru")


class FixedEmbedder:
    """Vectors chosen per text, to put two memories at an exact cosine."""

    name, version, dim = "fixed-test", "1", 4

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed(self, texts, *, kind="passage"):  # noqa: ANN001, ANN201
        return np.stack([self.table.get(t, np.array([0, 0, 0, 1.0])) for t in texts]).astype(np.float32)


def _at_cosine(c: float) -> np.ndarray:
    return np.array([c, np.sqrt(1 - c * c), 0, 0])


@pytest.mark.parametrize("cosine,merged", [(0.919, False), (0.921, True)])
def test_dedupe_threshold_just_below_and_above(tmp_path, cosine: float, merged: bool) -> None:
    a, b = "The parcel goes to the back door.", "The parcel goes to the back door!"
    emb = FixedEmbedder({a: np.array([1.0, 0, 0, 0]), b: _at_cosine(cosine)})
    with Memory(settings=Settings(path=str(tmp_path / "d")), embedder=emb) as mem:
        first = mem.save_memory(a, user_id="u", wait=True)
        second = mem.save_memory(b, user_id="u", wait=True)
        assert (second.memory_id == first.memory_id) is merged
        assert len(mem.list_memories(user_id="u")) == (1 if merged else 2)


def test_consolidation_over_capacity(tmp_path) -> None:
    texts = [f"Standup notes for week {w}." for w in range(3)]
    twin = "Standup notes for week 0!"
    emb = FixedEmbedder({texts[0]: np.array([1.0, 0, 0, 0]), twin: _at_cosine(0.95),
                         texts[1]: np.array([0, 1.0, 0, 0]), texts[2]: np.array([0, 0, 1.0, 0])})
    settings = Settings(path=str(tmp_path / "c"), pool_capacity=2, dedupe=False)
    with Memory(settings=settings, embedder=emb) as mem:
        old = mem.save_memory(texts[0], user_id="u", created_at=NOW - timedelta(days=2))
        for t in texts[1:]:
            mem.save_memory(t, user_id="u")
        new = mem.save_memory(twin, user_id="u")
        report = mem.maintain(now=NOW)
        assert report.consolidated == [(new.memory_id, [old.memory_id])]
        assert mem.get_memory(new.memory_id, user_id="u").frequency == 2
        retired = mem.get_memory(old.memory_id, user_id="u")
        assert retired.status is Status.DELETED and retired.superseded_by == new.memory_id
