"""The model client's parsing and failure paths, against a scripted model and a local HTTP server that
answers what each test scripts (the real model's behaviour is tests/llm's)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from portamem import Memory
from portamem.config import Settings
from portamem.embedding.embedders import Embedder
from portamem.errors import ConfigError, ModelRefusedError, ModelResponseError, ModelTimeoutError, ModelUnavailableError
from portamem.models import (CallableChatModel, ChatModel, ModelStats, OpenAIChatModel, as_chat_model, ask_json,
                             model_from_settings, parse_json_answer)

SCHEMA = {"title": "fact", "type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"],
          "additionalProperties": False}


def _value(data: Any) -> str | None:
    return None if isinstance(data, dict) and isinstance(data.get("value"), str) else "expected {\"value\": text}"


def _completion(content: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    if usage:
        body["usage"] = usage
    return body


class Scripted:
    """A local server whose answers a test scripts: ``script(request_body) -> (status, body, delay_s)``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: Callable[[dict[str, Any]], tuple[int, Any, float]] = lambda b: (200, _completion("{}"), 0.0)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append(dict(self.headers))
                status, answer, delay = outer.script(body)
                time.sleep(delay)
                raw = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.server.shutdown()
    s.server.server_close()


@pytest.mark.parametrize("answer, expected", [
    ('{"value": "Paris"}', {"value": "Paris"}),
    ('```json\n{"value": "Paris"}\n```', {"value": "Paris"}),
    ('```\n{"value": "巴黎"}```', {"value": "巴黎"}),
    ('Here is the JSON:\n```json\n{"value": "Paris"}\n```\nHope it helps!', {"value": "Paris"}),
    ('Sure! {"value": "Paris"} is the answer.', {"value": "Paris"}),
    ('答案是：[1, 2]。', [1, 2]),
])
def test_a_json_value_is_read_out_of_its_fence_and_prose(answer: str, expected: Any) -> None:
    assert parse_json_answer(answer) == expected


@pytest.mark.parametrize("answer", ["Sure! Here you go", '```json\n{"value": "Par', '{"value": }', ""])
def test_an_answer_without_json_is_refused(answer: str) -> None:
    with pytest.raises(ValueError):
        parse_json_answer(answer)


def test_ask_json_retries_with_the_reason_then_falls_back() -> None:
    prompts: list[str] = []
    answers = iter(["no json here", '{"other": 1}', '```json\n{"value": "Lyon"}\n```'])
    model = CallableChatModel(lambda p: prompts.append(p) or next(answers))
    assert ask_json(model, [{"role": "user", "content": "Where?"}], schema=SCHEMA, validate=_value,
                    retries=2) == {"value": "Lyon"}
    assert prompts[0] == "Where?" and "rejected: not JSON" in prompts[1] and "expected {\"value\"" in prompts[2]
    snap = model.stats.snapshot()
    assert snap["calls"] == 3 and snap["failures"]["invalid"] == 2 and snap["fallbacks"] == 0
    # never valid: three tries, then None and one fallback
    bad = CallableChatModel(lambda p: "{}")
    assert ask_json(bad, [{"role": "user", "content": "Where?"}], validate=_value, retries=2) is None
    assert bad.stats.snapshot()["failures"]["invalid"] == 3 and bad.stats.fallbacks == 1


def test_ask_json_stops_when_its_budget_is_spent() -> None:
    calls: list[float] = []

    def slow(prompt: str) -> str:
        calls.append(time.monotonic())
        time.sleep(0.15)
        return "not json"

    start = time.monotonic()
    assert ask_json(CallableChatModel(slow), [{"role": "user", "content": "x"}], validate=_value, retries=5,
                    budget_s=0.2) is None
    # a second try, begun with 0.05 s left, would end past the budget: none is begun
    assert len(calls) == 1 and time.monotonic() - start < 0.2


