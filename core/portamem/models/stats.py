"""Counters of a language model's use: calls by outcome, tokens, latency, answers refused, fallbacks.

One ``ModelStats`` is shared by a client and every ``ask_json`` made through it, from any thread (the
formation worker, a server request); ``Memory.stats()`` and ``/metrics`` read ``snapshot()``. The
latency keeps its sum and count for ever, a fixed histogram for Prometheus, and the last
``window`` calls for the median and p99 (a bounded window: a long-running server does not grow).
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from typing import Any

__all__ = ["ModelStats", "OUTCOMES", "LATENCY_BUCKETS"]

#: how a call ended: an answer, past its time limit, an HTTP error or no connection (the server may come
#: back), refused by the server (HTTP 4xx but 408 and 429: a setting is wrong), anything else
OUTCOMES = ("ok", "timeout", "http", "refused", "error")
#: upper bounds (seconds) of the latency histogram; a local 0.5B model takes 1-20 s a call
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ModelStats:
    """Thread-safe counters of one model's calls (the module docstring)."""

    def __init__(self, window: int = 512) -> None:
        self._lock = threading.Lock()
        self.calls = {o: 0 for o in OUTCOMES}
        #: answers that arrived but were not the JSON asked for (not parsed, or refused by ``validate``)
        self.invalid = 0
        #: ``ask_json`` gave up (every attempt failed): the caller used its rules instead
        self.fallbacks = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_sum = 0.0
        self.latency_count = 0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self._recent: deque[float] = deque(maxlen=window)

    def record_call(self, outcome: str, latency_s: float, *, prompt_tokens: int | None = None,
                    completion_tokens: int | None = None) -> None:
        """One call that ended with ``outcome`` (one of ``OUTCOMES``) after ``latency_s`` seconds."""
        if outcome not in self.calls:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        with self._lock:
            self.calls[outcome] += 1
            self.prompt_tokens += int(prompt_tokens or 0)
            self.completion_tokens += int(completion_tokens or 0)
            self.latency_sum += latency_s
            self.latency_count += 1
            self.buckets[bisect.bisect_left(LATENCY_BUCKETS, latency_s)] += 1
            self._recent.append(latency_s)

    def record_invalid(self) -> None:
        with self._lock:
            self.invalid += 1

    def record_fallback(self) -> None:
        with self._lock:
            self.fallbacks += 1

    def snapshot(self) -> dict[str, Any]:
        """Every counter at one instant, as plain data (JSON-ready)."""
        with self._lock:
            recent = sorted(self._recent)
            cumulative, running = [], 0
            for bound, n in zip((*LATENCY_BUCKETS, float("inf")), self.buckets):
                running += n
                cumulative.append((bound, running))
            return {
                "calls": sum(self.calls.values()),
                "outcomes": dict(self.calls),
                "failures": {"timeout": self.calls["timeout"], "http": self.calls["http"],
                             "refused": self.calls["refused"], "error": self.calls["error"], "invalid": self.invalid},
                "fallbacks": self.fallbacks,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "latency_s": {"sum": self.latency_sum, "count": self.latency_count,
                              "p50": _quantile(recent, 0.5), "p99": _quantile(recent, 0.99),
                              "buckets": cumulative},
            }


def _quantile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank quantile of sorted values, None when there are none."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]
