"""Train the guard's learned injection model (``portamem_plugins/injection_model.npz``).

Training data, English and Chinese:

- ``tests/data/guard/train_attacks.jsonl``: injection attempts written for training, by kind and
  style (override, role, leak, setup_leak, exfil, tool, agent_action, context_attack, respond,
  memory, data_poison, fake_system, hidden_html, encoded, task, phish, format, translate_hijack;
  conditional, polite, passive, steps, authority, question, colloquial, mixed_lang);
- ``tests/data/guard/train_ordinary.jsonl``: ordinary text, by kind: users' own requests to their
  assistant (including "ignore my last message", "from now on call me Sam", "send an email to my
  landlord"), daily conversation, memories kept about a user ("The user lives in Berlin."), web
  pages, e-mails, code, tool output, orders to staff, text about AI assistants, talk about security;
- ``guard_corpus.py``: texts generated from written parts, 1,500 per language and class;
- the dev splits of the guard's evaluation corpus (``attacks.jsonl`` but its hidden and encoded
  forms, ``indirect_attacks.jsonl`` with their ``carriers.jsonl``, ``hard_negatives.jsonl``,
  ``ordinary.jsonl``) and LoCoMo's dev conversations 1-2 (read in place). Their held-out and test
  splits and LoCoMo's conversations 3-5 are never trained on;
- the first fresh round (``fresh.jsonl``), after it was measured blind on the first model (66a766b).
  The second and third (``fresh2.jsonl``, ``fresh3.jsonl``) were written after this model was frozen
  and are never trained on (``tests/plugins/test_guard_families.py`` checks it).

Each attack is used alone and placed at the start, in the middle or at the end of an ordinary web
page, e-mail or tool result of its language. Examples are the model's windows (``injection_model.
windows``): every window of an ordinary text is a negative; of a text with an attack placed in it,
the windows that hold most of the attack and are mostly attack are positives, those that hold
none of it negatives.

The model is a logistic regression on the hashed features (numpy, minibatch Adam, L2, the classes
weighed equal); the shipped weights are the mean of the five fold models and the one trained on
everything (steadier than any one of them). The thresholds come from 5-fold cross-validation,
grouped by source text: the smallest
probability at which at most ``--data-alarms`` (1 %) of all out-of-fold ordinary texts judged as web
content, and at most ``--web-alarms`` (2.5 %) of the web pages, e-mails, code and tool output (hard
negatives, written to share the attacks' words: AI assistants, links, passwords, orders to staff),
would be flagged is the data threshold; at most ``--user-alarms`` (0.5 %) of the users' own turns
(requests, daily conversation, memories about a user, LoCoMo), the user threshold. The report gives
the out-of-fold figures of the model alone and of the guard's rules or the model, and a table of
operating points. Deterministic for a given seed (about 2 minutes on two cores).

    python benchmarks/train_guard.py              # cross-validate, train, write the .npz
    python benchmarks/train_guard.py --dry-run    # the figures only
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "guard"
OUT = ROOT / "plugins" / "portamem_plugins" / "injection_model.npz"
sys.path.insert(0, str(HERE))

import guard_corpus  # noqa: E402
import guard_eval  # noqa: E402

from portamem_plugins import injection_model as im  # noqa: E402
from portamem_plugins.guard import normalize  # noqa: E402


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class Text:
    """A training text (normalised), its label, and where an attack placed in a carrier sits."""

    view: str
    attack: bool
    lang: str
    source: str  # "user" or "web": how an ordinary text is judged when the thresholds are chosen
    group: int
    span: tuple[int, int] | None = None
    kind: str = ""
    #: made by ``guard_corpus`` from parts: trained on, but not used to choose thresholds or to report
    generated: bool = False


@dataclass
class Corpus:
    texts: list[Text] = field(default_factory=list)

    def add(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.texts.append(Text(*args, **kwargs))


def _sentences_of(view: str) -> list[int]:
    """Offsets where a payload may go in the middle of a carrier: after a line or sentence end."""
    return [i + 1 for i, ch in enumerate(view[:-1]) if ch in "\n.!?。！？" and view[i + 1] in " \n" or ch == "\n"]


def build(seed: int, generated: int) -> Corpus:
    rng = random.Random(seed)
    attacks: list[tuple[str, str, str]] = []  # (text, lang, kind)
    ordinary: list[tuple[str, str, str, str]] = []  # (text, lang, source, kind)
    carriers: dict[str, list[str]] = {"en": [], "zh": []}
    for r in _jsonl(DATA / "train_attacks.jsonl"):
        attacks.append((r["text"], r["lang"], r["kind"]))
    for r in _jsonl(DATA / "train_ordinary.jsonl"):
        ordinary.append((r["text"], r["lang"], r["source"], r["kind"]))
        if r["kind"] in ("web", "email", "tool_output"):
            carriers[r["lang"]].append(r["text"])
    for r in _jsonl(DATA / "attacks.jsonl"):
        # hidden and encoded payloads are read by the guard's decoding views, not in the visible text
        if r["split"] == "dev" and r["form"] not in ("hidden_markup", "encoded"):
            attacks.append((r["text"], r["lang"], "direct:" + r["form"]))
    for r in _jsonl(DATA / "indirect_attacks.jsonl"):
        if r["split"] == "dev":
            attacks.append((r["text"], r["lang"], "indirect:" + r["shape"]))
    for r in _jsonl(DATA / "carriers.jsonl"):
        if r["split"] == "dev":
            text = r["text"].replace("{attack}", "").strip()
            ordinary.append((text, r["lang"], "web", "carrier"))
            carriers[r["lang"]].append(text)
    for r in _jsonl(DATA / "hard_negatives.jsonl"):
        if r["split"] == "dev":
            ordinary.append((r["text"], r["lang"], r["source"], "hard:" + r["shape"]))
    for r in _jsonl(DATA / "ordinary.jsonl"):
        if r["split"] == "dev":
            ordinary.append((r["text"], r["lang"], "user", "daily"))
    for s in guard_eval.load_ordinary():
        if s.origin == "locomo" and s.split == "dev":
            ordinary.append((s.text, "en", "user", "locomo"))
    # the first fresh round, measured blind on the model of 66a766b, then trained on
    for r in _jsonl(DATA / "fresh.jsonl"):
        if r["type"] == "attack":
            attacks.append((r["text"], r["lang"], "fresh1"))
        elif r["type"] == "ordinary":
            ordinary.append((r["text"], r["lang"], r["source"], "fresh1"))
        else:
            text = r["text"].replace("{attack}", "").strip()
            ordinary.append((text, r["lang"], "web", "fresh1"))
            carriers[r["lang"]].append(text)

    for text, lang, source in guard_corpus.ordinary(random.Random(seed + 1), generated):
        ordinary.append((text, lang, source, "generated"))
    for text, lang in guard_corpus.attacks(random.Random(seed + 2), generated):
        attacks.append((text, lang, "generated"))

    corpus = Corpus()
    group = 0
    for text, lang, source, kind in ordinary:
        corpus.add(normalize(text), False, lang, source, group, kind=kind, generated=kind == "generated")
        group += 1
    for text, lang, kind in attacks:
        payload = normalize(text).strip()
        corpus.add(payload, True, lang, "user", group, (0, len(payload)), kind, kind == "generated")
        carrier = normalize(rng.choice(carriers[lang])).strip()
        where = rng.random()
        if where < 0.5:
            head, tail = carrier + "\n", ""
        elif where < 0.7:
            head, tail = "", "\n" + carrier
        else:
            cuts = _sentences_of(carrier) or [len(carrier)]
            cut = rng.choice(cuts)
            head, tail = carrier[:cut].rstrip() + " ", " " + carrier[cut:].lstrip()
        corpus.add(head + payload + tail, True, lang, "web", group, (len(head), len(head) + len(payload)), kind,
                   kind == "generated")
        group += 1
    return corpus


# ---------------------------------------------------------------------- examples and features
def examples(corpus: Corpus, groups: set[int] | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """The windows of the texts (of ``groups``, or all) as (features, label); duplicates dropped."""
    feats: list[tuple[np.ndarray, np.ndarray]] = []
    labels: list[int] = []
    seen: set[tuple[str, int]] = set()

    def add(view: str, label: int) -> None:
        if view.strip() and (view, label) not in seen:
            seen.add((view, label))
            feats.append(im.example_features(view))
            labels.append(label)

    for t in corpus.texts:
        if groups is not None and t.group not in groups:
            continue
        if not t.attack:
            for a, b in im.windows(t.view):
                add(t.view[a:b], 0)
            continue
        assert t.span is not None
        s, e = t.span
        add(t.view[s:e], 1)
        if (s, e) == (0, len(t.view)):
            continue
        for a, b in im.windows(t.view):
            overlap = max(0, min(b, e) - max(a, s))
            # a positive window is mostly the attack: were it mostly carrier, the carrier's own
            # words (an e-mail's greeting, a Q&A block) would be learnt as signs of an attack
            if overlap >= 0.7 * (e - s) and overlap >= 0.5 * (b - a):
                add(t.view[a:b], 1)
            elif overlap == 0:
                add(t.view[a:b], 0)
    return feats, np.array(labels, dtype=np.float64)


def _csr(feats: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.zeros(len(feats) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(i) for i, _ in feats])
    return indptr, np.concatenate([i for i, _ in feats]), np.concatenate([v for _, v in feats]).astype(np.float64)


def fit(feats: list[tuple[np.ndarray, np.ndarray]], y: np.ndarray, *, l2: float, epochs: int, lr: float,
        seed: int) -> tuple[np.ndarray, float]:
    """Logistic regression by minibatch Adam; both classes weigh the same in the loss."""
    dim = 1 << im.BITS
    indptr, indices, data = _csr(feats)
    n = len(y)
    pos = max(1.0, float(y.sum()))
    sample_w = np.where(y > 0, n / (2 * pos), n / (2 * max(1.0, n - pos)))
    w = np.zeros(dim)
    b = 0.0
    m_w, v_w = np.zeros(dim), np.zeros(dim)
    m_b = v_b = 0.0
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    rng = np.random.default_rng(seed)
    step = 0
    batch = 128
    for _ in range(epochs):
        order = rng.permutation(n)
        for k in range(0, n, batch):
            rows = order[k:k + batch]
            starts, ends = indptr[rows], indptr[rows + 1]
            lens = ends - starts
            idx = np.concatenate([indices[s:e] for s, e in zip(starts, ends)])
            val = np.concatenate([data[s:e] for s, e in zip(starts, ends)])
            row_of = np.repeat(np.arange(len(rows)), lens)
            z = np.bincount(row_of, weights=val * w[idx], minlength=len(rows)) + b
            p = 1.0 / (1.0 + np.exp(-z))
            g = (p - y[rows]) * sample_w[rows] / len(rows)
            grad = np.bincount(idx, weights=val * g[row_of], minlength=dim)
            touched = np.unique(idx)
            grad[touched] += l2 * w[touched]
            gb = float(g.sum())
            step += 1
            m_w[touched] = beta1 * m_w[touched] + (1 - beta1) * grad[touched]
            v_w[touched] = beta2 * v_w[touched] + (1 - beta2) * grad[touched] ** 2
            m_b = beta1 * m_b + (1 - beta1) * gb
            v_b = beta2 * v_b + (1 - beta2) * gb * gb
            corr1, corr2 = 1 - beta1 ** step, 1 - beta2 ** step
            w[touched] -= lr * (m_w[touched] / corr1) / (np.sqrt(v_w[touched] / corr2) + eps)
            b -= lr * (m_b / corr1) / (math.sqrt(v_b / corr2) + eps)
    return w, b


def quantise(w: np.ndarray) -> tuple[np.ndarray, float]:
    scale = float(np.abs(w).max()) / 127 or 1.0
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale


def _probabilities(model: im.Model, views: list[str]) -> np.ndarray:
    out = []
    for v in views:
        best = model.best_window(v)
        out.append(0.0 if best is None else best.probability)
    return np.array(out)


def _threshold(scores: np.ndarray, max_rate: float) -> float:
    """The smallest probability that flags at most ``max_rate`` of ``scores`` (strictly above the rest)."""
    ranked = np.sort(scores)[::-1]
    allowed = int(math.floor(max_rate * len(ranked)))
    cut = ranked[allowed] if allowed < len(ranked) else 0.0
    return float(min(0.999, math.nextafter(cut, 1.0)))


def _rules_verdicts(corpus: Corpus, pick: list[int]) -> tuple[dict[int, bool], dict[int, bool]]:
    """Whether the guard without its learned model quarantines each text, as a user's turn and as web content."""
    from portamem_plugins import guard

    original = guard.injection_model.load
    guard.injection_model.load = lambda: None  # type: ignore[assignment]
    try:
        user = {i: guard.judge(corpus.texts[i].view, "user") is not None for i in pick}
        web = {i: guard.judge(corpus.texts[i].view, "web") is not None for i in pick}
    finally:
        guard.injection_model.load = original  # type: ignore[assignment]
    return user, web


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """The chance that an attack scores above an ordinary text."""
    ranks = np.argsort(np.argsort(np.concatenate([pos, neg]))) + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--generated", type=int, default=1500, help="generated texts per language and class")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--l2", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--user-alarms", type=float, default=0.005,
                    help="share of the out-of-fold users' own turns the user threshold may flag")
    ap.add_argument("--data-alarms", type=float, default=0.01,
                    help="share of all out-of-fold ordinary texts, judged as web content, the data threshold may flag")
    ap.add_argument("--web-alarms", type=float, default=0.025,
                    help="share of the out-of-fold web pages, e-mails, code and tool output (written to look like "
                         "attacks: about AI assistants, links, passwords, orders to staff) the data threshold may flag")
    ap.add_argument("--no-bag", dest="bag", action="store_false",
                    help="ship the model trained on everything instead of the mean of it and the fold models")
    ap.add_argument("--dry-run", action="store_true", help="report, do not write the model")
    args = ap.parse_args(argv)
    t0 = time.time()
    corpus = build(args.seed, args.generated)
    groups = sorted({t.group for t in corpus.texts})
    rng = random.Random(args.seed)
    rng.shuffle(groups)
    folds = [set(groups[i::args.folds]) for i in range(args.folds)]
    n_att = sum(t.attack for t in corpus.texts)
    print(f"{len(corpus.texts)} texts ({n_att} with an attack, {len(corpus.texts) - n_att} ordinary), "
          f"{len(groups)} groups, {args.folds} folds")

    oof = np.zeros(len(corpus.texts))
    fold_models: list[tuple[np.ndarray, float]] = []
    for k, held in enumerate(folds):
        train_groups = set(groups) - held
        feats, y = examples(corpus, train_groups)
        w, b = fit(feats, y, l2=args.l2, epochs=args.epochs, lr=args.lr, seed=args.seed + k)
        fold_models.append((w, b))
        model = im.Model(w.astype(np.float32), b, 1.0, 1.0)
        pick = [i for i, t in enumerate(corpus.texts) if t.group in held]
        oof[pick] = _probabilities(model, [corpus.texts[i].view for i in pick])
        print(f"  fold {k + 1}: {len(y)} windows, {time.time() - t0:.0f}s")

    feats, y = examples(corpus)
    w, b = fit(feats, y, l2=args.l2, epochs=args.epochs, lr=args.lr, seed=args.seed)
    if args.bag:
        # the mean of the fold models and the full one: one linear model, steadier than any of them
        w = np.mean([w, *(fw for fw, _ in fold_models)], axis=0)
        b = float(np.mean([b, *(fb for _, fb in fold_models)]))
    q, scale = quantise(w)

    ordinary = [i for i, t in enumerate(corpus.texts) if not t.attack and not t.generated]
    users = [i for i in ordinary if corpus.texts[i].source == "user"]
    web = [i for i in ordinary if corpus.texts[i].source == "web"]
    data_threshold = max(_threshold(oof[web], args.web_alarms), _threshold(oof[ordinary], args.data_alarms))
    user_threshold = max(data_threshold, _threshold(oof[users], args.user_alarms))

    written = [i for i, t in enumerate(corpus.texts) if t.attack and not t.generated]
    alone = [i for i in written if corpus.texts[i].span == (0, len(corpus.texts[i].view))]
    placed = [i for i in written if corpus.texts[i].span != (0, len(corpus.texts[i].view))]
    print(f"\nthresholds: web and tool content {data_threshold:.3f}, users' own turns {user_threshold:.3f}")
    print("out of fold (model alone):")
    for name, pick, thr in (("attacks alone, as a user's turn", alone, user_threshold),
                            ("attacks alone, as web content", alone, data_threshold),
                            ("attacks in a carrier, as web content", placed, data_threshold)):
        hit = int((oof[pick] >= thr).sum())
        print(f"  {name:<38} {hit}/{len(pick)} ({100 * hit / len(pick):.1f}%)")
    for name, pick, thr in (("ordinary, users' own turns", users, user_threshold),
                            ("ordinary web, e-mail, code", web, data_threshold),
                            ("ordinary, all as web content", ordinary, data_threshold)):
        hit = int((oof[pick] >= thr).sum())
        print(f"  false alarms, {name:<28} {hit}/{len(pick)}")
    print(f"  AUC: attacks alone vs ordinary {_auc(oof[alone], oof[ordinary]):.4f}, "
          f"all written attacks vs ordinary {_auc(oof[written], oof[ordinary]):.4f}")
    rules_user, rules_web = _rules_verdicts(corpus, written + ordinary)
    print("out of fold, the guard's rules or the model:")
    for name, pick, rules, thr in (("attacks alone, as a user's turn", alone, rules_user, user_threshold),
                                   ("attacks alone, as web content", alone, rules_web, data_threshold),
                                   ("attacks in a carrier, as web content", placed, rules_web, data_threshold),
                                   ("false alarms, users' own turns", users, rules_user, user_threshold),
                                   ("false alarms, all ordinary as web content", ordinary, rules_web, data_threshold)):
        hit = sum(rules[i] or oof[i] >= thr for i in pick)
        only_rules = sum(rules[i] for i in pick)
        print(f"  {name:<42} {hit}/{len(pick)} ({100 * hit / len(pick):.1f}%; rules alone {only_rules})")
    print("operating points (model alone, out of fold): threshold, attacks alone, in a carrier; false alarms "
          "users' turns, web/e-mail/code, all as web")
    for thr in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        cells = [f"{100 * float((oof[p] >= thr).mean()):5.1f}%" for p in (alone, placed, users, web, ordinary)]
        print(f"  {thr:.2f}  " + "  ".join(cells))
    kinds: dict[str, list[int]] = {}
    for i in alone:
        kinds.setdefault(corpus.texts[i].kind.split(":")[0] + ":" + corpus.texts[i].lang, []).append(i)
    print("  by kind (alone, user threshold): " + ", ".join(
        f"{k} {int((oof[v] >= user_threshold).sum())}/{len(v)}" for k, v in sorted(kinds.items())))
    print(f"weights: {int((q != 0).sum())} of {len(q)} buckets non-zero, scale {scale:.5f}, bias {b:.3f}")
    if not args.dry_run:
        np.savez_compressed(OUT, weights=q, scale=np.float64(scale), bias=np.float64(b),
                            user_threshold=np.float64(user_threshold), data_threshold=np.float64(data_threshold),
                            bits=np.int64(im.BITS), ngrams=np.array(im.NGRAMS, dtype=np.int64))
        print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KiB)")
    print(f"{time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
