"""The rerank stage: after scoring, the reranker ``Settings.rerank`` names reorders and rescores the
search's best ``Settings.rerank_candidates`` hits (the ``portamem_rerank`` hook) and the first k stay.

Off by default: scoring alone ranks the hits. The built-in rerankers (``portamem_plugins.rerank``) are
MMR (diversity), a sentence-transformers CrossEncoder and the configured chat model as a judge.

May import: the data model and the hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..config import Settings
from ..errors import ConfigError, FrameworkNotInstalledError, PluginError
from ..plugins import Hooks
from ..records import SearchHit
from .trace import TraceEntry

__all__ = ["depth", "rerank", "note"]


def depth(settings: Settings, k: int) -> int:
    """How many hits scoring hands on: ``k``, or the reranker's candidates when one is named."""
    return k if settings.rerank is None else max(k, settings.rerank_candidates)


def rerank(hooks: Hooks, query: str, hits: Sequence[SearchHit], k: int, settings: Settings,
           model: Any = None) -> list[SearchHit]:
    """The first ``k`` of ``hits`` as the named reranker orders them (``hits[:k]`` when none is named).

    A reranker's own typed error about its configuration (a missing extra, a model that cannot be
    loaded) reaches the caller as itself, not wrapped in the ``PluginError`` that names the plugin.
    """
    if settings.rerank is None or not hits:
        return list(hits[:k])
    try:
        found = hooks.rerank(query, list(hits), k, settings, model)
    except PluginError as exc:
        if isinstance(exc.__cause__, (ConfigError, FrameworkNotInstalledError)):
            raise exc.__cause__ from None
        raise
    if found is None:
        raise ConfigError(
            f"no plugin reranks with rerank={settings.rerank!r}: the built-in rerankers are 'mmr', "
            "'cross-encoder' and 'model'; another name needs a plugin whose portamem_rerank answers for it"
        )
    return found[1][:k]


def note(trace: list[TraceEntry] | None, hits: Sequence[SearchHit], settings: Settings) -> None:
    """Tell the trace (``search_memory(debug=True)``) the reranker's ranks and which kept hits it left out."""
    if trace is None or settings.rerank is None:
        return
    ranks = {h.memory_id: i for i, h in enumerate(hits, 1)}
    for entry in trace:
        if entry.fate == "kept":
            entry.rank = ranks.get(entry.candidate.memory_id)
            if entry.rank is None:
                entry.fate = f"left out by the reranker {settings.rerank!r}"
