"""The scenario suite and ``portamem eval scenarios``: the packaged conversations meet their counts, and
the metrics mean what they say on small hand-made cases (a planted stale line counts, a change
statement does not, a stored question counts, precision counts lines)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.cli import main
from portamem.embedding.embedders import Embedder
from portamem.scenarios.locomo import evaluate_locomo
from portamem.messages import turn_messages
from portamem.recall import format_memories
from portamem.scenarios import (
    HELD_OUT,
    SPLITS,
    Scenario,
    ScenarioQuestion,
    evaluate_scenarios,
    holds,
    judge_prompt,
    load_scenarios,
    play,
    prompt_lines,
    stored_turns,
    suite_path,
)
from portamem.scenarios.harness import _figures
from portamem_plugins.redact import find_pii


# ---------------------------------------------------------------------- the packaged suite
@pytest.fixture(scope="module")
def suite() -> dict[str, list[Scenario]]:
    return {split: load_scenarios(suite_path(split), split) for split in (*SPLITS, *HELD_OUT)}


def _texts(scenario: Scenario) -> list[str]:
    return [x for t in scenario.turns for x in (t.user, t.assistant, *(c.result for c in t.tools))]


def test_the_suite_meets_its_counts(suite: dict[str, list[Scenario]]) -> None:
    everything = [s for split in suite.values() for s in split]
    questions = [q for s in everything for q in s.questions]
    assert len(everything) >= 40
    assert sum(not q.unstored for q in questions) >= 150
    phrasings = {t.phrasing for s in everything for t in s.turns if t.phrasing}
    assert len(phrasings) >= 40
    assert len({s.id for s in everything}) == len(everything)
    assert all(2 <= len(s.sessions) <= 5 for s in everything)
    for split, scenarios in suite.items():
        langs = Counter(s.lang for s in scenarios)
        assert set(langs) == {"en", "zh"} and abs(langs["en"] - langs["zh"]) <= 1, (split, langs)
        turns = [t for s in scenarios for t in s.turns]
        acts = Counter(a for t in turns for a in t.acts)
        assert all(acts[a] > 0 for a in ("greeting", "thanks", "smalltalk", "question", "request", "statement", "update"))
        assert any(t.tools for t in turns), split
        assert any(q.unstored for s in scenarios for q in s.questions), split
        assert len({t.phrasing for t in turns if t.phrasing}) >= 25, split


def test_the_halves_are_balanced_by_language_and_phenomenon(suite: dict[str, list[Scenario]]) -> None:
    def shares(scenarios: list[Scenario]) -> dict[str, float]:
        qs = [q for s in scenarios for q in s.questions if not q.unstored]
        tags = Counter(t for q in qs for t in q.tags)
        return {t: tags[t] / len(qs) for t in ("update", "fact", "number", "date", "tool", "preference")}

    dev, test = shares(suite["dev"]), shares(suite["test"])
    for tag in dev:
        assert abs(dev[tag] - test[tag]) <= 0.12, (tag, dev[tag], test[tag])
    for split in suite.values():
        by_lang = Counter(s.lang for s in split for q in s.questions if not q.unstored)
        assert abs(by_lang["en"] - by_lang["zh"]) <= 0.15 * sum(by_lang.values())


def test_the_held_out_conversations_are_phrased_unlike_the_halves(suite: dict[str, list[Scenario]]) -> None:
    """Each held-out split measures rules on text they were not written against: none of its changes is
    labelled with a phrasing of the dev or test half or of an earlier held-out split, no user turn of it
    repeats one of theirs, and each of its questions about a changed value names the stale one."""
    stating = {"statement", "update"}
    seen = [s for split in SPLITS for s in suite[split]]
    for split in HELD_OUT:
        held = suite[split]
        assert Counter(s.lang for s in held) == {"en": 8, "zh": 8}, split
        phrasings = {t.phrasing for s in seen for t in s.turns if t.phrasing}
        assert not phrasings & {t.phrasing for s in held for t in s.turns if t.phrasing}, split
        said = {t.user.casefold() for s in seen for t in s.turns if stating & set(t.acts)}
        assert not said & {t.user.casefold() for s in held for t in s.turns if stating & set(t.acts)}, split
        assert all(q.stale for s in held for q in s.questions if "update" in q.tags), split
        assert not {s.id for s in held} & {s.id for s in seen}, split
        seen += held


def test_the_dev_oracle_states_every_statement_turn_and_every_answer_a_user_gave(
        suite: dict[str, list[Scenario]]) -> None:
    """``dev.oracle.jsonl`` holds what a perfect extractor writes for each stating turn of the dev half
    (written by hand: the user's words, one self-contained sentence each): exactly one entry per
    statement or update turn, none for questions, requests and filler, and every answer the user gave
    (not a tool) is in a statement of its conversation, so statements fed through the reconciler can
    answer every such question."""
    from importlib import resources

    text = resources.files("portamem.scenarios").joinpath("dev.oracle.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    oracle = {(r["conversation"], r["session"], r["turn"]): r["statements"] for r in rows}
    assert len(oracle) == len(rows)
    assert all(isinstance(v, list) and v and all(isinstance(x, str) and x.strip() for x in v) for v in oracle.values())
    stating = {(s.id, session.id, i) for s in suite["dev"] for session in s.sessions
               for i, t in enumerate(session.turns) if {"statement", "update"} & set(t.acts)}
    assert set(oracle) == stating
    for s in suite["dev"]:
        said = [x for (conv, _, _), v in oracle.items() if conv == s.id for x in v]
        for q in s.questions:
            if not q.unstored and "tool" not in q.tags:
                assert any(holds(x, q.answer) for x in said), (s.id, q.question)


def test_every_question_is_answerable_from_its_conversation(suite: dict[str, list[Scenario]]) -> None:
    """Some surface form of each current and stale value, and each evidence substring, is in a turn
    (the other forms stand for how a memory may restate it); sessions are days apart and the
    questions come after the last one."""
    for scenario in (s for split in suite.values() for s in split):
        texts = _texts(scenario)
        for q in scenario.questions:
            if q.unstored:
                continue
            assert any(holds(t, q.answer) for t in texts), (scenario.id, q.question)
            assert not q.stale or any(holds(t, q.stale) for t in texts), (scenario.id, q.question)
            for e in q.evidence:
                assert any(holds(t, [e]) for t in texts), (scenario.id, e)
        starts = [s.start for s in scenario.sessions]
        assert all(b - a >= timedelta(days=1) for a, b in zip(starts, starts[1:])), scenario.id
        assert scenario.ask_at > starts[-1]


def test_no_answer_is_hidden_by_pii_redaction(suite: dict[str, list[Scenario]]) -> None:
    """Redaction takes phone numbers and e-mail addresses out of memories by default: the suite asks
    about what a memory keeps, so none of its texts holds one."""
    found = [(s.id, t) for split in suite.values() for s in split for t in _texts(s) if find_pii(t)]
    assert found == []


# ---------------------------------------------------------------------- matching and judging
def test_values_match_at_word_edges_and_across_number_formats() -> None:
    assert holds("The budget is now 15,000 euros", ["15000"])
    assert holds("budget £15 000", ["15000"])
    assert holds("预算改成１５万", ["15万"])  # full-width digits read as ASCII
    assert holds("I moved to PARIS", ["paris"])
    assert not holds("a budget of 120 euros", ["12"])
    assert not holds("a Lyonnaise salad", ["Lyon"])
    assert holds("Lyon's old town", ["Lyon"])
    assert holds("我搬到深圳了", ["深圳"])
    assert not holds("anything", [])


def test_prompt_lines_drop_the_header_and_each_lines_date(memory: Memory) -> None:
    """The bracket of id, date, source and trust is not read: a memory dated the 12th does not hold "12"."""
    at = datetime(2024, 3, 12, 9, 0, tzinfo=timezone.utc)
    memory.save_memory("My flat is on the third floor.", user_id="u", created_at=at, wait=True)
    hits = memory.search_memory("which floor is my flat on?", user_id="u")
    prompt = format_memories(hits, now=at + timedelta(days=2))
    lines = prompt_lines(prompt)
    assert "2024-03-12" in prompt and len(prompt.splitlines()) == len(lines) + 1
    assert lines == ["My flat is on the third floor."]
    assert not any(holds(line, ["12"]) for line in lines)


CITY = ScenarioQuestion("Where do I live?", ("Paris",), ("Lyon",), ("left Lyon for good",), ("update",))


def test_a_planted_stale_line_counts_and_a_change_statement_does_not() -> None:
    stale = judge_prompt(CITY, "I live in Lyon.", ["I live in Lyon.", "I moved from Lyon to Paris."])
    assert stale.stale and stale.stale_lines == ("I live in Lyon.",)
    assert not stale.top1 and stale.answer
    change = judge_prompt(CITY, "I moved from Lyon to Paris.", ["I moved from Lyon to Paris."])
    assert change.top1 and change.answer and not change.stale
    # a change statement without the new value is not stale when it is the question's evidence
    evidence = judge_prompt(CITY, "I left Lyon for good.", ["I left Lyon for good."])
    assert not evidence.stale and not evidence.answer and evidence.precision == 1.0


def test_precision_is_the_share_of_lines_bearing_on_the_answer() -> None:
    lines = ["I moved from Lyon to Paris.", "Paris rent is high.", "I left Lyon for good.", "Good morning!"]
    assert judge_prompt(CITY, lines[0], lines).precision == 0.75
    assert judge_prompt(CITY, None, []).precision is None
    assert judge_prompt(CITY, "Good morning!", ["Good morning!"]).precision == 0.0
    nothing = judge_prompt(ScenarioQuestion("What's my blood type?", ()), None, ["I live in Paris."])
    assert nothing.precision is None and not nothing.stale and nothing.lines == 1


def test_figures_average_precision_over_prompts_and_count_empty_recall() -> None:
    rows = [
        {"split": "x", "lang": "en", "tags": [], "lines": ["a", "b"], "stale": ["Lyon"], "top1": True,
         "answer_in_prompt": True, "stale_in_prompt": True, "precision": 0.5},
        {"split": "x", "lang": "en", "tags": [], "lines": [], "stale": [], "top1": False,
         "answer_in_prompt": False, "stale_in_prompt": False, "precision": None},
        {"split": "x", "lang": "en", "tags": [], "lines": ["c"], "stale": [], "top1": False,
         "answer_in_prompt": True, "stale_in_prompt": False, "precision": 1.0},
        {"split": "x", "lang": "en", "tags": [], "lines": [], "empty": True},
        {"split": "x", "lang": "en", "tags": [], "lines": ["d"], "empty": False},
    ]
    stored = [{"kind": "question"}, {"kind": "filler"}, {"kind": "filler"}]
    f = _figures(rows, stored, {"question_turns": 4, "filler_turns": 9}, 1)
    assert f["questions"] == 3 and f["top1_right"] == 0.3333 and f["answer_in_prompt"] == 0.6667
    assert f["stale_in_prompt"] == 1 and f["questions_with_stale_values"] == 1
    assert f["prompt_precision"] == 0.75 and f["mean_lines"] == 1.0
    assert (f["questions_stored"], f["question_turns"], f["filler_stored"], f["filler_turns"]) == (1, 4, 2, 9)
    assert (f["unstored_questions"], f["unstored_empty"]) == (2, 0.5)


def test_a_question_kept_as_an_active_fact_counts_as_stored(memory: Memory) -> None:
    from portamem.scenarios import ScenarioTurn

    asked = ScenarioTurn("What is my order number?", "It's ORD-1.", ("question",))
    other = ScenarioTurn("How long does rice keep?", "A day.", ("question",))
    memory.save_memory("What is my order number?", user_id="u", wait=True)
    memory.save_memory("User asked: how long does rice keep", user_id="u", type="working", wait=True)
    memory.save_memory("User: What is my order number?\nAssistant: It's ORD-1.", user_id="u", type="episodic",
                       wait=True)
    records = memory.list_memories(user_id="u")
    found = stored_turns(records, [asked, other])
    assert [(t.user, r.content) for t, r in found] == [
        ("What is my order number?", "What is my order number?"),
        ("How long does rice keep?", "User asked: how long does rice keep"),
    ]
    # a short turn is matched whole, and a text only at word edges
    hi = ScenarioTurn("hi", "Hello!", ("greeting",))
    morning = ScenarioTurn("morning!", "Morning!", ("greeting",))
    memory.save_memory("This is my third try at the morning swim.", user_id="u", wait=True)
    memory.save_memory("Swimming is on Saturday mornings.", user_id="u", wait=True)
    assert stored_turns(memory.list_memories(user_id="u"), [hi, morning]) == []
    memory.save_memory("Hi", user_id="u", type="working", wait=True)
    assert [t.user for t, _ in stored_turns(memory.list_memories(user_id="u"), [hi, morning])] == ["hi"]
    records = memory.list_memories(user_id="u")
    forgotten = [r.memory_id for r in records if r.type.value != "episodic"]
    memory.forget_memory(forgotten, user_id="u")
    assert stored_turns(memory.list_memories(user_id="u", filters={"statuses": ["active", "deleted"]}),
                        [asked, other]) == []


# ---------------------------------------------------------------------- playing and the command
TINY = {
    "id": "tiny-en", "lang": "en", "user_id": "ida", "title": "tiny",
    "sessions": [
        {"id": "s1", "start": "2024-05-01T09:00:00+00:00", "turns": [
            {"user": "Hi!", "assistant": "Hello Ida!", "acts": ["greeting"]},
            {"user": "My favourite colour is green.", "assistant": "Green, noted.", "acts": ["statement"]},
            {"user": "What's the capital of Peru?", "assistant": "Lima.", "acts": ["question"]},
        ]},
        {"id": "s2", "start": "2024-05-09T18:00:00+00:00", "turns": [
            {"user": "Where is my parcel? Order PX-118.", "assistant": "It arrives on Friday.", "acts": ["request"],
             "tools": [{"name": "track_order", "arguments": {"order": "PX-118"},
                        "result": "PX-118: out for delivery, arriving Fri 10 May"}]},
            {"user": "My favourite colour is blue now, not green.", "assistant": "Blue it is.", "acts": ["update"],
             "phrasing": "X now"},
        ]},
    ],
    "ask": {"session": "later", "at": "2024-05-12T10:00:00+00:00"},
    "questions": [
        {"q": "What is my favourite colour?", "answer": ["blue"], "stale": ["green"], "tags": ["update"]},
        {"q": "What is my blood type?", "answer": [], "tags": ["unstored"]},
    ],
}


def test_a_tool_turn_is_played_through_the_messages_adapters_record(memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps(TINY) + "\n", encoding="utf-8")
    scenario = load_scenarios(path)[0]
    play(memory, scenario)
    turns = memory.context(user_id="ida", session_id="s2")
    assert [t.user for t in turns] == ["Where is my parcel? Order PX-118.", "My favourite colour is blue now, not green."]
    messages = turn_messages(turns[0])
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].calls_tools and messages[2].name == "track_order"
    assert messages[2].text == "PX-118: out for delivery, arriving Fri 10 May"
    assert turns[0].created_at == datetime(2024, 5, 9, 18, 0, tzinfo=timezone.utc)
    assert turns[1].created_at == datetime(2024, 5, 9, 18, 2, tzinfo=timezone.utc)


def test_the_report_counts_per_split_and_language(tmp_path: Path, embedder: Embedder) -> None:
    zh = {**TINY, "id": "tiny-zh", "lang": "zh", "user_id": "lu",
          "questions": [{"q": "我最喜欢什么颜色？", "answer": ["blue"], "stale": ["green"], "tags": ["update"]}]}
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(TINY) + "\n" + json.dumps(zh, ensure_ascii=False) + "\n", encoding="utf-8")
    report = evaluate_scenarios(path=path, settings=Settings(), embedder=embedder, show_progress=False)
    assert list(report["splits"]) == ["mine"]
    split = report["splits"]["mine"]
    assert set(split["by_language"]) == {"en", "zh"}
    overall = split["overall"]
    assert overall["conversations"] == 2 and overall["questions"] == 2 and overall["unstored_questions"] == 1
    assert overall["question_turns"] == 2 and overall["filler_turns"] == 4
    assert split["by_language"]["en"]["question_turns"] == 1
    rows = report["questions"]
    assert len(rows) == 3 and all(r["split"] == "mine" for r in rows)
    for r in rows:
        if "empty" not in r:
            assert r["answer_in_prompt"] == any(holds(line, ["blue"]) for line in r["lines"])
            assert r["stale_in_prompt"] == any(holds(line, ["green"]) and not holds(line, ["blue"]) for line in r["lines"])


def test_the_cli_runs_a_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text(json.dumps(TINY) + "\n", encoding="utf-8")
    assert main(["eval", "scenarios", "--scenarios", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["splits"]["tiny"]["overall"]["questions"] == 1
    assert main(["eval", "scenarios", "--scenarios", str(path), "--failures"]) == 0
    out = capsys.readouterr().out
    assert "tiny en" in out and "tiny all" in out and "top-1" in out


def test_a_malformed_scenario_is_refused(tmp_path: Path) -> None:
    from portamem import ValidationError

    bad = json.loads(json.dumps(TINY))
    bad["sessions"][1]["turns"][1].pop("phrasing")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="phrasing"):
        load_scenarios(path)
    bad = json.loads(json.dumps(TINY))
    bad["ask"]["session"] = "s1"
    path.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="new one"):
        load_scenarios(path)


# ---------------------------------------------------------------------- LoCoMo's prompt precision
def test_locomo_prompt_precision_is_the_share_of_evidence_in_the_prompt(tmp_path: Path, embedder: Embedder) -> None:
    """With a one-line prompt and one evidence turn per question, the prompt's precision is Recall@1."""
    turns = ["Hi, how are you?", "Good, busy week.", "I adopted a beagle called Pepper.",
             "My ferry ticket FX-20931 is for the 7 am crossing.", "I am learning to bake sourdough bread."]
    conv = {"speaker_a": "Ida", "speaker_b": "Max", "session_1_date_time": "1:56 pm on 3 May, 2023",
            "session_1": [{"speaker": "Ida" if i % 2 == 0 else "Max", "dia_id": f"D1:{i + 1}", "text": t}
                          for i, t in enumerate(turns)]}
    qa = [{"question": "What is the name of Ida's dog?", "evidence": ["D1:3"], "category": 4},
          {"question": "Which ferry ticket number does Max have?", "evidence": ["D1:4"], "category": 4},
          {"question": "What is Ida learning to bake?", "evidence": ["D1:5"], "category": 4}]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "c", "conversation": conv, "qa": qa}]), encoding="utf-8")
    report = evaluate_locomo(path, ks=(1, 3), settings=Settings(top_k=1), embedder=embedder, show_progress=False,
                             negatives=False)
    precision = report["prompt_precision"]
    assert precision["top_k"] == 1 and precision["questions"] == 3
    assert precision["mean"] == report["results"]["hybrid"]["overall"]["recall@1"]


