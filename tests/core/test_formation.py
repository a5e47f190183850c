"""The formation stage: each user turn is queued in the transaction that writes it and formed in the
background (``portamem.background.formation``), once, whatever happens to the process; a configured
model decides through ``portamem_reconcile`` off the acknowledged path, and its decisions count only
after the checks (ids shown, scope, trust, the user's own words, questions)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings, Status, hookimpl
from portamem.errors import ConfigError
from portamem.models import CallableChatModel, ModelStats
from portamem.pipeline import Decision
from portamem.storage.schema import FORMED, formation_t

_MEMORY_LINE = re.compile(r'^\s+(M\d+) \(stored [^)]*\): "(.*)"', re.M)
_STATEMENT_LINE = re.compile(r'^(S\d+): "(.*)"', re.M)


def keys(prompt: str) -> tuple[dict[str, str], dict[str, str]]:
    """The S- and M-keys a reconcile prompt shows, by their text."""
    return ({k: t for k, t in _STATEMENT_LINE.findall(prompt)}, {k: t for k, t in _MEMORY_LINE.findall(prompt)})


def scripted(answer: Callable[[dict[str, str], dict[str, str]], str], calls: list[str] | None = None,
             delay: float = 0.0) -> CallableChatModel:
    """A model whose answer is computed from the keys its prompt shows."""
    def fn(prompt: str) -> str:
        if calls is not None:
            calls.append(prompt)
        if delay:
            time.sleep(delay)
        return answer(*keys(prompt))
    return CallableChatModel(fn)


def replace_tennis(statements: dict[str, str], memories: dict[str, str]) -> str:
    s = next(k for k, t in statements.items() if "bouldering" in t)
    m = next(k for k, t in memories.items() if "tennis" in t)
    return "```json\n" + json.dumps({"decisions": [{"statement": s, "action": "update", "target": m,
                                                    "reason": "bouldering replaced tennis on Sundays"}]}) + "\n```"


def rows(mem: Memory) -> list[dict]:
    with mem.store.engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(formation_t).order_by(formation_t.c.pk))]


def form_audit(mem: Memory, memory_id: str) -> list[dict]:
    return [e for e in mem.store.audit_trail(mem.tenant_id, memory_id) if e["action"] == "form"]


def test_each_user_turn_is_queued_with_its_context_and_formed_once(memory: Memory) -> None:
    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana", session_id="s")
    memory.add_turn("Thanks!", "Any time.", user_id="ana", session_id="s")
    wrote = memory.add_turn("My budget is 5000 euros.", "Noted.", user_id="ana", session_id="s")
    memory.flush(60)
    queued = rows(memory)
    assert [r["state"] for r in queued] == [FORMED] * 3
    assert queued[2]["turn"]["user"] == "My budget is 5000 euros."
    assert [t["user"] for t in queued[2]["turn"]["context"]] == ["I play tennis every Sunday.", "Thanks!"]
    assert queued[2]["memory_ids"] == [r.memory_id for r in wrote]
    stats = memory.stats().formation
    assert stats.pending == 0 and stats.oldest_pending_s == 0 and stats.formed_total == 3
    assert stats.formed_per_s > 0


def test_a_model_decision_replaces_the_rules_off_the_acknowledged_path(memory: Memory) -> None:
    calls: list[str] = []
    memory.formation.model = scripted(replace_tennis, calls)
    tennis = memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")[0]
    memory.flush(60)
    boulder = memory.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")[0]
    memory.flush(60)
    old = memory.get_memory(tennis.memory_id, user_id="ana")
    assert old.status is Status.SUPERSEDED and old.superseded_by == boulder.memory_id  # history kept
    trail = form_audit(memory, boulder.memory_id)
    assert trail and trail[0]["detail"]["by"] == "model_reconciler" and trail[0]["detail"]["applied"]
    assert "bouldering replaced tennis" in trail[0]["detail"]["reason"]
    hits = memory.search_memory("what sport on Sundays", user_id="ana")
    assert tennis.memory_id not in [h.memory_id for h in hits]
    assert len(calls) == 1  # the first turn had nothing stored near it: no call
    assert memory.stats().formation.fallbacks == 0


@pytest.mark.parametrize("answer", [
    "I think S1 updates M1.",  # no JSON at all
    '{"decisions": [{"statement": "S1", "action": "update", "target": "M7", "reason": "x"}]}',  # an id never shown
    '{"decisions": [{"statement": "S1", "action": "replace", "target": "M1", "reason": "x"}]}',  # no such action
    '{"decisions": [{"statement": "S9", "action": "update", "target": "M1", "reason": "x"}]}',  # no such statement
])
def test_a_broken_answer_is_asked_again_then_the_rules_decide(memory: Memory, answer: str) -> None:
    calls: list[str] = []
    memory.formation.model = scripted(lambda s, m: answer, calls)
    tennis = memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")[0]
    memory.flush(60)
    memory.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")
    memory.flush(60)
    assert memory.get_memory(tennis.memory_id, user_id="ana").status is Status.ACTIVE
    assert len(calls) == 1 + memory.settings.llm_retries
    assert "Your last answer was rejected" in calls[-1]
    stats = memory.stats().formation
    assert stats.fallbacks == 1 and stats.pending == 0


def test_a_model_that_fails_leaves_the_rules_decision(memory: Memory) -> None:
    def down(prompt: str) -> str:
        raise ConnectionError("connection refused")
    memory.formation.model = CallableChatModel(down)
    memory.add_turn("I live in Lyon.", "Nice.", user_id="ana")
    memory.flush(60)
    moved = memory.add_turn("I moved to Paris last month.", "Great.", user_id="ana")[0]
    memory.flush(60)
    lyon = [r for r in memory.list_memories(user_id="ana", filters={"statuses": ["superseded"]})]
    assert [r.superseded_by for r in lyon] == [moved.memory_id]  # the rule pass's supersession stands
    assert memory.stats().formation.fallbacks == 1


class _Reaching:
    """A third-party reconciler that names whatever target it was told to."""

    def __init__(self, target: str, action: str = "update") -> None:
        self.target, self.action = target, action

    @hookimpl(tryfirst=True)
    def portamem_reconcile(self, statements, candidates, turn, context, model):  # type: ignore[no-untyped-def]
        return [Decision(s.memory_id, self.action, self.target, "reaching") for s in statements]


def test_a_decision_outside_the_writers_scope_or_the_shown_is_refused(memory: Memory) -> None:
    other = memory.save_memory("I play tennis every Sunday.", user_id="bob")
    memory.plugins.register(_Reaching(other.memory_id), name="reaching")
    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    memory.flush(60)
    boulder = memory.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")[0]
    memory.flush(60)
    assert memory.get_memory(other.memory_id, user_id="bob").status is Status.ACTIVE
    trail = form_audit(memory, boulder.memory_id)
    assert trail and not trail[0]["detail"]["applied"] and "not among the memories shown" in trail[0]["detail"]["refused"]
    assert memory.stats().formation.refused >= 1


def test_a_less_trusted_statement_never_overrides_a_high_trust_memory(memory: Memory) -> None:
    memory.formation.model = scripted(replace_tennis)
    tennis = memory.save_memory("I play tennis every Sunday.", user_id="ana", source="system")  # high trust
    memory.flush(60)
    boulder = memory.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")[0]
    memory.flush(60)
    assert memory.get_memory(tennis.memory_id, user_id="ana").status is Status.ACTIVE
    assert "does not override the high-trust" in form_audit(memory, boulder.memory_id)[0]["detail"]["refused"]


def test_a_question_does_not_become_a_change_on_the_models_word(memory: Memory) -> None:
    from portamem_plugins import reconcile_model

    tennis = memory.save_memory("I play tennis every Sunday.", user_id="ana")
    question = memory.save_memory("Should I try bouldering on Sundays?", user_id="ana")
    memory.flush(60)
    from portamem.pipeline import FormationTurn, WriteContext
    from portamem.records import utcnow

    turn = FormationTurn(user=question.content, assistant="Maybe.", created_at=utcnow(), session_id="s")
    model = scripted(lambda s, m: json.dumps({"decisions": [
        {"statement": "S1", "action": "update", "target": "M1", "reason": "changed sport"}]}))
    decided = reconcile_model.portamem_reconcile(
        statements=[question], candidates={question.memory_id: [tennis]}, turn=turn,
        context=WriteContext(tenant_id=memory.tenant_id, user_id="ana", settings=memory.settings, formation=True),
        model=model)
    assert decided == []


def test_a_statement_about_someone_else_does_not_replace_the_users(memory: Memory) -> None:
    def merge(statements: dict[str, str], memories: dict[str, str]) -> str:
        return json.dumps({"decisions": [{"statement": next(iter(statements)), "action": "update",
                                          "target": next(iter(memories)), "reason": "blood pressure"}]})
    memory.formation.model = scripted(merge)
    mine = memory.save_memory("I have high blood pressure.", user_id="ana")
    memory.flush(60)
    father = memory.add_turn("My father has high blood pressure too.", "Sorry to hear.", user_id="ana")
    memory.flush(60)
    assert memory.get_memory(mine.memory_id, user_id="ana").status is Status.ACTIVE
    assert "about ['father'], the memory about ['user']" in form_audit(memory, father[0].memory_id)[0]["detail"]["refused"]


def test_add_turn_does_not_wait_for_a_slow_model_and_calls_it_at_most_once_per_turn(memory: Memory) -> None:
    calls: list[str] = []
    memory.formation.model = scripted(lambda s, m: json.dumps({"decisions": []}), calls, delay=2.0)
    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    memory.flush(60)
    spent = []
    said = ["These days I go bouldering on Sundays.", "My budget for the trip is 900 euros.",
            "I also play tennis on Sundays.", "My budget for the trip is now 1200 euros."]
    for text in said:
        start = time.perf_counter()
        memory.add_turn(text, "Noted.", user_id="ana")
        spent.append(time.perf_counter() - start)
    assert max(spent) < 1.0, spent  # acknowledged at once, while the model takes 2 s a call
    backlog = memory.stats().formation
    assert backlog.pending >= 1 and backlog.oldest_pending_s > 0
    memory.flush(120)
    assert len(calls) <= 1 + len(said)  # at most one call per user turn
    assert memory.stats().formation.pending == 0


WRITER = textwrap.dedent(
    """
    import sys, time, json
    from portamem import Memory, Settings
    from portamem.models import CallableChatModel
    def slow(prompt):
        time.sleep(float(sys.argv[2]))
        return json.dumps({"decisions": []})
    mem = Memory(settings=Settings(path=sys.argv[1]))
    mem.formation.model = CallableChatModel(slow)
    mem.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    for i in range(6):
        mem.add_turn(f"I play tennis every Sunday with club {i}.", "Nice.", user_id="ana")
    print("acked", flush=True)
    while mem.stats().formation.formed_total < int(sys.argv[3]):
        time.sleep(0.05)
    print("formed", mem.stats().formation.formed_total, flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("formed_before_kill", [0, 2])
def test_a_killed_process_resumes_its_backlog_and_forms_each_turn_once(tmp_path, embedder,
                                                                        formed_before_kill: int) -> None:
    path = str(tmp_path / "store")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, path, "0.5", str(formed_before_kill)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "acked"
        assert proc.stdout.readline().startswith("formed")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    calls: list[str] = []
    mem = Memory(settings=Settings(path=path), embedder=embedder)
    try:
        before = rows(mem)
        assert len(before) == 7 and sum(r["state"] == FORMED for r in before) >= formed_before_kill
        assert sum(r["state"] != FORMED for r in before) >= 1  # the kill left a backlog
        mem.formation.model = scripted(lambda s, m: json.dumps({"decisions": []}), calls)
        mem.flush(120)
        after = rows(mem)
        assert [r["state"] for r in after] == [FORMED] * 7
        # formed once: a turn formed before the kill is not formed again, and the others once each
        for r in after:
            for memory_id in r["memory_ids"]:
                assert len([e for e in form_audit(mem, memory_id) if e["detail"]["by"]]) <= 1
        assert len(calls) <= sum(r["state"] != FORMED for r in before)
    finally:
        mem.close()


def test_closing_with_a_backlog_keeps_it_for_the_next_open(tmp_path, embedder) -> None:
    path = str(tmp_path / "store")
    release = threading.Event()

    def blocked(prompt: str) -> str:
        release.wait(10)
        return json.dumps({"decisions": []})

    mem = Memory(settings=Settings(path=path), embedder=embedder)
    mem.formation.model = CallableChatModel(blocked)
    mem.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    for i in range(3):
        mem.add_turn(f"I play tennis every Sunday with club {i}.", "Nice.", user_id="ana")
    time.sleep(1.0)
    assert mem.stats().formation.pending >= 1
    release.set()
    mem.close()
    again = Memory(settings=Settings(path=path), embedder=embedder)
    try:
        again.flush(60)
        assert [r["state"] for r in rows(again)] == [FORMED] * 4
    finally:
        again.close()


def test_metrics_show_the_formation_backlog(memory: Memory) -> None:
    pytest.importorskip("prometheus_client", reason="/metrics needs the server extra (the server env runs this)")
    from portamem.server.metrics import formation_metrics

    release = threading.Event()
    memory.formation.model = CallableChatModel(lambda prompt: (release.wait(10), '{"decisions": []}')[1])
    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    for i in range(2):
        memory.add_turn(f"I play tennis every Sunday with club {i}.", "Nice.", user_id="ana")
    time.sleep(1.0)
    shown = {m.name: m.samples[0].value for m in formation_metrics(memory.stats().formation)}
    assert shown["portamem_formation_pending"] >= 1 and shown["portamem_formation_oldest_pending_seconds"] > 0
    assert shown["portamem_formation_failing"] == 0
    release.set()
    memory.flush(60)
    shown = {m.name: m.samples[0].value for m in formation_metrics(memory.stats().formation)}
    assert shown["portamem_formation_pending"] == 0 and shown["portamem_formed_turns"] == 3


@pytest.mark.parametrize(("newer", "older", "replaces"), [
    ("Going well, I bumped my mileage up to 45 km a week.", "I'm running about 30 km a week at the moment", True),
    ("最近状态不错，周跑量加到35公里了。", "现在每周跑20公里左右，跑鞋是耐克的Pegasus", True),
    ("Also we've gone with sage green tiles instead of the white metro ones.",
     "I'm leaning towards white metro tiles for the splashback", True),
    # a number beside another word, a shared unit of time, one shared word with a change word, another person
    ("the worktop is ordered, Silestone quartz in Calacatta Gold, £2,340 fitted", "The order is KB-55190.", False),
    ("and the broadband is BT Fibre 2, £45 a month", "I'm with Vodafone at the moment, paying £32 a month", False),
    ("We moved the whole thing two days earlier because my sister's leave changed",
     "hi, I'm planning a trip to Lisbon with my sister in June", False),
    ("My father's blood pressure is now 150 over 95.", "My blood pressure is 130 over 85.", False),
    # contractions ("we're", "they're") are no topic two texts share
    ("we're going with the other shop instead, they're cheaper", "we're hoping they're open on Monday", False),
])
def test_the_rules_judge_a_change_without_a_named_slot(newer: str, older: str, replaces: bool) -> None:
    from portamem.records import MemoryRecord
    from portamem.write.forming import changes

    def said(text: str) -> MemoryRecord:
        return MemoryRecord(content=text, user_id="ana", tenant_id="t")

    assert (changes(said(newer), said(older)) is not None) is replaces


def test_an_unreachable_model_keeps_the_backlog_waiting_while_the_rules_serve(memory: Memory) -> None:
    import socket

    from portamem.models import OpenAIChatModel

    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    memory.formation.model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "absent", timeout_s=2.0, retries=0)
    memory.add_turn("I live in Lyon.", "Nice.", user_id="ana")
    memory.flush(30)  # nothing stored near the first statement: formed without asking the model
    moved = memory.add_turn("I moved to Paris last month.", "Great.", user_id="ana")[0]
    memory.indexer.flush(30)
    time.sleep(1.5)
    waiting = memory.stats().formation
    assert waiting.pending == 1 and "cannot be reached" in (waiting.last_error or "")
    # the rule pass serves recall meanwhile
    assert memory.search_memory("where do I live", user_id="ana")[0].memory_id == moved.memory_id
    with pytest.raises(Exception, match="formation is still 1 turns behind"):
        memory.flush(1.0)
    memory.formation.model = scripted(lambda s, m: json.dumps({"decisions": []}))  # the model is back
    memory.formation.notify()
    memory.flush(60)
    assert memory.stats().formation.pending == 0 and memory.stats().formation.last_error is None


