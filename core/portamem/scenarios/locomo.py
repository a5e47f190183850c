"""Retrieval quality on LoCoMo-format conversations: Recall@K and MRR of hybrid search against a
pure-vector and a pure-BM25 baseline on the same embedder in the same run, and a weight search."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..config import DEFAULT_WEIGHTS, Settings
from ..embedding.embedders import Embedder, Kind, get_embedder
from ..errors import ValidationError
from ..filters import SearchFilters
from ..language.entities import extract_entities, normalize_entity
from ..memory import Memory
from ..read.calibration import CalibrationSet, calibration_for, fusion_weights, measure_background
from ..read.candidates import SOURCES, Candidate
from ..read.rerank import depth as rerank_depth
from ..read.rerank import rerank
from ..read.scoring import combine
from ..read.trace import TraceEntry
from ..recall import REFERENCES
from ..records import MemoryType, Status
from ..write.requests import MemoryDraft
from ..write.trust import trust_factors

__all__ = [
    "CATEGORIES",
    "METHODS",
    "LocomoTurn",
    "LocomoQuestion",
    "LocomoConversation",
    "CachedEmbedder",
    "load_locomo",
    "parse_session_time",
    "evaluate_locomo",
    "tune_weights",
    "format_evaluation",
    "format_tuning",
    "add_eval_arguments",
    "add_tune_arguments",
    "add_calibrate_arguments",
    "run_eval",
    "run_calibrate",
    "run_tune",
]

#: LoCoMo's question categories, named as the dataset's own evaluation code names them
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

#: the compared methods and the weights that rank by each alone (None: the configured weights)
METHODS: dict[str, dict[str, float] | None] = {"hybrid": None, "vector": {"vector": 1.0}, "bm25": {"keyword": 1.0}}

#: the previous scale, run beside the calibrated one in every evaluation: cosine above the least
#: similar of the query's neighbours, its weights, no threshold (so it always returns top-k)
RELATIVE_WEIGHTS: dict[str, float] = {"vector": 0.5, "keyword": 0.45, "entity": 0.05, "recency": 0.1, "importance": 0.05}

_SESSION_TIME = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.I)
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str
    created_at: datetime
    caption: str | None = None

    @property
    def content(self) -> str:
        """The memory text: who said it, what, and what a shared photo showed."""
        text = f"{self.speaker}: {self.text}"
        return f"{text} [shared a photo: {self.caption}]" if self.caption else text


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    evidence: tuple[str, ...]
    category: int


@dataclass
class LocomoConversation:
    sample_id: str
    turns: list[LocomoTurn]
    questions: list[LocomoQuestion]

    @property
    def now(self) -> datetime:
        """Just after the last session: the questions are asked once the conversation is over."""
        return max(t.created_at for t in self.turns) + timedelta(hours=1)


def parse_session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC; the dataset gives no zone)."""
    m = _SESSION_TIME.search(text)
    if not m or m.group(5).lower() not in _MONTHS:
        raise ValidationError(f"not a LoCoMo session time: {text!r} (expected e.g. '1:56 pm on 8 May, 2023')")
    hour, minute = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0), int(m.group(2))
    return datetime(int(m.group(6)), _MONTHS[m.group(5).lower()], int(m.group(4)), hour, minute, tzinfo=timezone.utc)


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """Read a LoCoMo json file: a list of conversations with ``conversation`` sessions and ``qa``.

    Questions whose evidence names no turn of the conversation are left out; malformed evidence ids
    (``D:11:26``, ``D8:6; D9:17``) are read as the dataset means them.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read LoCoMo file {path}: {exc}") from exc
    if not isinstance(data, list):
        raise ValidationError(f"{path}: expected a list of conversations")
    out = []
    for n, item in enumerate(data):
        try:
            conv = item["conversation"]
            turns: list[LocomoTurn] = []
            sessions = sorted((int(k.split("_")[1]), k) for k in conv if re.fullmatch(r"session_\d+", k))
            for _, key in sessions:
                start = parse_session_time(conv[f"{key}_date_time"])
                for i, t in enumerate(conv[key]):
                    # turns of one session share its time; a second apiece keeps their order
                    turns.append(LocomoTurn(t["dia_id"], t["speaker"], t["text"], start + timedelta(seconds=i),
                                            t.get("blip_caption") or None))
            known = {t.dia_id for t in turns}
            questions = []
            for q in item.get("qa", []):
                evidence = tuple(dict.fromkeys(
                    f"D{a}:{b}" for e in q.get("evidence") or [] for a, b in _EVIDENCE.findall(str(e))
                    if f"D{a}:{b}" in known
                ))
                if evidence:
                    questions.append(LocomoQuestion(str(q["question"]), evidence, int(q.get("category", 0))))
            out.append(LocomoConversation(str(item.get("sample_id", f"conv-{n}")), turns, questions))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"{path}: conversation {n} is not in the LoCoMo format: {exc!r}") from exc
    return out


# ---------------------------------------------------------------------- embedding cache
class CachedEmbedder:
    """Wraps an embedder so that a text is embedded once per run (questions and turns repeat).

    It keeps the wrapped model's name and version, so the vectors it stores are labelled as that model's.
    With ``path`` the vectors also persist in an ``.npz`` file between runs (``save()`` writes it),
    keyed by model, kind and text, so that repeated evaluations skip the embedding.
    """

    def __init__(self, inner: Embedder, path: str | Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self.dim = inner.dim
        self.path = Path(path) if path is not None else None
        self._cache: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()
        self._loaded = 0
        if self.path is not None and self.path.exists():
            with np.load(self.path, allow_pickle=False) as data:
                if str(data["model"]) == f"{self.name} {self.version}":
                    for kind, text, vector in zip(data["kinds"], data["texts"], data["vectors"]):
                        self._cache[(str(kind), str(text))] = vector
            self._loaded = len(self._cache)

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if (kind, t) not in self._cache))
        if todo:
            vectors = self.inner.embed(todo, kind=kind)
            with self._lock:
                self._cache.update({(kind, t): v for t, v in zip(todo, vectors)})
        with self._lock:
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._cache[(kind, t)] for t in texts])

    def save(self) -> None:
        """Write the cache to ``path`` when it holds vectors the file lacks."""
        if self.path is None or len(self._cache) == self._loaded:
            return
        with self._lock:
            keys = list(self._cache)
            vectors = np.stack([self._cache[k] for k in keys]).astype(np.float32)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, model=np.asarray(f"{self.name} {self.version}"), kinds=np.asarray([k for k, _ in keys]),
                 texts=np.asarray([t for _, t in keys]), vectors=vectors)
        tmp.replace(self.path)
        self._loaded = len(keys)


# ---------------------------------------------------------------------- metrics
@dataclass
class _Tally:
    """Recall@K (share of a question's evidence turns among the top K) and reciprocal rank, per category."""

    ks: tuple[int, ...]
    rows: list[tuple[int, dict[int, float], float]] = field(default_factory=list)

    def add(self, category: int, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        gold = set(evidence)
        recall = {k: len(gold & set(ranked[:k])) / len(gold) for k in self.ks}
        rr = next((1.0 / i for i, d in enumerate(ranked, 1) if d in gold), 0.0)
        self.rows.append((category, recall, rr))

    def summary(self) -> dict[str, Any]:
        def block(rows: list[tuple[int, dict[int, float], float]]) -> dict[str, Any]:
            n = len(rows)
            out: dict[str, Any] = {"n": n}
            for k in self.ks:
                out[f"recall@{k}"] = round(sum(r[1][k] for r in rows) / n, 4) if n else 0.0
            out["mrr"] = round(sum(r[2] for r in rows) / n, 4) if n else 0.0
            return out

        cats = sorted({c for c, _, _ in self.rows})
        return {
            "overall": block(self.rows),
            "by_category": {f"{c}:{CATEGORIES.get(c, '?')}": block([r for r in self.rows if r[0] == c]) for c in cats},
        }


# ---------------------------------------------------------------------- ingestion
def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q" if desc.startswith("ask") else "turn", file=sys.stderr,
                disable=not enabled, leave=False)


@contextmanager
def _ingested(
    conv: LocomoConversation, settings: Settings, embedder: Embedder, show_progress: bool
) -> Iterator[tuple[Memory, dict[str, str], dict[str, int]]]:
    """A throwaway store holding one conversation: each turn an episodic memory of its user."""
    path = tempfile.mkdtemp(prefix="portamem-eval-")
    # every turn is kept, even "Thanks!" said twice or a changed "my ... is": evidence ids must survive
    mem = Memory(settings=settings.replace(path=path, dedupe=False, supersede=False), embedder=embedder)
    try:
        ids: dict[str, str] = {}
        bar = _progress(len(conv.turns), f"ingest {conv.sample_id}", show_progress)
        for start in range(0, len(conv.turns), 128):
            batch = conv.turns[start:start + 128]
            drafts = [MemoryDraft(content=t.content, type=MemoryType.EPISODIC, session_id=t.dia_id.split(":")[0],
                                  created_at=t.created_at, metadata={"dia_id": t.dia_id}) for t in batch]
            for turn, record in zip(batch, mem.save_memories(drafts, user_id=conv.sample_id)):
                ids[record.memory_id] = turn.dia_id
            bar.update(len(batch))
        mem.flush()  # every turn in the vector index before the first question
        bar.close()
        statuses: dict[str, int] = {}
        for record in mem.list_memories(user_id=conv.sample_id, filters={"statuses": [s.value for s in Status]}):
            statuses[record.status.value] = statuses.get(record.status.value, 0) + 1
        yield mem, ids, statuses
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)


