"""The guard's third fresh round: three families in both languages, and no training on the later fresh rounds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
DATA = BENCHMARKS.parent / "tests" / "data" / "guard"


def _load(name: str):  # type: ignore[no-untyped-def]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _rows(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_the_third_round_holds_three_families_in_both_languages() -> None:
    rows = _rows("fresh3.jsonl")
    attacks = [r for r in rows if r["type"] == "attack"]
    for family in ("report_style", "long_document", "user_fact"):
        mine = [r for r in attacks if r["family"] == family]
        assert len(mine) >= 40, family
        assert {r["lang"] for r in mine} == {"en", "zh"}
        assert all(r["goal"] and r["carrier"] for r in mine)
    negatives = [r for r in rows if r["type"] == "ordinary"]
    assert {r["family"] for r in negatives} == {"report_style", "user_fact"}
    assert sum(r["source"] == "user" for r in negatives) >= 30
    for r in (r for r in rows if r["type"] == "carrier"):
        # the payload goes in the middle of 300-800 words (590 or more Chinese characters)
        head, tail = r["text"].split("{attack}")
        size = len(r["text"].split()) if r["lang"] == "en" else len(r["text"])
        assert (300 <= size <= 800) if r["lang"] == "en" else size >= 550
        assert 0.25 < len(head) / (len(head) + len(tail)) < 0.75
    texts = [r["text"] for r in rows]
    assert len(texts) == len(set(texts))


def test_the_third_round_keeps_its_families_in_the_evaluation() -> None:
    ev = _load("guard_eval")
    attacks, ordinary = ev.load_fresh("3")
    assert {s.family for s in attacks} == {"report_style", "long_document", "user_fact"}
    placed = [s for s in attacks if s.carrier == "carrier"]
    assert placed and all(len(s.text) > 550 for s in placed)
    assert {s.family for s in ordinary if s.form == "carrier"} == {"long_document"}


def test_the_model_never_trains_on_the_later_fresh_rounds() -> None:
    train_guard = _load("train_guard")
    from portamem_plugins.guard import normalize

    corpus = train_guard.build(7, 0)
    views = [t.view for t in corpus.texts]
    for name in ("fresh2.jsonl", "fresh3.jsonl"):
        for r in _rows(name):
            text = normalize(r["text"].replace("{attack}", "")).strip()
            # a payload may be placed in a carrier, so look for it inside every training text
            assert not any(text in v for v in views), (name, r["text"][:60])
