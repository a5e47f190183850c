"""portamem_langchain: portamem memory for LangChain 1.x agents (``langchain.agents.create_agent``) and LangGraph.

* ``PortamemMiddleware``: the drop-in. Recalls memories into each model call's system message,
  writes the exchange back after the run, and optionally gives the model memory tools.
* ``PortamemStore``: LangGraph's ``BaseStore`` (``create_agent(store=...)``, ``runtime.store``).
* ``PortamemRetriever``: a ``BaseRetriever`` over one user's memories.
* ``PortamemChatMessageHistory``: a ``BaseChatMessageHistory`` over one session (compat).
* ``as_chat_model``: a LangChain chat model as the ``portamem.models.ChatModel`` portamem's model stages ask.

LangChain messages keep their native form in portamem, so they come back exactly (role, name,
content blocks, tool calls, ids, additional_kwargs); other frameworks read role and text.
Importing a name needs ``pip install 'portamem[langchain]'`` and raises
``portamem.errors.FrameworkNotInstalledError`` without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .history import PortamemChatMessageHistory
    from .middleware import PortamemMiddleware, Scope
    from .retriever import PortamemRetriever
    from .models import as_chat_model
    from .store import PortamemStore

__all__ = ["PortamemMiddleware", "PortamemStore", "PortamemRetriever", "PortamemChatMessageHistory", "Scope",
           "as_chat_model"]

_HOME = {
    "PortamemMiddleware": "middleware",
    "Scope": "middleware",
    "PortamemStore": "store",
    "PortamemRetriever": "retriever",
    "PortamemChatMessageHistory": "history",
    "as_chat_model": "models",
}


def __getattr__(name: str) -> Any:
    # the framework is imported on first use, not when portamem_langchain is
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
