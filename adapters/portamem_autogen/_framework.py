"""The one place that checks AutoGen is there, so a missing install fails with the extra to add."""

from __future__ import annotations

from portamem.errors import FrameworkNotInstalledError

__all__ = ["require"]


def require() -> None:
    """Import autogen-core's memory and model-context modules, or raise ``FrameworkNotInstalledError``."""
    try:
        import autogen_core.memory  # noqa: F401
        import autogen_core.model_context  # noqa: F401
    except ImportError as exc:
        raise FrameworkNotInstalledError("AutoGen", "autogen") from exc
