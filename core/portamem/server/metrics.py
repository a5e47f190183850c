"""``/metrics``: the server in the Prometheus text format (``prometheus-client``).

- ``portamem_http_requests_total`` and ``portamem_http_request_duration_seconds`` (a histogram), by
  operation (the route template, ``/v1/memories/{memory_id}``, never a raw path), method and status;
  requests refused before routing (413, 421) count under ``(refused)``, paths no route has under ``(unmatched)``.
- The write queue: ``portamem_write_queue_depth``, ``..._capacity``, ``portamem_write_queue_rejected_total``
  (its 429s), ``portamem_write_operations_total``, ``portamem_write_transactions_total``.
- The indexer: ``portamem_index_pending`` (committed rows not in the vector index), ``portamem_index_oldest_pending_seconds``,
  ``portamem_index_rows_per_second`` (over the last minute), ``portamem_indexed_total``, ``portamem_index_failing``.
- Formation (``portamem.background.formation``): ``portamem_formation_pending`` (user turns not formed
  yet), ``portamem_formation_oldest_pending_seconds``, ``portamem_formation_turns_per_second``,
  ``portamem_formed_turns_total``, ``portamem_formation_fallbacks_total``,
  ``portamem_formation_refused_decisions_total``, ``portamem_formation_failing``.
- ``portamem_embedding_seconds`` (a histogram per embedder call, by kind: passage or query) and
  ``portamem_embedded_texts_total``.
- The chat model, when one is configured (``Settings.llm_url``): ``portamem_model_calls_total`` by outcome
  (ok, timeout, http, refused, error), ``portamem_model_invalid_answers_total`` (answers that were not the JSON
  asked for), ``portamem_model_fallbacks_total`` (the rules decided instead), ``portamem_model_tokens_total``
  by kind (prompt, completion; as the server reports them) and ``portamem_model_latency_seconds`` (a histogram).
- The read replica: ``portamem_replica_bytes``, ``portamem_replica_users``, ``portamem_replica_budget_bytes``.
- The store: ``portamem_memories`` by tenant and status, and ``portamem_evictions_total`` /
  ``portamem_purges_total`` by tenant since the server started. These are read from the store by a
  background thread every ``Settings.server_metrics_refresh_s`` (30 s), never per scrape
  (``portamem_store_stats_age_seconds`` says how old they are); the rest is read from memory.

Who may scrape: an ``admin`` key (``portamem keys create --scope admin``), or anyone a keyless loopback
server serves. The figures span every tenant, which a tenant's key must not see.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ..storage.schema import audit_t, memories
from .failures import describe

if TYPE_CHECKING:
    from .state import ServerState

__all__ = ["Metrics", "Measured", "CONTENT_TYPE_LATEST"]

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_EMBED_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The registry of one server, its request middleware and the store figures' refresher."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.registry = CollectorRegistry()
        self.requests = Counter("portamem_http_requests", "HTTP requests answered, by operation (route template), "
                                "method and status", ["operation", "method", "status"], registry=self.registry)
        self.latency = Histogram("portamem_http_request_duration_seconds", "Time to answer a request, by operation, "
                                 "method and status", ["operation", "method", "status"], buckets=_LATENCY_BUCKETS,
                                 registry=self.registry)
        self.embed_seconds = Histogram("portamem_embedding_seconds", "Time of one embedder call, by kind",
                                       ["kind"], buckets=_EMBED_BUCKETS, registry=self.registry)
        self.embedded = Counter("portamem_embedded_texts", "Texts embedded, by kind", ["kind"], registry=self.registry)
        self.registry.register(_Collector(self))
        self._store: dict[tuple[str, str], int] = {}
        self._evictions: dict[str, int] = {}
        self._purges: dict[str, int] = {}
        self._audit_pk: int | None = None
        self._store_at: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ requests
    def observe(self, scope: Any, status: int, seconds: float) -> None:
        route = scope.get("route")
        path = getattr(route, "path", None)
        if path is None:
            operation = "(refused)" if status in (413, 421) else "(unmatched)"
        else:
            operation = str(path)
        labels = (operation, str(scope.get("method", "")), str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # ------------------------------------------------------------------ embedder
    def time_embedder(self) -> None:
        """Time each call of the memory's embedder (the indexer's, searches' and queued rows' alike);
        ``portamem serve`` calls it on the embedder its own Memory loaded."""
        embedder = self.state.memory.embedder
        inner = embedder.embed
        hist, texts = self.embed_seconds, self.embedded

        def embed(batch: list[str], *, kind: str = "passage") -> Any:
            start = time.perf_counter()
            try:
                return inner(batch, kind=kind)
            finally:
                hist.labels(kind).observe(time.perf_counter() - start)
                texts.labels(kind).inc(len(batch))

        try:
            embedder.embed = embed  # type: ignore[method-assign]
        except (AttributeError, TypeError):
            log.info("embedder %s cannot be timed; portamem_embedding_seconds stays empty", type(embedder).__name__)

    # ------------------------------------------------------------------ store figures
    def start(self) -> None:
        """Read the store's figures once before the server answers (a scrape in the first instants found
        no ``portamem_memories`` while the thread had not read them yet), then every refresh interval."""
        self._refresh_logged()
        self._thread = threading.Thread(target=self._refresh_loop, name="portamem-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _refresh_loop(self) -> None:
        interval = self.state.memory.settings.server_metrics_refresh_s
        while not self._stop.wait(interval):
            self._refresh_logged()

    def _refresh_logged(self) -> None:
        try:
            self.refresh()
        except Exception as exc:
            log.warning("reading the store's figures for /metrics failed: %s", describe(exc))

    def refresh(self) -> None:
        """Count the store's memories by tenant and status, and the evictions and purges audited since the last look."""
        engine = self.state.memory.store.engine
        with engine.connect() as conn:
            sizes = {(t, st): int(n) for t, st, n in conn.execute(
                sa.select(memories.c.tenant_id, memories.c.status, sa.func.count())
                .group_by(memories.c.tenant_id, memories.c.status))}
            top = conn.execute(sa.select(sa.func.max(audit_t.c.pk))).scalar()
            counted: list[tuple[str, str, int]] = []
            if self._audit_pk is not None and top is not None and top > self._audit_pk:
                counted = [(t, a, int(n)) for t, a, n in conn.execute(
                    sa.select(audit_t.c.tenant_id, audit_t.c.action, sa.func.count())
                    .where(audit_t.c.pk > self._audit_pk, audit_t.c.pk <= top,
                           audit_t.c.action.in_(("evict", "purge")))
                    .group_by(audit_t.c.tenant_id, audit_t.c.action))]
        with self._lock:
            self._store, self._store_at = sizes, time.monotonic()
            if top is not None:
                self._audit_pk = top if self._audit_pk is None else max(self._audit_pk, top)
            elif self._audit_pk is None:
                self._audit_pk = 0
            for tenant, action, n in counted:
                into = self._evictions if action == "evict" else self._purges
                into[tenant] = into.get(tenant, 0) + n

    def store_figures(self) -> tuple[dict[tuple[str, str], int], dict[str, int], dict[str, int], float | None]:
        with self._lock:
            age = None if self._store_at is None else time.monotonic() - self._store_at
            return dict(self._store), dict(self._evictions), dict(self._purges), age


