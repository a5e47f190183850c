"""portamem for Google ADK: a ``BaseMemoryService`` and a ``BaseSessionService`` over one portamem store."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

try:
    import google.adk.memory  # noqa: F401
except ImportError as exc:  # the adapter is useless without its framework: say which extra to install
    raise FrameworkNotInstalledError("Google ADK", "adk") from exc

from .events import from_event, to_event  # noqa: E402
from .memory_service import PortamemMemoryService  # noqa: E402
from .session_service import PortamemSessionService  # noqa: E402

__all__ = ["PortamemMemoryService", "PortamemSessionService", "from_event", "to_event"]
