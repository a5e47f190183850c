"""portamem_openai_agents: portamem memory for the OpenAI Agents SDK (``openai-agents``, package ``agents``).

* ``PortamemSession``: the SDK's ``Session`` protocol, ``Runner.run(agent, input, session=...)``. The
  conversation is portamem's working window for the session, so any adapter reads it.
* ``PortamemInstructions``: the agent's ``instructions``, followed by the memories recalled for the
  newest user message of each run.
* ``PortamemTools``: save, search and forget as ``function_tool``s the model calls itself.
* ``to_item`` / ``from_item``: the SDK's input items to and from portamem's neutral ``Message``.

Input items keep their native form in portamem, so they come back exactly (function calls and their
outputs, reasoning, ids); other frameworks read role and text. Importing a name needs
``pip install 'portamem[openai-agents]'`` and raises ``portamem.errors.FrameworkNotInstalledError`` without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .instructions import PortamemInstructions
    from .items import from_item, to_item
    from .session import PortamemSession
    from .tools import PortamemTools

__all__ = ["PortamemSession", "PortamemInstructions", "PortamemTools", "to_item", "from_item"]

_HOME = {
    "PortamemSession": "session",
    "PortamemInstructions": "instructions",
    "PortamemTools": "tools",
    "to_item": "items",
    "from_item": "items",
}


def __getattr__(name: str) -> Any:
    # the framework is imported on first use, not when portamem_openai_agents is
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