def test_a_callable_that_raises_is_a_failed_attempt_not_a_crash() -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("quota exceeded")

    stats = ModelStats()
    assert ask_json(CallableChatModel(broken, stats=stats), [{"role": "user", "content": "x"}], retries=1) is None
    assert stats.calls["error"] == 2 and stats.fallbacks == 1
    assert isinstance(as_chat_model(lambda p: p), ChatModel) and isinstance(as_chat_model(
        CallableChatModel(str)), CallableChatModel)


def test_the_client_sends_a_strict_schema_at_temperature_0_and_counts_tokens(server: Scripted) -> None:
    server.script = lambda b: (200, _completion('{"value": "Paris"}', {"prompt_tokens": 40, "completion_tokens": 6}),
                               0.0)
    model = OpenAIChatModel(server.url, "qwen", api_key="sk-test")
    assert ask_json(model, [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Where?"}],
                    schema=SCHEMA, validate=_value) == {"value": "Paris"}
    body = server.requests[0]
    assert body["temperature"] == 0 and body["model"] == "qwen" and body["max_tokens"] == 256
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "fact", "schema": SCHEMA, "strict": True}}
    assert server.headers[0]["Authorization"] == "Bearer sk-test" and "sk-test" not in repr(model)
    snap = model.stats.snapshot()
    assert (snap["calls"], snap["prompt_tokens"], snap["completion_tokens"]) == (1, 40, 6)
    assert snap["latency_s"]["count"] == 1 and snap["latency_s"]["p50"] is not None
    # no schema: no response_format at all
    model.chat([{"role": "user", "content": "hi"}])
    assert "response_format" not in server.requests[1]


def test_a_server_refusing_json_schema_is_asked_with_json_object_and_remembered(server: Scripted) -> None:
    def script(body: dict[str, Any]) -> tuple[int, Any, float]:
        if body["response_format"]["type"] == "json_schema":
            return 400, {"error": {"message": "response_format type json_schema is not supported"}}, 0.0
        return 200, _completion('{"value": "Paris"}'), 0.0

    server.script = script
    model = OpenAIChatModel(server.url, "m")
    asked = [{"role": "user", "content": "Where?"}]
    assert ask_json(model, asked, schema=SCHEMA, validate=_value) == {"value": "Paris"}
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]
    assert server.requests[1]["response_format"]["schema"] == SCHEMA  # llama-cpp-python's json_object + schema
    assert model.stats.calls == {"ok": 1, "timeout": 0, "http": 0, "refused": 0, "error": 0}  # the probe is no failure
    ask_json(model, [{"role": "user", "content": "Again?"}], schema=SCHEMA, validate=_value)
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object", "json_object"]


def test_json_object_without_schema_is_the_last_format_tried(server: Scripted) -> None:
    def script(body: dict[str, Any]) -> tuple[int, Any, float]:
        fmt = body["response_format"]
        return (200, _completion('{"value": "x"}'), 0.0) if fmt == {"type": "json_object"} else (422, "bad", 0.0)

    server.script = script
    model = OpenAIChatModel(server.url, "m")
    assert model.chat([{"role": "user", "content": "x"}], schema=SCHEMA) == '{"value": "x"}'
    assert len(server.requests) == 3
    # a refusal that is not about the format is not retried
    server.script = lambda b: (401, {"error": "bad key"}, 0.0)
    with pytest.raises(ModelRefusedError, match="HTTP 401"):
        model.chat([{"role": "user", "content": "x"}], schema=SCHEMA)
    assert len(server.requests) == 4 and model.stats.calls["refused"] == 1


def test_a_server_error_is_retried_and_a_timeout_is_not(server: Scripted) -> None:
    statuses = iter([503, 200])
    server.script = lambda b: (s := next(statuses), _completion('{"value": "a"}') if s == 200 else "busy", 0.0)
    model = OpenAIChatModel(server.url, "m", retries=1)
    assert model.chat([{"role": "user", "content": "x"}]) == '{"value": "a"}'
    assert model.stats.calls["http"] == 1 and model.stats.calls["ok"] == 1
    server.script = lambda b: (503, "busy", 0.0)
    with pytest.raises(ModelUnavailableError):
        model.chat([{"role": "user", "content": "x"}])
    assert model.stats.calls["http"] == 3  # one try and one retry more
    # a slow answer: one call, cut at its limit, counted, and ask_json does not ask again
    server.requests.clear()
    server.script = lambda b: (200, _completion('{"value": "late"}'), 1.0)
    start = time.monotonic()
    assert ask_json(model, [{"role": "user", "content": "x"}], validate=_value, retries=3, budget_s=0.3) is None
    assert time.monotonic() - start < 0.8 and len(server.requests) == 1
    assert model.stats.calls["timeout"] == 1 and model.stats.fallbacks == 1
    with pytest.raises(ModelTimeoutError):
        model.chat([{"role": "user", "content": "x"}], timeout_s=0.2)


