"""Language models portamem asks, beside the storage at the bottom of the house.

- ``client``: ``ChatModel`` (the one method a stage calls), ``OpenAIChatModel`` (OpenAI-compatible
  ``/chat/completions`` over httpx: OpenAI, vLLM, Ollama, llama.cpp's server), ``CallableChatModel``
  (any ``fn(prompt) -> str``; the framework adapters hand their models over through it), and
  ``model_from_settings`` (``llm_url``, ``llm_model``, ``llm_api_key``, ``llm_timeout_s``, ``llm_retries``);
- ``asking``: ``ask_json``, an answer as JSON that keeps a contract, within a time budget, or None
  (the caller's rules take over);
- ``stats``: ``ModelStats``, the calls, tokens, latency, refused answers and fallbacks that
  ``Memory.stats()`` and ``/metrics`` show.

The library never downloads or starts a model: it talks to one it is given.

May import: the data model (settings, errors); nothing above it.
"""

from __future__ import annotations

from .asking import REJECTED, ask_json, parse_json_answer
from .client import CallableChatModel, ChatModel, OpenAIChatModel, as_chat_model, model_from_settings, render_prompt
from .stats import LATENCY_BUCKETS, OUTCOMES, ModelStats

__all__ = ["ChatModel", "OpenAIChatModel", "CallableChatModel", "as_chat_model", "model_from_settings",
           "render_prompt", "ask_json", "parse_json_answer", "REJECTED", "ModelStats", "OUTCOMES", "LATENCY_BUCKETS"]
