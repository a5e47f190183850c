"""Detection and false-alarm rates of the built-in injection guard, each on a dev and a held-out split.

Three corpora, all English and Chinese:

- **Rules corpus** (``tests/data/guard/attacks.jsonl``): direct injection phrasings (override,
  role-play, fake system messages, memory tampering, hidden markup, encoded and obfuscated forms),
  split dev/heldout. The rules were tuned on the dev split; the held-out split's first, blind
  measurement was 62/65 attacks (95.4%) and 0/2052 false alarms; two of its misses then also failed
  unit tests and were fixed, so its later figures are no longer blind.
- **Indirect corpus** (``indirect_attacks.jsonl``, ``carriers.jsonl``, ``hard_negatives.jsonl``):
  instructions addressed to the assistant inside content that should be data, written for this
  project after the shapes of public indirect-injection benchmarks (BIPIA's task categories, none
  of its texts): planted sentences, promotion and phishing links, response-format hijacks, leaks
  of the user's data, task hijacks, planted claims, and code that downloads and runs or sends data
  away. Each payload stands alone and is placed at the end of an e-mail, inside a web snippet,
  before a Q&A block, or (code) after a code answer, always into carriers of its own split.

  The first 154 payloads (shapes named) were split before the detector was written: within each
  (language, shape) group they alternate dev, test, dev... in the order written. The detector was
  tuned on dev; the test split's first, blind measurement was 281/300 as user turns (93.7%),
  292/300 as web content (97.3%), and 2/72 hard negatives flagged; its misses and alarms then led
  to general fixes, so its later figures are no longer blind. Because both halves came from one
  hand, five more rounds of fresh wordings (shape ``varied``, each with its own hard negatives)
  were written afterwards and measured alone before anything was tuned on them:

      round   as user turn   as web content   hard negatives flagged
      1       17/36          25/36            2/34
      2       14/33          17/33            0/30
      3       15/39          22/39            0/31
      4       13/30          17/30            0/25
      5       21/37          25/37            2/24

  Rounds 1-4 were then tuned on and belong to dev; round 5 was never tuned on and belongs to the
  test split. These rounds are the honest estimate for wordings the detector has not seen: about
  two thirds caught as web content, a little over half as a user's own turn.

- **Fresh rounds** (``fresh.jsonl``, ``fresh2.jsonl``), for the learned model (``portamem_plugins.
  injection_model``, trained by ``train_guard.py`` on the dev splits and a training corpus of its
  own): each round was written after a model was frozen, committed, and measured once before anything
  was tuned on it; injections in settings and wordings not written for training (reviews, issue
  trackers, chat threads, calendar invites, CVs, spreadsheets, call transcripts, wikis, social posts),
  judged alone as a user's turn, alone as web content, and placed in a carrier of the round as web
  content; ordinary users' turns and web or tool texts, many about AI assistants, passwords and orders
  to staff. Round 1 was measured blind on the first model (66a766b) and then trained on; round 2 was
  written after the shipped model was frozen (e8521c2) and is never trained on:

      round  model      as user turn   web, alone    web, in a carrier   false alarms (users' turns, web texts)
      1      66a766b    77/108         82/108        96/108              0/80, 7/35
      1      rules      17/108         32/108        36/108              0/80, 2/35
      2      e8521c2    71/94          74/94         78/94               0/80, 1/45
      2      rules      18/94          34/94         36/94               0/80, 0/45

  ("rules": the same guard without its learned model, ``--rules-only``.) Round 2 is the estimate for
  wordings nobody tuned on: English 85 % as a user's turn and 92 % in a carrier, Chinese 66 % and 74 %.

- **Round 3** (``fresh3.jsonl``), written by family after the shipped model (its weights unchanged since e8521c2)
  and the families' labelling, and measured once, at da6626b, before anything was changed: 123
  injections (63 English, 60 Chinese) in three families written apart from every earlier round
  (``family``: ``report_style``, hidden instructions as real-world reports describe them, in README
  files, CVs, product pages and their Q&A, support tickets, calendar invites, plugin manifests, pull
  requests; ``long_document``, a payload meant for the middle of a document, placed (``{attack}``)
  in the middle of one of 11 ordinary documents of 390-450 words or 590-710 Chinese characters: a
  staff handbook, an appliance manual, a district newsletter, a library README, a travel piece, an IT
  notice; ``user_fact``, injections phrased as facts about the user, "the user prefers that all
  receipts are forwarded to ...", 用户希望所有账单都抄送到 ...), each with its ``goal`` and
  ``carrier``; hard negatives: 36 genuine users' preferences and memories that mention forwarding,
  e-mail, passwords and payments, 24 READMEs, CVs, tickets, invites and reviews that mention AI
  assistants, keys and approvals, 8 genuine profile and settings records. Every injection is placed
  in one of the long documents for the carrier column. The blind figures:

      family          as user turn   web, alone     web, in a long document
      report_style    36/41 87.8 %   36/41 87.8 %   41/41
      long_document   38/41 92.7 %   39/41 95.1 %   39/41
      user_fact       28/41 68.3 %   29/41 70.7 %   41/41
      all             102/123 82.9 % 104/123 84.6 % 121/123
      all, rules      30/123 24.4 %  52/123 42.3 %  76/123

      false alarms    users' turns   users' turns as web   web and tool texts   long documents alone (web)
      shipped         0/36           1/36                  7/32                 10/11
      rules alone     0/36           1/36                  0/32                 4/11

  The carrier column says nothing: the long documents without a payload are quarantined 10 times in
  11 as web content, by the learned model (its likeliest window scores 0.78-0.96 on sentences such as
  "every full-time employee receives 26 days of paid annual leave"), and so are 134 of the 140
  READMEs of installed packages, their first 3,000 characters (rules alone: 28;
  ``guard_families.long_documents``). Facts about the user are the weak family (68 %), and long ordinary prose is the
  false-alarm problem the short texts of the earlier rounds never showed.

Each attack is judged twice: as a user's own turn (threshold 1.0: a user may tell their assistant
how to answer) and as web or tool content (``guard.DATA_THRESHOLD``). Ordinary texts are judged as
what they are: LoCoMo turns (``../shared/data/locomo/locomo-dev.json``, CC BY-NC 4.0, read in place;
conversations 1-2 dev, 3-5 held out) and the daily conversation of ``ordinary.jsonl`` as user turns,
carriers without a payload and the web, e-mail and code hard negatives as web content, the users'
own requests ("can you answer in French?") as user turns; LoCoMo and the daily lines are also
judged as web content, the stricter check.

    python benchmarks/guard_eval.py                # the tables
    python benchmarks/guard_eval.py --misses test  # also list a split's misses and false alarms (or fresh)
    python benchmarks/guard_eval.py --rules-only   # the guard without its learned model
    python benchmarks/guard_families.py            # leave one family out (origin, goal)
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
    #: where the text sits: alone, or inside an e-mail, a web snippet, before a Q&A block, in code
    carrier: str = "alone"
    #: the write's source the text is judged as ("user" turn, or "web" content)
    source: str = "user"
    #: the family a fresh round's row was written for (fresh3: report_style, long_document, user_fact)
    family: str = ""


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


#: the carriers each payload is placed in, besides standing alone (code payloads go into code and e-mail)
CARRIERS = ("email", "web", "qa")
CODE_CARRIERS = ("code", "email")


def load_indirect() -> tuple[list[Sample], list[Sample]]:
    """Indirect-injection attacks composed with their carriers, and the hard negatives.

    Every payload of ``indirect_attacks.jsonl`` stands alone and is placed (``{attack}``) into
    carriers of ``carriers.jsonl`` of its own split and language, chosen in turn; the carriers
    without a payload, and ``hard_negatives.jsonl``, are the ordinary texts of the same shapes.
    """
    payloads = _jsonl(DATA / "indirect_attacks.jsonl")
    carriers = _jsonl(DATA / "carriers.jsonl")
    pools: dict[tuple[str, str, str], list[str]] = {}
    for c in carriers:
        pools.setdefault((c["split"], c["lang"], c["carrier"]), []).append(c["text"])
    attacks: list[Sample] = []
    for i, p in enumerate(payloads):
        attacks.append(Sample(p["text"], True, p["split"], p["lang"], "indirect", p["shape"]))
        for kind in CODE_CARRIERS if p["shape"] == "code" else CARRIERS:
            pool = pools[(p["split"], p["lang"], kind)]
            text = pool[i % len(pool)].replace("{attack}", p["text"])
            attacks.append(Sample(text, True, p["split"], p["lang"], "indirect", p["shape"], kind))
    ordinary = [Sample(c["text"].replace("{attack}", "").strip(), False, c["split"], c["lang"], "carrier",
                       c["carrier"], c["carrier"], "web") for c in carriers]
    ordinary += [Sample(r["text"], False, r["split"], r["lang"], "hard-negative", r["shape"], r["shape"], r["source"])
                 for r in _jsonl(DATA / "hard_negatives.jsonl")]
    return attacks, ordinary


#: the fresh rounds: each written after a learned model was frozen, measured once before anything was
#: tuned on it; a round is trained on once the next model is made (round 1 is in the second model's data)
FRESH_ROUNDS = {"1": "fresh.jsonl", "2": "fresh2.jsonl", "3": "fresh3.jsonl"}


def load_fresh(round_: str = "2") -> tuple[list[Sample], list[Sample]]:
    """A fresh round (``fresh.jsonl``, ``fresh2.jsonl``, ``fresh3.jsonl``), written after a learned model was frozen.

    Each injection is judged alone as a user's turn, alone as web content, and placed (``{attack}``)
    in a carrier of its language, chosen in turn, as web content; the ordinary texts are judged as
    their own source, and the users' turns also as web content. A row's ``family`` (round 3) is kept
    on its samples, and on the carriers it was placed in.
    """
    rows = _jsonl(DATA / FRESH_ROUNDS[round_])
    carriers: dict[str, list[str]] = {}
    for r in rows:
        if r["type"] == "carrier":
            carriers.setdefault(r["lang"], []).append(r["text"])
    attacks: list[Sample] = []
    ordinary: list[Sample] = []
    counters = dict.fromkeys(carriers, 0)
    for r in rows:
        family = r.get("family", "")
        if r["type"] == "attack":
            attacks.append(Sample(r["text"], True, "fresh", r["lang"], "fresh", source="user", family=family))
            attacks.append(Sample(r["text"], True, "fresh", r["lang"], "fresh", source="web", family=family))
            pool = carriers[r["lang"]]
            text = pool[counters[r["lang"]] % len(pool)].replace("{attack}", r["text"])
            counters[r["lang"]] += 1
            attacks.append(Sample(text, True, "fresh", r["lang"], "fresh", carrier="carrier", source="web",
                                  family=family))
        elif r["type"] == "ordinary":
            ordinary.append(Sample(r["text"], False, "fresh", r["lang"], "fresh", r["source"], source=r["source"],
                                   family=family))
            if r["source"] == "user":
                ordinary.append(Sample(r["text"], False, "fresh", r["lang"], "fresh", "user as web", source="web",
                                       family=family))
    ordinary += [Sample(r["text"].replace("{attack}", "").strip(), False, "fresh", r["lang"], "fresh", "carrier",
                        source="web", family=r.get("family", "")) for r in rows if r["type"] == "carrier"]
    return attacks, ordinary


def fresh_report(attacks: list[Sample], ordinary: list[Sample]) -> dict[str, tuple[int, int, list[Sample]]]:
    """(flagged, total, the misses or false alarms) per judgement of the fresh set, overall and per language."""
    from portamem_plugins.guard import judge

    groups: dict[str, list[Sample]] = {}
    for s in attacks:
        where = "as a user's turn" if s.source == "user" else (
            "as web content, alone" if s.carrier == "alone" else "as web content, in a carrier")
        for lang in ("all", s.lang, *([s.family] if s.family else [])):
            groups.setdefault(f"attacks {where} [{lang}]", []).append(s)
        if s.source == "web":
            groups.setdefault(f"attacks as web content, both [{'all'}]", []).append(s)
    for s in ordinary:
        kind = {"user": "users' own turns", "web": "web and tool texts", "user as web": "users' turns judged as web",
                "carrier": "carriers without a payload"}[s.form]
        groups.setdefault(f"false alarms: {kind}", []).append(s)
        if s.family:
            groups.setdefault(f"false alarms: {kind} [{s.family}]", []).append(s)
    out = {}
    for name, pick in groups.items():
        flagged = [judge(s.text, s.source) is not None for s in pick]
        wrong = [s for s, f in zip(pick, flagged) if f != s.attack]
        out[name] = (sum(flagged), len(pick), wrong)
    return out


def _print_fresh(round_: str, rep: dict[str, tuple[int, int, list[Sample]]], show: bool) -> None:
    note = {"1": "measured blind on the first model (66a766b), then trained on",
            "2": "written after the shipped model was frozen; never tuned on",
            "3": "written by family after the shipped model was frozen; never tuned on"}[round_]
    print(f"\nFresh round {round_} ({note})")
    for name in sorted(rep, key=lambda k: (k.startswith("false"), k)):
        hit, n, wrong = rep[name]
        print(f"  {name:<52} {hit:>3}/{n:<3} {_rate(hit, n)}")
        if show and (name.endswith("[all]") and "both" not in name or name.startswith("false")):
            for s in wrong:
                print(f"      {'MISS' if s.attack else 'ALARM'} {s.text!r}")


def evaluate(samples: list[Sample]) -> dict[str, object]:
    """Flag every sample; the rates and the misses, per split and overall."""
    from portamem_plugins.guard import judge

    t0 = time.process_time()
    flagged = [judge(s.text) is not None for s in samples]
    elapsed = time.process_time() - t0
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


def indirect_report(attacks: list[Sample], ordinary: list[Sample], extra_ordinary: list[Sample]) -> dict[str, object]:
    """Detection per split, source, shape and carrier; false alarms per split and where they come from."""
    from portamem_plugins.guard import judge

    report: dict[str, object] = {}
    for split in ("dev", "test"):
        pick = [s for s in attacks if s.split == split]
        for source in ("user", "web"):
            flagged = [judge(s.text, source) is not None for s in pick]
            shapes: dict[str, list[int]] = {}
            for s, f in zip(pick, flagged):
                for key in (f"{s.lang}:{s.form}", f"carrier:{s.carrier}"):
                    shapes.setdefault(key, [0, 0])
                    shapes[key][0] += f
                    shapes[key][1] += 1
            report[(split, source)] = {"attacks": len(pick), "detected": sum(flagged), "shapes": shapes,
                                       "misses": [s for s, f in zip(pick, flagged) if not f]}
    for split in ("dev", "test"):
        pick = [s for s in ordinary if s.split == split]
        report[("alarms", split)] = [s for s in pick if judge(s.text, s.source) is not None]
        report[("ordinary", split)] = len(pick)
    for split in ("dev", "heldout"):
        pick = [s for s in extra_ordinary if s.split == split]
        report[("web-alarms", split)] = [s for s in pick if judge(s.text, "web") is not None]
        report[("web-ordinary", split)] = len(pick)
    return report


def guard_cost(chars: int = 8000, repeats: int = 7) -> dict[str, float]:
    """Median CPU ms per write on a ``chars`` long text: the whole guard, without its learned model, the
    phrase rules alone (no model, no structural reading), and the learned model alone.

    CPU time, not wall time, so that other work on the machine does not inflate it.
    """
    import statistics

    from portamem_plugins import directives, guard, injection_model

    carriers = [r["text"] for r in _jsonl(DATA / "carriers.jsonl")]
    text = ""
    while len(text) < chars:
        text += carriers[len(text) % len(carriers)].replace("{attack}", "") + "\n"
    text = text[:chars]

    def median_ms(run=lambda: guard.judge(text, "web")) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(repeats):
            t0 = time.process_time()
            run()
            times.append(1000 * (time.process_time() - t0))
        return statistics.median(times)

    out = {"full": median_ms()}
    model = injection_model.load()
    loader, signals = guard.injection_model.load, directives.signals
    guard.injection_model.load = lambda: None  # type: ignore[assignment]
    try:
        out["without model"] = median_ms()
        directives.signals = lambda text: []  # type: ignore[assignment]
        out["phrase rules"] = median_ms()
    finally:
        guard.injection_model.load, directives.signals = loader, signals  # type: ignore[assignment]
    if model is not None:
        view = guard.normalize(text)
        out["model"] = median_ms(lambda: model.best_window(view))
    return out


def _print_rules_corpus(report: dict[str, object]) -> None:
    print("Rules corpus (direct injection phrasings)")
    print(f"{'split':<8} {'attacks':>7} {'detected':>8} {'rate':>7}   {'ordinary':>8} {'alarms':>6} {'rate':>7}")
    for split in ("dev", "heldout", "all"):
        r = report[split]
        assert isinstance(r, dict)
        print(f"{split:<8} {r['attacks']:>7} {r['detected']:>8} {_rate(r['detected'], r['attacks']):>7}   "
              f"{r['ordinary']:>8} {r['false_alarms']:>6} {_rate(r['false_alarms'], r['ordinary']):>7}")
    forms = report["forms"]
    assert isinstance(forms, dict)
    print("detection by form: " + ", ".join(f"{k} {h}/{n}" for k, (h, n) in forms.items()))


def _print_indirect(rep: dict[object, object]) -> None:
    print("\nIndirect corpus (instructions to the assistant inside data)")
    print(f"{'split':<6} {'judged as':<10} {'attacks':>7} {'detected':>8} {'rate':>7}")
    for split in ("dev", "test"):
        for source in ("user", "web"):
            r = rep[(split, source)]
            assert isinstance(r, dict)
            print(f"{split:<6} {source:<10} {r['attacks']:>7} {r['detected']:>8} {_rate(r['detected'], r['attacks']):>7}")
    print(f"\n{'shape':<22} " + " ".join(f"{f'{sp} {so}':>12}" for sp in ("dev", "test") for so in ("user", "web")))
    keys = sorted({k for sp in ("dev", "test") for k in rep[(sp, "user")]["shapes"]},  # type: ignore[index]
                  key=lambda k: (k.startswith("carrier"), k))
    for key in keys:
        cells = []
        for sp in ("dev", "test"):
            for so in ("user", "web"):
                h, n = rep[(sp, so)]["shapes"].get(key, [0, 0])  # type: ignore[index]
                cells.append(f"{h}/{n}")
        print(f"{key:<22} " + " ".join(f"{c:>12}" for c in cells))
    print("\nFalse alarms, each text judged as its own source")
    for split in ("dev", "test"):
        alarms, n = rep[("alarms", split)], rep[("ordinary", split)]
        assert isinstance(alarms, list) and isinstance(n, int)
        print(f"  {split:<5} hard negatives (e-mail, web, Q&A, code, users' own requests): "
              f"{len(alarms)}/{n} {_rate(len(alarms), n)}")
    for split in ("dev", "heldout"):
        alarms, n = rep[("web-alarms", split)], rep[("web-ordinary", split)]
        assert isinstance(alarms, list) and isinstance(n, int)
        print(f"  {split:<7} LoCoMo and daily conversation judged as web content: "
              f"{len(alarms)}/{n} {_rate(len(alarms), n)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", choices=["dev", "heldout", "test", "fresh"],
                    help="list the misses and false alarms of a split (heldout: rules corpus, test: indirect, fresh)")
    ap.add_argument("--rules-only", action="store_true", help="the guard without its learned model (the figures before it)")
    args = ap.parse_args(argv)
    if args.rules_only:
        from portamem_plugins import guard

        guard.injection_model.load = lambda: None  # type: ignore[assignment]
    samples = load_attacks() + load_ordinary()
    if not LOCOMO.exists():
        print(f"note: {LOCOMO} not found; LoCoMo turns left out", file=sys.stderr)
    report = evaluate(samples)
    _print_rules_corpus(report)
    attacks, ordinary = load_indirect()
    everyday = [s for s in samples if not s.attack]
    rep = indirect_report(attacks, ordinary, everyday)
    _print_indirect(rep)  # type: ignore[arg-type]
    for round_ in FRESH_ROUNDS:
        _print_fresh(round_, fresh_report(*load_fresh(round_)), args.misses == "fresh")
    cost = guard_cost()
    print(f"\nguard cost: {1000 * float(report['seconds_per_text']):.2f} CPU ms per text "  # type: ignore[arg-type]
          f"({len(samples)} texts of the rules corpus, mostly LoCoMo turns); an 8000-character text of e-mails, "
          f"web snippets and code, CPU ms median: " + ", ".join(f"{k} {v:.1f}" for k, v in cost.items()))
    if args.misses in ("dev", "heldout") and args.misses in report:
        r = report[args.misses]
        assert isinstance(r, dict)
        for s in r["misses"]:
            print(f"MISS  [{s.lang} {s.form}] {s.text!r}")
        for s in r["alarms"]:
            print(f"ALARM [{s.origin}] {s.text!r}")
    if args.misses in ("dev", "test"):
        for source in ("user", "web"):
            for s in rep[(args.misses, source)]["misses"]:  # type: ignore[index]
                print(f"MISS as {source} [{s.lang} {s.form} in {s.carrier}] {s.text!r}")
        for s in rep[("alarms", args.misses)]:  # type: ignore[union-attr]
            print(f"ALARM as {s.source} [{s.origin} {s.form}] {s.text!r}")
    if args.misses in ("dev", "heldout"):
        for s in rep[("web-alarms", args.misses)]:  # type: ignore[union-attr]
            print(f"ALARM as web [{s.origin}] {s.text!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
