"""How far apart a question about something never said and an answerable one stand in the search's scores.

The paraphrase suite asks for facts in words the answer does not share, and asks about things the user
never said ("What's my favourite film?"); the scenario suite asks both too. Recall should bring the answer
to the first and nothing to the second. This plays both suites' conversations (``--split``) as the
evaluators do, runs each question's search with its trace (every candidate the retrievers found, scored,
kept or not) and reads two things off it:

- the best candidate's final score (what ``min_score`` and the standout rule look at);
- its vector score's lead over the median of the candidates' vector scores: the question's own
  background, a floor relative to the store's score distribution for that query.

Then it sweeps a rule "recall nothing when the best final score is under ``min_score`` or the lead is
under G" over G and prints, per G, the share of never-said questions left empty and the share of
answerable questions (an answer among the search's first five candidates) that the rule would empty too.
A rule worth having empties most never-said questions and costs few answers; the printed curve shows
whether any G does, for the embedder given.

    python benchmarks/never_said.py --split dev --embedding-cache /tmp/emb-cache.npz
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from typing import Any

from portamem import Memory, Settings
from portamem.embedding.embedders import get_embedder
from portamem.scenarios.harness import holds, load_scenarios, play, suite_path
from portamem.scenarios.locomo import CachedEmbedder
from portamem.scenarios.paraphrase import load_paraphrase

LEADS = (0.0, 0.05, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2, 0.25)


def questions(scenarios: list[Any], embedder: Any) -> list[dict[str, Any]]:
    """Per question: never said or not, an answer among the first five candidates, best score, lead."""
    out = []
    for sc in scenarios:
        path = tempfile.mkdtemp(prefix="portamem-never-said-")
        mem = Memory(settings=Settings(path=path), embedder=embedder)
        try:
            play(mem, sc)
            for q in sc.questions:
                trace: list[Any] = []
                mem.search_memory(q.question, user_id=sc.user_id, now=sc.ask_at, trace=trace)
                finals = [e.final for e in trace]
                vectors = [e.candidate.components.get("vector", 0.0) for e in trace]
                answered = not q.unstored and any(holds(e.candidate.record.content, q.answer) for e in trace[:5])
                lead = max(vectors) - statistics.median(vectors) if len(vectors) > 1 else (vectors or [0.0])[0]
                out.append({"never": q.unstored, "answered": answered, "lang": sc.lang,
                            "best": max(finals, default=0.0), "lead": lead})
        finally:
            mem.close()
    return out


def curve(rows: list[dict[str, Any]], min_score: float) -> list[tuple[float, float, float]]:
    never = [r for r in rows if r["never"]]
    answered = [r for r in rows if r["answered"]]
    out = []
    for g in LEADS:
        def empties(r: dict[str, Any], g: float = g) -> bool:
            return r["best"] < min_score or r["lead"] < g
        out.append((g, sum(map(empties, never)) / max(1, len(never)),
                    sum(map(empties, answered)) / max(1, len(answered))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="dev", choices=["dev", "test"])
    ap.add_argument("--embedder", default="multilingual-e5-small-q4")
    ap.add_argument("--embedding-cache", default=None)
    args = ap.parse_args()
    embedder = CachedEmbedder(get_embedder(args.embedder), args.embedding_cache)
    scenarios = load_paraphrase(None, args.split) + load_scenarios(suite_path(args.split), args.split)
    rows = questions(scenarios, embedder)
    embedder.save()
    min_score = Settings().min_score
    print(f"{args.split}: {sum(r['never'] for r in rows)} questions about things never said, "
          f"{sum(r['answered'] for r in rows)} answerable (an answer among the first five candidates); "
          f"embedder {args.embedder}, min_score {min_score:g}")
    print("  lead under  never said: empty  answers lost")
    for g, never, lost in curve(rows, min_score):
        print(f"  {g:10.2f}  {never:17.2f}  {lost:12.3f}")


if __name__ == "__main__":
    main()