def test_a_model_that_updates_whatever_it_is_shown_changes_nothing_unrelated(memory: Memory) -> None:
    def everything(statements: dict[str, str], memories: dict[str, str]) -> str:
        return json.dumps({"decisions": [{"statement": s, "action": "update", "target": m, "reason": "..."}
                                         for s in statements for m in memories]})
    memory.formation.model = scripted(everything)
    club = memory.add_turn("My club is Salford Harriers, we do track on Tuesdays.", "Nice.", user_id="ana")[0]
    memory.flush(60)
    memory.add_turn("I've signed up for the Wilmslow Half on 17 March.", "Good luck!", user_id="ana")
    memory.flush(60)
    assert memory.get_memory(club.memory_id, user_id="ana").status is Status.ACTIVE
    assert memory.stats().formation.refused >= 1


def test_a_purge_takes_the_turns_that_said_what_it_purges_out_of_the_formation_queue(memory: Memory) -> None:
    memory.formation.stop()  # a backlog: the turns wait
    said = memory.add_turn("I play tennis every Sunday with Ottilie.", "Nice.", user_id="ana", session_id="s")
    memory.add_turn("My budget is 5000 euros.", "Noted.", user_id="ana", session_id="s")
    assert "Ottilie" in json.dumps(rows(memory)[1]["turn"]["context"])
    memory.forget_memory([r.memory_id for r in said], user_id="ana")
    memory.purge_deleted(older_than=timedelta(0))
    left = rows(memory)
    assert "Ottilie" not in json.dumps([r["turn"] for r in left])  # neither the turn nor the context after it
    assert [(r["state"], r["turn"]["user"]) for r in left] == [(0, "My budget is 5000 euros.")]  # still to form
    memory.erase_user(user_id="ana")
    assert rows(memory) == []


