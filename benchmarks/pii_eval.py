"""False positives of the PII redactor on ordinary conversation, English and Chinese.

Two corpora of text that holds no personal numbers or addresses (a hit there is a false positive
unless the listing shows real PII):

- **LoCoMo**: every turn of ``../shared/data/locomo/locomo-dev.json`` (CC BY-NC 4.0, read in
  place; ``PORTAMEM_LOCOMO`` points elsewhere), English.
- **Chinese conversation**, assembled from the repository, since it ships no larger Chinese corpus:
  the Chinese lines of ``tests/data/guard/`` that hold no attack (daily conversation, hard
  negatives, carriers without their payload), the Chinese memory set and questions of
  ``benchmarks/embedders.py``, ``pii_negatives_zh.txt`` beside this script (everyday Chinese
  messages full of dates, times, prices, order and flight numbers, addresses and versions: the
  numbers a redactor can mistake for PII), and every Chinese string literal of the tests outside
  the redactor's own test file (which plants PII on purpose). Texts are de-duplicated.

A third, English set: the guard corpus's English lines (daily conversation, hard negatives, carriers
without their payload) and ``pii_negatives_en.txt`` (everyday lines full of numbers, and "at" and
"dot" used as words).

    python benchmarks/pii_eval.py                   # hits per corpus and kind
    python benchmarks/pii_eval.py --list            # every hit, quoted
    python benchmarks/pii_eval.py --compare HEAD~3  # also the redactor of a git revision, side by side
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUARD_DATA = ROOT / "tests" / "data" / "guard"
LOCOMO = Path(os.environ.get("PORTAMEM_LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"))
ZH_NEGATIVES = Path(__file__).resolve().parent / "pii_negatives_zh.txt"
EN_NEGATIVES = Path(__file__).resolve().parent / "pii_negatives_en.txt"
_CJK = re.compile(r"[\u4e00-\u9fff]{2}")
#: files whose Chinese literals are planted PII or attacks, not conversation
_SKIP_SOURCES = {"test_redact.py"}


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def locomo_turns(path: Path = LOCOMO) -> list[str]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        conversations = json.load(fh)
    out = []
    for conv in conversations:
        c = conv["conversation"]
        for key in sorted(k for k in c if k.startswith("session_") and isinstance(c[k], list)):
            out.extend(t["text"] for t in c[key] if t.get("text", "").strip())
    return out


def _guard_lines(lang: str) -> list[str]:
    out = [r["text"] for r in _jsonl(GUARD_DATA / "ordinary.jsonl") if r["lang"] == lang]
    out += [r["text"] for r in _jsonl(GUARD_DATA / "hard_negatives.jsonl") if r["lang"] == lang]
    out += [r["text"].replace("{attack}", "").strip() for r in _jsonl(GUARD_DATA / "carriers.jsonl") if r["lang"] == lang]
    return out


def _literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and _CJK.search(n.value)]


def chinese_corpus() -> list[str]:
    texts = _guard_lines("zh")
    texts += _literals(ROOT / "benchmarks" / "embedders.py")
    if ZH_NEGATIVES.exists():
        texts += [line for line in ZH_NEGATIVES.read_text(encoding="utf-8").splitlines() if line.strip()]
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name not in _SKIP_SOURCES:
            texts += _literals(path)
    return list(dict.fromkeys(t for t in texts if t.strip()))


def english_lines() -> list[str]:
    texts = _guard_lines("en")
    if EN_NEGATIVES.exists():
        texts += [line for line in EN_NEGATIVES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return list(dict.fromkeys(texts))


def corpora() -> dict[str, list[str]]:
    return {"locomo": locomo_turns(), "zh": chinese_corpus(), "en": english_lines()}


def _finder_at(revision: str) -> Callable[[str], list]:
    """``find_pii`` of the redactor as it was at a git revision."""
    source = subprocess.run(["git", "show", f"{revision}:plugins/portamem_plugins/redact.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(f"redact_{revision.replace('~', '_')}", fh.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(fh.name)
    return module.find_pii  # type: ignore[no-any-return]


def hits(find: Callable[[str], list], texts: list[str]) -> list[tuple[str, str, str]]:
    """(kind, matched text, the whole text) of every span found."""
    return [(r.kind, t[r.start:r.end], t) for t in texts for r in find(t)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="quote every hit")
    ap.add_argument("--compare", metavar="REV", help="also run the redactor of this git revision")
    args = ap.parse_args(argv)
    from portamem_plugins.redact import find_pii

    finders: dict[str, Callable[[str], list]] = {"current": find_pii}
    if args.compare:
        finders = {args.compare: _finder_at(args.compare), **finders}
    if not LOCOMO.exists():
        print(f"note: {LOCOMO} not found; LoCoMo turns left out", file=sys.stderr)
    for name, texts in corpora().items():
        print(f"{name}: {len(texts)} texts, {sum(map(len, texts)):,} characters")
        for label, find in finders.items():
            found = hits(find, texts)
            kinds = Counter(k for k, _, _ in found)
            print(f"  {label:<12} {len(found):>3} spans in {len({t for _, _, t in found}):>3} texts  "
                  + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
            if args.list:
                for kind, span, text in found:
                    print(f"    {kind:<10} {span!r:<40} in {' '.join(text.split())[:100]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
