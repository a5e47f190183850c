"""The LLM statement extractor: strict JSON, validated, asked again with what was wrong, the rules when
every attempt failed; asked only by the formation worker, once per user turn, never on the acknowledged
write path nor on the memories the turn wrote; a clause it reads that the rules missed is kept."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from portamem import Memory, Settings
from portamem.embedding.embedders import Embedder
from portamem.plugins import get_plugin_manager
from portamem.language.statements import statements_of
from portamem_plugins.llm_extract import LLMExtractor

LYON = {"statements": [{"attribute": "lives_in", "value": "Lyon", "polarity": True, "subject": "user",
                        "kind": "identity", "text": "I live in Lyon"}],
        "acts": [{"text": "I live in Lyon.", "act": "statement"}]}
# a change the rule extractor does not read ("Paris is where I am based now" gives no rule statement)
PARIS = {"statements": [{"attribute": "Lives-In", "value": "Paris", "polarity": True, "previous": "Lyon",
                         "when": "now", "qualifier": None, "subject": "user", "kind": "identity",
                         "text": "Paris is where I am based now"}],
         "acts": [{"text": "Paris is where I am based now, Lyon is behind me.", "act": "statement"}]}
QUESTION = {"statements": [], "acts": [{"text": "Where should I eat tonight?", "act": "question"}]}


def _scripted(answers: dict[str, list[str]], prompts: list[str]) -> Callable[[str], str]:
    """A model that answers each message with its scripted answers, in turn."""
    queues = {k: iter(v) for k, v in answers.items()}

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        message = prompt.rsplit("Message: ", 1)[1].split("\n\nYour last answer was rejected")[0]
        return next(queues[message])

    return llm


@pytest.mark.parametrize("bad", [
    [], {"statements": {}}, {"statements": [], "extra": 1},
    {"statements": [{"attribute": "lives_in"}]},  # no value
    {"statements": [{"attribute": "", "value": "Paris"}]},
    {"statements": [{"attribute": "lives_in", "value": "Paris", "polarity": "yes"}]},
    {"statements": [{"attribute": "lives_in", "value": "Paris", "kind": "opinion"}]},
    {"statements": [{"attribute": "lives_in", "value": "Paris", "confidence": 0.9}]},
    {"statements": [], "acts": [{"text": "hi", "act": "greeting"}]},
])
def test_an_answer_that_breaks_the_contract_is_refused(bad: object) -> None:
    assert LLMExtractor.validate(bad) is not None
    assert LLMExtractor.validate(LYON) is None and LLMExtractor.validate(PARIS) is None


@pytest.fixture
def scripted(tmp_path, embedder: Embedder) -> Iterator[tuple[Memory, list[str]]]:  # type: ignore[no-untyped-def]
    prompts: list[str] = []
    llm = _scripted({
        "I live in Lyon.": [json.dumps(LYON)],
        # not JSON, then a statement without its value, then the contract: three attempts
        "Paris is where I am based now, Lyon is behind me.": ["Sure! Here you go", json.dumps(
            {"statements": [{"attribute": "lives_in"}]}), json.dumps(PARIS)],
        "Where should I eat tonight?": [json.dumps(QUESTION)],
        "I'm allergic to peanuts.": ["no"] * 3,
    }, prompts)
    pm = get_plugin_manager()
    pm.register(LLMExtractor(llm), name="llm_extract")
    mem = Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm)
    yield mem, prompts
    mem.close()


def test_the_model_is_asked_once_per_user_turn_in_the_background_never_on_the_write_path(
        scripted: tuple[Memory, list[str]]) -> None:
    mem, prompts = scripted
    mem.save_memory("I live in Lyon.", user_id="u", wait=True)
    assert prompts == []  # a save is the rules' alone: no model on the acknowledged path
    turn = "Paris is where I am based now, Lyon is behind me."
    mem.add_turn(turn, "Nice!", user_id="u", session_id="s")
    mem.flush()
    asked = [p for p in prompts if "Message: " in p]
    # once for the turn (three attempts: the retries said what was wrong), never on the memories it wrote
    assert len(asked) == 3 and all(turn in p for p in asked)
    assert "rejected: not JSON" in asked[1] and "value" in asked[2]
    kept = [m.content for m in mem.list_memories(user_id="u", filters={"statuses": ["active", "superseded"]})]
    assert any("Paris is where I am based now" in c for c in kept)  # the clause the model read is kept


def test_a_question_the_model_labels_is_not_stored_as_a_fact(scripted: tuple[Memory, list[str]]) -> None:
    mem, _ = scripted
    out = mem.add_turn("Where should I eat tonight?", "Try the bistro on Rue Cler.", user_id="u", session_id="s")
    mem.flush()
    assert not any("Where should I eat" in m.content for m in mem.list_memories(user_id="u")
                   if m.type.value == "semantic") and out is not None


def test_three_broken_answers_leave_the_turn_to_the_rules(scripted: tuple[Memory, list[str]]) -> None:
    mem, prompts = scripted
    mem.add_turn("I'm allergic to peanuts.", "Noted.", user_id="u", session_id="s")
    mem.flush()
    assert len([p for p in prompts if "peanuts" in p]) == 3
    got = [s for m in mem.list_memories(user_id="u") for s in statements_of(m)]
    assert [(s.attribute, s.value) for s in got] == [("allergic_to", "peanuts")]  # the rule extractor's reading


#: a turn whose second sentence the rules do not capture, and the clause a model reads there
TINY = "I moved to Paris last month. Lol, the flat is tiny."
TINY_READ = {"statements": [{"attribute": "flat size", "value": "tiny", "polarity": True, "subject": "user",
                             "kind": "fact", "text": "the flat is tiny"}]}


def _reading(asked: list[str], then: Callable[[], None] = lambda: None) -> Callable[[str], str]:
    """A model extractor's model: TINY_READ for ``TINY`` (after ``then()``), nothing for any other message."""
    def llm(prompt: str) -> str:
        asked.append(prompt)
        if TINY not in prompt:
            return json.dumps({"statements": []})
        then()
        return json.dumps(TINY_READ)
    return llm


