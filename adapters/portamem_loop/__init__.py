"""portamem_loop: memory for a hand-written agent loop around any ``llm(prompt) -> str``.

Two calls wrap the model call::

    mem = LoopMemory(Memory("./data"), user_id="alice")
    prompt = mem.recall(user_msg)        # memories + recent turns + the message
    reply = llm(prompt)
    mem.record(user_msg, reply)          # the exchange goes to the working window

or in one: ``reply = mem.chat(llm, user_msg)``.
"""

from __future__ import annotations

from .loop import DEFAULT_TEMPLATE, LoopMemory

__all__ = ["LoopMemory", "DEFAULT_TEMPLATE"]
