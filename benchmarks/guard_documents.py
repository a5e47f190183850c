"""False alarms of the guard on ordinary long documents, beside its detection of an injection hidden in one.

An agent reads whole pages into memory: a package's README, a manual, a newsletter. Judged as web
content (``guard.judge(text, "web")``), such a page must not be quarantined, while the same page
with one instruction to the assistant in its middle must be. This script measures both:

- **READMEs**: the first ``--chars`` (3,000) characters of the long description in the ``METADATA``
  of every distribution installed in a ``site-packages`` directory (``--site-packages``, by default
  this interpreter's), when it has ``--min-words`` (300) words or more; one per project name. Real
  text nobody wrote for this project: badges, installation and usage orders to the reader, code,
  tables. How many there are depends on what is installed;
- **fresh round 3's long documents** (``tests/data/guard/fresh3.jsonl``, rows of type ``carrier``):
  11 ordinary documents (English and Chinese) judged alone as web content, and the round's 41
  ``long_document`` injections judged as a user's turn, alone as web content and placed in the
  middle of one of those documents (in turn, as ``guard_eval.load_fresh`` does). Round 3 is a blind
  test set: reported here, never trained or tuned on.

Each figure is given for the whole guard and for its rules alone (the learned model switched off);
``--weights`` judges with another model file (the weights before a change, say), so the figures
before and after a retraining come from one checkout. The leave-one-family-out figure that must not
drop is ``benchmarks/guard_families.py`` (``--families`` runs its origin axis too: several minutes).

    python benchmarks/guard_documents.py
    python benchmarks/guard_documents.py --weights /tmp/old_injection_model.npz
    python benchmarks/guard_documents.py --site-packages /path/to/venv/lib/python3.11/site-packages
"""

from __future__ import annotations

import argparse
import email.parser
import json
import sys
import sysconfig
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "guard"
sys.path.insert(0, str(HERE))

from portamem_plugins import guard  # noqa: E402
from portamem_plugins import injection_model as im  # noqa: E402


def readmes(site_packages: Path, chars: int = 3000, min_words: int = 300) -> dict[str, str]:
    """Project name (lower case) -> the first ``chars`` characters of its long description, in name order."""
    out: dict[str, str] = {}
    parser = email.parser.Parser()
    for meta in sorted(site_packages.glob("*.dist-info/METADATA")):
        try:
            msg = parser.parsestr(meta.read_text(encoding="utf-8", errors="replace"))
        except (OSError, UnicodeError):
            continue
        body = msg.get_payload()
        if not isinstance(body, str) or not body.strip():
            body = msg.get("Description") or ""
        name = (msg.get("Name") or meta.parent.name.split("-")[0]).lower()
        if len(body.split()) >= min_words and name not in out:
            out[name] = body[:chars]
    return dict(sorted(out.items()))


def stdlib_documents(min_words: int = 100, chars: int = 3000) -> list[str]:
    """Docstrings (modules, classes, functions) of ``min_words`` or more of this interpreter's standard
    library, their first ``chars`` characters: real technical prose that the guard's model never trained
    on and that is neither of the sets this script reports, to calibrate ``injection_model.WINDOW_REF`` on."""
    import ast

    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("test", "site-packages", "idlelib", "lib2to3", "turtledemo")) or "/test" in rel:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc.split()) >= min_words:
                    out.append(doc[:chars])
    return list(dict.fromkeys(out))


