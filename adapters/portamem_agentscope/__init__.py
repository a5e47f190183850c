"""portamem for AgentScope: a memory middleware for 2.x agents, and 1.x memory classes in ``portamem_agentscope.v1``.

AgentScope 1.x and 2.x share one distribution name, so one environment holds one of them; nothing
here imports AgentScope until a name is used, and ``portamem_agentscope.v1`` imports only 1.x names.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PortamemMiddleware", "restore_context", "to_msg", "from_msg"]

_LAZY = {
    "PortamemMiddleware": "middleware",
    "restore_context": "middleware",
    "to_msg": "messages",
    "from_msg": "messages",
}


#: AgentScope 1.x's classes, which live in ``portamem_agentscope.v1``: 2.x has no memory classes
_V1_ONLY = {"PortamemLongTermMemory", "PortamemMemory"}


def __getattr__(name: str) -> Any:
    if name in _V1_ONLY:
        raise ImportError(
            f"{name} is an AgentScope 1.x memory class: import it from portamem_agentscope.v1 (with agentscope==1.0.21, "
            "the 'agentscope1' extra). AgentScope 2.x has no memory classes; give a 2.x Agent "
            "portamem_agentscope.PortamemMiddleware(memory, user_id=...) instead", name=name, path=__file__)
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
