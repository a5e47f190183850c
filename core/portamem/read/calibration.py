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

import json
import logging
from importlib import resources
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import DEFAULT_WEIGHTS
from ..errors import ValidationError
from ..language.text import has_cjk

if TYPE_CHECKING:
    from ..embedding.embedders import Embedder

__all__ = ["SPAN", "Calibration", "CalibrationSet", "CALIBRATIONS", "calibration_for", "fusion_weights", "vector_score",
           "measure_background", "measured_calibration", "background_sets", "Hubness", "hubness_for",
           "measure_hubness", "shipped_hubness", "save_hubness", "SHIPPED_HUBNESS"]

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
    #: the model's own fusion weights, fitted for it with ``portamem tune`` (``fusion_weights``): what a
    #: search ranks with when ``Settings.weights`` is not set; None: ``DEFAULT_WEIGHTS`` (fitted on e5)
    weights: Mapping[str, float] | None = field(default=None, hash=False)
    #: the background of a question written in Chinese or Japanese (mean, std), where it differs: e5 puts
    #: two unrelated Chinese texts near 0.83, against 0.75-0.76 for English, so a Chinese question scored
    #: on the English background finds every memory of the user 0.4 relevant and never recalls nothing.
    #: None: the one background serves every language
    cjk: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not -1.0 <= self.mean < 1.0 or not 0.0 < self.std < 1.0:
            raise ValidationError(f"a calibration needs mean in [-1, 1) and std in (0, 1), got {self.mean}, {self.std}")
        if self.cjk is not None and (not -1.0 <= self.cjk[0] < 1.0 or not 0.0 < self.cjk[1] < 1.0):
            raise ValidationError(f"a calibration's CJK background needs mean in [-1, 1) and std in (0, 1), "
                                  f"got {self.cjk}")
        if self.weights is not None:
            w = dict(self.weights)
            if set(w) != set(DEFAULT_WEIGHTS) or any(
                    isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0 for v in w.values()):
                raise ValidationError(f"a calibration's weights give each of {sorted(DEFAULT_WEIGHTS)} in [0, 1], "
                                      f"got {w}")
            # the evidence weights sum to 1 as DEFAULT_WEIGHTS' do, so that min_score means the same
            evidence = sum(v for n, v in w.items() if n not in ("recency", "importance"))
            if abs(evidence - 1.0) > 1e-6:
                raise ValidationError(f"a calibration's evidence weights (vector, keyword, entity) sum to 1, got {w}")


_LOCOMO = ("`portamem calibrate locomo-dev.json --embedder {}`: every question of conversations 0-2 against every "
           "turn of the other conversations ({} pairs)")

#: measured background per model name (``Embedder.name``)
CALIBRATIONS: dict[str, Calibration] = {
    # the CJK backgrounds: the packaged background set's Chinese questions against its other Chinese topics'
    # passages (112 pairs; its English ones give 0.7609 / 0.0226 for e5 and 0.0613 / 0.0736 for USE)
    "multilingual-e5-small-q4": Calibration(0.7486, 0.0245, _LOCOMO.format("multilingual-e5-small-q4", "1,197,400"),
                                            cjk=(0.8320, 0.0171)),
    "use-multilingual-v3": Calibration(0.0994, 0.0807, _LOCOMO.format("use-multilingual-v3", "1,197,400"),
                                       cjk=(0.1004, 0.0557)),
}

_warned: set[str] = set()


def fusion_weights(explicit: Mapping[str, float] | None, calibration: Calibration | None) -> dict[str, float]:
    """The weights a search ranks with: the user's (``Settings.weights``) when set, else the model's own
    (``Calibration.weights``), else ``DEFAULT_WEIGHTS``. The user's are completed from the defaults."""
    if explicit is not None:
        return {**DEFAULT_WEIGHTS, **explicit}
    if calibration is not None and calibration.weights is not None:
        return dict(calibration.weights)
    return dict(DEFAULT_WEIGHTS)