@pytest.mark.parametrize(("status", "outcome", "tries"), [
    (408, "http", 2), (429, "http", 2), (503, "http", 2), (400, "refused", 1), (404, "refused", 1), (422, "refused", 1),
])
def test_a_busy_server_is_asked_again_and_a_refusal_is_not(server: Scripted, status: int, outcome: str,
                                                           tries: int) -> None:
    server.script = lambda b: (status, {"error": {"message": "no"}}, 0.0)
    model = OpenAIChatModel(server.url, "m", retries=1)
    with pytest.raises(ModelRefusedError if outcome == "refused" else ModelUnavailableError):
        model.chat([{"role": "user", "content": "x"}])
    assert len(server.requests) == tries and model.stats.calls[outcome] == tries
    assert sum(model.stats.calls.values()) == tries


def test_a_refused_request_is_said_once_and_its_turns_are_formed_by_the_rules_at_once(
        server: Scripted, tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture) -> None:
    server.script = lambda b: (401, {"error": {"message": "Incorrect API key provided: sk-wr***"}}, 0.0)
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder) as mem:
        mem.formation.model = OpenAIChatModel(server.url, "m", api_key="sk-wrong", retries=2)
        mem.save_memory("I live in Lyon.", user_id="u", wait=True)
        with caplog.at_level(logging.ERROR, logger="portamem.models"):
            for text in ("I moved to Paris last month.", "I moved to Berlin this week."):
                mem.add_turn(text, "Great.", user_id="u")
                mem.flush(10)  # formed by the rules now, not after MODEL_WAIT_S
        snap = mem.stats().model
        assert snap is not None and snap["outcomes"]["refused"] == snap["failures"]["refused"] == 2
        assert snap["outcomes"]["http"] == 0 and len(server.requests) == 2  # one request a turn, never again
        formation = mem.stats().formation
        assert formation.pending == 0 and formation.fallbacks == 2 and formation.last_error is None
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("portamem.models")]
    assert len(said) == 1, said
    assert "HTTP 401" in said[0] and "Incorrect API key provided" in said[0] and "llm_api_key" in said[0]


def test_a_calls_retries_share_its_time_budget(server: Scripted) -> None:
    server.script = lambda b: (503, "busy", 0.25)
    model = OpenAIChatModel(server.url, "m", retries=3)
    start = time.monotonic()
    assert ask_json(model, [{"role": "user", "content": "x"}], validate=_value, retries=0, budget_s=0.4) is None
    assert time.monotonic() - start < 0.6  # four tries of 0.25 s each would take 1 s
    assert len(server.requests) == 2 and model.stats.calls["http"] == 1 and model.stats.calls["timeout"] == 1


def test_malformed_completions_are_typed_errors(server: Scripted) -> None:
    model = OpenAIChatModel(server.url, "m")
    for body in ("not json at all", {"choices": []}, {"choices": [{"message": {"content": None}}]}):
        server.script = lambda b, body=body: (200, body, 0.0)
        with pytest.raises(ModelResponseError):
            model.chat([{"role": "user", "content": "x"}])
    assert model.stats.calls["error"] == 3
    # a malformed completion inside ask_json: retried, then the fallback
    assert ask_json(model, [{"role": "user", "content": "x"}], retries=1) is None and model.stats.fallbacks == 1


