"""portamem_adk on Google ADK: event round trips, the memory and session services, ADK's own memory tools."""

from __future__ import annotations

import importlib
import sys
from datetime import datetime, timezone

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.tools import load_memory, preload_memory  # noqa: E402
from google.genai import types  # noqa: E402
from portamem_adk import PortamemMemoryService, PortamemSessionService, from_event, to_event  # noqa: E402
from portamem_adk.events import RESTORED, to_events  # noqa: E402
from portamem_adk.testing import ScriptedLlm  # noqa: E402

from portamem import Memory  # noqa: E402
from portamem.errors import FrameworkNotInstalledError, ValidationError  # noqa: E402
from portamem.messages import Message, window_messages  # noqa: E402

CAT = "My cat is called Tom and he sleeps on the piano."
APP = "acme"


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _run(runner: Runner, text: str, *, user_id: str = "alice", session_id: str = "s1") -> list[Event]:
    return [e async for e in runner.run_async(user_id=user_id, session_id=session_id, new_message=_user(text))]


def _runner(memory: Memory, llm: ScriptedLlm, tools: list | None = None,
            sessions: PortamemSessionService | None = None) -> Runner:
    agent = LlmAgent(name="friday", model=llm, instruction="You are helpful.", tools=tools or [])
    return Runner(app_name=APP, agent=agent, session_service=sessions or PortamemSessionService(memory),
                  memory_service=PortamemMemoryService(memory), auto_create_session=True)


def _without_marker(event: Event) -> Event:
    meta = {k: v for k, v in (event.custom_metadata or {}).items() if k != RESTORED}
    return event.model_copy(update={"custom_metadata": meta or None})


# ---------------------------------------------------------------- events
def test_event_survives_the_neutral_form() -> None:
    call = Event(invocation_id="i1", author="friday", content=types.Content(role="model", parts=[
        types.Part(text="let me look", thought=True), types.Part(text="Looking it up."),
        types.Part(function_call=types.FunctionCall(id="c1", name="load_memory", args={"query": "cat"}))]),
        custom_metadata={"trace": {"step": 2}})
    result = Event(invocation_id="i1", author="friday", content=types.Content(role="user", parts=[
        types.Part(function_response=types.FunctionResponse(id="c1", name="load_memory", response={"memories": []}))]))
    user = Event(invocation_id="i1", author="user", content=_user("什么猫？"), timestamp=1_700_000_000.25)
    neutral = [from_event(e) for e in (user, call, result)]
    assert [(m.role, m.text, m.calls_tools, m.name) for m in neutral] == [
        ("user", "什么猫？", False, "user"), ("assistant", "Looking it up.", True, "friday"),
        ("tool", "", False, "friday")]
    assert neutral[0].created_at == datetime.fromtimestamp(1_700_000_000.25, tz=timezone.utc)
    back = [to_event(Message.from_dict(m.to_dict())) for m in neutral]  # through JSON, as the store keeps it
    assert all(e.custom_metadata and e.custom_metadata[RESTORED] for e in back)
    assert [_without_marker(e) for e in back] == [user, call, result]


def test_another_frameworks_messages_become_plain_events() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    messages = [Message("user", "Hi", id="u1", created_at=when, framework="langchain", native={"x": 1}),
                Message("assistant", "", calls_tools=True, framework="langchain"),
                Message("tool", "42", framework="langchain"),
                Message("assistant", "Hello!", name="bot", created_at=when, framework="langchain")]
    events = to_events(messages, author="friday")
    assert [(e.author, e.content.role, e.content.parts[0].text) for e in events] == [
        ("user", "user", "Hi"), ("friday", "model", "Hello!")]
    assert events[0].id == "u1" and events[0].timestamp == when.timestamp()
    assert to_events(messages)[1].author == "bot"


