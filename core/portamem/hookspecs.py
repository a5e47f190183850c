"""Hook specifications: the whole manual of a portamem plugin.

A plugin is any object or module with functions named like the hooks below, decorated with
``portamem.hookimpl``, and registered through the ``portamem`` entry-point group::

    [project.entry-points.portamem]
    my_plugin = "my_package.my_module"

Every hook receives keyword arguments only; a plugin may accept any subset of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .config import Settings
    from .pipeline import Decision, Extraction, FormationTurn, GuardVerdict, Habit, Preload, Redaction, TriggerVote, \
        WriteContext
    from .records import MemoryRecord, SearchHit, Turn

__all__ = [
    "hookspec",
    "hookimpl",
    "portamem_write_trigger",
    "portamem_guard",
    "portamem_redact",
    "portamem_extract",
    "portamem_score_importance",
    "portamem_register_scorers",
    "portamem_eviction_policy",
    "portamem_register_eviction_policies",
    "portamem_summarize_turns",
    "portamem_merge_statements",
    "portamem_preload",
    "portamem_summarize_habit",
    "portamem_reconcile",
    "portamem_rerank",
]

hookspec = pluggy.HookspecMarker("portamem")
hookimpl = pluggy.HookimplMarker("portamem")


@hookspec
def portamem_write_trigger(text: str, context: WriteContext) -> TriggerVote | None:
    """Vote on whether a turn's text should be written to long-term memory, and as what.

    Called for every turn (``Memory.observe_turn``) and for working-window turns before they are
    compressed. Every plugin votes (broadcast); the votes are combined by strength.

    :param text: the user's message of the turn.
    :param context: who wrote it (tenant, user, session, source) and the settings.
    :return: a ``TriggerVote`` (remember or not, type, kind, strength 0..1, reason), or None to abstain.
    """


@hookspec
def portamem_guard(record: MemoryRecord, context: WriteContext) -> GuardVerdict | None:
    """Inspect a memory before it is stored; flag injection and poisoning attempts.

    Called on every write, before redaction. Every guard runs (broadcast); the strictest verdict wins:
    ``quarantine`` keeps the text out of long-term memory, ``pending`` stores it inactive until confirmed.

    :param record: the memory about to be written (not yet stored; do not mutate).
    :param context: who wrote it and the settings.
    :return: a ``GuardVerdict`` (action and reason), or None to allow.
    """


@hookspec
def portamem_redact(text: str, context: WriteContext) -> Sequence[Redaction] | None:
    """Find personal data in text that must not be stored in clear.

    Called on every write after the guard, for the content and summary. Every redactor runs (broadcast);
    overlapping spans are resolved longest-first and each span is replaced by its typed placeholder.

    :param text: the text to scan.
    :param context: who wrote it and the settings.
    :return: the spans to replace (``Redaction(start, end, kind, placeholder)``), or None.
    """


@hookspec(firstresult=True)
def portamem_extract(text: str, context: WriteContext) -> Extraction | None:
    """Structure a memory: entities, (subject, relation, object) triples and a summary.

    Called on every write that did not bring its own entities. Stops at first non-None result.

    :param text: the (redacted) memory content.
    :param context: who wrote it and the settings.
    :return: an ``Extraction``, or None to let the next extractor try.
    """


@hookspec(firstresult=True)
def portamem_score_importance(record: MemoryRecord, context: WriteContext) -> int | None:
    """Rate a memory on the 1-100 importance bands.

    Bands: 1-20 transient state, 21-50 ordinary fact, 51-80 preference or profile,
    81-100 identity and rules that must not be lost. Called when the caller gave no importance.
    Stops at first non-None result.

    :param record: the memory about to be written.
    :param context: who wrote it and the settings.
    :return: an integer band 1..100, or None to pass.
    """


@hookspec
def portamem_register_scorers(register: Callable[[str, Callable[..., None]], None]) -> None:
    """Offer retrieval scorers, each adding or changing named score components of candidates.

    Called once when a ``Memory`` opens. Call ``register(name, scorer)`` for each scorer, where
    ``scorer(query: str, candidates: list[Candidate], now: datetime, settings: Settings) -> None``
    sets ``candidate.components[...]`` (each 0..1; ``candidate.record`` is the stored record). A
    component counts in the final score with the weight ``Settings.weights[component]`` (0 when unset).
    ``register(name, scorer, weight)`` also offers a default weight for component ``name``, used
    when ``Settings.weights`` does not set one. The built-in ``hybrid_scoring`` plugin adds
    ``recency`` and ``importance`` this way.

    :param register: the callback that records a scorer under a unique name.
    """


@hookspec(firstresult=True)
def portamem_eviction_policy(
    records: Sequence[MemoryRecord], now: datetime, settings: Settings
) -> Sequence[str] | None:
    """Choose which of a user's records to mark for eviction in a maintenance run.

    Called once per user pool by ``Memory.maintain``. Stops at first non-None result; return None
    to pass to the next policy (the built-in decay policy comes last).

    :param records: the pool's active records.
    :param now: the time of the run.
    :param settings: the settings (grace period, half-lives, capacity).
    :return: ids of records to mark for eviction, or None.
    """


@hookspec
def portamem_register_eviction_policies(register: Callable[[str, Callable[..., Sequence[str]]], None]) -> None:
    """Offer named eviction policies that ``Memory.maintain(policy=name)`` can run.

    :param register: ``register(name, policy)`` with ``policy(records, now, settings) -> list[str]``.
    """


@hookspec(firstresult=True)
def portamem_summarize_turns(turns: Sequence[Turn], context: WriteContext) -> str | dict[str, Any] | None:
    """Compress turns leaving the working window into the text of one episodic memory, or into the
    five episode fields ``{summary, key_facts, user_intent, outcome, entities}`` (``summary`` is the text).

    Stops at first non-None result; the built-in extractive summariser comes last.

    :param turns: the turns leaving the window, oldest first.
    :param context: whose window it is and the settings.
    :return: the episodic memory's text, or None to pass.
    """



@hookspec(firstresult=True)
def portamem_merge_statements(older: MemoryRecord, newer: MemoryRecord, context: WriteContext) -> str | None:
    """Merge a statement and the newer one that supersedes it (another value of the same attribute)
    into one statement that keeps what still holds ("my budget was 5000, it is 8000 now").

    Called by the indexer's review when ``newer`` supersedes ``older``. The merged statement is
    stored PENDING and becomes active in place of ``newer`` when a later write names its entity or
    attribute again (``portamem.write.supersession``). Stops at first non-None result; there is no
    built-in merger (rule mode keeps the two statements as they are).

    :param older: the statement being superseded.
    :param newer: the statement that supersedes it.
    :param context: whose memory it is and the settings.
    :return: the merged text, or None to pass.
    """


@hookspec
def portamem_preload(message: str, settings: Settings) -> Preload | None:
    """Say what a message that opens a task will need from memory before the user asks for it: "plan my
    business trip next week" needs the home city, travel preferences, budget and loyalty numbers.

    Called by ``recall`` on each message; every plugin's answer counts (their needs are merged, in
    registration order). ``recall`` runs one search for all the needs together, puts the memories that
    meet a need in the prompt (marked as preloaded) and reuses them for the next turns of the session
    instead of searching again. The built-in rule engine (``portamem_plugins.preload``) knows travel,
    purchases, scheduling and meals, in English and Chinese.

    :param message: the user's message.
    :param settings: the settings of the memory recalled from.
    :return: a ``Preload`` (the task and its needs), or None when the message opens no task.
    """


@hookspec(firstresult=True)
def portamem_summarize_habit(habit: Habit, context: WriteContext) -> str | None:
    """Write the text of the abstract memory that stands for a habit of the user (maintenance,
    ``portamem.lifecycle.abstraction``): "Prefers window seats (10 of 10 bookings since March)".

    Stops at first non-None result; the built-in rule template (the habit words and their support)
    comes last, and is the fallback when every summariser passes.

    :param habit: the habit words, the memories holding it, its support and since when.
    :param context: whose memories they are and the settings.
    :return: the abstract memory's text, or None to pass.
    """


@hookspec(firstresult=True)
def portamem_reconcile(
    statements: Sequence[MemoryRecord], candidates: Mapping[str, Sequence[MemoryRecord]], turn: FormationTurn,
    context: WriteContext, model: Any,
) -> Sequence[Decision] | None:
    """Decide what a user turn's new statements do to the user's current memories: add, update
    (supersede, history kept), outdate a part, delete (no longer holds) or no-op (a repeat).

    Called by the formation worker (``portamem.background.formation``), in the background, once per
    user turn that wrote statements, after the indexer's rule pass settled them (recall already
    serves them). Stops at first non-None result: the built-in model reconciler comes first when a
    model is configured (``model`` is not None), the built-in rule reconciler last. The worker checks
    every decision before applying it: a target must be among the statement's candidates (same tenant,
    user and scope), a less trusted statement never overrides a high-trust memory, and a delete needs
    the user's own words. Decisions are applied through supersession (audited with their reason,
    reversible); one about a pair the rules already settled the same way changes nothing.

    :param statements: the memories the turn wrote (its rule pass), each a new statement.
    :param candidates: for each statement's ``memory_id``, the user's nearest current memories in the
        writer's scope (by vector, keyword and entity), and those the rules superseded by it.
    :param turn: the user's message, the reply and the session's previous turns.
    :param context: whose turn it is and the settings (``context.formation`` is True).
    :param model: the configured chat model (``portamem.models.ChatModel``), or None without one.
    :return: the decisions (``Decision``; statements without one are left as the rules settled them),
        or None to let the next reconciler decide.
    """


@hookspec(firstresult=True)
def portamem_rerank(
    query: str, hits: Sequence[SearchHit], k: int, settings: Settings, model: Any
) -> Sequence[SearchHit] | None:
    """Reorder and rescore a search's best hits after scoring: for diversity, with a cross-encoder that
    reads the query and each memory together, or with a model that judges them side by side.

    Called by every search (``search_memory``, and so ``recall`` and the adapters) when
    ``Settings.rerank`` names a reranker (None, the default, skips the stage), with the
    ``Settings.rerank_candidates`` best hits (at least ``k``) as scoring ranked them. Stops at first
    non-None result: a plugin answers for the names it knows and passes on the others. The built-in
    ``rerank`` plugin (``portamem_plugins.rerank``) knows ``"mmr"`` (maximal marginal relevance over the
    hits' vectors, ``Settings.rerank_mmr_lambda``), ``"cross-encoder"`` (a sentence-transformers
    CrossEncoder at ``Settings.rerank_model``) and ``"model"`` (the configured chat model orders the ids
    it is shown; the scoring's order when its answer is unusable, counted as a fallback in
    ``Memory.stats().model``). A name no plugin answers for is a ``ConfigError``.

    The answer must be hits of ``hits``, each at most once, best first, their ``score`` not increasing
    (rescored: set ``score`` and ``breakdown.final`` with ``dataclasses.replace``, and any component
    in ``breakdown.components``); the search keeps the first ``k``. A hit may be left out.

    :param query: the search's query text.
    :param hits: the best hits, best first; ``hit.record.embedding`` is the memory's vector where the
        index had one (else None), ``hit.score`` and ``hit.breakdown`` the scoring's.
    :param k: how many hits the search returns.
    :param settings: the settings of the memory searched (``rerank``, ``rerank_mmr_lambda``, ``rerank_model``).
    :param model: the configured chat model (``portamem.models.ChatModel``), or None without one.
    :return: the hits reordered and rescored, or None to let the next reranker answer.
    """
