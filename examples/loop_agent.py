"""A hand-written agent loop with portamem: a fact told in one run is remembered in the next.

    python examples/loop_agent.py [store-dir]

Offline by default; set PORTAMEM_EXAMPLE_MODEL (see offline_models.py) for a real model.
"""

from __future__ import annotations

import sys
import tempfile

from offline_models import loop_llm
from portamem_loop import LoopMemory

from portamem import Memory


def main(path: str) -> None:
    llm = loop_llm()
    with Memory(path) as memory:  # run 1: the user tells something worth keeping
        mem = LoopMemory(memory, user_id="alice", session_id="monday")
        print("user: Please remember that my sister Maja lives in Porto.")
        print("bot: ", mem.chat(llm, "Please remember that my sister Maja lives in Porto."))

    with Memory(path) as memory:  # run 2, a new process in real life: a new session, same user
        mem = LoopMemory(memory, user_id="alice", session_id="tuesday")
        question = "Where does my sister live?"
        print("\nprompt sent to the model:\n" + mem.recall(question))
        reply = llm(mem.recall(question))  # the two calls by hand, instead of mem.chat
        mem.record(question, reply)
        print("\nuser:", question)
        print("bot: ", reply)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="portamem-loop-"))
