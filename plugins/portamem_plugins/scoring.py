"""Built-in retrieval scorers: recency ``exp(-lambda * age_hours)`` and stored importance."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from portamem import hookimpl
from portamem.read.candidates import Candidate
from portamem.read.scoring import recency_score


def recency(query: str, candidates: list[Candidate], now: datetime, settings: Any) -> None:
    lam = 0.01 if settings is None else settings.recency_lambda
    for cand in candidates:
        assert cand.record is not None
        cand.components["recency"] = recency_score(cand.record.created_at, now, lam)


def importance(query: str, candidates: list[Candidate], now: datetime, settings: Any) -> None:
    for cand in candidates:
        assert cand.record is not None
        cand.components["importance"] = float(cand.record.importance)


@hookimpl
def portamem_register_scorers(register: Callable[[str, Callable[..., None]], None]) -> None:
    register("recency", recency)
    register("importance", importance)
