"""Switch framework mid-conversation: start in a hand-written loop, continue in a LangChain agent, come back.

    python examples/switch_framework.py [store-dir]

The store is the only thing the two share: the LangChain agent has no checkpointer, yet it sees the
loop's turns (``history=True``) and recalls the loop's memories; the loop then sees the agent's turn.
Offline by default; PORTAMEM_EXAMPLE_MODEL selects real models (see offline_models.py).
"""

from __future__ import annotations

import sys
import tempfile

from langchain.agents import create_agent
from offline_models import chat_model, loop_llm
from portamem_loop import LoopMemory

from portamem import Memory

USER, SESSION = "alice", "trip-planning"


def main(path: str) -> None:
    with Memory(path) as memory:
        loop = LoopMemory(memory, user_id=USER, session_id=SESSION)
        llm = loop_llm()
        for message in ("Remember that I never fly: I travel by train.", "I want to visit Vienna in May."):
            print(f"[loop]      user: {message}\n[loop]      bot:  {loop.chat(llm, message)}")

    from portamem_langchain import PortamemMiddleware

    with Memory(path) as memory:  # same store, other framework
        agent = create_agent(chat_model(), tools=[],
                             middleware=[PortamemMiddleware(memory, user_id=USER, history=True)])
        question = "How should I get there?"
        out = agent.invoke({"messages": [{"role": "user", "content": question}]},
                           {"configurable": {"thread_id": SESSION}})
        print(f"[langchain] user: {question}\n[langchain] bot:  {out['messages'][-1].text}")

    with Memory(path) as memory:  # and back: the loop's prompt holds the agent's turn
        loop = LoopMemory(memory, user_id=USER, session_id=SESSION)
        print("\n[loop] conversation so far, as the loop sees it:")
        for turn in loop.turns():
            print(f"  user: {turn.user}\n  bot:  {turn.assistant}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="portamem-switch-"))
