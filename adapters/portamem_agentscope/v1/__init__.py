"""portamem for AgentScope 1.x (1.0.21): ``MemoryBase`` and ``LongTermMemoryBase`` classes for ``ReActAgent``.

``ReActAgent(memory=PortamemMemory(...), long_term_memory=PortamemLongTermMemory(...))``. This package
imports only 1.x names; AgentScope 2.x users want ``portamem_agentscope.PortamemMiddleware``.
"""

from __future__ import annotations

from .._framework import require

require(1)

from .memory import PortamemLongTermMemory, PortamemMemory  # noqa: E402
from .messages import from_msg, to_msg  # noqa: E402

__all__ = ["PortamemMemory", "PortamemLongTermMemory", "from_msg", "to_msg"]
