"""A retrieval scorer that lifts memories saved with ``metadata={"pinned": True}``.

Install it (``pip install examples/custom_scorer``) and every ``portamem.Memory`` opened afterwards
ranks pinned memories higher, with no change to the application. The weight of the ``pinned``
component defaults to 0.5; set ``weights = {pinned = ...}`` in the settings to change it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from portamem import hookimpl


def pinned(query: str, candidates: list[Any], now: datetime, settings: Any) -> None:
    for cand in candidates:
        cand.components["pinned"] = 1.0 if cand.record.metadata.get("pinned") is True else 0.0


@hookimpl
def portamem_register_scorers(register: Callable[..., None]) -> None:
    register("pinned", pinned, 0.5)