def test_a_stating_turn_is_lost_only_when_no_fact_or_candidate_of_its_time_holds_it() -> None:
    from portamem.records import MemoryRecord, MemoryType
    from portamem.scenarios.harness import ScenarioTurn, lost_statements

    at = datetime(2024, 5, 1, 10, 0, tzinfo=timezone.utc)
    kept = ScenarioTurn("I've taken up bouldering", "Fun!", ("statement",))
    lost = ScenarioTurn("my dad has diabetes", "Sorry to hear.", ("statement",))
    folded = ScenarioTurn("我开始学游泳了", "加油", ("statement",))
    records = [
        MemoryRecord(content="I've taken up bouldering", user_id="u", type=MemoryType.SEMANTIC, created_at=at),
        # an episode that folds a turn in is not a fact recalled as such
        MemoryRecord(content="User: 我开始学游泳了", user_id="u", type=MemoryType.EPISODIC,
                     created_at=at + timedelta(minutes=4)),
    ]
    stating = [(kept, at), (lost, at + timedelta(minutes=2)), (folded, at + timedelta(minutes=4))]
    assert lost_statements(records, stating) == [lost, folded]


def test_a_subset_of_conversations_is_played_and_a_model_is_reported(tmp_path: Path, embedder: Embedder) -> None:
    from portamem.errors import ValidationError

    zh = {**TINY, "id": "tiny-zh", "lang": "zh", "user_id": "lu"}
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(TINY) + "\n" + json.dumps(zh, ensure_ascii=False) + "\n", encoding="utf-8")
    report = evaluate_scenarios(path=path, settings=Settings(), embedder=embedder, show_progress=False,
                                conversations=["tiny-zh"])
    assert {r["conversation"] for r in report["questions"]} == {"tiny-zh"}
    assert report["splits"]["mine"]["overall"]["conversations"] == 1
    assert report["model"] is None  # no model configured: the rules formed every turn
    with pytest.raises(ValidationError, match="nope"):
        evaluate_scenarios(path=path, settings=Settings(), embedder=embedder, show_progress=False,
                           conversations=["nope"])


