"""An OpenAI Agents SDK agent with portamem memory: what one run learns, a later run recalls.

    python examples/openai_agents_agent.py [store-dir]

Offline by default: the agent's model is a ``Model`` subclass that quotes the memories in its
instructions (portamem_openai_agents.testing.ScriptedModel), so no provider is called. For a real
model set PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini and OPENAI_API_KEY.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agents import Agent, RunConfig, Runner
from offline_models import MODEL_ENV, offline_answer, two_runs
from portamem_openai_agents import PortamemInstructions, PortamemSession, PortamemTools
from portamem_openai_agents.testing import Call, ScriptedModel

from portamem import Memory

USER = "alice"


def _offline(call: Call) -> str:
    earlier = [i["content"] for i in call.input[:-1] if i.get("role") == "user" and isinstance(i.get("content"), str)]
    said = " Earlier you said: " + " | ".join(earlier) if earlier else ""
    return offline_answer(call.instructions or "") + said


def model() -> Any:
    """The real model named by PORTAMEM_EXAMPLE_MODEL (the SDK resolves the name), or the offline stand-in."""
    return os.environ.get(MODEL_ENV) or ScriptedModel([_offline])


async def ask(memory: Memory, question: str, session: str) -> str:
    agent = Agent(
        name="Friday",
        # the instructions, then the memories recalled for the newest user message
        instructions=PortamemInstructions(memory, user_id=USER, session_id=session,
                                          instructions="You are a helpful assistant. Use the memories you are given."),
        tools=PortamemTools(memory, user_id=USER, session_id=session).tools(),  # save/search/forget
        model=model(),
    )
    # the conversation is portamem's working window for the session
    result = await Runner.run(agent, question, session=PortamemSession(memory, user_id=USER, session_id=session),
                              run_config=RunConfig(tracing_disabled=not os.environ.get(MODEL_ENV)))
    return str(result.final_output)


if __name__ == "__main__":
    asyncio.run(two_runs(ask, "openai-agents"))
