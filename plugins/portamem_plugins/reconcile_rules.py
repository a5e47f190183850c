"""The rule reconciler (``portamem_reconcile``, last): what supersession's rules decide for a turn's
statements against the memories shown with them (``portamem.write.forming.rule_decisions``).

It is the no-model default and the fallback when the model reconciler passes (no model, a model that
failed, timed out or broke the contract): the rule pass of the indexer already applied what it decides
for the neighbours it saw, so in the formation worker it adds only what the wider look-up (keyword and
entity neighbours) finds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from portamem import hookimpl
from portamem.pipeline import Decision, FormationTurn, WriteContext
from portamem.records import MemoryRecord
from portamem.write.forming import rule_decisions

__all__ = ["portamem_reconcile"]


@hookimpl(trylast=True)
def portamem_reconcile(statements: Sequence[MemoryRecord], candidates: Mapping[str, Sequence[MemoryRecord]],
                       turn: FormationTurn, context: WriteContext, model: Any) -> list[Decision]:
    if not context.settings.supersede:  # a store that keeps every value keeps them here too
        return []
    return rule_decisions(statements, candidates)
