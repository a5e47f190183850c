"""Typed settings with documented defaults, loadable from a TOML file and PORTAMEM_* environment variables."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

__all__ = ["Settings", "DEFAULT_HALF_LIVES", "DEFAULT_WEIGHTS", "DEFAULT_TRUST_FACTORS", "DEFAULT_MIN_SCORE"]

#: half-life in days by memory kind (DESIGN.md, Lifecycle)
DEFAULT_HALF_LIVES: dict[str, float] = {
    "identity": 365.0,
    "preference": 90.0,
    "fact": 90.0,
    "episodic": 7.0,
    "task": 1.0,
}

#: final-score multipliers by trust (``portamem.write.trust``): a low-trust memory weighs 0.6 of an equal
#: high or medium one (ties between those two go to high)
DEFAULT_TRUST_FACTORS: dict[str, float] = {"high": 1.0, "medium": 1.0, "low": 0.6}

#: final = sum(weight * component), recency and importance scaled by the query evidence
#: (``portamem.read.scoring.combine``). From ``portamem tune`` on LoCoMo conversations 0-2, rounded;
#: entity keeps a small weight for exact identifiers, which LoCoMo's questions hardly ask about.
#: Recency 0.05 (not 0.1) since the threshold: a fresh memory must not lift an unrelated match over it
DEFAULT_WEIGHTS: dict[str, float] = {
    "vector": 0.5,
    "keyword": 0.45,
    "entity": 0.05,
    "recency": 0.05,
    "importance": 0.05,
}

#: the default ``min_score``: on LoCoMo conversations 0-2 the lowest round threshold that returns
#: nothing for 95% of questions asked of another conversation's memories without costing Recall@5
DEFAULT_MIN_SCORE = 0.1


@dataclass
class Settings:
    """Every tunable of portamem. ``path`` places the embedded stores; URLs override it."""

    #: directory of the embedded stores (records.sqlite3 and the milvus-lite index)
    path: str = "./portamem-data"
    #: SQLAlchemy URL of the record store; default sqlite in ``path``
    db_url: str | None = None
    #: the vector index: unset, a milvus-lite directory in ``path`` (the default, also with a PostgreSQL
    #: ``db_url``); a milvus-lite path ending in .db; a Milvus server ``http://host:19530[/database]``;
    #: ``"pgvector"``, a table in the records' own PostgreSQL database (which needs the pgvector extension:
    #: one database for everything, no index process); or a ``postgresql+psycopg://`` URL of another
    #: database with pgvector (``portamem.storage.pgvector``)
    vector_uri: str | None = None
    vector_token: str | None = None
    #: pgvector only: users with at least this many memories are searched through an HNSW index (built
    #: on the table when this is set, with iterative scans in strict order) instead of an exact scan of
    #: their rows, when the search narrows by the user alone (a metadata filter scans exactly: the walk
    #: under a filter loses neighbours); None: every search is exact, as numpy brute force
    #: (``benchmarks/pgvector.py``)
    vector_hnsw_above: int | None = None
    #: pgvector only: store the vectors as ``halfvec`` (half precision: 2 bytes a value, half the table) in a
    #: table of their own, filled from the records when the store opens (the ``vector`` table is left for
    #: you to drop); the exact scan agreed with float32 brute force on every top 10 measured, 11-13 % faster
    #: for one user of 100,000 memories and 27-51 % for 20 of 5,000 (``benchmarks/pgvector.py --halfvec``)
    vector_halfvec: bool = False
    #: where the embedded milvus-lite index runs: "child" (its own process, started, supervised and
    #: restarted by the store: the serving process holds none of its rows) or "inline" (threads of this
    #: process); None: ``PORTAMEM_VECTOR_PROCESS`` if set, else "child". A Milvus server URI ignores it
    vector_process: str | None = None
    #: where the background indexer's embedding, review (trust, dedupe, supersession) and index writes
    #: run: "thread" (a thread of this process) or "child" (a worker process the store starts and
    #: supervises, fed from the outbox, so a save holds this process's GIL only for its own
    #: transaction: ``portamem.background.process``); None: ``PORTAMEM_INDEXER_PROCESS`` if set, else
    #: "thread". "child" needs the index in a process of its own (``vector_process`` "child", or a
    #: Milvus server) and the embedder and plugins by name (the worker builds its own)
    indexer_process: str | None = None
    #: one Milvus partition per tenant+user: exact and fast filtered search on milvus-lite
    partition_per_user: bool = True
    #: embedding model: a registered name (see ``portamem.embedding.embedders.available_embedders``)
    #: or ``st:<path-or-name>`` for any sentence-transformers model
    embedder: str = "multilingual-e5-small-q4"
    #: processes that run the embedding model, each on one thread, outside this process's GIL
    #: (``portamem.embedding.embedders.ProcessEmbedder``); None: one per core; 0: in this process
    embed_workers: int | None = None
    tenant_id: str = "default"
    #: bounds of caller input (``portamem.write.validation``): longer or bigger values are refused with a
    #: ValidationError before anything is written
    max_content_chars: int = 8000
    max_id_chars: int = 256
    max_summary_chars: int = 2000
    #: metadata of a memory or a turn, as UTF-8 JSON
    max_metadata_bytes: int = 1_000_000
    max_metadata_depth: int = 16
    max_entities: int = 64
    max_entity_chars: int = 256
    #: the largest top_k a search accepts
    max_top_k: int = 1000
    #: working window size, in turns (a user message plus the reply); when it is full, its oldest half
    #: leaves together and becomes one episode of several turns
    window_turns: int = 8
    top_k: int = 5
    #: candidates fetched from each retriever before merging
    candidate_k: int = 50
    #: final = sum(weight * component). None: the embedder's own weights where its calibration carries
    #: some (``portamem.read.calibration.CALIBRATIONS``, fitted per model with ``portamem tune``), else
    #: ``DEFAULT_WEIGHTS``; set, they hold for every embedder (components left out from DEFAULT_WEIGHTS).
    #: ``Memory.settings.weights`` shows the ones in use
    weights: dict[str, float] | None = None
    #: recency = exp(-recency_lambda * age_hours): 0.002 halves it in about two weeks
    recency_lambda: float = 0.002
    #: hits with a lower final score are dropped: scores are absolute (``portamem.read.calibration``), so
    #: ``top_k`` is a maximum and a query about nothing stored returns nothing
    min_score: float = DEFAULT_MIN_SCORE
    #: share of the final score taken off per share of the query's entities that no memory of the
    #: user holds (a question about someone never mentioned); 0.7 from LoCoMo conversations 0-2
    unknown_entity_penalty: float = 0.7
    #: share of the final score taken off per share of the things whose identifier or reading the
    #: query asks for ("my passport number", "我的血型") that no memory of the user mentions a word of
    #: (``portamem.read.candidates.asked_identifiers``): nothing stored can give that value
    unknown_asked_penalty: float = 1.0
    #: share of the final score taken off per share of the things of the user's a personal question names
    #: ("What does my wife do?", "我老婆做什么工作？") that no memory of the user mentions
    #: (``portamem.read.candidates.asked_things``); less than all of it, since a thing is often introduced
    #: without its category word ("a beagle called Rolo" answers "my dog's name"). Chosen on the scenario
    #: suite's dev half: questions about nothing stored left empty 0.60 / 0.65 / 0.75 at 0 / 0.3 / 0.5, answer
    #: in prompt 0.904 / 0.898 / 0.893; 0.5 loses "a beagle called Rolo" for "What's my dog's name?"
    unknown_thing_penalty: float = 0.3
    #: ``recall`` leaves out of a prompt the hits below this share of the best hit's score, and hits
    #: with less query evidence (vector, keyword, entity) than ``prompt_min_evidence``: filler lines
    #: cost tokens and mislead (tuned on the scenario suite's dev split, ``portamem eval scenarios``)
    prompt_margin: float = 0.5
    prompt_min_evidence: float = 0.1
    #: a message that opens a task ("plan my business trip", "帮我订周五的餐厅") gets what the task will
    #: need in its first prompt (``portamem_preload``: home city, seat preference, budget ...), found
    #: by one search and marked as preloaded; at most ``preload_k`` memories, reused for the session's
    #: next ``preload_turns`` recalls instead of searching again while they stay on the task. Off by
    #: default: on the test half of ``portamem eval preload`` 0.62 of the preloaded lines meet a need
    #: (0.81 on dev), under the 0.8 a line shown unasked must reach
    preload: bool = False
    preload_k: int = 4
    preload_turns: int = 10
    #: maintenance writes one abstract memory per habit it finds among a user's memories (at least
    #: ``abstract_min_support`` close memories sharing words few others hold: "window seat, 8 of 10
    #: similar memories"); ``portamem.lifecycle.abstraction``
    abstract: bool = True
    abstract_min_support: int = 3
    abstract_similarity: float = 0.8
    #: storage tiers (``portamem.lifecycle.tiers``), moved by maintenance: a memory unused for
    #: ``warm_after_days`` (or its half-life, when longer) leaves the vector index for the warm tier
    #: (keyword and entity indexes, vector on disk); one unused for ``cold_after_days`` (or three
    #: half-lives) and used at most ``cold_max_access`` times moves to the compressed cold archive. Identity, preferences, keyed
    #: and abstract memories and the user's current statements stay hot by age alone;
    #: a warm memory used again comes back hot; a memory summed up by an abstract one goes warm once
    #: unused for ``tier_abstracted_days``
    tiers: bool = True
    warm_after_days: float = 30.0
    cold_after_days: float = 90.0
    cold_max_access: int = 2
    tier_abstracted_days: float = 7.0
    #: a search's warm pass runs when the best hot hit scores below this (thin evidence)
    warm_below: float = 0.35
    #: ``{"mean": .., "std": ..}`` of the embedder's cosine between unrelated (query, passage) pairs,
    #: for a model ``portamem.read.calibration.CALIBRATIONS`` lacks (measure it with ``portamem calibrate``)
    vector_calibration: dict[str, float] | None = None
    half_lives: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_HALF_LIVES))
    #: a new memory with cosine >= dedupe_threshold to one of the user's memories bumps its frequency
    dedupe: bool = True
    dedupe_threshold: float = 0.92
    #: a new value of a single-valued attribute ("my budget is 8000") supersedes the old one
    #: (``portamem.write.supersession``); off: both stay active and only the read path marks the conflict
    supersede: bool = True
    #: recall only for messages that refer back or name an entity the user's memories hold
    #: (``portamem.recall.needs_recall``); off: every message is searched
    recall_gate: bool = False
    #: run the write-triggers on every turn and keep what they vote for
    auto_capture: bool = True
    #: a trigger vote must be at least this strong to capture a turn
    trigger_threshold: float = 0.5
    #: decay eviction marks records whose retained value falls below this
    evict_below: float = 0.05
    grace_days: float = 7.0
    pool_capacity: int = 5000
    #: rows the background indexer embeds, reviews and indexes per batch
    index_batch: int = 64
    #: a vector search scores the user's writes not yet indexed itself (read-your-writes, ``portamem.background.queued``);
    #: above 0 it first waits at most this long for the indexer's review of them (merges, supersession)
    search_wait_s: float = 0.0
    #: how long ``save_memory(wait=True)`` waits for the indexer before ``IndexingTimeoutError``
    index_wait_s: float = 300.0
    #: memory for the per-user read replica of the vector index (float32 matrices, least recently
    #: used users dropped first); 0 serves every search from the Milvus index
    replica_budget_mb: float = 512.0
    #: memory for the keyword postings searches read (by user and term, least recently used dropped
    #: first), scored in memory instead of in SQL; SQLite only (a shared PostgreSQL store scores in SQL)
    keyword_cache_mb: float = 256.0
    #: query embeddings kept (by model and text) so a repeated question is not embedded again
    query_cache_size: int = 1024
    #: run maintenance (eviction, purge, consolidation, audit scan) every this many seconds in a
    #: background thread of each ``Memory``; None: only when ``maintain()`` is called
    maintain_interval_s: float | None = None
    #: a session whose last turn is this old has ended: when the user recalls in another session (and
    #: at maintenance) its window leaves as episodes, so the next conversation finds what it said
    session_idle_s: float = 1800.0
    #: reindex automatically on open when the embedder changed (else raise)
    auto_reindex: bool = True
    #: final-score multipliers by trust (high/medium/low); never higher for lower trust
    trust_factors: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TRUST_FACTORS))
    #: redact the working window's turns too (they are stored until they leave the window)
    redact_window: bool = True
    #: base64 X25519 public key (``portamem vault-keygen``): when set, the originals of redacted
    #: memories are sealed to it; only the matching private key, kept away from the store, reveals them
    pii_vault_public_key: str | None = None
    #: how long a search may spend embedding its user's rows the indexer has not reached (after a crash,
    #: thousands may wait): None scores every one of them (``portamem.background.queued``); a number of
    #: seconds leaves the oldest past it to the index (keyword search finds them meanwhile)
    search_queued_budget_s: float | None = None
    #: ``portamem serve``: the largest request body taken (bytes); a longer one is refused with HTTP 413
    #: while it is read, before any of it is parsed or its key checked. The import route keeps its own
    #: limit (512 MiB, spooled to disk). 4 MiB holds a save with the largest metadata (max_metadata_bytes)
    server_max_body_bytes: int = 4 * 1024 * 1024
    #: ``portamem serve``: the request bytes all requests together may hold at once (bodies being read,
    #: and being handled until answered); a request that would pass it waits up to 5 s, then gets HTTP 429
    #: ``OverloadedError`` with ``Retry-After``. Never below ``server_max_body_bytes``
    server_max_inflight_bytes: int = 16 * 1024 * 1024
    #: ``portamem serve``: serve callers without a key as the local user (every scope), decided once at
    #: start (``--keyless``): on a loopback address only and without ``server_allowed_hosts`` (a proxy in
    #: front would hand the world a loopback connection). Off, a server with no key refuses every request
    server_keyless: bool = False
    #: ``portamem serve``: the Host names (``name`` or ``name:port``) a request may carry, beside the loopback
    #: names a server on a loopback address always takes; a server on a loopback address refuses any other
    #: Host with HTTP 421 (the DNS-rebinding defence); on another address the list applies only when given.
    #: From the environment: comma-separated
    server_allowed_hosts: list[str] | None = None
    #: ``portamem serve``: how often the API key cache looks for a created or revoked key (seconds; a revoked
    #: key is refused within about this long, also when another process revoked it)
    server_key_refresh_s: float = 0.5
    #: ``portamem serve``: how often ``/metrics``' store size per tenant and eviction/purge counts are read
    #: from the store (seconds), so a scrape never counts the rows itself
    server_metrics_refresh_s: float = 30.0
    #: an OpenAI-compatible chat model (``portamem.models``): its base URL ending in ``/v1``
    #: (``http://127.0.0.1:8080/v1``); None: no model, the rules do everything
    llm_url: str | None = None
    #: the model name the server serves (``PORTAMEM_LLM_MODEL``)
    llm_model: str | None = None
    #: bearer key of the model server; from the environment (``PORTAMEM_LLM_API_KEY``), never shown in a repr
    llm_api_key: str | None = field(default=None, repr=False)
    #: the longest one model call may take (seconds); a call past it is not retried
    llm_timeout_s: float = 30.0
    #: how many times a call that met a server error (HTTP 5xx, no connection) is tried again
    llm_retries: int = 1
    #: with ``llm_url`` set, the formation worker also asks the model for each user turn's statements
    #: (``portamem_plugins.llm_extract``, off the acknowledged path: the rules have read the turn already, and
    #: read it again when the model's answer breaks the contract or comes late); off: the model reconciles only
    llm_extract: bool = False
    #: the tokens the model extractor's answer may take (its schema bounds the statements and their lengths)
    llm_extract_max_tokens: int = 256
    #: a reranker of each search's best hits after scoring (``portamem.read.rerank``, the ``portamem_rerank``
    #: hook): None (off), ``"mmr"`` (diversity: a hit like one ranked above it goes down), ``"cross-encoder"``
    #: (a sentence-transformers CrossEncoder at ``rerank_model``) or ``"model"`` (the chat model at ``llm_url``
    #: orders them); another name is a plugin's
    rerank: str | None = None
    #: how many of the best hits the reranker is shown (at least the search's top_k)
    rerank_candidates: int = 20
    #: MMR's balance of relevance (1: the scoring's order) against diversity (towards 0)
    rerank_mmr_lambda: float = 0.7
    #: the CrossEncoder of ``rerank="cross-encoder"``: a local path or a model name sentence-transformers loads
    rerank_model: str | None = None

    def __post_init__(self) -> None:
        if self.embed_workers is not None and (isinstance(self.embed_workers, bool) or self.embed_workers < 0):
            raise ConfigError(f"embed_workers must be None (one per core) or an integer >= 0, got {self.embed_workers}")
        if self.max_content_chars < 1 or self.window_turns < 0 or self.top_k < 1:
            raise ConfigError("max_content_chars and top_k must be >= 1, window_turns >= 0")
        bounds = ("max_id_chars", "max_summary_chars", "max_metadata_bytes", "max_metadata_depth", "max_entities",
                  "max_entity_chars", "max_top_k")
        if any(isinstance(getattr(self, b), bool) or not isinstance(getattr(self, b), int) or getattr(self, b) < 1
               for b in bounds):
            raise ConfigError(f"{', '.join(bounds)} must be integers >= 1")
        if self.abstract_min_support < 2 or not 0.0 <= self.abstract_similarity <= 1.0:
            raise ConfigError("abstract_min_support must be >= 2 and abstract_similarity in [0, 1], "
                              f"got {self.abstract_min_support}, {self.abstract_similarity}")
        if not (0 < self.warm_after_days <= self.cold_after_days and self.tier_abstracted_days > 0
                and isinstance(self.cold_max_access, int) and self.cold_max_access >= 0 and self.warm_below >= 0):
            raise ConfigError("tiers need 0 < warm_after_days <= cold_after_days, tier_abstracted_days > 0, "
                              f"cold_max_access >= 0 and warm_below >= 0; got {self.warm_after_days}, "
                              f"{self.cold_after_days}, {self.tier_abstracted_days}, {self.cold_max_access}, "
                              f"{self.warm_below}")
        if self.preload_k < 1 or self.preload_turns < 0:
            raise ConfigError(f"preload_k must be >= 1 and preload_turns >= 0, got {self.preload_k}, {self.preload_turns}")
        if self.top_k > self.max_top_k:
            raise ConfigError(f"top_k ({self.top_k}) must not exceed max_top_k ({self.max_top_k})")
        if self.index_batch < 1 or self.search_wait_s < 0 or self.index_wait_s <= 0 or self.replica_budget_mb < 0 \
                or self.keyword_cache_mb < 0 or self.query_cache_size < 0:
            raise ConfigError("index_batch must be >= 1, index_wait_s > 0, and search_wait_s, replica_budget_mb, "
                              "keyword_cache_mb, query_cache_size >= 0")
        if self.vector_process not in (None, "child", "inline"):
            raise ConfigError(f"vector_process must be 'child' or 'inline', got {self.vector_process!r}")
        if self.vector_hnsw_above is not None and (isinstance(self.vector_hnsw_above, bool)
                                                   or not isinstance(self.vector_hnsw_above, int)
                                                   or self.vector_hnsw_above < 1):
            raise ConfigError(f"vector_hnsw_above must be None or an integer >= 1, got {self.vector_hnsw_above!r}")
        if not isinstance(self.vector_halfvec, bool):
            raise ConfigError(f"vector_halfvec must be true or false, got {self.vector_halfvec!r}")
        if self.indexer_process not in (None, "thread", "child"):
            raise ConfigError(f"indexer_process must be 'thread' or 'child', got {self.indexer_process!r}")
        if not 0.0 < self.dedupe_threshold <= 1.0:
            raise ConfigError(f"dedupe_threshold must be in (0, 1], got {self.dedupe_threshold}")
        if self.vector_calibration is not None:
            # the bounds of ``portamem.read.calibration.Calibration``
            try:
                mean, std = float(self.vector_calibration["mean"]), float(self.vector_calibration["std"])
            except (KeyError, TypeError, ValueError):
                mean, std = math.nan, math.nan
            if not (-1.0 <= mean < 1.0 and 0.0 < std < 1.0):
                raise ConfigError(f"vector_calibration needs numbers 'mean' in [-1, 1) and 'std' in (0, 1), "
                                  f"got {self.vector_calibration!r}")
        if not self.session_idle_s > 0:
            raise ConfigError(f"session_idle_s must be a positive number of seconds, got {self.session_idle_s}")
        if self.maintain_interval_s is not None and not self.maintain_interval_s > 0:
            raise ConfigError(f"maintain_interval_s must be a positive number of seconds, got {self.maintain_interval_s}")
        if not (0.0 <= self.prompt_margin <= 1.0 and 0.0 <= self.prompt_min_evidence <= 1.0):
            raise ConfigError(f"prompt_margin and prompt_min_evidence must be in [0, 1], got {self.prompt_margin}, "
                              f"{self.prompt_min_evidence}")
        if isinstance(self.server_max_body_bytes, bool) or not isinstance(self.server_max_body_bytes, int) \
                or self.server_max_body_bytes < 1024:
            raise ConfigError(f"server_max_body_bytes must be an integer >= 1024, got {self.server_max_body_bytes!r}")
        if isinstance(self.server_max_inflight_bytes, bool) or not isinstance(self.server_max_inflight_bytes, int) \
                or self.server_max_inflight_bytes < 1024:
            raise ConfigError("server_max_inflight_bytes must be an integer >= 1024, got "
                              f"{self.server_max_inflight_bytes!r}")
        if self.server_allowed_hosts is not None and (
                isinstance(self.server_allowed_hosts, str) or not isinstance(self.server_allowed_hosts, (list, tuple))
                or not all(isinstance(h, str) and h.strip() for h in self.server_allowed_hosts)):
            raise ConfigError(f"server_allowed_hosts must be a list of host names, got {self.server_allowed_hosts!r}")
        if self.search_queued_budget_s is not None and not self.search_queued_budget_s >= 0:
            raise ConfigError(f"search_queued_budget_s must be None or >= 0 seconds, got {self.search_queued_budget_s}")
        if not (0 < self.server_key_refresh_s <= 60 and 0 < self.server_metrics_refresh_s <= 86400):
            raise ConfigError("server_key_refresh_s must be in (0, 60] and server_metrics_refresh_s in (0, 86400]")
        if not self.llm_timeout_s > 0 or isinstance(self.llm_retries, bool) or not isinstance(self.llm_retries, int) \
                or self.llm_retries < 0:
            raise ConfigError(f"llm_timeout_s must be > 0 seconds and llm_retries an integer >= 0, "
                              f"got {self.llm_timeout_s}, {self.llm_retries!r}")
        if isinstance(self.llm_extract_max_tokens, bool) or not isinstance(self.llm_extract_max_tokens, int) \
                or not 32 <= self.llm_extract_max_tokens <= 4096:
            raise ConfigError(f"llm_extract_max_tokens must be an integer from 32 to 4096, "
                              f"got {self.llm_extract_max_tokens!r}")
        if self.llm_url is not None and not str(self.llm_url).startswith(("http://", "https://")):
            raise ConfigError(f"llm_url must be an http(s) base URL ending in /v1, got {self.llm_url!r}")
        self._check_rerank()
        if not 0.0 <= self.unknown_entity_penalty <= 1.0:
            raise ConfigError(f"unknown_entity_penalty must be in [0, 1], got {self.unknown_entity_penalty}")
        if not 0.0 <= self.unknown_asked_penalty <= 1.0:
            raise ConfigError(f"unknown_asked_penalty must be in [0, 1], got {self.unknown_asked_penalty}")
        if not 0.0 <= self.unknown_thing_penalty <= 1.0:
            raise ConfigError(f"unknown_thing_penalty must be in [0, 1], got {self.unknown_thing_penalty}")
        if self.weights is not None and (not isinstance(self.weights, dict) or any(
                not isinstance(w, (int, float)) or w < 0 for w in self.weights.values())):
            raise ConfigError(f"weights must be non-negative numbers, got {self.weights}")
        factors = {**DEFAULT_TRUST_FACTORS, **self.trust_factors}
        if set(factors) != set(DEFAULT_TRUST_FACTORS) or any(
            isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1 for f in factors.values()
        ) or not factors["low"] <= factors["medium"] <= factors["high"]:
            raise ConfigError(f"trust_factors must give high/medium/low each in (0, 1], low <= medium <= high; "
                              f"got {self.trust_factors}")

    def _check_rerank(self) -> None:
        if self.rerank is not None and (not isinstance(self.rerank, str) or not self.rerank.strip()):
            raise ConfigError(f"rerank must be None or a reranker's name ('mmr', 'cross-encoder', 'model'), "
                              f"got {self.rerank!r}")
        # the depth a reranker reads is bounded like any search's, when a reranker is named
        most = self.max_top_k if self.rerank is not None else float("inf")
        if isinstance(self.rerank_candidates, bool) or not isinstance(self.rerank_candidates, int) \
                or not 1 <= self.rerank_candidates <= most:
            raise ConfigError(f"rerank_candidates must be an integer from 1 to max_top_k ({self.max_top_k}) "
                              f"when a reranker is named, got {self.rerank_candidates!r}")
        if not 0.0 < self.rerank_mmr_lambda <= 1.0:
            raise ConfigError(f"rerank_mmr_lambda must be in (0, 1] (1: no diversity), got {self.rerank_mmr_lambda}")
        if self.rerank == "cross-encoder" and not self.rerank_model:
            raise ConfigError("rerank='cross-encoder' needs rerank_model: the path or name of a sentence-transformers "
                              "CrossEncoder (pip install 'portamem[sentence-transformers]')")
        if self.rerank == "model" and self.llm_url is None:
            raise ConfigError("rerank='model' needs a chat model: set llm_url (and llm_model)")

    @property
    def resolved_db_url(self) -> str:
        return self.db_url or f"sqlite:///{Path(self.path).resolve() / 'records.sqlite3'}"

    @property
    def resolved_vector_uri(self) -> str:
        return self.vector_uri or str(Path(self.path).resolve() / "vectors.db")

    @property
    def resolved_vector_process(self) -> str:
        """How the embedded vector index runs (``vector_process``), the environment's word when unset."""
        return _chosen(self.vector_process, "PORTAMEM_VECTOR_PROCESS", ("child", "inline"))

    @property
    def resolved_indexer_process(self) -> str:
        """Where the background indexer runs (``indexer_process``), the environment's word when unset."""
        return _chosen(self.indexer_process, "PORTAMEM_INDEXER_PROCESS", ("thread", "child"))

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(
        cls,
        file: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Defaults, then the ``[portamem]`` table of a TOML file, then ``PORTAMEM_<FIELD>`` variables, then overrides."""
        values: dict[str, Any] = {}
        env = os.environ if env is None else env
        file = file or env.get("PORTAMEM_CONFIG")
        if file:
            try:
                data = tomllib.loads(Path(file).read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {file}: {exc}") from exc
            values.update(data.get("portamem", data))
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, f in fields.items():
            raw = env.get(f"PORTAMEM_{name.upper()}")
            if raw is not None:
                values[name] = _parse_env(name, raw, f)
        values.update({k: v for k, v in overrides.items() if v is not None})
        unknown = set(values) - set(fields)
        if unknown:
            raise ConfigError(f"unknown settings: {sorted(unknown)}; known: {sorted(fields)}")
        if values.get("weights") is not None:
            values["weights"] = {**DEFAULT_WEIGHTS, **values["weights"]}
        if "half_lives" in values:
            values["half_lives"] = {**DEFAULT_HALF_LIVES, **values["half_lives"]}
        if "trust_factors" in values:
            values["trust_factors"] = {**DEFAULT_TRUST_FACTORS, **values["trust_factors"]}
        return cls(**values)


def _chosen(value: str | None, variable: str, allowed: tuple[str, ...]) -> str:
    """A setting's word, else the environment's, else the first of ``allowed`` (the default)."""
    chosen = value or os.environ.get(variable) or allowed[0]
    if chosen not in allowed:
        raise ConfigError(f"{variable} must be {' or '.join(repr(a) for a in allowed)}, got {chosen!r}")
    return chosen


def _parse_env(name: str, raw: str, f: dataclasses.Field[Any]) -> Any:
    kind = str(f.type).removesuffix(" | None")
    try:
        if "dict" in kind:
            return json.loads(raw)
        if kind.startswith("list"):  # a list of names: comma-separated (or a JSON list)
            return json.loads(raw) if raw.lstrip().startswith("[") else [x.strip() for x in raw.split(",") if x.strip()]
        if kind == "bool":
            if raw.lower() not in {"1", "0", "true", "false", "yes", "no"}:
                raise ValueError(raw)
            return raw.lower() in {"1", "true", "yes"}
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as exc:
        raise ConfigError(f"PORTAMEM_{name.upper()}={raw!r} is not a valid {kind}") from exc
    return raw
