"""Absolute relevance: cosine measured against each embedding model's background of unrelated pairs.

Models spread cosines differently (E5 puts unrelated text near 0.75, USE near 0.10), so a raw cosine
means nothing on its own, and a cosine measured against the user's own pool (its least similar
neighbour) gives a user's only memory a score of 0 however well it matches. Instead each model
carries the mean and standard deviation of the cosine between a query and passages it has nothing
to do with, measured once (``measure_background``, ``portamem calibrate``), and the vector
component is how far a match stands above that background:

    vector = clip((cosine - mean) / (SPAN * std), 0, 1)

0 is an unrelated passage, 1 a match ``SPAN`` background deviations above it. The same cosine gets
the same score for a user with one memory or a hundred thousand.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ValidationError

if TYPE_CHECKING:
    from ..embeddings import Embedder

__all__ = ["SPAN", "Calibration", "CalibrationSet", "CALIBRATIONS", "calibration_for", "vector_score",
           "measure_background"]

log = logging.getLogger(__name__)

#: background deviations above the background mean that score 1. Tuned on LoCoMo conversations 0-2
#: with the default weights (``portamem tune``): 8 puts E5's 0.95 at 1 and its median relevant
#: pair (0.83) near 0.4
SPAN = 8.0


@dataclass(frozen=True)
class Calibration:
    """The background cosine distribution of one embedding model: (query, unrelated passage) pairs."""

    mean: float
    std: float
    #: how and on what it was measured
    measured: str = ""

    def __post_init__(self) -> None:
        if not -1.0 <= self.mean < 1.0 or not 0.0 < self.std < 1.0:
            raise ValidationError(f"a calibration needs mean in [-1, 1) and std in (0, 1), got {self.mean}, {self.std}")


_LOCOMO = ("`portamem calibrate locomo-dev.json --embedder {}`: every question of conversations 0-2 against every "
           "turn of the other conversations ({} pairs)")

#: measured background per model name (``Embedder.name``)
CALIBRATIONS: dict[str, Calibration] = {
    "multilingual-e5-small-q4": Calibration(0.7486, 0.0245, _LOCOMO.format("multilingual-e5-small-q4", "1,197,400")),
    "use-multilingual-v3": Calibration(0.0994, 0.0807, _LOCOMO.format("use-multilingual-v3", "1,197,400")),
}

_warned: set[str] = set()


def calibration_for(model: str, override: Mapping[str, float] | None = None) -> Calibration | None:
    """The model's calibration: ``override`` (``Settings.vector_calibration``), else the measured table.

    None for a model nobody measured; the caller falls back to a relative scale and says so once.
    """
    if override:
        try:
            return Calibration(float(override["mean"]), float(override["std"]), "Settings.vector_calibration")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"vector_calibration needs numbers 'mean' and 'std', got {override!r}") from exc
    found = CALIBRATIONS.get(model)
    if found is None and model not in _warned:
        _warned.add(model)
        log.warning("no cosine calibration for embedder %r: vector scores are relative to each query's neighbours "
                    "and min_score means less; run `portamem calibrate` and set vector_calibration", model)
    return found


def vector_score(cosine: Any, calibration: Calibration, span: float = SPAN) -> Any:
    """How far a cosine stands above the model's background, 0..1 (floats or numpy arrays)."""
    return np.clip((cosine - calibration.mean) / (span * calibration.std), 0.0, 1.0)


@dataclass(frozen=True)
class CalibrationSet:
    """One conversation for ``measure_background``: its questions, its passages, and for each question
    the indices of the passages that answer it. Nothing in the other sets is about its questions."""

    questions: Sequence[str]
    passages: Sequence[str]
    evidence: Sequence[Sequence[int]]


def measure_background(sets: Sequence[CalibrationSet], embedder: Embedder, *,
                       use: Sequence[int] = (0, 1, 2)) -> dict[str, Any]:
    """Measure a model's background: every question of the sets ``use`` names against every passage
    of the *other* sets (nothing there is about the question), and, for reference, the cosine of
    each question to its own evidence passages. ``portamem calibrate`` feeds it LoCoMo conversations."""
    bad = [i for i in use if not 0 <= i < len(sets)]
    if bad or len(sets) < 2:
        raise ValidationError(f"need at least two conversations and valid numbers, got {list(use)}")
    passages = [embedder.embed(list(c.passages), kind="passage") for c in sets]
    background: list[np.ndarray] = []
    relevant: list[float] = []
    for i in use:
        conv = sets[i]
        queries = embedder.embed(list(conv.questions), kind="query")
        background.extend((queries @ passages[j].T).ravel() for j in range(len(sets)) if j != i)
        own = queries @ passages[i].T
        for n, answers in enumerate(conv.evidence):
            relevant.extend(float(own[n, e]) for e in answers)
    bg = np.concatenate(background)
    rel = np.asarray(relevant)
    quantiles = (0.5, 0.9, 0.99, 0.999)
    return {
        "embedder": embedder.name,
        "pairs": int(bg.size),
        "mean": round(float(bg.mean()), 4),
        "std": round(float(bg.std()), 4),
        "background_quantiles": {str(q): round(float(np.quantile(bg, q)), 4) for q in quantiles},
        "relevant_pairs": int(rel.size),
        "relevant_quantiles": {str(q): round(float(np.quantile(rel, q)), 4) for q in (0.1, 0.5, 0.9)} if rel.size else {},
    }