class Measured:
    """An ASGI middleware counting and timing every HTTP request by its route template (``Metrics.observe``)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.observe(scope, status or 500, time.perf_counter() - start)


class _Collector:
    """The figures read at scrape time from memory: the queue, the indexer, the replica, the store's cache."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        state = self.metrics.state
        q, mem = state.queue.stats, state.memory
        yield _gauge("portamem_write_queue_depth", "Writes waiting in the queue", q.pending)
        yield _gauge("portamem_write_queue_capacity", "Writes the queue holds before it answers 429", q.max_pending)
        yield _counter("portamem_write_queue_rejected", "Writes refused with 429 because the queue was full", q.rejected)
        yield _counter("portamem_write_operations", "Write operations applied", q.operations)
        yield _counter("portamem_write_transactions", "Transactions the writer committed", q.transactions)
        index = mem.stats()
        yield _gauge("portamem_index_pending", "Committed rows not yet in the vector index", index.pending)
        yield _gauge("portamem_index_oldest_pending_seconds", "Age of the oldest of them", index.oldest_pending_s)
        yield _gauge("portamem_index_rows_per_second", "Rows indexed per second over the last minute",
                     index.indexed_per_s)
        yield _counter("portamem_indexed", "Rows this server's indexer wrote", index.indexed_total)
        yield _gauge("portamem_index_failing", "1 while the indexer's last batch failed", int(bool(index.last_error)))
        yield from formation_metrics(getattr(index, "formation", None))
        yield from model_metrics(getattr(index, "model", None))
        vectors = mem.vectors
        yield _gauge("portamem_replica_bytes", "Bytes of the in-memory vector replica", vectors.resident_bytes())
        yield _gauge("portamem_replica_users", "Users whose vectors the replica holds", vectors.resident_users())
        yield _gauge("portamem_replica_budget_bytes", "The replica's budget (Settings.replica_budget_mb)",
                     vectors.budget)
        if state.key_cache is not None:
            yield _gauge("portamem_api_keys_active", "API keys not revoked", state.key_cache.active_count)
        sizes, evictions, purges, age = self.metrics.store_figures()
        family = GaugeMetricFamily("portamem_memories", "Memories in the store by tenant and status",
                                   labels=["tenant", "status"])
        if age is not None and not sizes:  # an empty store has a series too: 0 active memories
            sizes = {(mem.tenant_id, "active"): 0}
        for (tenant, status), n in sorted(sizes.items()):
            family.add_metric([tenant, status], n)
        yield family
        for name, doc, values in (("portamem_evictions", "Memories evicted by decay since the server started",
                                   evictions),
                                  ("portamem_purges", "Forgotten memories purged since the server started", purges)):
            counter = CounterMetricFamily(name, doc, labels=["tenant"])
            for tenant, n in sorted(values.items()):
                counter.add_metric([tenant], n)
            yield counter
        if age is not None:
            yield _gauge("portamem_store_stats_age_seconds", "Age of the store figures above", age)


