"""Built-in rerankers (``portamem_rerank``), each used when ``Settings.rerank`` names it:

- ``"mmr"``: maximal marginal relevance. Hits are taken greedily by ``lambda * score - (1 - lambda) *
  top * redundancy``, where redundancy is a hit's highest cosine to a hit already taken, above the
  candidates' typical cosine to each other (e5 puts unrelated texts near 0.8, so a raw cosine would
  take off nearly the same from every hit) and scaled to 0..1; ``top`` is the best score, so the
  penalty is on the scores' own scale. Relevance is the scoring's order, its scores made non-increasing
  (scoring puts the newest of conflicting hits first). A hit's new score is that less its redundancy's
  share (the first hit keeps its score; one like nothing above it keeps its own).
- ``"cross-encoder"``: a sentence-transformers ``CrossEncoder`` (``Settings.rerank_model``, a local path
  or a name it loads) reads the query and each memory together; its score (0..1) is the new score.
  Needs ``pip install 'portamem[sentence-transformers]'``.
- ``"model"``: the configured chat model (``Settings.llm_url``) is shown the question and the memories
  under short ids and answers ``{"order": [ids]}``, best first; only ids shown, each once (those it
  leaves out follow in the scoring's order). The hits keep the scoring's scores in the new order. An
  answer that is not that, after one retry, or no answer in ``llm_timeout_s``, leaves the scoring's
  order (a fallback counted in the model's stats: ``Memory.stats().model``, ``/metrics``).

Any other name passes (None) to the plugins registered after this one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from portamem import hookimpl
from portamem.config import Settings
from portamem.errors import ConfigError, FrameworkNotInstalledError
from portamem.models import ask_json
from portamem.records import SearchHit

__all__ = ["mmr", "cross_encode", "judge", "cross_encoder", "NAMES"]

log = logging.getLogger(__name__)

#: the names this plugin answers for
NAMES = ("mmr", "cross-encoder", "model")
#: characters of a memory the model judge is shown
_JUDGE_CHARS = 400

#: a scorer of (query, text) pairs, higher is better: a CrossEncoder's ``predict`` or a test's own
PairScorer = Callable[[list[tuple[str, str]]], Sequence[float]]


@hookimpl
def portamem_rerank(query: str, hits: Sequence[SearchHit], k: int, settings: Settings,
                    model: Any) -> list[SearchHit] | None:
    if settings.rerank == "mmr":
        return mmr(hits, k, settings.rerank_mmr_lambda)
    if settings.rerank == "cross-encoder":
        if not settings.rerank_model:
            raise ConfigError("rerank='cross-encoder' needs rerank_model (a CrossEncoder's path or name)")
        return cross_encode(query, hits, k, cross_encoder(settings.rerank_model))
    if settings.rerank == "model":
        return judge(query, hits, k, model, budget_s=settings.llm_timeout_s)
    return None


def _rescored(hit: SearchHit, score: float, **components: float) -> SearchHit:
    breakdown = dataclasses.replace(hit.breakdown, final=score,
                                    components={**hit.breakdown.components, **components})
    return dataclasses.replace(hit, score=score, breakdown=breakdown)


# ---------------------------------------------------------------------- MMR
def mmr(hits: Sequence[SearchHit], k: int, lam: float) -> list[SearchHit]:
    """The first ``k`` hits by maximal marginal relevance (the module docstring); a hit without a vector
    is like none of the others."""
    n = len(hits)
    if n < 2 or lam >= 1.0:
        return list(hits[:k])
    vectors = np.zeros((n, max((len(h.record.embedding) for h in hits if h.record.embedding is not None),
                               default=1)), dtype=np.float32)
    has = np.zeros(n, dtype=bool)
    for i, h in enumerate(hits):
        if h.record.embedding is not None:
            v = np.asarray(h.record.embedding, dtype=np.float32)
            norm = float(np.linalg.norm(v))
            if norm > 0 and len(v) == vectors.shape[1]:
                vectors[i], has[i] = v / norm, True
    sims = vectors @ vectors.T
    pairs = sims[np.triu_indices(n, 1)][(has[:, None] & has[None, :])[np.triu_indices(n, 1)]]
    typical = float(np.median(pairs)) if len(pairs) else 0.0
    redundancy = np.clip((sims - typical) / max(1e-6, 1.0 - typical), 0.0, 1.0)
    redundancy[~has, :] = 0.0
    redundancy[:, ~has] = 0.0
    # relevance is the scoring's order (which puts the newest of conflicting hits first), its scores
    # made non-increasing: a hit like none above it keeps its place
    rel = np.minimum.accumulate(np.asarray([h.score for h in hits], dtype=np.float64))
    top = float(rel.max()) if float(rel.max()) > 0 else 1.0
    taken: list[int] = []
    worst = np.zeros(n)  # each hit's highest redundancy with those taken
    left = list(range(n))
    out: list[SearchHit] = []
    last = math.inf
    while left and len(out) < k:
        gains = [lam * rel[i] - (1.0 - lam) * top * worst[i] for i in left]
        best = left[int(np.argmax(gains))]
        score = min(last, max(0.0, float(rel[best] - (1.0 - lam) / lam * top * worst[best])))
        out.append(_rescored(hits[best], score, redundancy=float(worst[best])))
        last = score
        taken.append(best)
        left.remove(best)
        worst = np.maximum(worst, redundancy[best])
    return out


# ---------------------------------------------------------------------- cross-encoder
_LOADED: dict[str, PairScorer] = {}
_LOADING = threading.Lock()


def cross_encoder(name: str) -> PairScorer:
    """The ``predict`` of the CrossEncoder at ``name`` (a local path or a model name), loaded once per
    process; ``FrameworkNotInstalledError`` naming the extra when sentence-transformers is missing."""
    with _LOADING:
        found = _LOADED.get(name)
        if found is not None:
            return found
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise FrameworkNotInstalledError("sentence-transformers (for rerank='cross-encoder')",
                                             "sentence-transformers") from exc
        try:
            model = CrossEncoder(name)
        except Exception as exc:  # noqa: BLE001 - whatever the library raises, the setting is what is wrong
            raise ConfigError(f"rerank_model {name!r} could not be loaded as a CrossEncoder: "
                              f"{type(exc).__name__}: {exc}") from exc
        _LOADED[name] = model.predict
        return model.predict


def cross_encode(query: str, hits: Sequence[SearchHit], k: int, predict: PairScorer) -> list[SearchHit]:
    """The first ``k`` hits by the pair scorer's score of (query, memory), squashed to 0..1 when it
    gives logits; ties keep the scoring's order."""
    if not hits:
        return []
    raw = [float(x) for x in np.asarray(predict([(query, h.content) for h in hits]), dtype=np.float64).reshape(-1)]
    if len(raw) != len(hits) or not all(math.isfinite(x) for x in raw):
        raise ValueError(f"the cross-encoder gave {len(raw)} scores for {len(hits)} pairs, or one not finite")
    if any(x < 0.0 or x > 1.0 for x in raw):  # logits
        raw = [1.0 / (1.0 + math.exp(-x)) for x in raw]
    order = sorted(range(len(hits)), key=lambda i: -raw[i])
    return [_rescored(hits[i], raw[i], rerank=raw[i]) for i in order[:k]]


