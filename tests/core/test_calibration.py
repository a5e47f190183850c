"""Absolute relevance: a cosine scores the same whatever the pool, and a query about nothing stored
returns nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.read.calibration import CALIBRATIONS, Calibration, calibration_for, vector_score
from portamem.embeddings import Embedder
from portamem.errors import ConfigError, ValidationError

FILLER = [
    "We are driving to the coast for the long weekend.",
    "The dentist appointment moved to Thursday afternoon.",
    "My sister teaches chemistry at a school in Porto.",
    "The car needs new tyres before winter.",
    "I water the basil every morning.",
    "Our team standup is at half past nine.",
]


def test_a_users_only_memory_scores_as_it_would_among_many(memory: Memory) -> None:
    memory.save_memory("My name is Dana Whitfield.", user_id="alone")
    memory.save_memory("My name is Dana Whitfield.", user_id="crowd")
    for i, text in enumerate(FILLER * 5):
        memory.save_memory(f"{text} ({i})", user_id="crowd")
    alone = memory.search_memory("What is my name?", user_id="alone")
    crowd = memory.search_memory("What is my name?", user_id="crowd")
    assert [h.content for h in alone] == ["My name is Dana Whitfield."]
    assert crowd[0].content == "My name is Dana Whitfield."
    # the vector component depends on the cosine alone, not on the other memories of the pool
    assert alone[0].breakdown.components["vector"] == pytest.approx(crowd[0].breakdown.components["vector"])
    assert alone[0].breakdown.components["vector"] > 0.3 and alone[0].score >= memory.settings.min_score


def test_a_query_about_nothing_stored_returns_nothing(memory: Memory) -> None:
    for text in FILLER[:3]:
        memory.save_memory(text, user_id="u1")
    assert memory.search_memory("What is the wifi password at the office?", user_id="u1") == []
    assert memory.search_memory("How old is Bob's cat?", user_id="u1") == []  # someone never mentioned
    # top_k is a maximum: the one related memory comes back alone
    hits = memory.search_memory("When is the dentist?", user_id="u1", top_k=5)
    assert [h.content for h in hits] == [FILLER[1]]


def test_the_threshold_can_be_lowered_to_fill_top_k(settings: Settings, embedder: Embedder) -> None:
    with Memory(settings=settings.replace(min_score=0.0), embedder=embedder) as mem:
        for text in FILLER[:3]:
            mem.save_memory(text, user_id="u1")
        assert len(mem.search_memory("What is the wifi password at the office?", user_id="u1")) == 3


def test_vector_score_is_zero_at_the_background_and_saturates() -> None:
    cal = CALIBRATIONS["multilingual-e5-small-q4"]
    assert vector_score(cal.mean, cal) == 0.0 and vector_score(cal.mean - 0.1, cal) == 0.0
    assert vector_score(0.999, cal) == 1.0
    assert 0.3 < vector_score(0.83, cal) < 0.5  # the median relevant LoCoMo pair


def test_calibration_override_and_unknown_models() -> None:
    assert calibration_for("st:some-model") is None  # nobody measured it: the relative fallback
    assert calibration_for("st:some-model", {"mean": 0.2, "std": 0.1}) == Calibration(0.2, 0.1,
                                                                                    "Settings.vector_calibration")
    with pytest.raises(ValidationError):
        calibration_for("x", {"mean": 0.2})
    with pytest.raises(ConfigError):
        Settings(vector_calibration={"mean": 0.2, "std": 0.0})
    with pytest.raises(ConfigError):
        Settings(unknown_entity_penalty=1.5)


def test_an_uncalibrated_model_falls_back_to_the_relative_scale(tmp_path: Path, embedder: Embedder) -> None:
    class Renamed:
        name, version, dim = "st:unmeasured", embedder.version, embedder.dim

        def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
            return embedder.embed(texts, kind=kind)

    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=Renamed()) as mem:
        assert mem.retriever.calibration is None
        for text in FILLER[:3]:
            mem.save_memory(text, user_id="u1")
        hits = mem.search_memory("When is the dentist?", user_id="u1")
        assert hits[0].content == FILLER[1]