def calibration_for(model: str, override: Mapping[str, float] | None = None) -> Calibration | None:
    """The model's calibration: ``override`` (``Settings.vector_calibration``), else the measured table.

    None for a model nobody measured: ``measured_calibration`` measures one on the packaged set.
    """
    if override:
        try:
            return Calibration(float(override["mean"]), float(override["std"]), "Settings.vector_calibration")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"vector_calibration needs numbers 'mean' and 'std', got {override!r}") from exc
    found = CALIBRATIONS.get(model)
    if found is None and model not in _warned:
        _warned.add(model)
        log.info("no measured cosine calibration for embedder %r: measuring one on the packaged background set "
                 "(`portamem calibrate` on your own data measures a better one)", model)
    return found


#: the store meta key that keeps a calibration measured at open, per model
_META = "calibration:{}"


def background_sets() -> list[CalibrationSet]:
    """The packaged background set (``background.jsonl``): questions and passages on two dozen topics in
    English and Chinese; every question against another topic's passages is an unrelated pair."""
    sets = []
    for line in resources.files(__package__).joinpath("background.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        sets.append(CalibrationSet([row["question"]], row["passages"], [list(range(len(row["passages"])))]))
    return sets


def measured_calibration(store: Any, embedder: Embedder) -> Calibration | None:
    """A calibration for a model nobody measured: its background on the packaged set, measured once per
    store (kept in the store's meta) so that hybrid scores stay absolute with any embedder: without one,
    vector scores relative to each query's neighbours dilute the keyword evidence (``portamem eval locomo``:
    all-minilm-l6-v2 hybrid fell below BM25 alone). None when the model cannot be measured (the relative
    scale then)."""
    key = _META.format(embedder.name)
    kept = store.get_meta(key)
    if kept:
        data = json.loads(kept)
        return Calibration(float(data["mean"]), float(data["std"]), str(data.get("measured", "")))
    found = _measured.get((embedder.name, embedder.version))
    if found is None:
        try:
            sets = background_sets()
            report = measure_background(sets, embedder, use=range(len(sets)))
            found = Calibration(min(report["mean"], 0.999), min(max(report["std"], 1e-4), 0.999),
                                f"measured on portamem's packaged background set ({report['pairs']} pairs)")
        except Exception:  # noqa: BLE001 - a model that cannot embed the set keeps the relative scale
            log.warning("could not measure a cosine calibration for %r; vector scores stay relative", embedder.name,
                        exc_info=True)
            return None
        _measured[(embedder.name, embedder.version)] = found
    with store.transaction() as conn:
        store.set_meta(conn, key, json.dumps({"mean": found.mean, "std": found.std, "measured": found.measured}))
    return found


#: calibrations measured in this process, by model name and version
_measured: dict[tuple[str, str], Calibration] = {}


def vector_score(cosine: Any, calibration: Calibration, span: float = SPAN, *, cjk: bool = False) -> Any:
    """How far a cosine stands above the model's background, 0..1 (floats or numpy arrays); ``cjk``: of a
    question written in Chinese or Japanese, against that background where the model has one."""
    mean, std = calibration.cjk if cjk and calibration.cjk is not None else (calibration.mean, calibration.std)
    return np.clip((cosine - mean) / (span * std), 0.0, 1.0)


@dataclass(frozen=True)
class Hubness:
    """How near a passage sits to questions in general, to take off its cosine to any one question.

    Some passages are hubs: with E5 a short first-person line ("Hi! I'm Lena.") is nearer than the
    answer to almost every first-person question (``portamem eval paraphrase``: the greeting was the
    first hit of 3 of 61 dev questions, and answers sat 0.03-0.1 cosine below it). A passage's mean
    cosine to the reference questions (``background.jsonl``), ``passage @ query_mean``, says how much
    of its cosine to a question it gets for nothing; the corrected cosine is

        cosine - (passage @ query_mean - passage_mean)

    where ``passage_mean`` is that term's mean over the reference passages of the passage's script, so
    an ordinary passage keeps its cosine and the model's calibration stays valid (the centring of CSLS
    on one side). Per script, because e5 puts every Chinese passage 0.03 nearer the mean question than
    an English one, as near as an English greeting: one mean for both took 0.03 off every Chinese
    cosine and emptied Chinese prompts of the scenario suite.
    """

    query_mean: np.ndarray
    passage_mean: float
    #: the same mean over the reference passages in Chinese
    cjk_passage_mean: float | None = None

    def correction(self, vectors: np.ndarray, cjk: Sequence[bool] | None = None) -> np.ndarray:
        """What each passage's cosine to any question is lowered by (raised, for a passage less
        similar to questions than most); ``cjk`` says which passages are Chinese."""
        near = vectors @ self.query_mean
        if cjk is None or self.cjk_passage_mean is None:
            return near - self.passage_mean
        return near - np.where(np.asarray(cjk, dtype=bool), self.cjk_passage_mean, self.passage_mean)


#: hubness references measured in this process, by model name and version
_hubness: dict[tuple[str, str], Hubness | None] = {}

#: the packaged embedders' hubness references, measured ahead (``benchmarks/hubness_reference.py``)
#: so that no search pays for embedding the background set: ``<embedder name>.npz`` here
SHIPPED_HUBNESS = "hubness"


def measure_hubness(embedder: Embedder) -> Hubness:
    """The embedder's hubness reference measured on the packaged background set (~0.6-4 s of e5)."""
    sets = background_sets()
    texts = [p for c in sets for p in c.passages]
    queries = embedder.embed([q for c in sets for q in c.questions], kind="query")
    passages = embedder.embed(texts, kind="passage")
    mean = np.asarray(queries, dtype=np.float32).mean(axis=0)
    near = np.asarray(passages, dtype=np.float32) @ mean
    cjk = np.asarray([has_cjk(t) for t in texts])
    return Hubness(mean, float(near[~cjk].mean()), float(near[cjk].mean()) if cjk.any() else None)


def save_hubness(path: Any, embedder: Embedder, hubness: Hubness) -> None:
    """Write a reference as ``shipped_hubness`` reads it (the model's name and version beside it)."""
    np.savez(path, name=np.asarray(embedder.name), version=np.asarray(getattr(embedder, "version", "")),
             query_mean=np.asarray(hubness.query_mean, dtype=np.float32),
             passage_mean=np.asarray(hubness.passage_mean, dtype=np.float64),
             cjk_passage_mean=np.asarray(np.nan if hubness.cjk_passage_mean is None else hubness.cjk_passage_mean,
                                         dtype=np.float64))


def shipped_hubness(embedder: Embedder) -> Hubness | None:
    """The reference packaged for this embedder, if one was measured on the same model version and
    dimension; None otherwise (it is then measured at first use)."""
    entry = resources.files(__package__).joinpath(SHIPPED_HUBNESS, f"{embedder.name}.npz")
    if not entry.is_file():
        return None
    with entry.open("rb") as fh, np.load(fh, allow_pickle=False) as data:
        if str(data["version"]) != str(getattr(embedder, "version", "")) or \
                data["query_mean"].shape != (getattr(embedder, "dim", data["query_mean"].shape[0]),):
            return None
        cjk = float(data["cjk_passage_mean"])
        return Hubness(data["query_mean"].astype(np.float32), float(data["passage_mean"]),
                       None if np.isnan(cjk) else cjk)


def hubness_for(embedder: Embedder) -> Hubness | None:
    """The embedder's hubness reference: the packaged one (``shipped_hubness``), else measured on the
    packaged background set once per process; None when the model cannot embed it (no correction then)."""
    key = (embedder.name, getattr(embedder, "version", ""))
    if key not in _hubness:
        try:
            _hubness[key] = shipped_hubness(embedder) or measure_hubness(embedder)
        except Exception:  # noqa: BLE001 - a model that cannot embed the set keeps its raw cosines
            log.warning("could not measure the hubness reference of %r; cosines stay uncorrected", embedder.name,
                        exc_info=True)
            _hubness[key] = None
    return _hubness[key]


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
