"""The plugin manager: hookspecs, built-in plugins, entry points, and a typed facade over the hooks."""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError
from .config import Settings
from .pipeline import RECONCILE_ACTIONS, Decision, Extraction, FormationTurn, GuardVerdict, Habit, Need, Preload, \
    Redaction, TriggerVote, WriteContext
from .records import MemoryRecord, SearchHit, Turn

__all__ = ["DEFAULT_PLUGINS", "get_plugin_manager", "Hooks", "RegisteredScorer", "BLOCK_ENV"]

#: built-in plugins, registered under these names (the same names as their entry points)
DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("triggers", "portamem_plugins.triggers"),
    ("importance", "portamem_plugins.importance"),
    ("hybrid_scoring", "portamem_plugins.scoring"),
    ("decay_eviction", "portamem_plugins.eviction"),
    ("rule_extractor", "portamem_plugins.extract"),
    ("extractive_summary", "portamem_plugins.summarize"),
    ("guard", "portamem_plugins.guard"),
    ("pii_redaction", "portamem_plugins.redact"),
    ("preload_rules", "portamem_plugins.preload"),
    ("model_extractor", "portamem_plugins.llm_extract"),
    ("model_reconciler", "portamem_plugins.reconcile_model"),
    ("rule_reconciler", "portamem_plugins.reconcile_rules"),
    ("rerank", "portamem_plugins.rerank"),
)

#: comma-separated plugin names that must not be loaded
BLOCK_ENV = "PORTAMEM_BLOCK_PLUGINS"

_SEVERITY = {"allow": 0, "pending": 1, "quarantine": 2}


def get_plugin_manager(
    *, load_entrypoints: bool = True, defaults: bool = True, block: Sequence[str] = ()
) -> pluggy.PluginManager:
    """A fresh manager: block-list, built-ins, entry-point plugins, then a check of every hook name."""
    pm = pluggy.PluginManager("portamem")
    pm.add_hookspecs(hookspecs)
    for name in [*block, *filter(None, (s.strip() for s in os.environ.get(BLOCK_ENV, "").split(",")))]:
        pm.set_blocked(name)
    if defaults:
        for name, module in DEFAULT_PLUGINS:
            if not pm.is_blocked(name):
                try:
                    pm.register(importlib.import_module(module), name=name)
                except ImportError:
                    continue  # a default not shipped in this install; entry points may still bring it
    if load_entrypoints:
        pm.load_setuptools_entrypoints("portamem")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(getattr(exc, "plugin_name", "?"), "check_pending", str(exc)) from exc
    return pm


