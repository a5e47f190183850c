"""The one place that imports LangChain, so a missing install fails with the extra to add."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

__all__ = ["require"]


def require() -> None:
    """Import langchain-core, langchain and langgraph, or raise ``FrameworkNotInstalledError``."""
    try:
        import langchain.agents  # noqa: F401
        import langchain_core.messages  # noqa: F401
        import langgraph.store.base  # noqa: F401
    except ImportError as exc:
        raise FrameworkNotInstalledError("LangChain", "langchain") from exc