# ---------------------------------------------------------------- the memory service
async def test_memory_entries_come_back_as_written(memory: Memory) -> None:
    service = PortamemMemoryService(memory)
    entry = MemoryEntry(content=types.Content(role="model", parts=[types.Part(text=CAT)]), author="friday",
                        custom_metadata={"topic": "pets"}, timestamp="2026-03-01T10:00:00+00:00")
    [saved] = await service.add_memory(app_name=APP, user_id="alice", memories=[entry])
    found = await service.search_memory(app_name=APP, user_id="alice", query="What is my cat like?")
    assert found.memories == [saved]
    assert (saved.content, saved.author, saved.custom_metadata, saved.timestamp) == (
        entry.content, "friday", {"topic": "pets"}, "2026-03-01T10:00:00+00:00")
    await service.delete_memory(app_name=APP, user_id="alice", memory_id=saved.id)
    assert (await service.search_memory(app_name=APP, user_id="alice", query="cat")).memories == []


async def test_the_app_is_the_tenant_unless_one_is_named(memory: Memory) -> None:
    service = PortamemMemoryService(memory)
    await service.add_memory(app_name="app_a", user_id="alice", memories=[MemoryEntry(content=_user(CAT))])
    assert (await service.search_memory(app_name="app_b", user_id="alice", query="cat")).memories == []
    assert memory.search_memory("cat", user_id="alice", tenant_id="app_a")[0].content == CAT
    shared = PortamemMemoryService(memory, tenant_id="app_a")
    assert [m.id for m in (await shared.search_memory(app_name="app_b", user_id="alice", query="cat")).memories]


async def test_bad_input_is_refused_and_writes_nothing(memory: Memory) -> None:
    service = PortamemMemoryService(memory)
    blank = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="  ")]))
    with pytest.raises(ValidationError):
        await service.add_memory(app_name=APP, user_id="alice", memories=[MemoryEntry(content=_user(CAT)), blank])
    assert memory.list_memories(user_id="alice", tenant_id=APP) == []
    with pytest.raises(ValidationError):
        await service.delete_memory(app_name=APP, user_id="alice")
    with pytest.raises(ValidationError):
        await service.search_memory(app_name=APP, user_id="", query="cat")


async def test_a_session_added_again_adds_only_its_new_turns(memory: Memory) -> None:
    from google.adk.sessions import InMemorySessionService

    sessions = InMemorySessionService()
    agent = LlmAgent(name="friday", model=ScriptedLlm(replies=["Hello!", "Noted."]))
    runner = Runner(app_name=APP, agent=agent, session_service=sessions, auto_create_session=True)
    service = PortamemMemoryService(memory)
    await _run(runner, "Hi")
    session = await sessions.get_session(app_name=APP, user_id="alice", session_id="s1")
    await service.add_session_to_memory(session)
    await _run(runner, "I live in Oslo.")
    session = await sessions.get_session(app_name=APP, user_id="alice", session_id="s1")
    await service.add_session_to_memory(session)
    await service.add_session_to_memory(session)
    window = window_messages(memory, user_id="alice", session_id="s1", tenant_id=APP)
    assert [(m.role, m.text) for m in window] == [("user", "Hi"), ("assistant", "Hello!"),
                                                  ("user", "I live in Oslo."), ("assistant", "Noted.")]
    assert [m.id for m in window] == [e.id for e in session.events]


async def test_event_deltas_wait_for_the_reply_and_keep_their_metadata(memory: Memory) -> None:
    service = PortamemMemoryService(memory)
    question = Event(invocation_id="i", author="user", content=_user("Where is Tom?"))
    answer = Event(invocation_id="i", author="friday", content=types.Content(role="model", parts=[
        types.Part(text="On the piano.")]))
    await service.add_events_to_memory(app_name=APP, user_id="alice", events=[question], session_id="s1",
                                       custom_metadata={"ttl": "7d"})
    assert window_messages(memory, user_id="alice", session_id="s1", tenant_id=APP) == []
    await service.add_events_to_memory(app_name=APP, user_id="alice", events=[answer], session_id="s1")
    window = window_messages(memory, user_id="alice", session_id="s1", tenant_id=APP)
    assert [m.text for m in window] == ["Where is Tom?", "On the piano."]
    assert window[0].metadata == {"custom_metadata": {"ttl": "7d"}} and window[1].metadata == {}