def _prime_queries(embedder: Embedder, questions: Sequence[LocomoQuestion], i: int, batch: int = 32) -> None:
    """Embed the questions a batch ahead (a cached embedder keeps them): batches run faster."""
    if i % batch == 0 and isinstance(embedder, CachedEmbedder):
        embedder.embed([q.question for q in questions[i:i + batch]], kind="query")


def _select(convs: list[LocomoConversation], which: Iterable[int] | None) -> list[LocomoConversation]:
    if which is None:
        return convs
    picked = list(which)
    bad = [i for i in picked if not 0 <= i < len(convs)]
    if bad:
        raise ValidationError(f"conversation numbers {bad} out of range: the file has {len(convs)} (0..{len(convs) - 1})")
    return [convs[i] for i in picked]


# ---------------------------------------------------------------------- evaluation
def _baseline(trace: Sequence[TraceEntry], source: str, raw: str, depth: int) -> list[TraceEntry]:
    """One retriever's own list, in its own order (cosine, or BM25), newest first on ties."""
    own = [e for e in trace if source in e.candidate.found_by]
    own.sort(key=lambda e: (-e.candidate.raw.get(raw, 0.0), -e.candidate.record.created_at.timestamp()))  # type: ignore[union-attr]
    return own[:depth]


def _relative(mem: Memory, query: str, user_id: str, trace: Sequence[TraceEntry], now: datetime, depth: int) -> list[str]:
    """The same candidates ranked on the previous relative scale, through the same read-path clean-up."""
    pool = [e.candidate.raw["cosine"] for e in trace if "vector" in e.candidate.found_by and "cosine" in e.candidate.raw]
    floor = min(pool) if pool else 0.0
    again: dict[str, Candidate] = {}
    for e in trace:
        c = e.candidate
        comps = {n: c.raw.get(n, v) for n, v in c.components.items()}  # the priors before scaling
        comps["vector"] = max(0.0, (c.raw.get("cosine", 0.0) - floor) / (1.0 - floor)) if floor < 1.0 else 0.0
        again[c.memory_id] = Candidate(c.memory_id, comps, set(c.found_by), c.record)
    s = mem.settings
    hits = mem.retriever.rank(query, again, tenant_id=mem.tenant_id, user_id=user_id, weights=RELATIVE_WEIGHTS,
                              now=now, top_k=depth, min_score=0.0, settings=s,
                              duplicate_cosine=s.dedupe_threshold, trust_factor=trust_factors(s.trust_factors))
    return [h.memory_id for h in hits]