def test_maintenance_prunes_the_formed_turns_and_keeps_those_to_form(memory: Memory) -> None:
    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana", session_id="s")
    memory.flush(60)
    memory.formation.stop()
    memory.add_turn("My budget is 5000 euros.", "Noted.", user_id="ana", session_id="s")
    assert [r["state"] for r in rows(memory)] == [FORMED, 0]
    report = memory.maintain()
    assert [(r["state"], r["turn"]["user"]) for r in rows(memory)] == [(0, "My budget is 5000 euros.")]
    assert report.formed_pruned == 1


@pytest.mark.parametrize("forgotten", ["statement", "target"])
def test_a_purge_empties_the_reasons_formation_audited(memory: Memory, forgotten: str) -> None:
    memory.formation.model = scripted(replace_tennis)
    tennis = memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")[0]
    memory.flush(60)
    boulder = memory.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")[0]
    memory.flush(60)
    assert "bouldering replaced tennis" in form_audit(memory, boulder.memory_id)[0]["detail"]["reason"]
    memory.forget_memory((boulder if forgotten == "statement" else tennis).memory_id, user_id="ana")
    memory.purge_deleted(older_than=timedelta(0))
    trail = form_audit(memory, boulder.memory_id)
    assert trail and trail[0]["detail"]["reason"] is None  # what happened stays, the model's words do not
    assert trail[0]["detail"]["target"] == tennis.memory_id and trail[0]["detail"]["applied"]


