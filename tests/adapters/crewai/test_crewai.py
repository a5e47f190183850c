"""portamem_crewai on CrewAI 1.x: records and messages round trips, the storage protocol, a crew's own loop."""

from __future__ import annotations

import importlib
import sys
from datetime import datetime, timedelta

import pytest

pytest.importorskip("crewai.memory.storage.backend")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.memory.storage.backend import StorageBackend  # noqa: E402
from crewai.memory.types import MemoryRecord as CrewRecord  # noqa: E402
from portamem_crewai import (  # noqa: E402
    PortamemConversation,
    PortamemStorage,
    crew_memory,
    from_llm_message,
    to_llm_message,
)
from portamem_crewai.models import ScriptedLLM  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, UnsupportedContentError, ValidationError  # noqa: E402
from portamem.messages import Message  # noqa: E402

CAT = "My cat is called Tom and he sleeps on the piano."
PEANUTS = "I am allergic to peanuts, so no satay for me."


def _record(content: str, scope: str = "/", categories: list[str] | None = None, **kw: object) -> CrewRecord:
    return CrewRecord(content=content, scope=scope, categories=categories or [], **kw)


def _search(storage: PortamemStorage, query: str, **kw: object) -> list[str]:
    return [r.content for r, _ in storage.search(storage.embedder([query])[0], **kw)]


@pytest.fixture
def storage(memory: Memory) -> PortamemStorage:
    return PortamemStorage(memory, user_id="alice")


# ---------------------------------------------------------------- records and messages
def test_a_record_comes_back_as_saved(storage: PortamemStorage) -> None:
    assert isinstance(storage, StorageBackend)
    when = datetime(2026, 3, 1, 10, 0, 0)
    original = _record(CAT, "/home/pets", ["pets", "家"], metadata={"by": "planner"}, importance=0.8,
                       created_at=when, source="alice-chat", private=True)
    storage.save([original])
    back = storage.get_record(original.id)
    assert back is not None and len(original.id) == 32  # the id is portamem's
    assert back.model_dump(exclude={"last_accessed"}) == original.model_dump(exclude={"last_accessed"})
    assert storage.memory.get_memory(original.id, user_id="alice").importance == 0.8


def test_llm_messages_survive_the_neutral_form() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"cat\"}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "Tom"}
    neutral = [from_llm_message(m) for m in (call, result)]
    assert [(m.role, m.calls_tools, m.text) for m in neutral] == [("assistant", True, ""), ("tool", False, "Tom")]
    assert [to_llm_message(Message.from_dict(m.to_dict())) for m in neutral] == [call, result]
    foreign = Message("assistant", "Hi!", name="bot", framework="langchain", native={"x": 1})
    assert to_llm_message(foreign) == {"role": "assistant", "content": "Hi!", "name": "bot"}


class _File:
    content_type = "image/png"


def test_attached_files_are_refused_with_their_mime_type(memory: Memory) -> None:
    conversation = PortamemConversation(memory, user_id="alice")
    with pytest.raises(UnsupportedContentError) as caught:
        conversation.add([{"role": "user", "content": "What is in this picture?", "files": {"cat.png": _File()}},
                          {"role": "assistant", "content": "A cat."}])
    assert caught.value.mime_type == "image/png" and "cat.png" in str(caught.value)
    assert conversation.messages() == []  # nothing of the exchange was written
    # an empty attachment list holds nothing to lose
    assert from_llm_message({"role": "user", "content": "hi", "files": {}}).native == {"role": "user", "content": "hi"}


def test_a_key_that_is_not_json_is_a_typed_error_and_json_parts_round_trip(memory: Memory) -> None:
    conversation = PortamemConversation(memory, user_id="alice")
    with pytest.raises(ValidationError, match="raw_tool_call_parts"):
        conversation.add([{"role": "user", "content": "hi"},
                          {"role": "assistant", "content": "hello", "raw_tool_call_parts": [object()]}])
    assert conversation.messages() == []
    with pytest.raises(ValidationError):
        from_llm_message(["role", "user"])  # type: ignore[arg-type]
    parts = {"role": "assistant", "content": "hello", "raw_tool_call_parts": [{"thought_signature": "abc"}]}
    conversation.add([{"role": "user", "content": "hi"}, parts])
    assert conversation.messages()[-1] == parts


# ---------------------------------------------------------------- the storage protocol
def test_scopes_and_categories_map_to_metadata(storage: PortamemStorage) -> None:
    storage.save([_record(CAT, "/home/pets", ["pets"]), _record(PEANUTS, "/home/food", ["health", "food"]),
                  _record("Standup is at nine.", "/work", ["schedule"])])
    assert storage.list_scopes("/") == ["/home", "/work"] and storage.list_scopes("/home") == ["/home/food",
                                                                                               "/home/pets"]
    assert storage.count() == 3 and storage.count("/home") == 2 and storage.count("/hom") == 0
    assert storage.list_categories("/home") == {"pets": 1, "health": 1, "food": 1}
    info = storage.get_scope_info("/home")
    assert (info.record_count, info.categories, info.child_scopes) == (2, ["food", "health", "pets"],
                                                                      ["/home/food", "/home/pets"])
    assert PEANUTS in _search(storage, "Can I eat peanuts?")
    assert PEANUTS not in _search(storage, "Can I eat peanuts?", scope_prefix="/work")
    assert _search(storage, "When is standup?", scope_prefix="/work") == ["Standup is at nine."]
    assert _search(storage, "Can I eat peanuts?", scope_prefix="/home", categories=["health"]) == [PEANUTS]
    with pytest.raises(ValidationError, match="one CrewAI category"):
        _search(storage, "peanuts", categories=["health", "pets"])
    storage.reset("/home")
    assert [r.content for r in storage.list_records()] == ["Standup is at nine."]


