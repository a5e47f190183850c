"""Fit the same-thing model of ``portamem.language.sameness`` on the scenario suite's dev half, and
report it, unchanged, on the other splits.

Each conversation is played into a fresh store as ``portamem eval scenarios`` plays it; its user's
statement memories (semantic and working, of the user's turns, whatever their status) are paired, each
newer one with the older ones among its ``--neighbours`` nearest (as the write path's review meets
them). A pair is **the same thing changed** when a question of the conversation about a changed value
finds the old value in the older memory (and not the current one) and the current value in the newer;
a pair where both hold a value of one question (a repeat, or two steps of one chain) is left out; every
other pair is a pair about different things.

    python benchmarks/fit_sameness.py --embedding-cache /tmp/emb-cache.npz

prints the standardisation, weights and threshold to paste into ``sameness.py`` (``--write`` puts them
there), then precision and recall at that threshold per split. Only ``--fit`` (default dev) is fitted on.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from portamem import Memory
from portamem.config import Settings
from portamem.embedding.embedders import get_embedder
from portamem.language import sameness
from portamem.records import MemoryType, Source
from portamem.scenarios.harness import holds, load_scenarios, play, suite_path
from portamem.scenarios.locomo import CachedEmbedder

_FORMED = ["active", "pending", "superseded"]


def pairs_of(scenario, settings, embedder, neighbours):  # type: ignore[no-untyped-def]
    """(features, label, older text, newer text) of one conversation's statement pairs."""
    path = tempfile.mkdtemp(prefix="portamem-fit-")
    mem = Memory(settings=settings.replace(path=path), embedder=embedder)
    try:
        play(mem, scenario)
        records = [r for r in mem.list_memories(user_id=scenario.user_id, filters={"statuses": _FORMED}, limit=1000)
                   if r.type in (MemoryType.SEMANTIC, MemoryType.WORKING) and r.source is Source.USER]
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)
    records.sort(key=lambda r: r.created_at)
    if len(records) < 2:
        return [], 0
    vectors = embedder.embed([r.content for r in records], kind="passage")
    sims = vectors @ vectors.T
    changed = [q for q in scenario.questions if q.stale]
    out = []
    missed = 0
    for j, newer in enumerate(records):
        older_ix = [i for i in range(j) if records[i].created_at < newer.created_at]
        if not older_ix:
            continue
        near = sorted(older_ix, key=lambda i: -sims[i, j])[:neighbours]
        for i in older_ix:
            older = records[i]
            label = None
            for q in changed:
                if holds(older.content, q.stale) and not holds(older.content, q.answer) \
                        and holds(newer.content, q.answer):
                    label = 1
                elif (holds(older.content, q.stale) or holds(older.content, q.answer)) \
                        and (holds(newer.content, q.stale) or holds(newer.content, q.answer)) and label is None:
                    label = -1  # both hold a value of one question: a repeat or a step of a chain
            if label == -1:
                continue
            if i not in near:
                missed += label == 1
                continue
            pool = [float(sims[k, j]) for k in near if k != i]
            feats = sameness.pair_features(older.content, newer.content, float(sims[i, j]), pool)
            out.append((feats, 1 if label == 1 else 0, older.content, newer.content))
    return out, missed


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 4000) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    w, b = np.zeros(z.shape[1]), 0.0
    pos = max(1.0, y.sum())
    weight = np.where(y == 1, (len(y) - pos) / pos, 1.0)  # the classes weighed equally
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = (p - y) * weight
        w -= 0.05 * (z.T @ g / len(y) + l2 * w / len(y))
        b -= 0.05 * g.mean()
    return mean, scale, w, float(b)


def scores(x: np.ndarray) -> np.ndarray:
    return np.array([sameness.probability(f) for f in x])