def gate_savings(convs: Sequence[LocomoConversation]) -> dict[str, Any]:
    """How many recalls the pre-think gate (``portamem.recall.needs_recall``) saves: every turn taken
    as a message to an agent that remembers the turns before it, and every question asked at the end."""
    turns = skipped = questions = skipped_questions = 0
    for conv in convs:
        held: set[str] = set()
        for turn in conv.turns:
            turns += 1
            skipped += not _gate(turn.text, held)
            # the speaker leads the memory's text ("Ida: ..."), where a sentence-initial name is not read
            held.update(normalize_entity(e) for e in [turn.speaker, *extract_entities(turn.content)])
        for q in conv.questions:
            questions += 1
            skipped_questions += not _gate(q.question, held)
    return {"turns": turns, "turns_skipped": round(skipped / turns, 4) if turns else 0.0,
            "questions": questions, "questions_skipped": round(skipped_questions / questions, 4) if questions else 0.0}


def _gate(message: str, held: set[str]) -> bool:
    if REFERENCES.search(message):
        return True
    return any(normalize_entity(e) in held for e in extract_entities(message))


def evaluate_locomo(
    path: str | Path,
    *,
    ks: Sequence[int] = (5, 10),
    conversations: Iterable[int] | None = None,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    weights: Mapping[str, float] | None = None,
    show_progress: bool = True,
    negatives: bool = True,
    embedding_cache: str | Path | None = None,
) -> dict[str, Any]:
    """Ask every question of each conversation through ``Memory.search_memory`` (hybrid), and rank
    the same candidates by each retriever alone for the baselines: pure vector is the index's
    nearest neighbours by cosine, pure BM25 the keyword index's matches by BM25; ``relative`` is
    the previous relative scale on the same candidates (before the calibration).

    One search per question serves all of them, so the baselines see exactly the lists the hybrid
    merged. MRR counts the first evidence turn within the top ``max(ks)`` (0 when none is there).
    With ``negatives`` each conversation is also asked the next conversation's questions, about
    which nothing is stored: the share that returns nothing is the ``negatives`` figure.

    With ``Settings.rerank`` set, ``hybrid`` is the scoring alone and ``rerank:<name>`` the same
    search's best ``rerank_candidates`` hits as the reranker orders them, in the same run.
    """
    ks = tuple(sorted(set(int(k) for k in ks)))
    if not ks or ks[0] < 1:
        raise ValidationError(f"--k values must be positive integers, got {list(ks)}")
    settings = settings or Settings.load()
    if weights is not None:
        settings = settings.replace(weights={**(settings.weights or {}), **weights})
    started = time.perf_counter()
    cached = CachedEmbedder(embedder or get_embedder(settings.embedder), embedding_cache)
    convs = _select(load_locomo(path), conversations)
    reranking, settings = settings, settings.replace(rerank=None)
    reranked = f"rerank:{reranking.rerank}" if reranking.rerank else None
    tallies = {m: _Tally(ks) for m in [*METHODS, "relative", *([reranked] if reranked else [])]}
    depth = max(ks)
    empty = {"hybrid": 0, "relative": 0}
    asked = 0
    returned: list[int] = []
    #: per question with a non-empty prompt, the share of its lines (the top ``settings.top_k`` hits) that are evidence
    precision: list[float] = []
    # the candidate lists must reach past the deepest cut-off for the baselines to be whole
    settings = settings.replace(candidate_k=max(settings.candidate_k, depth))
    ingested = 0
    inactive = 0
    everything = load_locomo(path)
    for conv in convs:
        with _ingested(conv, settings, cached, show_progress) as (mem, ids, statuses):
            ingested += len(ids)
            inactive += sum(n for s, n in statuses.items() if s != Status.ACTIVE.value)
            bar = _progress(len(conv.questions), f"ask {conv.sample_id}", show_progress)
            for i, q in enumerate(conv.questions):
                _prime_queries(cached, conv.questions, i)
                trace: list[TraceEntry] = []
                hits = mem.search_memory(q.question, user_id=conv.sample_id, top_k=rerank_depth(reranking, depth),
                                         now=conv.now, trace=trace)
                shown, hits = hits, hits[:depth]
                ranked = {
                    "hybrid": [h.memory_id for h in hits],
                    "vector": [e.candidate.memory_id for e in _baseline(trace, "vector", "cosine", depth)],
                    "bm25": [e.candidate.memory_id for e in _baseline(trace, "keyword", "bm25", depth)],
                    "relative": _relative(mem, q.question, conv.sample_id, trace, conv.now, depth),
                }
                if reranked:
                    ranked[reranked] = [h.memory_id for h in rerank(mem.hooks, q.question, shown, depth, reranking,
                                                                    getattr(mem.formation, "model", None))]
                for method, memory_ids in ranked.items():
                    tallies[method].add(q.category, [ids.get(m, "?") for m in memory_ids], q.evidence)
                returned.append(len(hits))
                prompt = [ids.get(h.memory_id) for h in hits[:settings.top_k]]
                if prompt:
                    precision.append(sum(d in q.evidence for d in prompt) / len(prompt))
                bar.update(1)
            bar.close()
            if negatives and len(everything) > 1:
                other = everything[(everything.index(next(c for c in everything if c.sample_id == conv.sample_id))
                                    + 1) % len(everything)]
                bar = _progress(len(other.questions), f"ask {conv.sample_id} of {other.sample_id}", show_progress)
                for i, q in enumerate(other.questions):
                    _prime_queries(cached, other.questions, i)
                    trace = []
                    hits = mem.search_memory(q.question, user_id=conv.sample_id, top_k=depth, now=conv.now,
                                             trace=trace)
                    asked += 1
                    empty["hybrid"] += not hits
                    empty["relative"] += not _relative(mem, q.question, conv.sample_id, trace, conv.now, depth)
                    bar.update(1)
                bar.close()
        cached.save()
    results = {m: t.summary() for m, t in tallies.items()}
    hybrid = results["hybrid"]["overall"]
    return {
        "dataset": str(path),
        "conversations": [c.sample_id for c in convs],
        "questions": sum(len(c.questions) for c in convs),
        "turns": ingested,
        "turns_not_active": inactive,
        "embedder": cached.name,
        "ks": list(ks),
        "mrr_depth": depth,
        "weights": fusion_weights(settings.weights, calibration_for(cached.name, settings.vector_calibration)),
        "recency_lambda": settings.recency_lambda,
        "min_score": settings.min_score,
        "rerank": {"name": reranking.rerank, "candidates": reranking.rerank_candidates,
                   "mmr_lambda": reranking.rerank_mmr_lambda} if reranked else None,
        "results": results,
        "mean_returned": round(float(np.mean(returned)), 2) if returned else 0.0,
        "prompt_precision": {"top_k": settings.top_k, "questions": len(precision),
                             "mean": round(float(np.mean(precision)), 4) if precision else None},
        "gate": gate_savings(convs),
        "negatives": {"questions": asked, **{m: round(n / asked, 4) if asked else None for m, n in empty.items()}},
        "margins": {
            m: {key: round(hybrid[key] - r["overall"][key], 4) for key in hybrid if key != "n"}
            for m, r in results.items() if m != "hybrid"
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def format_evaluation(report: Mapping[str, Any]) -> str:
    """A small table: each method overall and per category, then hybrid's margin over each baseline."""
    keys = [f"recall@{k}" for k in report["ks"]] + ["mrr"]
    results = report["results"]
    lines = [
        f"LoCoMo retrieval: {report['questions']} questions, {report['turns']} turns in "
        f"{len(report['conversations'])} conversations; embedder {report['embedder']}; "
        f"MRR within the top {report['mrr_depth']}; {report['seconds']} s",
        f"{'':24}" + "".join(f"{m:>26}" for m in results),
        f"{'':24}" + "".join("".join(f"{k.replace('recall', 'R'):>9}" for k in keys)[1:] + " " for _ in results),
    ]
    first = next(iter(results.values()))
    rows = [("overall", "overall")] + [(c, c) for c in first["by_category"]]
    for label, key in rows:
        cells = []
        for r in results.values():
            block = r["overall"] if key == "overall" else r["by_category"].get(key, {})
            cells.append("".join(f"{block.get(k, 0.0):9.3f}" for k in keys)[1:] + " ")
        n = (first["overall"] if key == "overall" else first["by_category"][key])["n"]
        lines.append(f"{label + f' (n={n})':24}" + "".join(f"{c:>26}" for c in cells))
    neg = report.get("negatives") or {}
    if neg.get("questions"):
        lines.append(f"asked of another conversation (nothing relevant stored), {neg['questions']} questions: "
                     f"nothing returned for {neg['hybrid']:.1%} (hybrid, min_score {report['min_score']:g}), "
                     f"{neg['relative']:.1%} (relative scale, no threshold); hybrid returned "
                     f"{report['mean_returned']:g} of at most {report['mrr_depth']} per own question")
    prec = report.get("prompt_precision") or {}
    if prec.get("mean") is not None:
        lines.append(f"prompt precision (share of the top {prec['top_k']} hybrid hits that are evidence turns, "
                     f"{prec['questions']} questions with a prompt): {prec['mean']:.3f}")
    gate = report.get("gate")
    if gate:
        lines.append(f"pre-think gate (off by default): would skip recall for {gate['turns_skipped']:.1%} of "
                     f"{gate['turns']} turns taken as messages, {gate['questions_skipped']:.1%} of the questions")
    for method, margin in report.get("margins", {}).items():
        parts = ", ".join(f"{k} {v:+.3f} ({v / results[method]['overall'][k]:+.0%})" if results[method]["overall"][k]
                          else f"{k} {v:+.3f}" for k, v in margin.items())
        lines.append(f"hybrid vs {method}: {parts}")
    if report.get("turns_not_active"):
        lines.append(f"note: {report['turns_not_active']} turns were held back by the write guard (not searchable)")
    return "\n".join(lines)


# ---------------------------------------------------------------------- weight search
@dataclass
class _Table:
    """Every candidate of every question as arrays, so that one weighting ranks them all at once."""

    components: dict[str, np.ndarray]
    group: np.ndarray
    created: np.ndarray
    gold: np.ndarray
    n_gold: np.ndarray
    category: np.ndarray


def _candidate_rows(
    mem: Memory, conv: LocomoConversation, ids: dict[str, str], lambdas: Sequence[float], show_progress: bool
) -> dict[float, list[tuple[dict[str, float], float, bool]]]:
    """Per question, its candidates' components, with the recency scorer run for each lambda."""
    registered = mem.hooks.scorers()
    out: dict[float, list[Any]] = {lam: [] for lam in lambdas}
    bar = _progress(len(conv.questions), f"ask {conv.sample_id}", show_progress)
    for i, q in enumerate(conv.questions):
        _prime_queries(mem.embedder, conv.questions, i)
        cands = list(mem.retriever.candidates(
            q.question, tenant_id=mem.tenant_id, user_id=conv.sample_id, filters=SearchFilters(),
            k=mem.settings.candidate_k, sources=SOURCES,
        ).values())
        gold = set(q.evidence)
        for lam in lambdas:
            settings = mem.settings.replace(recency_lambda=lam)
            for reg in registered.values():
                reg.fn(q.question, cands, conv.now, settings)
            out[lam].append((q, [(dict(c.components), c.record.created_at.timestamp(),  # type: ignore[union-attr]
                                  ids.get(c.memory_id) in gold) for c in cands]))
        bar.update(1)
    bar.close()
    return out


def _table(questions: list[tuple[LocomoQuestion, list[tuple[dict[str, float], float, bool]]]]) -> _Table:
    names = sorted({n for _, rows in questions for comps, _, _ in rows for n in comps})
    comps: dict[str, list[float]] = {n: [] for n in names}
    group, created, gold, n_gold, category = [], [], [], [], []
    for g, (q, rows) in enumerate(questions):
        n_gold.append(len(q.evidence))
        category.append(q.category)
        for c, ts, is_gold in rows:
            for n in names:
                comps[n].append(c.get(n, 0.0))
            group.append(g)
            created.append(ts)
            gold.append(is_gold)
    return _Table({n: np.asarray(v) for n, v in comps.items()}, np.asarray(group, dtype=np.int64),
                  np.asarray(created), np.asarray(gold, dtype=bool), np.asarray(n_gold), np.asarray(category))


def _score_table(table: _Table, weights: Mapping[str, float], ks: Sequence[int], depth: int) -> dict[str, Any]:
    """Recall@K and MRR of ranking each question's candidates by ``combine`` (read-path clean-up aside)."""
    final = combine(table.components, weights)
    # by question, best first, newest first on ties: the read path's order
    order = np.lexsort((-table.created, -final, table.group))
    grp = table.group[order]
    starts = np.r_[0, np.flatnonzero(np.diff(grp)) + 1]
    pos = np.arange(len(grp)) - np.repeat(starts, np.diff(np.r_[starts, len(grp)]))
    gold = table.gold[order]
    n_q = len(table.n_gold)
    out: dict[str, Any] = {}
    for k in ks:
        hits = np.bincount(grp[gold & (pos < k)], minlength=n_q)
        out[f"recall@{k}"] = float(np.mean(np.minimum(hits, table.n_gold) / table.n_gold))
    first = np.full(n_q, np.inf)
    np.minimum.at(first, grp[gold & (pos < depth)], pos[gold & (pos < depth)] + 1)
    out["mrr"] = float(np.mean(np.where(np.isfinite(first), 1.0 / first, 0.0)))
    return {k: round(v, 4) for k, v in out.items()}


def _grid(step: float, priors: Mapping[str, float] | None = None) -> list[dict[str, float]]:
    """Evidence weights on a simplex (only their ratios matter), priors small and relative to them;
    ``priors`` keeps recency and importance at those values (only the evidence weights are searched)."""
    n = int(round(1 / step))
    out = []
    for v, kw in itertools.product(range(n + 1), repeat=2):
        if v + kw > n:
            continue
        ev = {"vector": round(v / n, 4), "keyword": round(kw / n, 4), "entity": round((n - v - kw) / n, 4)}
        if priors is not None:
            out.append({**ev, "recency": priors["recency"], "importance": priors["importance"]})
            continue
        for rec, imp in itertools.product((0.0, 0.05, 0.1, 0.2), (0.0, 0.05, 0.1)):
            out.append({**ev, "recency": rec, "importance": imp})
    return out


def tune_weights(
    path: str | Path,
    *,
    train: Iterable[int] = (0, 1, 2),
    test: Iterable[int] = (3, 4),
    ks: Sequence[int] = (5, 10),
    step: float = 0.1,
    lambdas: Sequence[float] = (0.0005, 0.002, 0.01),
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    show_progress: bool = True,
    embedding_cache: str | Path | None = None,
    fixed_priors: bool = False,
) -> dict[str, Any]:
    """Grid-search the weights (and recency lambda) on the ``train`` conversations; report the best
    and the configured defaults on ``train`` and on the held-out ``test`` conversations.

    ``fixed_priors``: search the evidence weights (vector, keyword, entity) alone, recency, importance
    and the recency lambda kept as configured: how an embedder's own weights
    (``portamem.read.calibration.CALIBRATIONS``) are fitted, since the priors describe the memories,
    not the model.

    Candidates are gathered once per question and every weighting re-ranks them as arrays, so the
    search costs one pass of retrieval. The objective is the mean of Recall@5 (first K) and MRR.
    """
    ks = tuple(sorted(set(int(k) for k in ks)))
    settings = settings or Settings.load()
    train, test = list(train), list(test)
    if set(train) & set(test):
        raise ValidationError(f"train and test conversations overlap: {sorted(set(train) & set(test))}")
    started = time.perf_counter()
    cached = CachedEmbedder(embedder or get_embedder(settings.embedder), embedding_cache)
    convs = load_locomo(path)
    lambdas = (settings.recency_lambda,) if fixed_priors else tuple(dict.fromkeys([*lambdas, settings.recency_lambda]))
    rows: dict[str, dict[float, list[Any]]] = {"train": {lam: [] for lam in lambdas}, "test": {lam: [] for lam in lambdas}}
    for split, which in (("train", train), ("test", test)):
        for conv in _select(convs, which):
            with _ingested(conv, settings, cached, show_progress) as (mem, ids, _):
                for lam, qs in _candidate_rows(mem, conv, ids, lambdas, show_progress).items():
                    rows[split][lam].extend(qs)
            cached.save()
    tables = {split: {lam: _table(qs) for lam, qs in by_lam.items()} for split, by_lam in rows.items()}
    depth = max(ks)

    def objective(r: Mapping[str, float]) -> float:
        return (r[f"recall@{ks[0]}"] + r["mrr"]) / 2

    # the weights a search with these settings ranks with: the user's, else the model's own, else the defaults
    defaults = fusion_weights(settings.weights, calibration_for(cached.name, settings.vector_calibration))
    best: tuple[float, dict[str, float], float] | None = None
    tried = 0
    for lam in lambdas:
        for w in _grid(step, defaults if fixed_priors else None):
            if w["recency"] == 0 and lam != lambdas[0]:
                continue  # lambda does not matter without recency
            tried += 1
            score = objective(_score_table(tables["train"][lam], w, ks, depth))
            if best is None or score > best[0] + 1e-9:
                best = (score, w, lam)
    assert best is not None
    _, best_w, best_lam = best

    def figures(w: Mapping[str, float], lam: float) -> dict[str, Any]:
        return {split: _score_table(tables[split][lam], w, ks, depth) for split in tables}

    baselines = {m: figures(w, lambdas[0]) for m, w in METHODS.items() if w is not None}
    return {
        "dataset": str(path),
        "train": [convs[i].sample_id for i in train],
        "test": [convs[i].sample_id for i in test],
        "questions": {split: int(tables[split][lambdas[0]].n_gold.size) for split in tables},
        "embedder": cached.name,
        "ks": list(ks),
        "grid_size": tried,
        "fixed_priors": fixed_priors,
        "best": {"weights": best_w, "recency_lambda": best_lam, **figures(best_w, best_lam)},
        "defaults": {"weights": defaults, "recency_lambda": settings.recency_lambda,
                     **figures(defaults, settings.recency_lambda)},
        # the global defaults (fitted on e5) beside the model's own weights, where it has some
        "global": {"weights": dict(DEFAULT_WEIGHTS), "recency_lambda": settings.recency_lambda,
                   **figures(DEFAULT_WEIGHTS, settings.recency_lambda)} if defaults != DEFAULT_WEIGHTS else None,
        "baselines": baselines,
        "seconds": round(time.perf_counter() - started, 1),
    }


def format_tuning(report: Mapping[str, Any]) -> str:
    keys = [f"recall@{k}" for k in report["ks"]] + ["mrr"]
    lines = [
        f"weight search on {', '.join(report['train'])} ({report['questions']['train']} questions), "
        f"held out {', '.join(report['test'])} ({report['questions']['test']} questions); "
        f"embedder {report['embedder']}; {report['grid_size']} weightings; {report['seconds']} s",
        f"{'':34}{'train':>27}{'held out':>27}",
        f"{'':34}" + ("".join(f"{k.replace('recall', 'R'):>9}" for k in keys)) * 2,
    ]

    def row(label: str, figs: Mapping[str, Any]) -> str:
        return f"{label:34}" + "".join(f"{figs[s][k]:9.3f}" for s in ("train", "test") for k in keys)

    lines.append(row("best", report["best"]))
    lines.append(row("configured", report["defaults"]))
    if report.get("global"):
        lines.append(row("global defaults", report["global"]))
    for method, figs in report["baselines"].items():
        lines.append(row(f"{method} only", figs))
    fmt = ", ".join(f"{k} {v:g}" for k, v in report["best"]["weights"].items())
    lines.append(f"best weights: {fmt}; recency_lambda {report['best']['recency_lambda']:g}")
    lines.append("(ranking by the weighted score alone: the window, duplicate and conflict steps are not applied)")
    return "\n".join(lines)


# ---------------------------------------------------------------------- the CLI's eval and tune commands
def add_eval_arguments(p: Any) -> None:
    """The arguments of ``portamem eval locomo`` (the CLI puts them under its ``locomo`` dataset)."""
    p.add_argument("file", help="a LoCoMo json file (a list of conversations)")
    p.add_argument("--k", type=int, nargs="+", default=[5, 10], help="cut-offs for Recall@K (default: 5 10)")
    p.add_argument("--conversations", type=_indices, help="which conversations, e.g. 0-2 or 0,3 (default: all)")
    p.add_argument("--weights", type=_weights, help='JSON weights, e.g. \'{"vector": 0.5, "keyword": 0.3}\'')
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--no-negatives", action="store_true",
                   help="skip asking each conversation the next one's questions")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_calibrate_arguments(p: Any) -> None:
    p.add_argument("file", help="a LoCoMo json file (at least two conversations)")
    p.add_argument("--conversations", type=_indices, default=[0, 1, 2],
                   help="whose questions to ask of the other conversations (default: 0-2)")
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")


def add_tune_arguments(p: Any) -> None:
    p.add_argument("file", help="a labelled set in the LoCoMo json format")
    p.add_argument("--train", type=_indices, default=[0, 1, 2], help="conversations to tune on (default: 0-2)")
    p.add_argument("--test", type=_indices, default=[3, 4], help="held-out conversations (default: 3-4)")
    p.add_argument("--k", type=int, nargs="+", default=[5, 10])
    p.add_argument("--step", type=float, default=0.1, help="grid step of the evidence weights (default: 0.1)")
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--fixed-priors", action="store_true",
                   help="search the evidence weights alone (vector, keyword, entity), recency and importance as "
                        "configured: how an embedder's own weights are fitted")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _indices(text: str) -> list[int]:
    out: list[int] = []
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            out.extend(range(int(a), int(b) + 1) if b else [int(a)])
    except ValueError as exc:
        raise ValueError(f"expected conversation numbers like 0-2 or 0,3, got {text!r}") from exc
    return out


