"""``portamem eval paraphrase``: facts said in conversation, asked back in words they do not share.

``paraphrase.jsonl`` holds one conversation per user (English and Chinese, half each), in the scenario
suite's format (``portamem.scenarios.harness``) with a ``split`` per conversation: a greeting with a
self-introduction, 8 facts said in ordinary user turns among small talk, a question to the assistant and
thanks, over two sessions; then, in a new session, one question per fact that shares no content word
with the turn that said it ("I'm allergic to peanuts." / "What food should I stay away from?", checked
with ``portamem.language.statements.content_words``), and 3 questions about things never said. The facts of one
user are each other's distractors; the dev and test halves are split by user.

Each conversation is played the way the scenario harness plays one (``harness.play``: ``add_turn`` per
turn at its time, settled by the indexer), then each question goes through ``recall()`` (what the
adapters call) and ``Memory.search_memory``. The figures, per split and language:

- **recall top-1** / **in prompt**: the first recalled hit holds the answer / some prompt line does;
- **search top-1** / **search in top k**: the same for ``search_memory``'s hits;
- **greeting first**: the share of answerable questions whose first search hit is the conversation's
  greeting or self-introduction (a hub: a short first-person line near every first-person question);
- **never said: empty**: the share of questions about things never said for which recall (and search)
  return nothing.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embedding.embedders import Embedder, get_embedder
from ..errors import ValidationError
from .locomo import CachedEmbedder, _weights
from ..memory import Memory
from ..read.calibration import calibration_for, fusion_weights
from ..recall import format_memories, recall
from ..language.statements import content_words
from .harness import LANGUAGES, SPLITS, Scenario, holds, judge_prompt, load_scenarios, play, prompt_lines

__all__ = ["suite_file", "load_paraphrase", "shared_words", "evaluate_paraphrase", "format_paraphrase",
           "add_arguments", "run"]


def suite_file() -> Traversable:
    """The packaged suite (``paraphrase.jsonl``)."""
    return resources.files("portamem.scenarios").joinpath("paraphrase.jsonl")


def load_paraphrase(source: str | Path | Traversable | None = None, split: str = "all") -> list[Scenario]:
    """The suite's conversations of ``split`` (``dev``, ``test`` or ``all``), each carrying its split."""
    if split not in (*SPLITS, "all"):
        raise ValidationError(f"split must be one of {[*SPLITS, 'all']}, got {split!r}")
    path = suite_file() if source is None else source
    text = path.read_text(encoding="utf-8") if not isinstance(path, (str, Path)) else Path(path).read_text(encoding="utf-8")
    halves = {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if row.get("split") not in SPLITS:
                raise ValidationError(f"{path}:{n}: each conversation names its split, one of {list(SPLITS)}")
            halves[str(row["id"])] = row["split"]
    return [replace(s, split=halves[s.id]) for s in load_scenarios(path, "paraphrase")
            if split == "all" or halves[s.id] == split]


def shared_words(scenario: Scenario) -> list[tuple[str, str, frozenset[str]]]:
    """(question, stating turn, shared content words) for each answerable question and each turn that
    states its answer where the two share a content word: the suite's rule is that there are none."""
    out = []
    stating = [t.user for t in scenario.turns if "statement" in t.acts]
    for q in scenario.questions:
        for turn in (t for t in stating if q.answer and holds(t, q.answer)):
            common = content_words(q.question) & content_words(turn)
            if common:
                out.append((q.question, turn, common))
    return out


def _run_one(scenario: Scenario, settings: Settings, embedder: Embedder) -> list[dict[str, Any]]:
    path = tempfile.mkdtemp(prefix="portamem-paraphrase-")
    mem = Memory(settings=settings.replace(path=path), embedder=embedder)
    greeting = scenario.turns[0].user
    rows = []
    try:
        play(mem, scenario)
        if isinstance(embedder, CachedEmbedder):
            embedder.embed([q.question for q in scenario.questions], kind="query")
        for q in scenario.questions:
            hits = recall(mem, q.question, user_id=scenario.user_id, session_id=scenario.ask_session,
                          now=scenario.ask_at)
            lines = prompt_lines(format_memories(hits, now=scenario.ask_at))
            found = mem.search_memory(q.question, user_id=scenario.user_id, now=scenario.ask_at)
            row: dict[str, Any] = {"split": scenario.split, "lang": scenario.lang, "conversation": scenario.id,
                                   "question": q.question, "lines": lines,
                                   "search": [round(h.score, 4) for h in found],
                                   "search_top": found[0].content if found else None}
            if q.unstored:
                row.update(recall_empty=not hits, search_empty=not found)
            else:
                v = judge_prompt(q, hits[0].content if hits else None, lines)
                row.update(answer=list(q.answer), top1=v.top1, in_prompt=v.answer,
                           search_top1=bool(found) and holds(found[0].content, q.answer),
                           search_in=any(holds(h.content, q.answer) for h in found),
                           greeting_first=bool(found) and found[0].content.strip() == greeting.strip())
            rows.append(row)
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)
    return rows


def _share(rows: Sequence[Mapping[str, Any]], key: str) -> float | None:
    return round(sum(bool(r[key]) for r in rows) / len(rows), 4) if rows else None