def figures(p: np.ndarray, y: np.ndarray, t: float) -> str:
    pred = p >= t
    tp, fp, fn = int((pred & (y == 1)).sum()), int((pred & (y == 0)).sum()), int((~pred & (y == 1)).sum())
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    return f"pairs {len(y)} (same {int(y.sum())}): precision {prec:.3f} ({tp}/{tp + fp}), recall {rec:.3f} ({tp}/{tp + fn})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", default="dev")
    ap.add_argument("--report", default="test,holdout")
    ap.add_argument("--embedding-cache")
    ap.add_argument("--neighbours", type=int, default=8)
    ap.add_argument("--beta", type=float, default=0.5, help="the threshold maximises F-beta on the fitted split")
    ap.add_argument("--write", action="store_true", help="write the fitted constants into sameness.py")
    ap.add_argument("--errors", action="store_true", help="print the fitted split's wrong decisions")
    args = ap.parse_args()
    settings = Settings.load()
    embedder = CachedEmbedder(get_embedder(settings.embedder), args.embedding_cache)

    def data(split: str):  # type: ignore[no-untyped-def]
        source = Path(split) if split.endswith(".jsonl") else suite_path(split)
        rows, missed = [], 0
        for sc in load_scenarios(source, split):
            got, m = pairs_of(sc, settings, embedder, args.neighbours)
            rows += got
            missed += m
        embedder.save()
        x = np.array([r[0] for r in rows], dtype=float)
        y = np.array([r[1] for r in rows], dtype=int)
        return x, y, rows, missed

    x, y, rows, missed = data(args.fit)
    mean, scale, w, b = fit(x, y)
    sameness._MEAN, sameness._SCALE = tuple(float(v) for v in mean), tuple(float(v) for v in scale)
    sameness.WEIGHTS, sameness.BIAS = tuple(float(v) for v in w), b
    p = scores(x)
    best, best_t = -1.0, 0.5
    for t in np.linspace(0.05, 0.99, 95):
        pred = p >= t
        tp, fp, fn = (pred & (y == 1)).sum(), (pred & (y == 0)).sum(), (~pred & (y == 1)).sum()
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f = (1 + args.beta ** 2) * prec * rec / (args.beta ** 2 * prec + rec) if prec + rec else 0.0
        if f > best:
            best, best_t = f, float(t)
    print("weights:", ", ".join(f"{n} {v:+.2f}" for n, v in zip(sameness.FEATURES, w)), f"bias {b:+.2f}")
    print(f"threshold {best_t:.2f} (F{args.beta:g} {best:.3f} on {args.fit})")
    print(f"{args.fit} (fitted): {figures(p, y, best_t)}; same pairs beyond the {args.neighbours} neighbours: {missed}")
    if args.errors:
        for (f, label, older, newer), prob in zip(rows, p):
            if (prob >= best_t) != bool(label):
                print(f"  {'missed' if label else 'wrong'} {prob:.2f}: {older!r} -> {newer!r}")
    for split in [s for s in args.report.split(",") if s]:
        xs, ys, _, m = data(split)
        print(f"{split}: {figures(scores(xs), ys, best_t)}; same pairs beyond the neighbours: {m}")
    if args.write:
        target = Path(sameness.__file__)
        text = target.read_text(encoding="utf-8")

        def tup(v: np.ndarray) -> str:
            return "(" + ", ".join(f"{float(a):.4f}" for a in v) + ")"
        text = re.sub(r"^_MEAN = .*$", f"_MEAN = {tup(mean)}", text, count=1, flags=re.M)
        text = re.sub(r"^_SCALE = .*$", f"_SCALE = {tup(scale)}", text, count=1, flags=re.M)
        text = re.sub(r"^WEIGHTS = .*$", f"WEIGHTS = {tup(w)}", text, count=1, flags=re.M)
        text = re.sub(r"^BIAS = .*$", f"BIAS = {b:.4f}", text, count=1, flags=re.M)
        text = re.sub(r"^THRESHOLD = .*$", f"THRESHOLD = {best_t:.2f}", text, count=1, flags=re.M)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
