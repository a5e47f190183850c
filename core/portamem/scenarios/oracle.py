"""Oracle statements: what a perfect extractor would write for each turn of the dev half, written by hand
(``dev.oracle.jsonl``), fed to the write path in place of the rules' reading of the turn.

``portamem eval scenarios --oracle`` plays the dev conversations with an extractor plugin that answers
each user turn with its oracle statements (and nothing for a question, a request or small talk), so
capture writes exactly those sentences; everything after it is the real thing: the rules' reading of
each stored sentence, the indexer's review, formation's reconciler and the read path. The figures bound
what reconciliation and recall can reach from perfect statements: where they fall short, the reconciler
or the read path is the bottleneck, not the extractor.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pluggy

from ..errors import ValidationError
from ..hookspecs import hookimpl
from ..pipeline import Extraction, WriteContext
from ..plugins import get_plugin_manager
from ..language.statements import Statement

__all__ = ["ORACLE_SPLIT", "load_oracle", "OracleExtractor", "oracle_plugins"]

#: the split the packaged oracle statements are written for
ORACLE_SPLIT = "dev"


def load_oracle(path: str | Path | None = None) -> dict[tuple[str, str, int], list[str]]:
    """The oracle statements by (conversation, session, turn index); the packaged dev file by default."""
    source: Any = path if path is not None else resources.files(__package__ or "portamem.scenarios").joinpath(
        f"{ORACLE_SPLIT}.oracle.jsonl")
    out: dict[tuple[str, str, int], list[str]] = {}
    with source.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            statements = row.get("statements")
            if not isinstance(statements, list) or not all(isinstance(s, str) and s.strip() for s in statements):
                raise ValidationError(f"oracle line {n}: statements must be a list of non-blank strings")
            out[(str(row["conversation"]), str(row["session"]), int(row["turn"]))] = list(statements)
    return out


class OracleExtractor:
    """Answers the extract hook for each user turn of one conversation, once, with the turn's oracle
    statements; every other text (a stored sentence read again, the formation worker's second look) is
    left to the next extractor, the rules."""

    def __init__(self, turns: Sequence[tuple[str, list[str]]]) -> None:
        self._pending: dict[str, deque[list[str]]] = defaultdict(deque)
        for text, statements in turns:
            self._pending[text.strip()].append(statements)

    @hookimpl(tryfirst=True)
    def portamem_extract(self, text: str, context: WriteContext) -> Extraction | None:
        queued = self._pending.get(text.strip())
        if not queued:
            return None
        statements = queued.popleft()
        # a turn with no oracle statement says nothing to keep: one sentence that is not a statement
        return Extraction(
            statements=[Statement("statement", s, text=s) for s in statements],
            utterances=[(s, "statement") for s in statements] or [(text.strip(), "question")])


def oracle_plugins(scenario: Any, oracle: Mapping[tuple[str, str, int], list[str]]) -> pluggy.PluginManager:
    """The plugin manager of one conversation: the built-ins with the oracle extractor first."""
    pm = get_plugin_manager()
    turns = [(turn.user, list(oracle.get((scenario.id, session.id, i), [])))
             for session in scenario.sessions for i, turn in enumerate(session.turns)]
    pm.register(OracleExtractor(turns), name="oracle_extractor")
    return pm
