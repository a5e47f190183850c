"""Models for the examples: a real one when ``PORTAMEM_EXAMPLE_MODEL`` names it, an offline stand-in otherwise.

Real models:
* loop: ``PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini`` plus ``OPENAI_API_KEY`` (and ``OPENAI_BASE_URL`` for any
  OpenAI-compatible server, e.g. ``http://localhost:11434/v1`` for Ollama) calls its chat completions API.
* LangChain: ``PORTAMEM_EXAMPLE_MODEL=openai:gpt-4o-mini`` (any ``init_chat_model`` name; install the
  provider package, e.g. ``pip install langchain-openai``).

The offline stand-ins answer from what they were shown, so the output proves what memory put there.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from portamem import Memory

MODEL_ENV = "PORTAMEM_EXAMPLE_MODEL"

_MEMORY_LINE = re.compile(r"^- \[[^\]]*\] (.*)$", re.MULTILINE)


def offline_answer(prompt: str) -> str:
    """What an offline model says: the memories it finds in its prompt, quoted back."""
    memories = _MEMORY_LINE.findall(prompt)
    if not memories:
        return "(offline model) I have no memories about this yet."
    return "(offline model) From memory: " + " | ".join(memories)


def loop_llm() -> Any:
    """An ``llm(prompt) -> str`` for the loop examples."""
    model = os.environ.get(MODEL_ENV)
    if not model:
        return offline_answer
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")

    def llm(prompt: str) -> str:
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}]}).encode()
        request = urllib.request.Request(
            f"{base}/chat/completions", data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)["choices"][0]["message"]["content"]

    return llm


def chat_model() -> Any:
    """A LangChain chat model for ``create_agent``."""
    model = os.environ.get(MODEL_ENV)
    if model:
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class OfflineChatModel(GenericFakeChatModel):
        """Answers from its system message and quotes what the user said earlier in its messages."""

        messages: Any = iter(())

        def bind_tools(self, tools: Any, **kwargs: Any) -> OfflineChatModel:
            return self

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            prompt = "\n".join(m.text for m in messages if m.type == "system")
            earlier = [m.text for m in messages[:-1] if m.type == "human"]
            text = offline_answer(prompt) + (" Earlier you said: " + " | ".join(earlier) if earlier else "")
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])

    return OfflineChatModel()


async def two_runs(ask: Callable[[Memory, str, str], Awaitable[str]], name: str) -> None:
    """The agent examples' two runs on the store named on the command line (a new one otherwise): run 1
    says a fact, run 2 reopens the store in another session and asks what needs it."""
    path = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix=f"portamem-{name}-")
    with Memory(path) as memory:
        print("run 1 bot:", await ask(memory, "Remember that I am allergic to peanuts.", "monday"))
    with Memory(path) as memory:  # reopened: a later run, another session
        print("run 2 bot:", await ask(memory, "Can I eat peanut butter?", "tuesday"))
