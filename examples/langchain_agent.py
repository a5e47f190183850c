"""A LangChain ``create_agent`` with portamem memory: what one run learns, a later run recalls.

    python examples/langchain_agent.py [store-dir]

Offline by default (a stand-in model that quotes the memories it is shown). For a real model set
PORTAMEM_EXAMPLE_MODEL=openai:gpt-4o-mini (any init_chat_model name) and the provider's API key.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass

from langchain.agents import create_agent
from offline_models import chat_model
from portamem_langchain import PortamemMiddleware, PortamemStore

from portamem import Memory


@dataclass
class Context:
    user_id: str


def ask(memory: Memory, question: str, thread: str) -> str:
    agent = create_agent(
        chat_model(),
        tools=[],
        system_prompt="You are a helpful assistant. Use the memories you are given.",
        middleware=[PortamemMiddleware(memory, mode="both")],  # recall + write-back + memory tools
        store=PortamemStore(memory),  # the same memories for tools that use runtime.store
        context_schema=Context,
    )
    out = agent.invoke({"messages": [{"role": "user", "content": question}]},
                       {"configurable": {"thread_id": thread}}, context=Context(user_id="alice"))
    return out["messages"][-1].text


def main(path: str) -> None:
    with Memory(path) as memory:
        print("run 1 bot:", ask(memory, "Remember that I am allergic to peanuts.", "monday"))
    with Memory(path) as memory:  # reopened: a later run, another thread
        print("run 2 bot:", ask(memory, "Can I eat peanut butter?", "tuesday"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="portamem-langchain-"))