def _weights(text: str) -> dict[str, float]:
    data = json.loads(text)
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise ValueError("weights must be a JSON object of numbers")
    return {str(k): float(v) for k, v in data.items()}


def _settings(args: Any) -> Settings:
    settings = Settings.load(getattr(args, "config", None), tenant_id=getattr(args, "tenant", None))
    return settings.replace(embedder=args.embedder) if args.embedder else settings


def run_eval(args: Any) -> int:
    """Recall@K and MRR of hybrid search and of pure-vector and pure-BM25 baselines, per category."""
    settings = _settings(args)
    report = evaluate_locomo(args.file, ks=args.k, conversations=args.conversations, settings=settings,
                             weights=args.weights, show_progress=not args.json or sys.stderr.isatty(),
                             negatives=not args.no_negatives, embedding_cache=args.embedding_cache)
    print(json.dumps(report, ensure_ascii=False) if args.json else format_evaluation(report))
    return 0


def run_tune(args: Any) -> int:
    """Grid-search the weights on some conversations and report them on the held-out ones."""
    settings = _settings(args)
    report = tune_weights(args.file, train=args.train, test=args.test, ks=args.k, step=args.step, settings=settings,
                          show_progress=not args.json or sys.stderr.isatty(), embedding_cache=args.embedding_cache,
                          fixed_priors=getattr(args, "fixed_priors", False))
    print(json.dumps(report, ensure_ascii=False) if args.json else format_tuning(report))
    return 0



def calibration_sets(conversations: Sequence[LocomoConversation]) -> list[CalibrationSet]:
    """LoCoMo conversations as ``measure_background`` reads them: questions, turns, evidence turns."""
    out = []
    for conv in conversations:
        where = {t.dia_id: n for n, t in enumerate(conv.turns)}
        out.append(CalibrationSet([q.question for q in conv.questions], [t.content for t in conv.turns],
                                  [[where[e] for e in q.evidence] for q in conv.questions]))
    return out


def run_calibrate(args: Any) -> int:
    """Measure an embedder's background cosine distribution (unrelated question and turn pairs) for
    ``Settings.vector_calibration`` or ``portamem.read.calibration.CALIBRATIONS``."""
    settings = _settings(args)
    cached = CachedEmbedder(get_embedder(settings.embedder), args.embedding_cache)
    report = measure_background(calibration_sets(load_locomo(args.file)), cached, use=args.conversations)
    cached.save()
    print(json.dumps(report, ensure_ascii=False, indent=2))
    print(f"# set vector_calibration = {{mean = {report['mean']}, std = {report['std']}}} for {report['embedder']}",
          file=sys.stderr)
    return 0
