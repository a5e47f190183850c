"""``/metrics``' chat model families, rendered from a ``ModelStats`` snapshot in the Prometheus text format."""

from __future__ import annotations

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from portamem.models import ModelStats  # noqa: E402
from portamem.server.metrics import model_metrics  # noqa: E402


class _Collector:
    def __init__(self, snapshot: dict | None) -> None:  # type: ignore[type-arg]
        self.snapshot = snapshot

    def collect(self):  # type: ignore[no-untyped-def]
        yield from model_metrics(self.snapshot)


def _scrape(snapshot: dict | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:  # type: ignore[type-arg]
    registry = CollectorRegistry()
    registry.register(_Collector(snapshot))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_model_families_count_calls_tokens_latency_and_fallbacks() -> None:
    stats = ModelStats()
    stats.record_call("ok", 0.8, prompt_tokens=120, completion_tokens=30)
    stats.record_call("ok", 3.0, prompt_tokens=100, completion_tokens=20)
    stats.record_call("timeout", 5.0)
    stats.record_invalid()
    stats.record_fallback()
    got = _scrape(stats.snapshot())
    assert got[("portamem_model_calls_total", (("outcome", "ok"),))] == 2
    assert got[("portamem_model_calls_total", (("outcome", "timeout"),))] == 1
    assert got[("portamem_model_calls_total", (("outcome", "http"),))] == 0
    assert got[("portamem_model_invalid_answers_total", ())] == 1
    assert got[("portamem_model_fallbacks_total", ())] == 1
    assert got[("portamem_model_tokens_total", (("kind", "prompt"),))] == 220
    assert got[("portamem_model_tokens_total", (("kind", "completion"),))] == 50
    assert got[("portamem_model_latency_seconds_count", ())] == 3
    assert got[("portamem_model_latency_seconds_sum", ())] == pytest.approx(8.8)
    assert got[("portamem_model_latency_seconds_bucket", (("le", "1.0"),))] == 1
    assert got[("portamem_model_latency_seconds_bucket", (("le", "5.0"),))] == 3


def test_no_model_no_model_families() -> None:
    assert _scrape(None) == {}
