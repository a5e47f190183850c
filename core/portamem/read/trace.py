"""What ranking did with each candidate of one search, and the readable account of it that
``search_memory(debug=True)`` prints.

May import: the data model and the read path's candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .candidates import SOURCES, Candidate

__all__ = ["TraceEntry", "explain"]


@dataclass
class TraceEntry:
    """What ranking did with one candidate: its final score and its fate (kept, or why not)."""

    candidate: Candidate
    final: float
    fate: str = "kept"
    rank: int | None = None


def explain(query: str, trace: Sequence[TraceEntry], prompt: str = "", *, limit: int = 30) -> str:
    """A readable account of one search: every candidate with its sources, components, final score
    and fate, then the prompt text the kept hits make. For ``search_memory(debug=True)``."""
    names = sorted({n for e in trace for n in e.candidate.components}, key=lambda n: (n not in SOURCES, n))
    lines = [f"query: {query!r}  ({len(trace)} candidates)"]
    lines.append("  rank  final   " + " ".join(f"{n[:8]:>8}" for n in names) + "  found by          fate / content")
    for entry in list(trace)[:limit]:
        cand = entry.candidate
        record = cand.record
        text = " ".join(record.content.split())[:70] if record is not None else "?"
        comps = " ".join(f"{cand.components[n]:8.3f}" if n in cand.components else f"{'-':>8}" for n in names)
        raw = ", ".join(f"{k} {v:.3f}" for k, v in cand.raw.items())
        lines.append(f"  {entry.rank or '':>4}  {entry.final:.3f}  {comps}  {'+'.join(sorted(cand.found_by)):<16}  "
                     f"{entry.fate}: {text}")
        if raw:
            lines.append(f"{'':14}raw: {raw}")
    if len(trace) > limit:
        lines.append(f"  ... {len(trace) - limit} more candidates")
    lines.append("prompt:")
    lines.append(prompt or "  (nothing recalled)")
    return "\n".join(lines)