def _tiny(mem: Memory) -> list:
    return [m for m in mem.list_memories(user_id="u", filters={"statuses": ["active", "superseded", "deleted",
                                                                            "pending"]})
            if m.content == "the flat is tiny"]


def test_a_turn_formed_again_after_the_model_was_down_writes_its_clauses_once(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    import socket
    import time

    from portamem.models import CallableChatModel, OpenAIChatModel

    asked: list[str] = []
    pm = get_plugin_manager()
    pm.register(LLMExtractor(_reading(asked)), name="llm_extract")
    with socket.socket() as sock:  # a port nothing listens on: the reconciler's model cannot be reached
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        mem.save_memory("I live in Lyon.", user_id="u", wait=True)
        mem.formation.model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "absent", timeout_s=2.0, retries=0)
        mem.add_turn(TINY, "Nice!", user_id="u", session_id="s")
        deadline = time.monotonic() + 30
        while sum(TINY in p for p in asked) < 3 and time.monotonic() < deadline:  # formed three times, in vain
            time.sleep(0.05)
        assert sum(TINY in p for p in asked) >= 3 and mem.stats().formation.pending == 1
        mem.formation.model = CallableChatModel(lambda prompt: json.dumps({"decisions": []}))  # the model is back
        mem.formation.notify()
        mem.flush(60)
        tiny = _tiny(mem)
        assert [(m.status.value, m.frequency) for m in tiny] == [("active", 1)]  # written once, never repeated


def test_a_clause_read_while_its_user_is_erased_is_not_written(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    import threading

    held: list[Memory] = []
    erased = threading.Event()
    asked: list[str] = []

    def erase() -> None:
        held[0].erase_user(user_id="u")
        erased.set()

    pm = get_plugin_manager()
    pm.register(LLMExtractor(_reading(asked, erase)), name="llm_extract")
    path = str(tmp_path / "s")
    with Memory(settings=Settings(path=path), embedder=embedder, plugins=pm) as mem:
        held.append(mem)
        mem.add_turn(TINY, "Nice!", user_id="u", session_id="s")
        mem.flush(60)
        assert erased.wait(30)
    # closed: the worker is done with the turn in hand
    with Memory(settings=Settings(path=path), embedder=embedder) as again:
        assert again.list_memories(user_id="u", filters={"statuses": ["active", "superseded", "deleted",
                                                                      "pending"]}) == []
        assert again.stats().formation.pending == 0


def test_most_bounds_the_statements_the_schema_and_prompt_ask_for() -> None:
    few = LLMExtractor(lambda p: "", most=3)
    assert few.SCHEMA["properties"]["statements"]["maxItems"] == 3 and "At most 3 statements" in few.prompt("x")
    assert few.SCHEMA["required"] == ["acts", "statements"]  # with acts, both still asked for
    assert LLMExtractor.SCHEMA["properties"]["statements"]["maxItems"] == 8  # the class's own is untouched
    alone = LLMExtractor(lambda p: "", acts=False, most=2)
    assert alone.SCHEMA["required"] == ["statements"] and list(alone.SCHEMA["properties"]) == ["statements"]
    for bad in (0, 9, True, "3"):
        with pytest.raises(ValueError, match="most"):
            LLMExtractor(lambda p: "", most=bad)
