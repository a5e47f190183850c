"""portamem: portable, framework-neutral long-term memory for LLM agents."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .client import RemoteMemory
from .config import Settings
from .embedding.embedders import E5Embedder, Embedder, SentenceTransformerEmbedder, USEEmbedder, get_embedder
from .errors import (
    ContentTooLongError,
    EmbeddingError,
    ImportFormatError,
    NotFoundError,
    PluginError,
    AuthenticationError,
    OverloadedError,
    PermissionDeniedError,
    PortamemError,
    StoreError,
    StoreLockedError,
    StoreOpenError,
    ValidationError,
)
from .filters import SearchFilters
from .hookspecs import hookimpl
from .memory import Memory, MemoryDraft
from .messages import Message
from .recall import arecall, format_memories, recall
from .records import MemoryRecord, MemoryType, ScoreBreakdown, SearchHit, Source, Status, Trust, Turn

try:
    __version__ = version("portamem")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

__all__ = [
    "Memory",
    "RemoteMemory",
    "MemoryDraft",
    "Message",
    "recall",
    "arecall",
    "format_memories",
    "MemoryRecord",
    "MemoryType",
    "SearchHit",
    "ScoreBreakdown",
    "SearchFilters",
    "Settings",
    "Source",
    "Status",
    "Trust",
    "Turn",
    "Embedder",
    "E5Embedder",
    "USEEmbedder",
    "SentenceTransformerEmbedder",
    "get_embedder",
    "PortamemError",
    "ValidationError",
    "ContentTooLongError",
    "NotFoundError",
    "StoreError",
    "StoreOpenError",
    "StoreLockedError",
    "EmbeddingError",
    "ImportFormatError",
    "PluginError",
    "AuthenticationError",
    "PermissionDeniedError",
    "OverloadedError",
    "hookimpl",
    "__version__",
]