class Hooks:
    """Typed calls into the plugin manager. Each failure names the plugin and the hook."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm

    def _impls(self, hook: str) -> list[Any]:
        # pluggy calls implementations last-registered first, honouring tryfirst/trylast
        return list(reversed(getattr(self.pm.hook, hook).get_hookimpls()))

    def _call(self, hook: str, impl: Any, kwargs: dict[str, Any]) -> Any:
        try:
            return impl.function(*[kwargs[name] for name in impl.argnames])
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(impl.plugin_name, hook, f"{type(exc).__name__}: {exc}") from exc

    def _broadcast(self, hook: str, expected: type | tuple[type, ...], **kwargs: Any) -> list[tuple[str, Any]]:
        out = []
        for impl in self._impls(hook):
            result = self._call(hook, impl, kwargs)
            if result is None:
                continue
            if not isinstance(result, expected):
                raise PluginError(impl.plugin_name, hook, f"returned {type(result).__name__}, expected {expected}")
            out.append((impl.plugin_name, result))
        return out

    def _first(self, hook: str, check: Callable[[Any], bool], what: str, **kwargs: Any) -> tuple[str, Any] | None:
        for impl in self._impls(hook):
            result = self._call(hook, impl, kwargs)
            if result is None:
                continue
            if not check(result):
                raise PluginError(impl.plugin_name, hook, f"returned {result!r}, expected {what}")
            return impl.plugin_name, result
        return None

    # ---------------------------------------------------------------- write path
    def trigger_votes(self, text: str, context: WriteContext) -> list[tuple[str, TriggerVote]]:
        return self._broadcast("portamem_write_trigger", TriggerVote, text=text, context=context)

    def guard(self, record: MemoryRecord, context: WriteContext) -> GuardVerdict:
        verdicts = self._broadcast("portamem_guard", GuardVerdict, record=record, context=context)
        strictest = GuardVerdict("allow", "")
        for name, verdict in verdicts:
            if verdict.action not in _SEVERITY:
                raise PluginError(name, "portamem_guard", f"unknown action {verdict.action!r}")
            if _SEVERITY[verdict.action] > _SEVERITY[strictest.action]:
                strictest = verdict if verdict.guard else GuardVerdict(verdict.action, verdict.reason, name, verdict.score)
        return strictest

    def redact(self, text: str, context: WriteContext) -> tuple[str, list[Redaction]]:
        spans: list[Redaction] = []
        for name, found in self._broadcast("portamem_redact", (list, tuple), text=text, context=context):
            for r in found:
                if not isinstance(r, Redaction) or not 0 <= r.start < r.end <= len(text):
                    raise PluginError(name, "portamem_redact", f"bad span {r!r} for a text of {len(text)} characters")
                spans.append(r)
        kept: list[Redaction] = []
        for r in sorted(spans, key=lambda s: (s.start, -(s.end - s.start))):
            if kept and r.start < kept[-1].end:
                continue  # overlaps a longer or earlier span
            kept.append(r)
        out = text
        for r in reversed(kept):
            out = out[: r.start] + r.label() + out[r.end:]
        return out, kept

    def extract(self, text: str, context: WriteContext) -> Extraction | None:
        found = self._first(
            "portamem_extract", lambda r: isinstance(r, Extraction), "an Extraction", text=text, context=context
        )
        return None if found is None else found[1]

    def extract_by(self, text: str, context: WriteContext) -> tuple[str, Extraction] | None:
        """``extract``, with the name of the plugin that answered."""
        return self._first(
            "portamem_extract", lambda r: isinstance(r, Extraction), "an Extraction", text=text, context=context
        )

    def score_importance(self, record: MemoryRecord, context: WriteContext) -> int | None:
        found = self._first(
            "portamem_score_importance",
            lambda r: isinstance(r, int) and not isinstance(r, bool) and 1 <= r <= 100,
            "an int from 1 to 100",
            record=record,
            context=context,
        )
        return None if found is None else found[1]

    def summarize_turns(self, turns: Sequence[Turn], context: WriteContext) -> str | dict[str, Any] | None:
        """The episode text, or the five episode fields (a mapping whose ``summary`` is that text)."""
        def valid(r: Any) -> bool:
            text = r.get("summary") if isinstance(r, Mapping) else r
            return isinstance(text, str) and bool(text.strip())

        found = self._first(
            "portamem_summarize_turns", valid, "a non-empty str or a mapping with a non-empty 'summary'",
            turns=turns, context=context,
        )
        return None if found is None else (dict(found[1]) if isinstance(found[1], Mapping) else found[1])

    def merge_statements(self, older: MemoryRecord, newer: MemoryRecord, context: WriteContext) -> str | None:
        found = self._first(
            "portamem_merge_statements", lambda r: isinstance(r, str) and bool(r.strip()), "a non-empty str",
            older=older, newer=newer, context=context,
        )
        return None if found is None else found[1]

    def summarize_habit(self, habit: Habit, context: WriteContext) -> str | None:
        found = self._first(
            "portamem_summarize_habit", lambda r: isinstance(r, str) and bool(r.strip()), "a non-empty str",
            habit=habit, context=context,
        )
        return None if found is None else found[1]

    def reconcile(self, statements: Sequence[MemoryRecord], candidates: Mapping[str, Sequence[MemoryRecord]],
                  turn: FormationTurn, context: WriteContext, model: Any) -> tuple[str, list[Decision]] | None:
        """The first reconciler's decisions and its name (audited with them), or None when all passed."""
        def valid(r: Any) -> bool:
            return isinstance(r, (list, tuple)) and all(
                isinstance(d, Decision) and d.action in RECONCILE_ACTIONS for d in r)

        found = self._first("portamem_reconcile", valid, f"a list of Decision with an action of {RECONCILE_ACTIONS}",
                            statements=statements, candidates=candidates, turn=turn, context=context, model=model)
        return None if found is None else (found[0], list(found[1]))

    # ---------------------------------------------------------------- read path and lifecycle
    def preload(self, message: str, settings: Settings) -> Preload | None:
        """Every plugin's needs for the task ``message`` opens, merged (the first plugin's task names it),
        or None when no plugin sees a task."""
        plans = self._broadcast("portamem_preload", Preload, message=message, settings=settings)
        if not plans:
            return None
        needs: dict[str, Need] = {}
        for name, plan in plans:
            for need in plan.needs:
                if not isinstance(need, Need):
                    raise PluginError(name, "portamem_preload", f"a need must be a Need, got {need!r}")
                needs.setdefault(need.name, need)
        query = "; ".join(dict.fromkeys(plan.query for _, plan in plans if plan.query))
        return Preload(plans[0][1].task, tuple(needs.values()), query)

    def rerank(self, query: str, hits: Sequence[SearchHit], k: int, settings: Settings,
               model: Any) -> tuple[str, list[SearchHit]] | None:
        """The first reranker's hits and its name, checked against the hook's contract (hits shown, each
        once, scores not increasing), or None when no plugin answers for ``settings.rerank``."""
        shown = {h.memory_id for h in hits}

        def valid(r: Any) -> bool:
            if not isinstance(r, (list, tuple)) or not all(isinstance(h, SearchHit) for h in r):
                return False
            ids = [h.memory_id for h in r]
            scores = [h.score for h in r]
            return len(set(ids)) == len(ids) and set(ids) <= shown \
                and all(isinstance(x, (int, float)) and math.isfinite(x) for x in scores) \
                and all(a >= b for a, b in zip(scores, scores[1:]))
        found = self._first("portamem_rerank", valid, "hits of those shown, each once, their scores not increasing",
                            query=query, hits=hits, k=k, settings=settings, model=model)
        return None if found is None else (found[0], list(found[1]))

    def scorers(self) -> dict[str, RegisteredScorer]:
        """Retrieval scorers by name, each with the default weight its plugin offered (or None)."""
        return self._registry("portamem_register_scorers")  # type: ignore[return-value]

    def eviction_policies(self) -> dict[str, Callable[..., Sequence[str]]]:
        return {name: reg.fn for name, reg in self._registry("portamem_register_eviction_policies").items()}

    def _registry(self, hook: str) -> dict[str, RegisteredScorer]:
        found: dict[str, RegisteredScorer] = {}
        for impl in self._impls(hook):
            def register(name: str, fn: Callable[..., Any], weight: float | None = None,
                         _plugin: str = impl.plugin_name) -> None:
                if not isinstance(name, str) or not callable(fn):
                    raise PluginError(_plugin, hook, "register(name, callable) needs a str and a callable")
                if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))
                                           or weight < 0):
                    raise PluginError(_plugin, hook, f"weight must be a non-negative number, got {weight!r}")
                if name in found:
                    raise PluginError(_plugin, hook, f"{name!r} is already registered by {found[name].plugin}")
                found[name] = RegisteredScorer(_named(fn, _plugin, hook), None if weight is None else float(weight),
                                               _plugin)
            self._call(hook, impl, {"register": register})
        return found

    def eviction(self, records: Sequence[MemoryRecord], now: datetime, settings: Any) -> list[str] | None:
        found = self._first(
            "portamem_eviction_policy",
            lambda r: isinstance(r, (list, tuple, set)) and all(isinstance(i, str) for i in r),
            "a list of memory ids",
            records=records, now=now, settings=settings,
        )
        return None if found is None else list(found[1])


@dataclass(frozen=True)
class RegisteredScorer:
    """A callable offered through a ``register`` hook, with the plugin's default weight for it."""

    fn: Callable[..., Any]
    weight: float | None
    plugin: str


def _named(fn: Callable[..., Any], plugin: str, hook: str) -> Callable[..., Any]:
    """Wrap a registered callable so that its failures name the plugin that offered it."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(plugin, hook, f"{type(exc).__name__}: {exc}") from exc

    call.__name__ = getattr(fn, "__name__", "registered")
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call
