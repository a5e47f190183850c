"""``portamem eval habits``: users with repeated behaviour (bookings, orders, meals, in English and
Chinese; ``habits.jsonl``, a dev half and a test half), a maintenance run, then a question about the
habit ("Do I prefer a window or an aisle seat?", "我中午一般点什么外卖？").

Each user's events are saved a few days apart among unrelated facts, ``Memory.maintain`` runs, and the
question is recalled. The figures: the share of users for whom an abstract memory was written holding
the expected habit word, and the share whose first prompt line is that abstract memory (with its
support, "6 of 7 similar memories"); the memories before and after (the members stay).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from ..config import Settings
from ..embedding.embedders import Embedder, get_embedder
from .locomo import CachedEmbedder
from ..lifecycle.abstraction import ABSTRACT_KEY
from ..memory import Memory
from ..recall import recall
from .harness import SPLITS, holds

__all__ = ["load_habits", "evaluate_habits", "add_arguments", "run"]

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


def load_habits(source: str | Path | None = None, split: str | None = None) -> list[dict[str, Any]]:
    path = resources.files("portamem.scenarios").joinpath("habits.jsonl") if source is None else Path(source)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split in (None, "all") or r["split"] == split]


def _play(user: dict[str, Any], settings: Settings, embedder: Embedder) -> dict[str, Any]:
    path = tempfile.mkdtemp(prefix="portamem-habits-")
    mem = Memory(settings=settings.replace(path=path), embedder=embedder)
    try:
        texts = [(t, user.get("source", "tool")) for t in user["events"]] + [(t, "user") for t in user["distractors"]]
        for i, (text, source) in enumerate(texts):
            mem.save_memory(text, user_id="user", source=source, created_at=T0 + timedelta(days=3 * i))
        mem.flush()
        now = T0 + timedelta(days=3 * len(texts) + 7)
        mem.maintain(now=now)
        abstracts = [r for r in mem.list_memories(user_id="user") if ABSTRACT_KEY in r.metadata]
        good = [a for a in abstracts if holds(a.content, [user["expect"]])]
        hits = recall(mem, user["question"], user_id="user", session_id="q", now=now)
        top = hits[0] if hits else None
        return {"id": user["id"], "split": user["split"], "lang": user["lang"], "question": user["question"],
                "abstract": good[0].content if good else None, "abstracts": len(abstracts),
                "top_is_abstract": bool(top and good and top.memory_id == good[0].memory_id),
                "top": top.content if top else None, "memories": len(mem.list_memories(user_id="user"))}
    finally:
        mem.close()
        shutil.rmtree(path, ignore_errors=True)


def evaluate_habits(split: str = "dev", *, path: str | Path | None = None, settings: Settings | None = None,
                    embedding_cache: str | Path | None = None) -> dict[str, Any]:
    settings = settings or Settings()
    base = get_embedder(settings.embedder, workers=settings.embed_workers)
    cached = CachedEmbedder(base, embedding_cache)
    rows = [_play(u, settings, cached) for u in load_habits(path, split)]
    if embedding_cache is not None:
        cached.save()
    figures = {}
    for s in sorted({r["split"] for r in rows}):
        mine = [r for r in rows if r["split"] == s]
        figures[s] = {"users": len(mine), "abstract_written": round(sum(bool(r["abstract"]) for r in mine) / len(mine), 4),
                      "top_hit_is_abstract": round(sum(r["top_is_abstract"] for r in mine) / len(mine), 4)}
    return {"embedder": base.name, "figures": figures, "rows": rows}


def add_arguments(p: Any) -> None:
    p.add_argument("--split", choices=[*SPLITS, "all"], default="dev", help="which half (default: dev)")
    p.add_argument("--habits", help="a JSON Lines file of users instead of the packaged ones")
    p.add_argument("--embedding-cache", help="an .npz file that keeps the vectors between runs")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: Any) -> int:
    """Abstraction of repeated memories: is a habit written, and is it the top hit for its question."""
    settings = Settings.load(getattr(args, "config", None), tenant_id=getattr(args, "tenant", None))
    report = evaluate_habits(args.split, path=args.habits, settings=settings, embedding_cache=args.embedding_cache)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return 0
    print(f"abstraction of repeated memories: embedder {report['embedder']}")
    for s, f in report["figures"].items():
        print(f"{s:5} users {f['users']}  abstract written {f['abstract_written']}  top hit is the abstract "
              f"{f['top_hit_is_abstract']}")
    for r in report["rows"]:
        print(f"[{r['split']} {r['id']}] {r['question']}\n    abstract: {r['abstract']}\n    top: {r['top']}")
    return 0