# ---------------------------------------------------------------------- the chat model as judge
_JUDGE_SYSTEM = (
    "You rank a user's stored memories by how well each one helps answer their question. "
    "Answer with JSON only: {\"order\": [ids]}, the ids shown, the most helpful first, each at most once."
)


def judge(query: str, hits: Sequence[SearchHit], k: int, model: Any, *, budget_s: float | None = None,
          retries: int = 1) -> list[SearchHit]:
    """The first ``k`` hits in the order the chat model gives (the module docstring), or in the
    scoring's order when it gives none that keeps the contract."""
    if not hits:
        return []
    if model is None:
        log.warning("rerank='model' without a chat model: the scoring's order stands")
        return list(hits[:k])
    ids = [f"m{i + 1}" for i in range(len(hits))]
    listing = "\n".join(f"{m}: {' '.join(h.content.split())[:_JUDGE_CHARS]}" for m, h in zip(ids, hits))
    messages = [{"role": "system", "content": _JUDGE_SYSTEM},
                {"role": "user", "content": f"Question: {query}\n\nMemories:\n{listing}\n\n"
                                            "Order the ids, most helpful first."}]
    schema = {"type": "object", "additionalProperties": False, "required": ["order"],
              "properties": {"order": {"type": "array", "items": {"type": "string", "enum": ids},
                                       "uniqueItems": True, "maxItems": len(ids)}}}
    shown = set(ids)

    def validate(data: Any) -> str | None:
        if not isinstance(data, dict) or set(data) != {"order"} or not isinstance(data["order"], list):
            return 'the answer must be an object with one key, "order", a list of ids'
        order = data["order"]
        unknown = [x for x in order if not isinstance(x, str) or x not in shown]
        if unknown:
            return f"ids not shown: {unknown[:5]}"
        if len(set(order)) != len(order):
            return "an id is listed more than once"
        return None

    data = ask_json(model, messages, schema=schema, validate=validate, budget_s=budget_s, retries=retries,
                    max_tokens=16 + 6 * len(ids), what="rerank")
    if data is None:  # counted as a fallback in the model's stats by ask_json
        return list(hits[:k])
    position = {m: i for i, m in enumerate(ids)}
    order = [position[m] for m in data["order"]]
    order += [i for i in range(len(hits)) if i not in set(order)]
    scores = sorted((h.score for h in hits), reverse=True)  # the scoring's scores, given to the new order
    n = len(hits)
    return [_rescored(hits[i], scores[rank], rerank=1.0 - rank / n) for rank, i in enumerate(order[:k])]
