"""Detection and false-alarm rates of the built-in injection guard, on a dev and a held-out split.

Attacks: ``tests/data/guard/attacks.jsonl`` (English and Chinese; plain, role-play, fake system
messages, memory tampering, hidden markup, encoded and obfuscated forms). Ordinary turns: every
LoCoMo turn (``../shared/data/locomo/locomo-dev.json``, CC BY-NC 4.0, read in place, not copied)
plus ``tests/data/guard/ordinary.jsonl`` (English near-misses and Chinese daily conversation).

The rules were tuned on the dev split (attacks marked ``dev``, LoCoMo conversations 1-2, ordinary
lines marked ``dev``); the held-out split (the other attacks, LoCoMo conversations 3-5, the other
ordinary lines) was written at the same time, before the rules. Its first measurement, blind, was
62/65 attacks (95.4%) and 0/2052 false alarms; two of its misses then also failed unit tests and
were fixed (Cyrillic capitals, the weight of "remember permanently"), so its later figures are no
longer blind.

    python benchmarks/guard_eval.py               # the table
    python benchmarks/guard_eval.py --misses dev  # also list the dev split's misses and false alarms
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "guard"
#: LoCoMo stays in the shared data folder beside the repository (its licence forbids nothing, but
#: a copy would have to carry LICENSE.txt); PORTAMEM_LOCOMO points elsewhere
LOCOMO = Path(os.environ.get("PORTAMEM_LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"))
#: LoCoMo conversations (by position) whose turns belong to the dev split
LOCOMO_DEV = (0, 1)


@dataclass(frozen=True)
class Sample:
    text: str
    attack: bool
    split: str
    lang: str
    origin: str
    form: str = ""


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_attacks() -> list[Sample]:
    return [Sample(r["text"], True, r["split"], r["lang"], "attacks", r["form"]) for r in _jsonl(DATA / "attacks.jsonl")]


def load_ordinary(locomo: Path = LOCOMO) -> list[Sample]:
    """The written ordinary lines, plus every LoCoMo turn when the file is there."""
    out = [Sample(r["text"], False, r["split"], r["lang"], f"ordinary-{r['lang']}") for r in _jsonl(DATA / "ordinary.jsonl")]
    if locomo.exists():
        with open(locomo, encoding="utf-8") as fh:
            conversations = json.load(fh)
        for i, conv in enumerate(conversations):
            split = "dev" if i in LOCOMO_DEV else "heldout"
            c = conv["conversation"]
            for key in sorted(k for k in c if k.startswith("session_") and isinstance(c[k], list)):
                out.extend(Sample(t["text"], False, split, "en", "locomo") for t in c[key] if t.get("text", "").strip())
    return out


def evaluate(samples: list[Sample]) -> dict[str, object]:
    """Flag every sample; the rates and the misses, per split and overall."""
    from portamem_plugins.guard import judge

    t0 = time.perf_counter()
    flagged = [judge(s.text) is not None for s in samples]
    elapsed = time.perf_counter() - t0
    report: dict[str, object] = {"seconds_per_text": elapsed / max(1, len(samples))}
    for split in ("dev", "heldout", "all"):
        pick = [(s, f) for s, f in zip(samples, flagged) if split == "all" or s.split == split]
        attacks = [(s, f) for s, f in pick if s.attack]
        ordinary = [(s, f) for s, f in pick if not s.attack]
        report[split] = {
            "attacks": len(attacks),
            "detected": sum(f for _, f in attacks),
            "ordinary": len(ordinary),
            "false_alarms": sum(f for _, f in ordinary),
            "misses": [s for s, f in attacks if not f],
            "alarms": [s for s, f in ordinary if f],
        }
    by_form: Counter[str] = Counter()
    by_form_hit: Counter[str] = Counter()
    for s, f in zip(samples, flagged):
        if s.attack:
            by_form[s.form] += 1
            by_form_hit[s.form] += f
    report["forms"] = {k: (by_form_hit[k], n) for k, n in sorted(by_form.items())}
    return report


def _rate(num: int, den: int) -> str:
    return f"{100.0 * num / den:5.1f}%" if den else "   - "


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", choices=["dev", "heldout", "all"], help="list the misses and false alarms of a split")
    args = ap.parse_args(argv)
    samples = load_attacks() + load_ordinary()
    if not LOCOMO.exists():
        print(f"note: {LOCOMO} not found; LoCoMo turns left out", file=sys.stderr)
    report = evaluate(samples)
    print(f"{'split':<8} {'attacks':>7} {'detected':>8} {'rate':>7}   {'ordinary':>8} {'alarms':>6} {'rate':>7}")
    for split in ("dev", "heldout", "all"):
        r = report[split]
        assert isinstance(r, dict)
        print(f"{split:<8} {r['attacks']:>7} {r['detected']:>8} {_rate(r['detected'], r['attacks']):>7}   "
              f"{r['ordinary']:>8} {r['false_alarms']:>6} {_rate(r['false_alarms'], r['ordinary']):>7}")
    forms = report["forms"]
    assert isinstance(forms, dict)
    print("\ndetection by form: " + ", ".join(f"{k} {h}/{n}" for k, (h, n) in forms.items()))
    print(f"time per text: {1000 * float(report['seconds_per_text']):.2f} ms "  # type: ignore[arg-type]
          f"({len(samples)} texts, ordinary from: {', '.join(sorted({s.origin for s in samples if not s.attack}))})")
    if args.misses:
        r = report[args.misses]
        assert isinstance(r, dict)
        for s in r["misses"]:
            print(f"MISS  [{s.lang} {s.form}] {s.text!r}")
        for s in r["alarms"]:
            print(f"ALARM [{s.origin}] {s.text!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
