"""Chat models portamem can ask: any OpenAI-compatible server, or any callable.

``ChatModel`` is the one method every stage that asks a model uses (``chat(messages) -> text``);
``OpenAIChatModel`` speaks ``/chat/completions`` to OpenAI, vLLM, Ollama or llama.cpp's server;
``CallableChatModel`` wraps any ``fn(prompt) -> str`` (the plugins' original contract, and what the
framework adapters hand over). Each counts its calls in a ``ModelStats``.

A call is bounded in time (``timeout_s``: its retries and format probes included) and a timeout is never
retried: a model that took too long once takes as long again, and the caller has rules to fall back on. A
server error (HTTP 5xx, 408, 429, no connection) is retried ``retries`` times within the call's time; a
refusal (any other HTTP 4xx: a wrong key, an unknown model, a bad request) is not: it is counted as
``refused``, logged once with what the server said and the setting to check, and raised as
``ModelRefusedError``, so the caller's rules take over at once. A server refusing ``response_format:
json_schema`` is asked once with ``json_object`` instead, and the client remembers (that probe is not
counted as a failed call: the request that follows is the call).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError, ModelError, ModelRefusedError, ModelResponseError, ModelTimeoutError, \
    ModelUnavailableError
from .stats import ModelStats

if TYPE_CHECKING:
    from ..config import Settings

__all__ = ["ChatModel", "OpenAIChatModel", "CallableChatModel", "as_chat_model", "model_from_settings",
           "render_prompt"]

Messages = Sequence[Mapping[str, str]]

log = logging.getLogger(__name__)


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: the assistant's text for ``messages`` (``{"role", "content"}`` each).

    ``schema``, when given, is the JSON schema the answer must follow (a server that can constrain
    its output to it does); ``max_tokens`` bounds the answer; ``timeout_s`` bounds the call (None:
    the model's own default). Failures raise ``portamem.errors.ModelError`` subclasses.
    """

    def chat(self, messages: Messages, *, schema: Mapping[str, Any] | None = None, max_tokens: int = 256,
             timeout_s: float | None = None) -> str: ...


#: response formats tried in turn until the server takes one: the strict schema (OpenAI, vLLM, Ollama,
#: recent llama.cpp), the schema inside json_object (llama-cpp-python's own extension), plain JSON
_FORMATS = ("json_schema", "json_object+schema", "json_object")


#: words of an error that blames the response format (some servers answer a format they lack with a 500)
_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar")
#: statuses of a server that may take the request later: retried, and formation waits for it
_BUSY = (408, 429)
#: the settings a refusal points at, by HTTP status (else ``_CHECK_OTHER``)
_CHECK = {401: "llm_api_key (PORTAMEM_LLM_API_KEY)", 403: "llm_api_key (PORTAMEM_LLM_API_KEY)",
          404: "llm_model and llm_url (PORTAMEM_LLM_MODEL, PORTAMEM_LLM_URL: the base URL ends in /v1)"}
_CHECK_OTHER = "llm_model and llm_url (PORTAMEM_LLM_MODEL, PORTAMEM_LLM_URL) and what the server accepts"


