"""The model client against a real model (Qwen2.5-0.5B-Instruct under llama.cpp, ``conftest.local_llm``):
answers under a JSON schema parsed and valid, a timeout cut short and counted, a server that is not
there giving None and a counted fallback, tokens counted from the server's usage, and the share of
valid answers and the median latency on 20 extraction- and reconciliation-shaped prompts.

The figures of the last test are printed and, with ``PORTAMEM_ARTIFACTS`` set, written to
``$PORTAMEM_ARTIFACTS/llm_figures.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.models import OpenAIChatModel, ask_json
from portamem_conformance.local_model import Endpoint, free_port

EXTRACT = {
    "title": "statements", "type": "object", "additionalProperties": False, "required": ["statements"],
    "properties": {"statements": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "additionalProperties": False, "required": ["subject", "attribute", "value"],
        "properties": {"subject": {"type": "string", "maxLength": 40}, "attribute": {"type": "string", "maxLength": 40},
                       "value": {"type": "string", "maxLength": 60}}}}}}
EXTRACT_SYSTEM = ("Extract facts from the user's message for long-term memory, as JSON. Each fact: subject "
                  "(\"user\" or who it is about), attribute (a short noun), value (words copied from the message). "
                  "Example: message \"My brother Tom lives in Oslo.\" -> {\"statements\": [{\"subject\": "
                  "\"Tom (brother)\", \"attribute\": \"lives in\", \"value\": \"Oslo\"}]}. A question or a "
                  "request states nothing: {\"statements\": []}.")


def _reconcile_schema(ids: list[str]) -> dict[str, Any]:
    """The reason first: a small model that writes why before it decides decides better."""
    return {"title": "reconcile", "type": "object", "additionalProperties": False,
            "required": ["reason", "decision", "target"],
            "properties": {"reason": {"type": "string", "maxLength": 100},
                           "decision": {"enum": ["add", "update", "delete", "noop"]},
                           "target": {"enum": [*ids, "none"]}}}


RECONCILE_SYSTEM = ("You keep a user's memory current. Compare the new statement with each memory. update: the new "
                    "statement gives a new value for the same thing as a memory (a new city, a new budget). delete: "
                    "the new statement says a memory no longer holds. noop: the new statement says the same as a "
                    "memory. add: it is about something no memory covers. target: the memory id for update, delete "
                    "or noop, none for add. First write the reason in a few words, then the decision. Answer with "
                    "JSON only.")


EXTRACTIONS = [  # (message, words a right value holds)
    ("I moved from Lyon to Paris last month.", "paris"),
    ("My sister Anna works as a nurse in Leeds.", "nurse"),
    ("We set aside 12000 euros for the kitchen renovation.", "12000"),
    ("I've taken up bouldering on Tuesday evenings.", "bouldering"),
    ("My dog Rolo is allergic to chicken.", "chicken"),
    ("我搬到杭州了，离公司近一些。", "杭州"),
    ("我女儿今年九月上小学。", "小学"),
    ("医生把我的降压药加到每天两片。", "两片"),
    ("我最近开始学吉他。", "吉他"),
    ("我们家的猫叫年糕。", "年糕"),
]
RECONCILIATIONS = [  # (new statement, memories, the decision that is right)
    ("I live in Paris now.", {"m1": "I live in Lyon.", "m2": "I like jazz."}, "update"),
    ("My budget for the kitchen is now 15000 euros.", {"m1": "Kitchen budget: 12000 euros.", "m2": "I drive a Golf."},
     "update"),
    ("I like jazz.", {"m1": "I like jazz.", "m2": "I live in Lyon."}, "noop"),
    ("I started learning Portuguese.", {"m1": "I live in Lyon.", "m2": "I like jazz."}, "add"),
    ("I no longer have the Golf, I sold it.", {"m1": "I drive a Golf.", "m2": "I like jazz."}, "delete"),
    ("我现在住在杭州。", {"m1": "我住在上海。", "m2": "我喜欢喝茶。"}, "update"),
    ("我喜欢喝茶。", {"m1": "我喜欢喝茶。", "m2": "我住在上海。"}, "noop"),
    ("我开始学游泳了。", {"m1": "我住在上海。", "m2": "我喜欢喝茶。"}, "add"),
    ("我的预算改成两万了。", {"m1": "装修预算一万五。", "m2": "我喜欢喝茶。"}, "update"),
    ("我已经不喝咖啡了。", {"m1": "我每天早上喝咖啡。", "m2": "我住在上海。"}, "delete"),
]


def _valid_extraction(data: Any) -> str | None:
    if not isinstance(data, dict) or set(data) != {"statements"} or not isinstance(data["statements"], list):
        return "expected exactly {\"statements\": [...]}"
    for st in data["statements"]:
        if not isinstance(st, dict) or set(st) != {"subject", "attribute", "value"} or \
                not all(isinstance(v, str) and v.strip() for v in st.values()):
            return "each statement needs non-empty subject, attribute and value, and nothing else"
    return None


def _valid_reconciliation(ids: list[str]):  # type: ignore[no-untyped-def]
    def check(data: Any) -> str | None:
        if not isinstance(data, dict) or set(data) != {"reason", "decision", "target"}:
            return "expected exactly decision, target and reason"
        if data["decision"] not in {"add", "update", "delete", "noop"}:
            return "decision must be add, update, delete or noop"
        if data["target"] not in {*ids, "none"}:
            return f"target must be one of {ids} or none"
        if data["decision"] != "add" and data["target"] == "none":
            return f"{data['decision']} needs a target memory id"
        return None
    return check


def _reconcile_messages(statement: str, memories: dict[str, str]) -> list[dict[str, str]]:
    shown = "\n".join(f"[{i}] {text}" for i, text in memories.items())
    return [{"role": "system", "content": RECONCILE_SYSTEM},
            {"role": "user", "content": f"Memories:\n{shown}\n\nNew statement: {statement}"}]


def test_an_answer_under_the_schema_is_parsed_and_valid(local_llm: Endpoint) -> None:
    model = OpenAIChatModel(local_llm.url, local_llm.model, timeout_s=60)
    statement, memories, _ = RECONCILIATIONS[0]
    data = ask_json(model, _reconcile_messages(statement, memories), schema=_reconcile_schema(list(memories)),
                    validate=_valid_reconciliation(list(memories)), budget_s=90, retries=1, max_tokens=96)
    assert data is not None and data["target"] in {"m1", "m2", "none"}
    data = ask_json(model, [{"role": "system", "content": EXTRACT_SYSTEM},
                            {"role": "user", "content": "Message: My sister Anna works as a nurse in Leeds."}],
                    schema=EXTRACT, validate=_valid_extraction, budget_s=90, retries=1, max_tokens=160)
    assert data is not None and isinstance(data["statements"], list)
    snap = model.stats.snapshot()
    assert snap["outcomes"]["ok"] >= 2 and snap["fallbacks"] == 0


def test_the_server_reports_tokens_and_they_are_counted(local_llm: Endpoint) -> None:
    model = OpenAIChatModel(local_llm.url, local_llm.model, timeout_s=60)
    text = model.chat([{"role": "user", "content": "Say OK."}], max_tokens=4)
    assert isinstance(text, str)
    snap = model.stats.snapshot()
    assert snap["prompt_tokens"] > 0 and 0 < snap["completion_tokens"] <= 4
    assert snap["latency_s"]["count"] == 1 and snap["latency_s"]["p50"] > 0


def test_a_timeout_is_counted_and_gives_none_at_once(local_llm: Endpoint) -> None:
    model = OpenAIChatModel(local_llm.url, local_llm.model, timeout_s=60)
    start = time.monotonic()
    data = ask_json(model, [{"role": "system", "content": EXTRACT_SYSTEM},
                            {"role": "user", "content": "Message: I moved from Lyon to Paris last month."}],
                    schema=EXTRACT, validate=_valid_extraction, budget_s=0.05, retries=3, max_tokens=8)
    assert data is None and time.monotonic() - start < 1.0
    snap = model.stats.snapshot()
    assert snap["outcomes"]["timeout"] == 1 and snap["outcomes"]["ok"] == 0 and snap["fallbacks"] == 1


def test_a_server_that_is_not_there_gives_none_and_a_counted_fallback(local_llm: Endpoint) -> None:
    model = OpenAIChatModel(f"http://127.0.0.1:{free_port()}/v1", local_llm.model, timeout_s=5, retries=1)
    start = time.monotonic()
    assert ask_json(model, _reconcile_messages(*RECONCILIATIONS[0][:2]), schema=_reconcile_schema(["m1", "m2"]),
                    retries=1, budget_s=10) is None
    assert time.monotonic() - start < 3
    snap = model.stats.snapshot()
    assert snap["outcomes"]["http"] == 4 and snap["fallbacks"] == 1 and snap["outcomes"]["ok"] == 0


def test_memory_stats_show_the_configured_models_counters(local_llm: Endpoint, tmp_path: Path,
                                                          embedder: Embedder) -> None:
    settings = Settings(path=str(tmp_path / "s"), llm_url=local_llm.url, llm_model=local_llm.model)
    with Memory(settings=settings, embedder=embedder) as mem:
        snap = mem.stats().model
        assert snap is not None and set(snap["outcomes"]) == {"ok", "timeout", "http", "refused", "error"}
    with Memory(settings=Settings(path=str(tmp_path / "t")), embedder=embedder) as mem:
        assert mem.stats().model is None


def test_share_of_valid_answers_and_latency_on_twenty_prompts(local_llm: Endpoint) -> None:
    """Answers valid under the schema at the first try (no retry: the figure the model reaches alone),
    extractions that found a statement, kept values that are words of the message and held the right
    value, right reconciliation decisions, and the median latency of a call (the format probe left out)."""
    model = OpenAIChatModel(local_llm.url, local_llm.model, timeout_s=60)
    model.chat([{"role": "user", "content": "hi"}], schema=EXTRACT, max_tokens=4)  # settle the response format
    rows = []
    for message, word in EXTRACTIONS:
        data = ask_json(model, [{"role": "system", "content": EXTRACT_SYSTEM},
                                {"role": "user", "content": f"Message: {message}"}],
                        schema=EXTRACT, validate=_valid_extraction, budget_s=60, retries=0, max_tokens=160)
        found = data["statements"] if data is not None else []
        grounded = bool(found) and all(st["value"].lower() in message.lower() for st in found)
        rows.append({"kind": "extract", "prompt": message, "valid": data is not None, "found": bool(found),
                     "grounded": grounded,
                     "right": data is not None and any(word in st["value"].lower() for st in data["statements"]),
                     "answer": data})
    for statement, memories, right in RECONCILIATIONS:
        ids = list(memories)
        data = ask_json(model, _reconcile_messages(statement, memories), schema=_reconcile_schema(ids),
                        validate=_valid_reconciliation(ids), budget_s=60, retries=0, max_tokens=96)
        rows.append({"kind": "reconcile", "prompt": statement, "valid": data is not None,
                     "right": data is not None and data["decision"] == right, "answer": data})
    snap = model.stats.snapshot()
    latencies = model.stats._recent  # every call of this client, the first (format) call included
    figures = {
        "prompts": len(rows),
        "valid_first_try": sum(r["valid"] for r in rows) / len(rows),
        "extract_found": sum(r.get("found", False) for r in rows if r["kind"] == "extract") / len(EXTRACTIONS),
        "extract_grounded": sum(r.get("grounded", False) for r in rows if r["kind"] == "extract") / len(EXTRACTIONS),
        "extract_right": sum(r["right"] for r in rows if r["kind"] == "extract") / len(EXTRACTIONS),
        "reconcile_right": sum(r["right"] for r in rows if r["kind"] == "reconcile") / len(RECONCILIATIONS),
        "median_latency_s": round(statistics.median(list(latencies)[1:]), 3),
        "max_latency_s": round(max(list(latencies)[1:]), 3),
        "prompt_tokens": snap["prompt_tokens"], "completion_tokens": snap["completion_tokens"],
        "invalid": snap["failures"]["invalid"], "timeouts": snap["outcomes"]["timeout"],
        "rows": rows,
    }
    print("\nlocal model figures: " + json.dumps({k: v for k, v in figures.items() if k != "rows"}), file=sys.stderr)
    if os.environ.get("PORTAMEM_ARTIFACTS"):
        out = Path(os.environ["PORTAMEM_ARTIFACTS"]) / "llm_figures.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, ensure_ascii=False, indent=1))
    assert figures["valid_first_try"] >= 0.9, figures


def test_formation_asks_the_real_model_off_the_acknowledged_path(local_llm: Endpoint, tmp_path: Path,
                                                                 embedder: Embedder) -> None:
    """With the model configured, a turn is acknowledged without waiting for it; formation then asks it
    (calls counted, none refused) and every turn's statement is kept, whatever the model decided."""
    turns = [("I live in Lyon.", "Nice."), ("Actually I moved to Paris last month.", "Congratulations!"),
             ("我最近开始学吉他。", "好啊，加油！")]
    settings = Settings(path=str(tmp_path / "s"), llm_url=local_llm.url, llm_model=local_llm.model, llm_timeout_s=60)
    with Memory(settings=settings, embedder=embedder) as mem:
        acks = []
        for user, assistant in turns:
            start = time.monotonic()
            mem.add_turn(user, assistant, user_id="u", session_id="s")
            acks.append(time.monotonic() - start)
        assert max(acks) < 2.0, acks  # a model call takes seconds here: none was made on this path
        mem.flush(timeout=300)
        stats = mem.stats()
        assert stats.model["outcomes"]["ok"] >= 1 and stats.model["prompt_tokens"] > 0
        assert stats.formation.pending == 0
        everything = {"statuses": ["active", "superseded", "pending"]}
        kept = {m.content for m in mem.list_memories(user_id="u", filters=everything)}
        assert {user for user, _ in turns} <= kept