# ---------------------------------------------------------------- ADK's own loop and tools
async def test_load_memory_reads_what_another_framework_saved(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice", tenant_id=APP)  # as LoopMemory.remember or any adapter's tool does
    memory.flush()
    llm = ScriptedLlm(replies=[types.FunctionCall(name="load_memory", args={"query": "What is my cat like?"}),
                               "Tom sleeps on the piano."])
    events = await _run(_runner(memory, llm, tools=[load_memory]), "What is my cat like?")
    [response] = [r for e in events for r in e.get_function_responses()]
    assert [m.content.parts[0].text for m in response.response["result"].memories] == [CAT]
    assert CAT in llm.requests[1].contents[-1].model_dump_json()  # the model read the tool's result
    assert events[-1].content.parts[0].text == "Tom sleeps on the piano."


async def test_preload_memory_puts_memories_in_the_prompt(memory: Memory) -> None:
    memory.save_memory(CAT, user_id="alice", tenant_id=APP)
    memory.flush()
    llm = ScriptedLlm(replies=["Tom!"])
    await _run(_runner(memory, llm, tools=[preload_memory]), "What is my cat called?")
    prompt = "\n".join(p.text or "" for c in llm.requests[0].contents for p in c.parts or [])
    assert "<PAST_CONVERSATIONS>" in prompt and f"user: {CAT}" in prompt


async def test_a_conversation_goes_on_in_a_new_process(memory: Memory) -> None:
    def tool_call() -> types.FunctionCall:
        return types.FunctionCall(name="load_memory", args={"query": "cat"})

    first = _runner(memory, ScriptedLlm(replies=[tool_call(), "Nothing yet.", "Nice to meet you, Tom's owner."]),
                    tools=[load_memory])
    await _run(first, "Do you know my cat?")
    await _run(first, CAT)
    written = (await first.session_service.get_session(app_name=APP, user_id="alice", session_id="s1")).events
    # a fresh session service (a new process): the session comes back from portamem, each event as its
    # JSON form (a tool's pydantic result comes back as the dict ADK's database sessions also give)
    later = PortamemSessionService(memory)
    restored = await later.get_session(app_name=APP, user_id="alice", session_id="s1")
    assert [_without_marker(e).model_dump(mode="json") for e in restored.events] == [
        e.model_dump(mode="json") for e in written]
    llm = ScriptedLlm(replies=["Tom, on the piano."])
    await _run(_runner(memory, llm, sessions=later), "Where does he sleep?")
    shown = [p.text for c in llm.requests[0].contents for p in c.parts or [] if p.text]
    assert shown[:2] == ["Do you know my cat?", "Nothing yet."] and shown[-1] == "Where does he sleep?"
    window = window_messages(memory, user_id="alice", session_id="s1", tenant_id=APP)
    assert [m.role for m in window] == ["user", "assistant", "tool", "assistant", "user", "assistant",
                                        "user", "assistant"]  # each turn once, the tool call kept


async def test_a_session_another_framework_wrote_continues_in_adk(memory: Memory) -> None:
    memory.add_turn("I moved to Oslo.", "Welcome to Norway!", user_id="alice", session_id="s1", tenant_id=APP)
    sessions = PortamemSessionService(memory, assistant_author="friday")
    session = await sessions.get_session(app_name=APP, user_id="alice", session_id="s1")
    assert [(e.author, e.content.parts[0].text) for e in session.events] == [
        ("user", "I moved to Oslo."), ("friday", "Welcome to Norway!")]
    assert await sessions.get_session(app_name=APP, user_id="alice", session_id="nope") is None
    await _run(_runner(memory, ScriptedLlm(replies=["Yes."]), sessions=sessions), "Is it cold?")
    assert [t.user for t in memory.context(user_id="alice", session_id="s1", tenant_id=APP)] == [
        "I moved to Oslo.", "Is it cold?"]
    await sessions.delete_session(app_name=APP, user_id="alice", session_id="s1")
    assert memory.context(user_id="alice", session_id="s1", tenant_id=APP) == []


def test_missing_adk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "google.adk.memory", None)
    monkeypatch.delitem(sys.modules, "portamem_adk")
    with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[adk\]"):
        importlib.import_module("portamem_adk")
