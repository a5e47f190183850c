"""A learned guard layer on the default embedder's sentence vectors, measured offline by leaving families out.

The write path already embeds each memory with the default embedder (``multilingual-e5-small-q4``),
so a guard layer on that vector would cost no second embedding: the guard would take the vector
that is passed in. This prototype measures whether such a layer generalises to families of attacks
it never saw better than the n-gram model: a logistic regression (numpy, the classes weighed equal)
on the vector of each text of ``train_guard``'s corpus but the generated ones (a payload alone, a
payload placed in a carrier, an ordinary text), trained again without each family exactly as
``guard_families`` trains the n-gram model, at one threshold: the smallest that flags at most 1 % of
the training corpus's ordinary texts out of fold (5 folds grouped by text). It is reported alone and
or-ed with the guard (rules and the left-out n-gram model), with the false alarms of each on the same
held-out ordinary texts and READMEs. Texts are normalised as the guard reads them and embedded up to
their first 1,000 characters (``CHARS``); the vectors are kept in a cache, built once with
``--embed`` (the engine does about 10 short texts a second on a free core and far fewer long ones:
7,284 texts took 18 minutes on two busy shared cores).

Measured at 3302475 (docs/security.md has the table): left out by goal, the vector layer alone
catches 22.4 % of the 1,519 written attacks (0/2160 users' turns, 5-8/133 web texts and 12-21/140
READMEs flagged); or-ed with the guard 73.5 % as a user's turn and 76.3 % as web content against the
guard's 70.3 % and 73.6 %, for 6-9 web texts flagged instead of 0-4. Not shipped: three points for
3-6 % more false alarms on web text is no clear win at 1 %.

    python benchmarks/guard_vectors.py --embed /tmp/guard_vectors.npz   # the cache
    python benchmarks/guard_vectors.py --cache /tmp/guard_vectors.npz   # the tables (origin, goal)
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import guard_families as gf
from portamem_plugins import guard

EMBEDDER = "multilingual-e5-small-q4"
#: characters of each (normalised) text that are embedded
CHARS = 1000
#: share of the training corpus's ordinary texts (out of fold) the threshold may flag
RATE = 0.01


def key(text: str) -> str:
    return guard.normalize(text).strip()[:CHARS]


def lookup(cache: dict[str, np.ndarray], view: str) -> np.ndarray | None:
    """A normalised text's vector, cut before or after its outer whitespace is stripped."""
    for k in (view.strip()[:CHARS], view[:CHARS]):
        if k in cache:
            return cache[k]
    return None


def needed_texts() -> list[str]:
    """Every text the tables judge or train on, as keys, shortest first."""
    trainer = gf.Trainer(7, 0)
    texts = [t.view.strip()[:CHARS] for t in trainer.corpus.texts]
    texts += [key(a.text) for a in gf.attacks(0) if a.origin != "generated"]
    users, web = gf.held_out_ordinary()
    texts += [key(t) for t in users + web + gf.long_documents()]
    return sorted(dict.fromkeys(t for t in texts if t), key=len)


def embed_cache(path: Path, log=print) -> None:  # type: ignore[no-untyped-def]
    from portamem.embedding.embedders import get_embedder

    texts = needed_texts()
    embedder = get_embedder(EMBEDDER, workers=0)
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    t0 = time.time()
    for i in range(0, len(texts), 32):
        vectors[i:i + 32] = embedder.embed(texts[i:i + 32])
        if i % 1024 == 0:
            log(f"  {i}/{len(texts)} embedded, {time.time() - t0:.0f}s")
    np.savez(path, texts=np.array(texts, dtype=object), vectors=vectors)
    log(f"{len(texts)} texts embedded in {time.time() - t0:.0f}s -> {path}")


def load_cache(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=True) as data:
        return {str(t): v for t, v in zip(data["texts"], data["vectors"])}


def fit(x: np.ndarray, y: np.ndarray, *, l2: float = 1e-4, steps: int = 400, lr: float = 0.05) -> tuple[np.ndarray, float]:
    """Logistic regression by full-batch Adam; both classes weigh the same in the loss."""
    pos = max(1.0, float(y.sum()))
    sw = np.where(y > 0, len(y) / (2 * pos), len(y) / (2 * max(1.0, len(y) - pos)))
    w, b = np.zeros(x.shape[1]), 0.0
    m, v, mb, vb = np.zeros_like(w), np.zeros_like(w), 0.0, 0.0
    for step in range(1, steps + 1):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = (p - y) * sw / len(y)
        gw, gb = x.T @ g + l2 * w, float(g.sum())
        m, v = 0.9 * m + 0.1 * gw, 0.999 * v + 0.001 * gw * gw
        mb, vb = 0.9 * mb + 0.1 * gb, 0.999 * vb + 0.001 * gb * gb
        w -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
        b -= lr * (mb / (1 - 0.9 ** step)) / (math.sqrt(vb / (1 - 0.999 ** step)) + 1e-8)
    return w, b


def detector(cache: dict[str, np.ndarray]) -> Callable[[gf.Trainer], gf.Extra]:
    """The vector layer for ``guard_families.run``: trained without the dropped groups, at the 1 % threshold."""

    def build(trainer: gf.Trainer) -> gf.Extra:
        found = [(t, lookup(cache, t.view)) for t in trainer.corpus.texts if not t.generated]
        rows = [t for t, v in found if v is not None]
        x = np.stack([v for _, v in found if v is not None]).astype(np.float64)
        y = np.array([float(t.attack) for t in rows])
        groups = np.array([t.group for t in rows])
        # the threshold: out-of-fold scores of the ordinary texts, 5 folds grouped by text
        ids = sorted(set(groups.tolist()))
        random.Random(trainer.seed).shuffle(ids)
        fold_of = {g: i % 5 for i, g in enumerate(ids)}
        folds = np.array([fold_of[g] for g in groups])
        oof = np.zeros(len(y))
        for k in range(5):
            w, b = fit(x[folds != k], y[folds != k])
            oof[folds == k] = x[folds == k] @ w + b
        ordinary = np.sort(oof[y == 0])[::-1]
        threshold = float(np.nextafter(ordinary[int(RATE * len(ordinary))], np.inf))

        def extra(drop: set[int]) -> Callable[[list[str]], list[bool]]:
            keep = ~np.isin(groups, list(drop)) if drop else np.ones(len(y), dtype=bool)
            w, b = fit(x[keep], y[keep])

            def flags(texts: list[str]) -> list[bool]:
                found = [lookup(cache, guard.normalize(t)) for t in texts]
                if any(v is None for v in found):
                    raise KeyError("a text is not in the vector cache: build it again with --embed")
                vs = np.stack(found).astype(np.float64)  # type: ignore[arg-type]
                return [bool(s >= threshold) for s in vs @ w + b]

            return flags

        return extra

    return build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embed", type=Path, help="embed every needed text into this cache (.npz) and stop")
    ap.add_argument("--cache", type=Path, help="the cache made by --embed")
    ap.add_argument("--axes", nargs="+", choices=gf.AXES, default=["origin", "goal"])
    args = ap.parse_args(argv)
    if args.embed:
        embed_cache(args.embed)
        return 0
    if not args.cache:
        ap.error("--cache or --embed is needed")
    tables, base = gf.run(args.axes, extra=detector(load_cache(args.cache)))
    gf.print_tables(tables, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
