"""A LlamaIndex ``FunctionAgent`` with portamem memory: what one run learns, a later run recalls.

    python examples/llamaindex_agent.py [store-dir]

Offline by default (a stand-in model that quotes the memories it is shown). For a real model set
PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini, OPENAI_API_KEY, and ``pip install llama-index-llms-openai``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms.mock import MockFunctionCallingLLM
from offline_models import MODEL_ENV, offline_answer, two_runs
from portamem_llamaindex import PortamemMemory, PortamemToolSpec

from portamem import Memory

USER = "alice"


def llm() -> Any:
    """A function-calling LLM: the real one named by PORTAMEM_EXAMPLE_MODEL, or the offline stand-in."""
    model = os.environ.get(MODEL_ENV)
    if model:
        from llama_index.llms.openai import OpenAI

        return OpenAI(model=model)

    def answer(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        prompt = "\n".join(m.content or "" for m in messages if m.role == MessageRole.SYSTEM)
        earlier = [m.content or "" for m in messages[:-1] if m.role == MessageRole.USER]
        said = " Earlier you said: " + " | ".join(earlier) if earlier else ""
        return ChatMessage(role=MessageRole.ASSISTANT, content=offline_answer(prompt) + said)

    return MockFunctionCallingLLM(response_generator=answer)


async def ask(memory: Memory, question: str, session: str) -> str:
    agent = FunctionAgent(
        tools=PortamemToolSpec(memory, user_id=USER, session_id=session).to_tool_list(),  # save/search/forget
        llm=llm(),
        system_prompt="You are a helpful assistant. Use the memories you are given.",
    )
    # every turn goes to portamem's window; recalled memories come first in the model's input
    return str(await agent.run(user_msg=question, memory=PortamemMemory(memory, user_id=USER, session_id=session)))


if __name__ == "__main__":
    asyncio.run(two_runs(ask, "llamaindex"))