def test_the_oracle_extractor_answers_each_turn_once_with_its_statements() -> None:
    from portamem.pipeline import WriteContext
    from portamem.scenarios.oracle import OracleExtractor, load_oracle

    ctx = WriteContext(tenant_id="t", user_id="u", settings=Settings())
    oracle = OracleExtractor([("So we're redoing the kitchen, budget 12k", ["We're redoing the kitchen.",
                                                                             "The kitchen budget is 12,000."]),
                              ("thanks!", [])])
    first = oracle.portamem_extract(text="So we're redoing the kitchen, budget 12k", context=ctx)
    assert first is not None and [s.text for s in first.statements] == ["We're redoing the kitchen.",
                                                                       "The kitchen budget is 12,000."]
    assert [a for _, a in first.utterances] == ["statement", "statement"]
    # a stored sentence read again, or the same turn read a second time, is left to the rules
    assert oracle.portamem_extract(text="So we're redoing the kitchen, budget 12k", context=ctx) is None
    assert oracle.portamem_extract(text="We're redoing the kitchen.", context=ctx) is None
    nothing = oracle.portamem_extract(text="thanks!", context=ctx)
    assert nothing is not None and not nothing.statements and nothing.utterances == [("thanks!", "question")]
    packaged = load_oracle()
    assert packaged[("en-kitchen", "s1", 1)][0] == "We're finally redoing the kitchen."


def test_oracle_statements_are_played_through_the_write_path(tmp_path: Path, embedder: Embedder) -> None:
    from portamem.errors import ValidationError
    from portamem.scenarios.harness import _run_one
    from portamem.scenarios.oracle import load_oracle

    scenario = next(s for s in load_scenarios(suite_path("dev"), "dev") if s.id == "en-kitchen")
    run = _run_one(scenario, Settings(), embedder, oracle=load_oracle())
    # every stating turn left its statements, and no question or filler turn left anything
    assert not [s for s in run.stored if s["kind"] in ("lost", "question", "filler")]
    with pytest.raises(ValidationError, match="dev"):
        evaluate_scenarios("test", oracle=True, embedder=embedder, show_progress=False)
