"""The one place that checks the OpenAI Agents SDK is there, so a missing install fails with the extra to add."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

__all__ = ["require"]


def require() -> None:
    """Import the Agents SDK (``agents``), or raise ``FrameworkNotInstalledError``."""
    try:
        import agents  # noqa: F401
    except ImportError as exc:
        raise FrameworkNotInstalledError("the OpenAI Agents SDK", "openai-agents") from exc
