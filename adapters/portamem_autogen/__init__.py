"""portamem_autogen: portamem memory for AutoGen 0.7 (``autogen-core`` and ``autogen-agentchat``).

* ``PortamemMemory``: AutoGen's ``Memory`` (``add``, ``query``, ``update_context``, ``clear``,
  ``close``), for ``AssistantAgent(memory=[...])``: before each model call the memories recalled for the
  newest user message go into the model context.
* ``PortamemChatCompletionContext``: a ``ChatCompletionContext`` (``AssistantAgent(model_context=...)``)
  whose messages are portamem's working window for the session, so any adapter reads the conversation.
* ``to_llm_message`` / ``from_llm_message``: AutoGen's ``LLMMessage`` to and from portamem's ``Message``.

Importing a name needs ``pip install 'portamem[autogen]'`` and raises
``portamem.errors.FrameworkNotInstalledError`` without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .context import PortamemChatCompletionContext
    from .memory import PortamemMemory, RecalledMemories
    from .messages import from_llm_message, to_llm_message

__all__ = ["PortamemMemory", "RecalledMemories", "PortamemChatCompletionContext", "to_llm_message",
           "from_llm_message"]

_HOME = {
    "PortamemMemory": "memory",
    "RecalledMemories": "memory",
    "PortamemChatCompletionContext": "context",
    "to_llm_message": "messages",
    "from_llm_message": "messages",
}


def __getattr__(name: str) -> Any:
    # the framework is imported on first use, not when portamem_autogen is
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