def _figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    asked = [r for r in rows if "answer" in r]
    never = [r for r in rows if "answer" not in r]
    return {"questions": len(asked), "top1": _share(asked, "top1"), "in_prompt": _share(asked, "in_prompt"),
            "search_top1": _share(asked, "search_top1"), "search_in": _share(asked, "search_in"),
            "greeting_first": _share(asked, "greeting_first"), "never_said": len(never),
            "never_empty": _share(never, "recall_empty"), "never_search_empty": _share(never, "search_empty")}


def evaluate_paraphrase(split: str = "dev", *, path: str | Path | None = None, settings: Settings | None = None,
                        embedder: Embedder | None = None, embedding_cache: str | Path | None = None,
                        show_progress: bool = True) -> dict[str, Any]:
    """Play each conversation of ``split`` into a fresh store and ask its questions through ``recall`` and
    ``search_memory``; the report holds the figures per split and language and every question's row."""
    settings = settings or Settings.load()
    cached = CachedEmbedder(embedder or get_embedder(settings.embedder), embedding_cache)
    scenarios = load_paraphrase(path, split)
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    for scenario in tqdm(scenarios, desc="paraphrase", unit="conv", file=sys.stderr, disable=not show_progress,
                         leave=False):
        rows += _run_one(scenario, settings, cached)
    cached.save()
    figures: dict[str, Any] = {}
    for s in (n for n in SPLITS if any(r["split"] == n for r in rows)):
        mine = [r for r in rows if r["split"] == s]
        figures[s] = {**{lang: _figures([r for r in mine if r["lang"] == lang]) for lang in LANGUAGES
                         if any(r["lang"] == lang for r in mine)}, "all": _figures(mine)}
    return {"suite": str(path) if path is not None else "packaged", "embedder": cached.name,
            "top_k": settings.top_k,
            "weights": fusion_weights(settings.weights, calibration_for(cached.name, settings.vector_calibration)), "figures": figures, "questions": rows}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def format_paraphrase(report: Mapping[str, Any], *, failures: bool = False) -> str:
    weights = ", ".join(f"{k} {v:g}" for k, v in report.get("weights", {}).items())
    lines = [f"paraphrase suite ({report['suite']}): embedder {report['embedder']}, top_k {report['top_k']}; "
             f"weights {weights}",
             f"{'':10}{'asked':>6}{'top-1':>7}{'in prompt':>10}{'search top-1':>13}{'search in k':>12}"
             f"{'greeting 1st':>13}{'never said: empty':>19}{'(search)':>9}"]
    for s, by in report["figures"].items():
        for label, f in by.items():
            lines.append(f"{s + ' ' + label:10}{f['questions']:>6}{_pct(f['top1']):>7}{_pct(f['in_prompt']):>10}"
                         f"{_pct(f['search_top1']):>13}{_pct(f['search_in']):>12}{_pct(f['greeting_first']):>13}"
                         f"{_pct(f['never_empty']) + ' of ' + str(f['never_said']):>19}"
                         f"{_pct(f['never_search_empty']):>9}")
    if failures:
        for r in report["questions"]:
            if "answer" in r and r["top1"] and r["in_prompt"]:
                continue
            if "answer" not in r and r["recall_empty"]:
                continue
            what = "never said, recalled" if "answer" not in r else \
                f"answer {r['answer'][0]!r}" + ("" if r["in_prompt"] else " not in prompt") + \
                ("" if r["top1"] else ", top-1 wrong")
            lines.append(f"[{r['split']} {r['conversation']}] {r['question']}  -- {what}; search {r['search'][:5]}")
            lines.extend(f"    {i}. {line[:140]}" for i, line in enumerate(r["lines"], 1))
    return "\n".join(lines)


def add_arguments(p: Any) -> None:
    p.add_argument("--split", choices=[*SPLITS, "all"], default="dev", help="which half (default: dev)")
    p.add_argument("--paraphrase", help="a JSON Lines file of conversations instead of the packaged suite")
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--weights", type=_weights,
                   help='JSON weights instead of the configured ones, e.g. \'{"vector": 1, "keyword": 0, "entity": 0}\' '
                        "for the vector component alone (left-out components keep their default weight)")
    p.add_argument("--failures", action="store_true", help="also print each miss with its prompt")
    p.add_argument("--json", action="store_true", help="print one JSON object (with every question's prompt)")


def run(args: Any) -> int:
    """Facts asked back in words they do not share: recall and search top-1, the answer in the prompt,
    greetings ranked first, and nothing recalled for things never said; per split and language."""
    settings = Settings.load(getattr(args, "config", None), tenant_id=getattr(args, "tenant", None))
    if args.embedder:
        settings = settings.replace(embedder=args.embedder)
    if getattr(args, "weights", None):
        settings = settings.replace(weights={**(settings.weights or {}), **args.weights})
    report = evaluate_paraphrase(args.split, path=args.paraphrase, settings=settings,
                                 embedding_cache=args.embedding_cache,
                                 show_progress=not args.json or sys.stderr.isatty())
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(format_paraphrase(report, failures=args.failures))
    return 0
