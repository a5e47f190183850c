"""``portamem eval preload``: task openings ("Can you help me plan my business trip to Madrid next
week?", "帮我挑一件参加婚礼穿的裙子") against a user's stored facts, each labelled with the memories the task
will need later (the home city, the seat, the loyalty number). ``preload.jsonl`` holds them, a dev half
to tune the rules on and a test half only reported.

Each task is played into a fresh store (its memories saved as the user's own words), then the opening
and its follow-up messages are recalled in one session through ``portamem.recall.recall``, counting the
searches. The figures, per split and language:

- **needs in the first prompt**: the share of tasks whose every labelled need is in the opening's prompt,
  and the share of all needs found there;
- **preloaded lines**: lines marked as preloaded in the first prompt, and the share of them that meet a
  labelled need (precision);
- **searches per task**: the searches beyond one per message (the preload's), and whether the follow-ups
  read the preloaded memories without searching for them again.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embedding.embedders import Embedder, get_embedder
from ..errors import ValidationError
from .locomo import CachedEmbedder
from ..memory import Memory
from ..read.preload import PRELOAD
from ..recall import recall
from .harness import SPLITS, holds

__all__ = ["PreloadTask", "load_tasks", "evaluate_preload", "format_preload", "add_arguments", "run"]


@dataclass(frozen=True)
class PreloadTask:
    id: str
    split: str
    lang: str
    memories: tuple[str, ...]
    opening: str
    needs: tuple[str, ...]
    followups: tuple[str, ...] = ()


def load_tasks(source: str | Path | None = None, split: str | None = None) -> list[PreloadTask]:
    """The labelled task openings (the packaged ``preload.jsonl`` by default), of ``split`` or all."""
    path = resources.files("portamem.scenarios").joinpath("preload.jsonl") if source is None else Path(source)
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            task = PreloadTask(str(d["id"]), str(d["split"]), str(d["lang"]), tuple(map(str, d["memories"])),
                               str(d["opening"]), tuple(map(str, d["needs"])), tuple(map(str, d.get("followups", ()))))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError(f"{path}:{n}: not a preload task ({exc})") from exc
        if task.split not in SPLITS or not task.needs or not task.memories:
            raise ValidationError(f"{path}:{n}: split must be one of {SPLITS}, needs and memories non-empty")
        if split in (None, "all") or task.split == split:
            out.append(task)
    return out


class _Counting:
    """A memory whose searches are counted (everything else goes to the memory itself)."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self.searches = 0

    def search_memory(self, *args: Any, **kwargs: Any) -> Any:
        self.searches += 1
        return self._memory.search_memory(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)


def _play(task: PreloadTask, settings: Settings, embedder: Embedder) -> dict[str, Any]:
    path = tempfile.mkdtemp(prefix="portamem-preload-")
    mem = Memory(settings=settings.replace(path=path), embedder=embedder)
    try:
        for text in task.memories:
            mem.save_memory(text, user_id="user", source="user")
        mem.flush()
        counted = _Counting(mem)
        first = recall(counted, task.opening, user_id="user", session_id="task")  # type: ignore[arg-type]
        opening_searches = counted.searches
        later = [recall(counted, m, user_id="user", session_id="task") for m in task.followups]  # type: ignore[arg-type]
        texts = [h.content for h in first]
        preloaded = [h.content for h in first if PRELOAD in h.found_by]
        found = [n for n in task.needs if any(holds(t, [n]) for t in texts)]
        reused = all({h.memory_id for h in first if PRELOAD in h.found_by}
                     <= {h.memory_id for h in hits} for hits in later)
        return {"id": task.id, "split": task.split, "lang": task.lang, "opening": task.opening,
                "needs": list(task.needs), "found": found, "all": len(found) == len(task.needs),
                "preloaded": preloaded, "useful": sum(any(holds(p, [n]) for n in task.needs) for p in preloaded),
                "extra_searches": counted.searches - 1 - len(task.followups), "opening_searches": opening_searches,
                "reused": reused, "lines": texts}
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)


