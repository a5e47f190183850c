"""An AutoGen ``AssistantAgent`` with portamem memory: what one run learns, a later run recalls.

    python examples/autogen_agent.py [store-dir]

Offline by default: the model is AutoGen's own ReplayChatCompletionClient, taught to quote the
memories it is shown, so no provider is called. For a real model set PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini
and OPENAI_API_KEY, and ``pip install 'autogen-ext[openai]'``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import CreateResult, LLMMessage, RequestUsage, SystemMessage, UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient
from offline_models import MODEL_ENV, offline_answer, two_runs
from portamem_autogen import PortamemChatCompletionContext, PortamemMemory

from portamem import Memory

USER = "alice"


class OfflineClient(ReplayChatCompletionClient):
    """Answers from the memories in its system messages and quotes what the user said earlier."""

    async def create(self, messages: Sequence[LLMMessage], *args: Any, **kwargs: Any) -> CreateResult:
        prompt = "\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        earlier = [m.content for m in messages if isinstance(m, UserMessage) and isinstance(m.content, str)][:-1]
        said = " Earlier you said: " + " | ".join(earlier) if earlier else ""
        return CreateResult(finish_reason="stop", content=offline_answer(prompt) + said, cached=False,
                            usage=RequestUsage(prompt_tokens=0, completion_tokens=0))


def model() -> Any:
    """The real model named by PORTAMEM_EXAMPLE_MODEL, or the offline stand-in."""
    name = os.environ.get(MODEL_ENV)
    if name:
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        return OpenAIChatCompletionClient(model=name)
    return OfflineClient([])


async def ask(memory: Memory, question: str, session: str) -> str:
    agent = AssistantAgent(
        "Friday",
        model_client=model(),
        system_message="You are a helpful assistant. Use the memories you are given.",
        memory=[PortamemMemory(memory, user_id=USER, session_id=session)],  # recalled before each model call
        model_context=PortamemChatCompletionContext(memory, user_id=USER, session_id=session),  # the conversation
    )
    result = await agent.run(task=question)
    return result.messages[-1].to_text()


if __name__ == "__main__":
    asyncio.run(two_runs(ask, "autogen"))