def calibrate(refs: list[int], weights: Path | None) -> None:
    """For each candidate ``WINDOW_REF``: the share of standard-library docstrings the model alone flags as
    web content, and of the indirect corpus's dev payloads placed in the middle of one that the guard catches."""
    import random

    docs = stdlib_documents()
    rows = [json.loads(line) for line in (DATA / "indirect_attacks.jsonl").read_text("utf-8").splitlines() if line.strip()]
    rng = random.Random(3)
    placed = []
    for r in rows:
        if r["split"] == "dev" and r["lang"] == "en":
            doc = rng.choice(docs)
            cut = doc.find("\n", len(doc) // 2)
            cut = cut if cut > 0 else len(doc) // 2
            placed.append(doc[:cut] + "\n" + r["text"] + "\n" + doc[cut:])
    original = im.WINDOW_REF
    with model_from(weights):
        model = guard.injection_model.load()
        assert model is not None
        try:
            for ref in refs:
                im.WINDOW_REF = ref
                flagged = 0
                for d in docs:
                    best = model.best_window(guard.normalize(d))
                    flagged += best is not None and best.probability >= model.data_threshold
                caught = sum(guard.judge(t, "web") is not None for t in placed)
                print(f"  WINDOW_REF {ref:>6}: docstrings flagged by the model {_rate(flagged, len(docs))}; "
                      f"dev payloads in them caught by the guard {_rate(caught, len(placed))}")
        finally:
            im.WINDOW_REF = original


def fresh3_documents() -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """(documents as (lang, text)), (injections as (lang, text)), and each injection placed in a document."""
    rows = [json.loads(line) for line in (DATA / "fresh3.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    carriers: dict[str, list[str]] = {}
    for r in rows:
        if r["type"] == "carrier":
            carriers.setdefault(r["lang"], []).append(r["text"])
    docs = [(lang, t.replace("{attack}", "").strip()) for lang, ts in carriers.items() for t in ts]
    attacks: list[tuple[str, str]] = []
    placed: list[str] = []
    counters = dict.fromkeys(carriers, 0)
    for r in rows:
        if r["type"] != "attack":
            continue
        pool = carriers[r["lang"]]
        text = pool[counters[r["lang"]] % len(pool)].replace("{attack}", r["text"])
        counters[r["lang"]] += 1  # every attack takes its turn, as guard_eval.load_fresh places them
        if r.get("family") == "long_document":
            attacks.append((r["lang"], r["text"]))
            placed.append(text)
    return docs, attacks, placed


@contextmanager
def model_from(weights: Path | None, rules_only: bool = False):  # type: ignore[no-untyped-def]
    """The guard judging with the shipped model, with the one in ``weights``, or with its rules alone."""
    original = guard.injection_model.load
    if rules_only:
        guard.injection_model.load = lambda: None  # type: ignore[assignment]
    elif weights is not None:
        import numpy as np

        with np.load(weights) as data:
            model = im.Model(data["weights"].astype(np.float32) * float(data["scale"]), float(data["bias"]),
                             float(data["user_threshold"]), float(data["data_threshold"]))
        guard.injection_model.load = lambda: model  # type: ignore[assignment]
    try:
        yield
    finally:
        guard.injection_model.load = original  # type: ignore[assignment]


def _rate(k: int, n: int) -> str:
    return f"{k:>3}/{n:<3} {100.0 * k / n:5.1f} %" if n else "  -"


def measure(site_packages: Path, chars: int, min_words: int, weights: Path | None, rules_only: bool,
            show: bool = False) -> dict[str, tuple[int, int]]:
    docs = readmes(site_packages, chars, min_words)
    f3_docs, f3_attacks, f3_placed = fresh3_documents()
    out: dict[str, tuple[int, int]] = {}
    with model_from(weights, rules_only):
        flagged = {name: guard.judge(text, "web") for name, text in docs.items()}
        out["READMEs flagged as web content"] = (sum(v is not None for v in flagged.values()), len(docs))
        f3_flags = [guard.judge(text, "web") for _, text in f3_docs]
        out["fresh3 long documents flagged as web content"] = (sum(v is not None for v in f3_flags), len(f3_docs))
        out["fresh3 long_document injections, as a user's turn"] = (
            sum(guard.judge(t, "user") is not None for _, t in f3_attacks), len(f3_attacks))
        out["fresh3 long_document injections, web, alone"] = (
            sum(guard.judge(t, "web") is not None for _, t in f3_attacks), len(f3_attacks))
        out["fresh3 long_document injections, web, in a document"] = (
            sum(guard.judge(t, "web") is not None for t in f3_placed), len(f3_placed))
    if show:
        for name, verdict in flagged.items():
            if verdict is not None:
                print(f"    ALARM {name}: {verdict.reason[:150]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site-packages", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    ap.add_argument("--chars", type=int, default=3000, help="characters of each README judged")
    ap.add_argument("--min-words", type=int, default=300, help="READMEs shorter than this are left out")
    ap.add_argument("--weights", type=Path, help="judge with this injection_model.npz instead of the shipped one")
    ap.add_argument("--show", action="store_true", help="list the READMEs flagged, and why")
    ap.add_argument("--calibration", type=int, nargs="*", metavar="REF",
                    help="only calibrate WINDOW_REF on the standard library's docstrings, for these values")
    ap.add_argument("--families", action="store_true",
                    help="also run guard_families.py's leave-one-family-out on the origin axis (several minutes)")
    args = ap.parse_args(argv)
    if args.calibration is not None:
        calibrate(args.calibration or [10**9, 120, 60, 30], args.weights)
        return 0
    t0 = time.time()
    label = str(args.weights) if args.weights else "shipped model"
    for name, rules_only in ((f"guard ({label})", False), ("rules alone", True)):
        print(f"{name}:")
        for key, (k, n) in measure(args.site_packages, args.chars, args.min_words, args.weights, rules_only,
                                   args.show and not rules_only).items():
            print(f"  {key:<56} {_rate(k, n)}")
    print(f"({time.time() - t0:.0f} s; READMEs from {args.site_packages})")
    if args.families:
        import guard_families

        if args.weights:
            print("note: --families measures the shipped model's recipe, not --weights", file=sys.stderr)
        return guard_families.main(["--axes", "origin"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