def _figures(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    needs = sum(len(r["needs"]) for r in rows)
    pre = sum(len(r["preloaded"]) for r in rows)
    return {"tasks": n, "all_needs": round(sum(r["all"] for r in rows) / n, 4) if n else None,
            "needs_found": round(sum(len(r["found"]) for r in rows) / needs, 4) if needs else None,
            "preloaded_per_task": round(pre / n, 2) if n else None,
            "preload_precision": round(sum(r["useful"] for r in rows) / pre, 4) if pre else None,
            "max_extra_searches": max((r["extra_searches"] for r in rows), default=0),
            "followups_reuse": round(sum(r["reused"] for r in rows) / n, 4) if n else None}


def evaluate_preload(split: str = "dev", *, path: str | Path | None = None, settings: Settings | None = None,
                     embedder: Embedder | None = None, embedding_cache: str | Path | None = None) -> dict[str, Any]:
    settings = (settings or Settings()).replace(preload=True)  # what is measured, whatever the default
    base = embedder or get_embedder(settings.embedder, workers=settings.embed_workers)
    cached = CachedEmbedder(base, embedding_cache)
    rows = [_play(t, settings, cached) for t in load_tasks(path, split)]
    if embedding_cache is not None:
        cached.save()
    report: dict[str, Any] = {"embedder": base.name, "rows": rows, "figures": {}}
    for s in sorted({r["split"] for r in rows}):
        for lang in (None, "en", "zh"):
            mine = [r for r in rows if r["split"] == s and (lang is None or r["lang"] == lang)]
            if mine:
                report["figures"][f"{s} {lang or 'all'}"] = _figures(mine)
    return report


def format_preload(report: Mapping[str, Any], *, failures: bool = False) -> str:
    out = [f"preload on task openings: embedder {report['embedder']}",
           f"{'':10} {'tasks':>5} {'all needs':>10} {'needs':>7} {'preloaded':>10} {'precision':>10} "
           f"{'extra searches':>15} {'reused':>7}"]
    for label, f in report["figures"].items():
        out.append(f"{label:10} {f['tasks']:>5} {f['all_needs']:>10} {f['needs_found']:>7} {f['preloaded_per_task']:>10} "
                   f"{f['preload_precision'] if f['preload_precision'] is not None else '-':>10} "
                   f"{f['max_extra_searches']:>15} {f['followups_reuse']:>7}")
    out.append("all needs: tasks whose every labelled need is in the first prompt; needs: share of needs found "
               "there; extra searches: the most any task made beyond one per message")
    if failures:
        for r in report["rows"]:
            if not r["all"]:
                missing = [n for n in r["needs"] if n not in r["found"]]
                out.append(f"[{r['split']} {r['id']}] {r['opening']}  -- missing {missing}")
                out += [f"    {i}. {t[:140]}" for i, t in enumerate(r["lines"], 1)]
    return "\n".join(out)


def add_arguments(p: Any) -> None:
    p.add_argument("--split", choices=[*SPLITS, "all"], default="dev", help="which half of the tasks (default: dev)")
    p.add_argument("--tasks", help="a JSON Lines file of task openings instead of the packaged ones")
    p.add_argument("--embedder", help="embedder name (default: the configured one)")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--failures", action="store_true", help="also print each task that missed a need, with its prompt")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: Any) -> int:
    """Preload on labelled task openings: the needs in the first prompt, precision, searches per task."""
    settings = Settings.load(getattr(args, "config", None), tenant_id=getattr(args, "tenant", None))
    if args.embedder:
        settings = settings.replace(embedder=args.embedder)
    report = evaluate_preload(args.split, path=args.tasks, settings=settings, embedding_cache=args.embedding_cache)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(format_preload(report, failures=args.failures))
    sys.stdout.flush()
    return 0
