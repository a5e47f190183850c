"""A scripted ADK model for offline tests and examples: replies from a list, requests kept for inspection."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

__all__ = ["ScriptedLlm"]


class ScriptedLlm(BaseLlm):
    """Answers each request with the next reply: a text, or a ``types.FunctionCall`` the agent then runs.

    Out of replies, it says so in text (a test then sees the extra call). ``requests`` holds every
    ``LlmRequest`` it was sent, so a test can read what the model was shown.
    """

    model: str = "scripted"
    replies: list[Any] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        reply = self.replies.pop(0) if self.replies else "(no scripted reply left)"
        part = types.Part(function_call=reply) if isinstance(reply, types.FunctionCall) else types.Part(text=reply)
        yield LlmResponse(content=types.Content(role="model", parts=[part]), turn_complete=True)