def _response_format(kind: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    if kind == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": str(schema.get("title") or "answer"), "schema": dict(schema), "strict": True}}
    if kind == "json_object+schema":
        return {"type": "json_object", "schema": dict(schema)}
    return {"type": "json_object"}


class OpenAIChatModel:
    """A client of an OpenAI-compatible ``/chat/completions`` endpoint (the module docstring).

    ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8080/v1``, ``https://api.openai.com/v1``); the
    key, when given, is sent as a bearer token and never shown in ``repr``. Temperature is 0: the
    same question gets the same answer, so a test or a replay is repeatable.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 30.0,
                 retries: int = 1, stats: ModelStats | None = None) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"llm_url must be an http(s) base URL ending in /v1, got {base_url!r}")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("llm_model must name the model the server serves (e.g. 'qwen2.5-0.5b-instruct')")
        if not timeout_s > 0 or isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"llm_timeout_s must be > 0 and llm_retries an integer >= 0, got {timeout_s}, {retries}")
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise ConfigError("the model client needs httpx: pip install httpx") from exc
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.stats = stats or ModelStats()
        self._api_key = api_key
        self._format = 0  # index into _FORMATS: the first response format this server has not refused
        self._told: set[int] = set()  # the refusals logged already, by HTTP status
        self._lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, follow_redirects=False)
        self._httpx = httpx

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.base_url!r}, {self.model!r}, timeout_s={self.timeout_s}, retries={self.retries})"

    def close(self) -> None:
        self._client.close()

    def chat(self, messages: Messages, *, schema: Mapping[str, Any] | None = None, max_tokens: int = 256,
             timeout_s: float | None = None) -> str:
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        if not limit > 0:
            raise ModelTimeoutError("no time left for a model call")
        deadline = time.monotonic() + limit  # the call's time, its retries and format probes included
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages], "temperature": 0,
                                "max_tokens": int(max_tokens), "stream": False}
        attempt = 0
        while True:
            fmt = self._format
            if schema is not None:
                body["response_format"] = _response_format(_FORMATS[fmt], schema)
            left = deadline - time.monotonic()
            if left <= 0:
                self.stats.record_call("timeout", limit)
                raise ModelTimeoutError(f"the model at {self.base_url} took more than {limit:.1f} s")
            try:
                return self._post(body, left)
            except _Refused as refused:
                if schema is not None and fmt < len(_FORMATS) - 1 and refused.status not in _CHECK:
                    with self._lock:  # this server does not take that format: the next one, from now on
                        self._format = max(self._format, fmt + 1)
                    continue
                if refused.status >= 500:  # a server error blaming the last format there is
                    self.stats.record_call("http", refused.elapsed)
                    raise ModelResponseError(f"the model server refused the request: HTTP {refused.status}: "
                                             f"{refused.text[:300]}") from None
                self.stats.record_call("refused", refused.elapsed)
                raise self._refusal(refused) from None
            except ModelUnavailableError:
                attempt += 1
                if attempt > self.retries or time.monotonic() >= deadline:
                    raise

    def _refusal(self, refused: _Refused) -> ModelRefusedError:
        """The error of a refusal, logged the first time the server answers its status."""
        said = " ".join(refused.text.split())[:300]
        message = (f"the model server at {self.base_url} refused the request for model {self.model!r} with HTTP "
                   f"{refused.status}: {said!r}; check {_CHECK.get(refused.status, _CHECK_OTHER)}")
        with self._lock:
            first = refused.status not in self._told
            self._told.add(refused.status)
        if first:  # every request is refused alike until the setting changes: said once, counted each time
            log.error("%s (the rules decide meanwhile; counted as 'refused' in the model's stats)", message)
        return ModelRefusedError(message)

    def _post(self, body: dict[str, Any], limit: float) -> str:
        """One request, its whole time within ``limit`` seconds (the answer is read in chunks and
        dropped when the deadline passes, so a server trickling bytes cannot hold the caller)."""
        httpx = self._httpx
        start = time.monotonic()
        deadline = start + limit
        try:
            with self._client.stream("POST", f"{self.base_url}/chat/completions", json=body,
                                     timeout=httpx.Timeout(limit)) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the answer is still arriving past the deadline")
                raw = b"".join(chunks)
        except httpx.TimeoutException as exc:
            self.stats.record_call("timeout", time.monotonic() - start)
            raise ModelTimeoutError(f"the model at {self.base_url} took more than {limit:.1f} s") from exc
        except httpx.HTTPError as exc:
            self.stats.record_call("http", time.monotonic() - start)
            raise ModelUnavailableError(f"the model server at {self.base_url} cannot be reached: {exc}") from exc
        elapsed = time.monotonic() - start
        status = response.status_code
        if status >= 400:
            text = raw.decode("utf-8", "replace")
            if status in _BUSY or (status >= 500 and not any(w in text for w in _FORMAT_WORDS)):
                self.stats.record_call("http", elapsed)
                raise ModelUnavailableError(f"the model server at {self.base_url} answered HTTP {status}: {text[:200]}")
            raise _Refused(status, text, elapsed)  # counted by ``chat`` unless it only refused the format
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            self.stats.record_call("error", elapsed)
            raise ModelResponseError(f"the model server at {self.base_url} did not answer with a chat "
                                     f"completion ({exc}): {raw[:200]!r}") from exc
        usage = data.get("usage") if isinstance(data, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        self.stats.record_call("ok", elapsed, prompt_tokens=_int(usage.get("prompt_tokens")),
                               completion_tokens=_int(usage.get("completion_tokens")))
        return text


class _Refused(Exception):
    def __init__(self, status: int, text: str, elapsed: float) -> None:
        super().__init__(status)
        self.status = status
        self.text = text
        self.elapsed = elapsed


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def render_prompt(messages: Messages) -> str:
    """One prompt of ``messages`` for a model that takes text: a lone user message is itself; otherwise
    the system and user texts in order, an earlier assistant answer marked as such."""
    if len(messages) == 1:
        return str(messages[0].get("content", ""))
    parts = []
    for m in messages:
        content = str(m.get("content", ""))
        parts.append(f"Assistant: {content}" if m.get("role") == "assistant" else content)
    return "\n\n".join(parts)


class CallableChatModel:
    """Any ``fn(prompt: str) -> str`` as a ``ChatModel``: the messages rendered into one prompt
    (``render_prompt``), the schema and token bound left to the prompt's own words. With
    ``messages=True``, ``fn`` takes the messages themselves (``[{"role", "content"}, ...]``): how the
    framework adapters hand over a chat model that knows roles.

    A callable cannot be interrupted: its time is whatever it takes, measured and counted; ``ask_json``
    does not ask again once its budget is spent. An exception it raises becomes a ``ModelError``.
    """

    def __init__(self, fn: Callable[[str], str] | Callable[[list[dict[str, str]]], str], *, messages: bool = False,
                 stats: ModelStats | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"a chat model must be callable as fn(prompt) -> str, got {type(fn).__name__}")
        self.fn = fn
        self.messages = messages
        self.stats = stats or ModelStats()

    def __repr__(self) -> str:
        return f"CallableChatModel({getattr(self.fn, '__qualname__', type(self.fn).__name__)})"

    def chat(self, messages: Messages, *, schema: Mapping[str, Any] | None = None, max_tokens: int = 256,
             timeout_s: float | None = None) -> str:
        start = time.monotonic()
        given: Any = [dict(m) for m in messages] if self.messages else render_prompt(messages)
        try:
            text = self.fn(given)
        except ModelError:
            self.stats.record_call("error", time.monotonic() - start)
            raise
        except TimeoutError as exc:
            self.stats.record_call("timeout", time.monotonic() - start)
            raise ModelTimeoutError(f"the model callable timed out: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - any failure of a foreign callable is the model's failure
            self.stats.record_call("error", time.monotonic() - start)
            raise ModelError(f"the model callable raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(text, str):
            self.stats.record_call("error", time.monotonic() - start)
            raise ModelResponseError(f"the model callable must return text, got {type(text).__name__}")
        self.stats.record_call("ok", time.monotonic() - start)
        return text


def as_chat_model(model: ChatModel | Callable[[str], str]) -> ChatModel:
    """``model`` as a ``ChatModel``: itself when it has ``chat``, else a ``CallableChatModel`` around it."""
    if isinstance(model, ChatModel):
        return model
    return CallableChatModel(model)


def model_from_settings(settings: Settings, *, stats: ModelStats | None = None) -> ChatModel | None:
    """The model ``settings`` configure (``llm_url`` and ``llm_model``), None when none is."""
    url = getattr(settings, "llm_url", None)
    if not url:
        return None
    model = getattr(settings, "llm_model", None)
    if not model:
        raise ConfigError("llm_url is set but llm_model is not: name the model the server serves "
                          "(PORTAMEM_LLM_MODEL or --llm-model)")
    return OpenAIChatModel(url, model, api_key=getattr(settings, "llm_api_key", None),
                           timeout_s=getattr(settings, "llm_timeout_s", 30.0),
                           retries=getattr(settings, "llm_retries", 1), stats=stats)