def test_delete_update_and_list(storage: PortamemStorage) -> None:
    old = _record(CAT, "/pets", metadata={"topic": "cat"}, created_at=datetime.utcnow() - timedelta(days=9))
    new = _record(PEANUTS, "/food", metadata={"topic": "food"})
    storage.save([old, new])
    assert [r.id for r in storage.list_records()] == [new.id, old.id]  # newest first
    assert [r.id for r in storage.list_records(limit=1, offset=1)] == [old.id]
    assert storage.delete(metadata_filter={"topic": "nope"}) == 0
    changed = old.model_copy(update={"content": "My cat Tom now sleeps on the sofa.", "scope": "/home/pets"})
    storage.update(changed)
    assert storage.get_record(old.id).content == changed.content and storage.list_scopes("/") == ["/food", "/home"]
    assert storage.delete(older_than=datetime.utcnow() - timedelta(days=1)) == 1
    assert storage.get_record(old.id) is None
    assert storage.delete(record_ids=[new.id]) == 1 and storage.count() == 0


def test_bad_input_is_refused_and_writes_nothing(storage: PortamemStorage) -> None:
    with pytest.raises(ValidationError):
        storage.save([_record(CAT), _record("   ")])
    with pytest.raises(ValidationError, match="'crewai'"):
        storage.save([_record(CAT, metadata={"crewai": 1})])
    assert storage.count() == 0
    with pytest.raises(ValidationError, match="embedder=storage.embedder"):
        storage.search([0.1] * 8)


def test_what_another_framework_saved_is_at_the_root(memory: Memory, storage: PortamemStorage) -> None:
    memory.save_memory(CAT, user_id="alice")
    cm = crew_memory(memory, user_id="alice")
    assert [m.record.content for m in cm.recall("What is my cat like?", limit=3)] == [CAT]
    assert [m.record.scope for m in cm.recall("cat", limit=3, depth="shallow")] == ["/"]
    assert cm.recall("cat", scope="/work", limit=3) == []
    assert crew_memory(memory, user_id="bob").recall("cat", limit=3) == []


# ---------------------------------------------------------------- CrewAI's own loop
def test_a_crew_recalls_and_saves_through_portamem(memory: Memory) -> None:
    memory.save_memory(PEANUTS, user_id="alice")  # as any other framework's adapter would
    llm = ScriptedLLM(replies=["Final Answer: Book the Thai place and skip the satay."])
    planner = Agent(role="Dinner planner", goal="Plan dinners the user can eat.", backstory="Careful.", llm=llm)
    task = Task(description="Plan dinner for tonight. Which foods must I avoid, like peanuts?",
                expected_output="A short plan.", agent=planner)
    cm = crew_memory(memory, user_id="alice")
    result = Crew(agents=[planner], tasks=[task], memory=cm).kickoff()
    assert result.raw == "Book the Thai place and skip the satay."
    shown = "\n".join(str(m.get("content")) for m in llm.calls[0])
    assert PEANUTS in shown  # recalled into the task's prompt
    cm.drain_writes()
    saved = [h.content for h in memory.search_memory("Thai place satay", user_id="alice")]
    assert any("Book the Thai place and skip the satay." in text for text in saved)


def test_a_conversation_goes_on_in_kickoff(memory: Memory) -> None:
    memory.add_turn("I moved to Oslo.", "Welcome to Norway!", user_id="alice", session_id="s1")
    conversation = PortamemConversation(memory, user_id="alice", session_id="s1")
    llm = ScriptedLLM(replies=["Final Answer: Yes, in winter."])
    agent = Agent(role="assistant", goal="Help.", backstory="Kind.", llm=llm)
    assert conversation.kickoff(agent, "Is it cold there?").raw == "Yes, in winter."
    shown = [(m["role"], m["content"]) for m in llm.calls[0] if m["role"] != "system"]
    assert shown[:2] == [("user", "I moved to Oslo."), ("assistant", "Welcome to Norway!")]
    assert [(m["role"], m["content"]) for m in conversation.messages()] == [
        ("user", "I moved to Oslo."), ("assistant", "Welcome to Norway!"),
        ("user", "Is it cold there?"), ("assistant", "Yes, in winter.")]


def test_missing_crewai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "crewai.memory.storage.backend", None)
    monkeypatch.delitem(sys.modules, "portamem_crewai")
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[crewai\]"):
        importlib.import_module("portamem_crewai")
