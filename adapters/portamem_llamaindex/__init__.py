"""portamem for LlamaIndex 0.14: a memory block, a full ``BaseMemory``, a retriever and memory tools."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # the adapter is useless without its framework: say which extra to install
    raise FrameworkNotInstalledError("LlamaIndex", "llamaindex") from exc

from .memory import PortamemMemory, PortamemMemoryBlock  # noqa: E402
from .messages import from_chat_message, to_chat_message  # noqa: E402
from .models import as_chat_model  # noqa: E402
from .retriever import PortamemRetriever  # noqa: E402
from .tools import PortamemToolSpec  # noqa: E402

__all__ = [
    "PortamemMemory",
    "PortamemMemoryBlock",
    "PortamemRetriever",
    "PortamemToolSpec",
    "to_chat_message",
    "from_chat_message",
    "as_chat_model",
]
