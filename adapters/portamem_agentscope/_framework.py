"""Which AgentScope is installed: 1.x and 2.x share a distribution name, so each side checks before importing."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from portamem.errors import FrameworkNotInstalledError

__all__ = ["require"]

#: major version -> (name in messages, portamem extra)
_EXTRAS = {2: ("AgentScope 2.x", "agentscope"), 1: ("AgentScope 1.x", "agentscope1")}


def require(major: int) -> None:
    """Raise ``FrameworkNotInstalledError`` unless AgentScope ``major``.x is installed."""
    framework, extra = _EXTRAS[major]
    try:
        installed = version("agentscope")
    except PackageNotFoundError as exc:
        raise FrameworkNotInstalledError(framework, extra) from exc
    if int(installed.split(".")[0]) != major:
        raise FrameworkNotInstalledError(f"{framework} (found agentscope {installed})", extra)