def test_a_server_that_is_down_gives_none_and_a_counted_fallback() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "m", timeout_s=2, retries=1)
    start = time.monotonic()
    assert ask_json(model, [{"role": "user", "content": "x"}], validate=_value, retries=1) is None
    assert time.monotonic() - start < 2
    snap = model.stats.snapshot()
    assert snap["failures"]["http"] == 4 and snap["fallbacks"] == 1  # 2 attempts x (1 try + 1 retry)


def test_settings_configure_the_model_and_hide_its_key() -> None:
    assert model_from_settings(Settings()) is None
    settings = Settings.load(env={"PORTAMEM_LLM_URL": "http://127.0.0.1:9/v1", "PORTAMEM_LLM_MODEL": "qwen",
                                  "PORTAMEM_LLM_API_KEY": "sk-secret", "PORTAMEM_LLM_TIMEOUT_S": "4.5",
                                  "PORTAMEM_LLM_RETRIES": "0"})
    assert "sk-secret" not in repr(settings)
    model = model_from_settings(settings)
    assert isinstance(model, OpenAIChatModel) and (model.timeout_s, model.retries) == (4.5, 0)
    assert "sk-secret" not in repr(model)
    with pytest.raises(ConfigError, match="llm_model"):
        model_from_settings(Settings(llm_url="http://127.0.0.1:9/v1"))
    for bad in ({"llm_url": "127.0.0.1:8080"}, {"llm_timeout_s": 0}, {"llm_retries": -1}):
        with pytest.raises(ConfigError):
            Settings(**bad)


def test_stats_are_safe_across_threads() -> None:
    stats = ModelStats(window=100)

    def work() -> None:
        for i in range(1000):
            stats.record_call("ok", 0.01 * (i % 10), prompt_tokens=2, completion_tokens=1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = stats.snapshot()
    assert snap["calls"] == 4000 and snap["prompt_tokens"] == 8000 and snap["latency_s"]["count"] == 4000
    assert snap["latency_s"]["buckets"][-1][1] == 4000 and 0 <= snap["latency_s"]["p50"] <= 0.09
    with pytest.raises(ValueError):
        stats.record_call("maybe", 1.0)


def test_the_plugins_send_their_schema_and_take_a_fenced_answer(server: Scripted) -> None:
    from portamem.pipeline import WriteContext
    from portamem.records import MemoryRecord
    from portamem_plugins.llm_extract import LLMExtractor
    from portamem_plugins.summarize import LLMMerger

    server.script = lambda b: (200, _completion('```json\n{"statement": "Budget: 8000, was 5000."}\n```'), 0.0)
    merger = LLMMerger(OpenAIChatModel(server.url, "m"), budget_s=5.0)
    ctx = WriteContext(tenant_id="default", user_id="u", settings=Settings())
    assert merger.portamem_merge_statements(MemoryRecord(content="My budget is 5000.", user_id="u"),
                                            MemoryRecord(content="My budget is 8000.", user_id="u"),
                                            ctx) == "Budget: 8000, was 5000."
    fmt = server.requests[0]["response_format"]
    assert fmt["json_schema"]["name"] == "merged_statement"
    assert fmt["json_schema"]["schema"]["required"] == ["statement"]
    # the extractor's schema is strict JSON schema a server can compile (every key required, nothing else)
    schema = LLMExtractor.SCHEMA
    item = schema["properties"]["statements"]["items"]
    assert set(item["required"]) == set(item["properties"]) and item["additionalProperties"] is False
    json.dumps(schema)


def test_a_memory_with_a_model_configured_shows_its_counters_and_closes_its_client(tmp_path: Path,
                                                                                  embedder: Embedder) -> None:

    settings = Settings(path=str(tmp_path / "s"), llm_url="http://127.0.0.1:9/v1", llm_model="m")
    with Memory(settings=settings, embedder=embedder) as mem:
        model = mem.formation.model
        assert isinstance(model, OpenAIChatModel)
        assert mem.stats().model == model.stats.snapshot() and mem.stats().model["calls"] == 0
    assert model._client.is_closed
    with Memory(settings=Settings(path=str(tmp_path / "t")), embedder=embedder) as mem:
        assert mem.stats().model is None
