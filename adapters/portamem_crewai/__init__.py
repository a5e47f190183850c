"""portamem for CrewAI 1.x: a storage backend for CrewAI's unified ``Memory``, and a session's conversation."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

try:
    import crewai.memory.storage.backend  # noqa: F401
except ImportError as exc:  # the adapter is useless without its framework: say which extra to install
    raise FrameworkNotInstalledError("CrewAI", "crewai") from exc

from .memory import crew_memory  # noqa: E402
from .messages import PortamemConversation, from_llm_message, to_llm_message  # noqa: E402
from .models import NoAnalysisLLM  # noqa: E402
from .storage import PortamemStorage, QueryEmbedder  # noqa: E402

__all__ = ["crew_memory", "PortamemStorage", "QueryEmbedder", "PortamemConversation", "NoAnalysisLLM",
           "from_llm_message", "to_llm_message"]
