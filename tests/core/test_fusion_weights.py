"""Fusion weights per embedder: a model's calibration may carry its own weights (fitted for it with
``portamem tune``), used when the user set none; the user's weights win when set."""

from __future__ import annotations

from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.config import DEFAULT_WEIGHTS
from portamem.embedding.embedders import Embedder
from portamem.errors import ValidationError
from portamem.read.calibration import CALIBRATIONS, Calibration, fusion_weights
from portamem.read.scoring import PRIORS

#: weights no real model has, so that a test sees which ones a search used
OWN = {"vector": 0.3, "keyword": 0.6, "entity": 0.1, "recency": 0.02, "importance": 0.03}


def _renamed(embedder: Embedder, name: str) -> Embedder:
    class Renamed:
        version, dim = embedder.version, embedder.dim

        def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
            return embedder.embed(texts, kind=kind)

    Renamed.name = name  # type: ignore[attr-defined]
    return Renamed()  # type: ignore[return-value]


def test_the_user_weights_win_else_the_models_own_else_the_defaults() -> None:
    base = CALIBRATIONS["multilingual-e5-small-q4"]
    own = Calibration(base.mean, base.std, "test", OWN)
    assert fusion_weights(None, own) == OWN
    assert fusion_weights(None, Calibration(base.mean, base.std)) == DEFAULT_WEIGHTS
    assert fusion_weights(None, None) == DEFAULT_WEIGHTS
    # the user's, completed from the defaults (not from the model's own)
    assert fusion_weights({"vector": 1.0}, own) == {**DEFAULT_WEIGHTS, "vector": 1.0}
    assert Settings().weights is None  # not set: the model decides
    assert Settings.load(env={"PORTAMEM_WEIGHTS": '{"keyword": 0.7}'}).weights == {**DEFAULT_WEIGHTS, "keyword": 0.7}


def test_a_search_ranks_with_the_models_own_weights_unless_the_user_set_some(
        tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    base = CALIBRATIONS[embedder.name]
    monkeypatch.setitem(CALIBRATIONS, "st:own-weights", Calibration(base.mean, base.std, "test", OWN))
    model = _renamed(embedder, "st:own-weights")
    for weights, expected in ((None, OWN), ({"vector": 0.7, "keyword": 0.3}, {**DEFAULT_WEIGHTS, "vector": 0.7,
                                                                               "keyword": 0.3})):
        with Memory(settings=Settings(path=str(tmp_path / str(bool(weights))), weights=weights), embedder=model) as mem:
            assert mem.settings.weights == expected  # the weights in use, shown
            mem.save_memory("The dentist appointment moved to Thursday afternoon.", user_id="u")
            hit = mem.search_memory("When is the dentist appointment?", user_id="u")[0]
            for name in ("vector", "keyword"):
                assert hit.breakdown.weights[name] == pytest.approx(expected[name])
            assert hit.score == pytest.approx(sum(hit.breakdown.weights[k] * v
                                                  for k, v in hit.breakdown.components.items()))


def test_a_model_without_weights_of_its_own_ranks_with_the_defaults(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=_renamed(embedder, "st:unmeasured")) as mem:
        assert mem.settings.weights == DEFAULT_WEIGHTS


@pytest.mark.parametrize("name", sorted(CALIBRATIONS))
def test_the_calibration_tables_weights_are_valid(name: str) -> None:
    weights = CALIBRATIONS[name].weights
    if weights is None:
        pytest.skip(f"{name} ranks with DEFAULT_WEIGHTS")
    assert set(weights) == set(DEFAULT_WEIGHTS)
    assert all(0.0 <= w <= 1.0 for w in weights.values())
    # the evidence weights sum to 1 as the defaults' do, so that min_score means the same for every model
    assert sum(w for n, w in weights.items() if n not in PRIORS) == pytest.approx(1.0)
    assert weights["vector"] > 0 and weights["keyword"] > 0  # a fusion, not one retriever alone


@pytest.mark.parametrize("weights", [
    {"vector": 0.5, "keyword": 0.45},  # a component left out
    {**OWN, "vector": -0.1, "keyword": 1.0},
    {**OWN, "vector": 0.5},  # evidence sums to 1.2
    {**OWN, "typo": 0.0},
])
def test_a_calibration_refuses_invalid_weights(weights: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        Calibration(0.5, 0.1, "test", weights)