def test_flush_leaves_the_workers_lock_free_while_it_asks_the_store(memory: Memory, monkeypatch) -> None:
    from portamem.storage import formation as queue

    real = queue.waiting_upto
    free: list[bool] = []

    def asking(engine, pk):  # type: ignore[no-untyped-def]
        probe = threading.Thread(target=memory.formation.notify)  # the worker's lock, taken from elsewhere
        probe.start()
        probe.join(2.0)
        free.append(not probe.is_alive())
        return real(engine, pk)

    memory.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
    monkeypatch.setattr(queue, "waiting_upto", asking)
    memory.flush(60)
    assert free and all(free)


def test_close_waits_for_a_model_call_a_bounded_time_and_the_next_open_forms_its_turn(
        tmp_path, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from portamem.background import formation

    monkeypatch.setattr(formation, "STOP_WAIT_S", 0.5)
    path = str(tmp_path / "store")
    entered, release = threading.Event(), threading.Event()

    def stuck(prompt: str) -> str:
        entered.set()
        release.wait(8)
        return json.dumps({"decisions": []})

    mem = Memory(settings=Settings(path=path), embedder=embedder)
    try:
        mem.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
        mem.flush(60)
        mem.formation.model = CallableChatModel(stuck)
        mem.add_turn("I play tennis every Sunday with club 1.", "Nice.", user_id="ana")
        assert entered.wait(30)
        start = time.monotonic()
        mem.close()
        took = time.monotonic() - start
    finally:
        release.set()
    mem.formation._thread.join(10)  # the call ended after the close: its turn changed nothing
    assert took < 3, took
    again = Memory(settings=Settings(path=path), embedder=embedder)
    try:
        assert [r["state"] for r in rows(again)] == [FORMED, 0]
        again.formation.model = scripted(lambda s, m: json.dumps({"decisions": []}))
        again.flush(60)
        assert [r["state"] for r in rows(again)] == [FORMED] * 2
    finally:
        again.close()


@pytest.mark.parametrize(("newer", "older", "part"), [
    # a change that names the older's name again (or its short form) beside a name of its own
    ("Also switched to Hoka Clifton, the Brooks were giving me blisters.", "I run in Brooks Ghost by the way, love them",
     ["I run in Brooks Ghost by the way"]),
    ("Hazelwood Barn double booked us, so we're going with Oakley Manor instead",
     "We've booked Hazelwood Barn as the venue, and the caterer is Rosa's", ["We've booked Hazelwood Barn as the venue"]),
    # a longer name is another thing (the shop's plan, not the shop), an article is no name, no change word,
    # no name of its own, another person
    ("also I upgraded to Stride Plus, £4.99 a month", "hi, I ordered running shoes from Stride last week", None),
    ("the gig fell through, so we're playing The Crown instead", "I play bass in a covers band called The Loose Ends", None),
    ("Oakley Manor looks lovely in the photos", "We've booked Hazelwood Barn as the venue", None),
    # a change that ends what the older names, with nothing in its place
    ("and I cancelled the PureGym membership obviously", "I'm a member at PureGym on Kirkstall Road",
     ["I'm a member at PureGym on Kirkstall Road"]),
    ("Hazelwood Barn looks lovely in the photos", "We've booked Hazelwood Barn as the venue", None),
    ("My father switched to Hoka Clifton, the Brooks hurt him", "I run in Brooks Ghost", None),
])
def test_a_change_that_names_the_older_name_outdates_its_clause(newer: str, older: str, part: list[str] | None) -> None:
    from portamem.records import MemoryRecord
    from portamem.write.forming import names_replaced

    def said(text: str) -> MemoryRecord:
        return MemoryRecord(content=text, user_id="ana", tenant_id="t")

    assert names_replaced(said(newer), said(older)) == part


def test_the_newer_name_answers_in_the_older_place_and_the_older_keeps_its_other_facts(memory: Memory) -> None:
    from datetime import datetime, timezone

    from portamem.recall import recall

    day = datetime(2026, 3, 1, tzinfo=timezone.utc)
    memory.add_turn("I run in Brooks Ghost, got them at Runners Need in Leeds", "Nice.", user_id="ana",
                    session_id="a", created_at=day)
    memory.add_turn("I cook a lot of Thai food at home", "Yum.", user_id="ana", session_id="a", created_at=day)
    memory.add_turn("Also switched to Hoka Clifton, the Brooks were giving me blisters.", "Ouch.", user_id="ana",
                    session_id="b", created_at=day + timedelta(days=30))
    memory.flush(60)
    older = next(r for r in memory.list_memories(user_id="ana") if "Brooks Ghost" in r.content)
    assert older.status is Status.ACTIVE and older.metadata["outdated"]["by"]
    shoes = [h.content for h in recall(memory, "Which shoes do I run in these days?", user_id="ana", session_id="c",
                                       now=day + timedelta(days=31))]
    assert shoes and "Hoka Clifton" in shoes[0] and not any("Brooks Ghost" in c for c in shoes)
    shop = [h.content for h in recall(memory, "Where did I get them at, Runners Need?", user_id="ana",
                                      session_id="c", now=day + timedelta(days=31))]
    assert any("Runners Need" in c for c in shop)


def test_a_line_the_newer_name_replaces_whole_gives_way_for_any_question(memory: Memory) -> None:
    from datetime import datetime, timezone

    from portamem.recall import recall

    day = datetime(2026, 3, 1, tzinfo=timezone.utc)
    memory.add_turn("We've booked Hazelwood Barn as the venue", "Lovely.", user_id="ana", session_id="a",
                    created_at=day)
    memory.add_turn("Hazelwood Barn double booked us, so we're going with Oakley Manor, same date thankfully",
                    "Phew.", user_id="ana", session_id="b", created_at=day + timedelta(days=20))
    memory.flush(60)
    lines = [h.content for h in recall(memory, "Where is the wedding?", user_id="ana", session_id="c",
                                       now=day + timedelta(days=21))]
    assert lines and "Oakley Manor" in lines[0] and not any(c.startswith("We've booked") for c in lines)


class _Recording:
    """A chat model that records what each call asked for (its schema and token budget) and answers the
    extractor's prompt with ``extraction`` and the reconciler's with no decisions."""

    def __init__(self, extraction: str, gate: threading.Event | None = None) -> None:
        self.extraction, self.gate = extraction, gate
        self.asked: list[tuple[str, dict | None, int]] = []
        self.stats = ModelStats()

    def chat(self, messages, *, schema=None, max_tokens=256, timeout_s=None) -> str:
        prompt = messages[-1]["content"]
        self.asked.append((prompt, schema, max_tokens))
        if self.gate is not None:
            self.gate.wait(10)
        if prompt.startswith("Read the user's message"):
            return self.extraction
        return json.dumps({"decisions": []})


def _extractions(model: _Recording) -> list[tuple[str, dict | None, int]]:
    return [a for a in model.asked if a[0].startswith("Read the user's message")]


def test_llm_extract_asks_the_model_for_statements_in_formation_within_its_token_budget(tmp_path, embedder) -> None:
    gate = threading.Event()
    answer = {"statements": [{"attribute": "lives_in", "value": "Oslo", "polarity": True, "previous": "Lyon",
                              "when": None, "qualifier": None, "subject": "user", "kind": "identity",
                              "text": "I moved from Lyon to Oslo"}]}
    model = _Recording(json.dumps(answer), gate)
    settings = Settings(path=str(tmp_path / "s"), llm_extract=True, llm_extract_max_tokens=160)
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.formation.model = model
        wrote = mem.add_turn("I moved from Lyon to Oslo in May.", "Big move!", user_id="ana")
        assert wrote  # acknowledged while the model is still held at the gate: never on the write path
        gate.set()
        mem.flush(60)
        asked = _extractions(model)
        assert len(asked) == 1
        prompt, schema, max_tokens = asked[0]
        assert max_tokens == 160 and "I moved from Lyon to Oslo in May." in prompt
        # statements only (the rules label the sentences), bounded in number and length
        # (two statements: as many as 160 tokens hold, so the model closes its list instead of being cut off)
        assert list(schema["properties"]) == ["statements"] and schema["properties"]["statements"]["maxItems"] == 2
        assert "At most 2 statements" in prompt
        assert "acts" not in prompt.split("Message:")[0].split("exactly")[-1]
        assert [r["state"] for r in rows(mem)] == [FORMED]
        assert any("Oslo" in m.content for m in mem.list_memories(user_id="ana"))


@pytest.mark.parametrize("answer", ["Oslo!", json.dumps({"statements": [{"attribute": "x", "value": "v" * 500}]}),
                                    json.dumps({"statements": [{"attribute": "lives_in", "value": "Oslo"}] * 9})])
def test_a_broken_or_unbounded_extraction_leaves_the_turn_to_the_rules(tmp_path, embedder, answer: str) -> None:
    model = _Recording(answer)
    settings = Settings(path=str(tmp_path / "s"), llm_extract=True)
    with Memory(settings=settings, embedder=embedder) as mem:
        mem.formation.model = model
        mem.add_turn("I moved from Lyon to Oslo in May.", "Big move!", user_id="ana")
        mem.flush(60)
        assert len(_extractions(model)) == 2  # asked again once, then the rules
        assert [r["state"] for r in rows(mem)] == [FORMED]
        assert any("Oslo" in m.content for m in mem.list_memories(user_id="ana"))  # nothing the user said is lost


def test_without_llm_extract_the_model_only_reconciles(tmp_path, embedder) -> None:
    model = _Recording("{}")
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder) as mem:
        mem.formation.model = model
        mem.add_turn("I play tennis every Sunday.", "Nice.", user_id="ana")
        mem.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="ana")
        mem.flush(60)
        assert model.asked and not _extractions(model)


@pytest.mark.parametrize("tokens", [0, 31, 5000, True, "many"])
def test_llm_extract_max_tokens_out_of_bounds_is_a_config_error(tokens) -> None:
    with pytest.raises(ConfigError, match="llm_extract_max_tokens"):
        Settings(llm_extract_max_tokens=tokens)
