"""Measure the packaged embedders' hubness references into the package (``portamem/read/hubness``).

A search corrects each cosine by the passage's nearness to questions in general, measured on the
packaged background set (``portamem.read.calibration.Hubness``). Embedding that set costs 0.6-4 s
of a fresh process's first search; the references written here are read instead when the model's
name, version and dimension match. ``tests/core/test_calibration.py`` recomputes them and checks
they still match. Rerun after a change of the background set or of a packaged model's version:

    python benchmarks/hubness_reference.py                       # every packaged model this machine has
    python benchmarks/hubness_reference.py multilingual-e5-small-q4
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from portamem.embedding.embedders import get_embedder  # noqa: E402
from portamem.read import calibration  # noqa: E402

#: the registered models that ship a reference (null-hash is a near-free function: measured at first use)
PACKAGED = ("multilingual-e5-small-q4", "multilingual-e5-small-int8", "use-multilingual-v3", "all-minilm-l6-v2")
OUT = Path(calibration.__file__).parent / calibration.SHIPPED_HUBNESS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=list(PACKAGED))
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    for name in args.models:
        try:
            embedder = get_embedder(name, workers=0)
            hub = calibration.measure_hubness(embedder)
        except Exception as exc:  # noqa: BLE001 - a model this machine lacks is skipped, and said so
            print(f"{name:28} skipped: {type(exc).__name__}: {str(exc)[:100]}")
            continue
        calibration.save_hubness(OUT / f"{name}.npz", embedder, hub)
        print(f"{name:28} version {embedder.version}: passage mean {hub.passage_mean:.4f}, "
              f"Chinese {hub.cjk_passage_mean}, written to {OUT / (name + '.npz')}")


if __name__ == "__main__":
    main()