def formation_metrics(formation: Any) -> Iterator[Metric]:
    """The formation worker's backlog (``portamem.background.formation.FormationStats``)."""
    if formation is None:
        return
    yield _gauge("portamem_formation_pending", "User turns queued for formation, not formed yet", formation.pending)
    yield _gauge("portamem_formation_oldest_pending_seconds", "Age of the oldest of them", formation.oldest_pending_s)
    yield _gauge("portamem_formation_turns_per_second", "Turns formed per second over the last minute",
                 formation.formed_per_s)
    yield _counter("portamem_formed_turns", "Turns this server's formation worker formed", formation.formed_total)
    yield _counter("portamem_formation_fallbacks", "Turns the model was asked about and the rules decided instead",
                   formation.fallbacks)
    yield _counter("portamem_formation_refused_decisions", "Reconciler decisions the checks refused",
                   formation.refused)
    yield _gauge("portamem_formation_failing", "1 while the formation worker's last round failed",
                 int(bool(formation.last_error)))


def model_metrics(snapshot: dict[str, Any] | None) -> Iterator[Metric]:
    """The chat model's counters (``portamem.models.ModelStats.snapshot()``); nothing without a model."""
    if not snapshot:
        return
    calls = CounterMetricFamily("portamem_model_calls", "Chat model calls by how they ended", labels=["outcome"])
    for outcome, n in sorted(snapshot["outcomes"].items()):
        calls.add_metric([outcome], n)
    yield calls
    yield _counter("portamem_model_invalid_answers", "Model answers that were not the JSON asked for",
                   snapshot["failures"]["invalid"])
    yield _counter("portamem_model_fallbacks", "Questions to the model the rules answered instead",
                   snapshot["fallbacks"])
    tokens = CounterMetricFamily("portamem_model_tokens", "Tokens the model server reported, by kind", labels=["kind"])
    tokens.add_metric(["prompt"], snapshot["prompt_tokens"])
    tokens.add_metric(["completion"], snapshot["completion_tokens"])
    yield tokens
    latency = snapshot["latency_s"]
    histogram = HistogramMetricFamily("portamem_model_latency_seconds", "Time of one chat model call")
    histogram.add_metric([], [(_bound(b), n) for b, n in latency["buckets"]], sum_value=latency["sum"])
    yield histogram


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=float(value))


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=float(value))
