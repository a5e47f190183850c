"""A Google ADK agent with portamem memory: what one run learns, a later run recalls.

    python examples/adk_agent.py [store-dir]

The runner keeps its sessions in ``PortamemSessionService`` (each finished turn goes to portamem) and
searches ``PortamemMemoryService`` through ADK's own ``preload_memory`` tool. Offline by default (a
stand-in model that quotes the memories it is shown). For a real model set
PORTAMEM_EXAMPLE_MODEL=gemini-2.5-flash and GOOGLE_API_KEY.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools import preload_memory
from google.genai import types
from offline_models import MODEL_ENV, two_runs
from portamem_adk import PortamemMemoryService, PortamemSessionService

from portamem import Memory

APP, USER = "assistant", "alice"


class OfflineModel(BaseLlm):
    """Quotes what ``preload_memory`` put in its prompt, so the output shows what memory recalled."""

    model: str = "offline"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        prompt = "\n".join(p.text or "" for c in llm_request.contents for p in c.parts or [])
        block = prompt.split("<PAST_CONVERSATIONS>", 1)[-1] if "<PAST_CONVERSATIONS>" in prompt else ""
        memories = re.findall(r"^user: (.*)$", block, re.M)
        text = ("(offline model) From memory: " + " | ".join(memories) if memories
                else "(offline model) I have no memories about this yet.")
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def model() -> Any:
    return os.environ.get(MODEL_ENV) or OfflineModel()


async def ask(memory: Memory, question: str, session: str) -> str:
    agent = LlmAgent(name="assistant", model=model(), tools=[preload_memory],  # recalls before every model call
                     instruction="You are a helpful assistant. Use what you remember about the user.")
    runner = Runner(app_name=APP, agent=agent, auto_create_session=True,
                    session_service=PortamemSessionService(memory, assistant_author="assistant"),
                    memory_service=PortamemMemoryService(memory))
    message = types.Content(role="user", parts=[types.Part(text=question)])
    reply = ""
    async for event in runner.run_async(user_id=USER, session_id=session, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            reply = "".join(p.text or "" for p in event.content.parts)
    return reply


if __name__ == "__main__":
    asyncio.run(two_runs(ask, "adk"))
