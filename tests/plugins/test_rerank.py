"""The rerank stage (``portamem_rerank``): off by default, a third party's reranker through the hook, the
contract checked, and the built-ins: MMR, a cross-encoder (its mechanics with a scripted scorer; the
real one needs sentence-transformers and a model) and the chat model as a listwise judge."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from portamem import Memory, PluginError, Settings, hookimpl
from portamem.errors import ConfigError, FrameworkNotInstalledError
from portamem.models import CallableChatModel
from portamem.plugins import get_plugin_manager
from portamem.records import MemoryRecord, ScoreBreakdown, SearchHit
from portamem_plugins import rerank as builtin

HIKING = ["I go hiking in the Alps every summer.", "Every summer I hike in the Alps.",
          "Hiking in the Alps is what I do each summer."]
OTHERS = ["I row on the lake on Sunday mornings.", "My sister lives in Boston.",
          "I work as a nurse at the city hospital."]


def _memory(tmp_path, embedder, pm=None, **settings) -> Memory:  # type: ignore[no-untyped-def]
    # dedupe off: the paraphrases stay three memories; min_score 0: every candidate reaches the reranker
    return Memory(settings=Settings(path=str(tmp_path / "s"), dedupe=False, min_score=0.0, **settings),
                  embedder=embedder, plugins=pm)


def _hit(text: str, score: float, vector: list[float] | None = None) -> SearchHit:
    record = MemoryRecord(content=text, user_id="u", embedding=None if vector is None else np.asarray(vector))
    return SearchHit(record, score, ScoreBreakdown(score, {"vector": score}, {"vector": 1.0}), ("vector",))


class Reverse:
    """A third party's reranker, answering for its own name only."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    @hookimpl
    def portamem_rerank(self, query, hits, k, settings):  # type: ignore[no-untyped-def]
        if settings.rerank != "reverse":
            return None
        self.seen.append((len(hits), k))
        top = hits[0].score
        return [dataclasses.replace(h, score=top * (1 - i / len(hits))) for i, h in enumerate(reversed(hits))]


def test_rerank_is_off_by_default_and_a_plugin_reranks_when_named(tmp_path, embedder) -> None:
    assert Settings().rerank is None
    pm = get_plugin_manager(load_entrypoints=False)
    plugin = Reverse()
    pm.register(plugin, name="reverse")
    with _memory(tmp_path, embedder, pm) as mem:
        mem.save_memories(HIKING + OTHERS, user_id="u", wait=True)
        plain = mem.search_memory("what sports do I do?", user_id="u", top_k=6)
        assert plugin.seen == []  # off: the hook is not called
    with _memory(tmp_path, embedder, pm, rerank="reverse", rerank_candidates=6) as mem:
        hits = mem.search_memory("what sports do I do?", user_id="u", top_k=2)
    assert plugin.seen == [(6, 2)]  # shown the 6 best, asked for 2
    assert [h.memory_id for h in hits] == [h.memory_id for h in plain[::-1][:2]]


class Liar:
    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        self.answer = answer

    @hookimpl
    def portamem_rerank(self, hits, settings):  # type: ignore[no-untyped-def]
        return self.answer(list(hits)) if settings.rerank == "liar" else None


@pytest.mark.parametrize("answer", [
    lambda hits: hits + hits[:1],  # a hit twice
    lambda hits: [dataclasses.replace(hits[0], record=MemoryRecord(content="made up", user_id="u")), *hits[1:]],
    lambda hits: list(reversed(hits)),  # best last: scores increasing
    lambda hits: "m1,m2",
])
def test_a_reranker_breaking_the_contract_is_named(tmp_path, embedder, answer) -> None:  # type: ignore[no-untyped-def]
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Liar(answer), name="liar")
    with _memory(tmp_path, embedder, pm, rerank="liar") as mem:
        mem.save_memories(HIKING + OTHERS, user_id="u", wait=True)
        with pytest.raises(PluginError, match="liar") as info:
            mem.search_memory("what sports do I do?", user_id="u", top_k=3)
    assert info.value.plugin == "liar"


def test_a_reranker_no_plugin_knows_is_a_config_error(tmp_path, embedder) -> None:
    with _memory(tmp_path, embedder, rerank="nosuch") as mem:
        mem.save_memory("I row on the lake.", user_id="u", wait=True)
        with pytest.raises(ConfigError, match="nosuch"):
            mem.search_memory("rowing", user_id="u")


@pytest.mark.parametrize("bad", [{"rerank": ""}, {"rerank_candidates": 0}, {"rerank_mmr_lambda": 0.0},
                                 {"rerank_mmr_lambda": 1.5}, {"rerank": "cross-encoder"}, {"rerank": "model"}])
def test_rerank_settings_are_checked(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError):
        Settings(**bad)


# ---------------------------------------------------------------------- MMR
def test_mmr_lets_another_memory_past_the_top_hits_paraphrases(tmp_path, embedder) -> None:
    query = "what sports do I do?"
    with _memory(tmp_path, embedder) as mem:
        mem.save_memories(HIKING + OTHERS, user_id="u", wait=True)
        plain = [h.content for h in mem.search_memory(query, user_id="u", top_k=3)]
    trace: list = []
    with _memory(tmp_path, embedder, rerank="mmr") as mem:
        hits = mem.search_memory(query, user_id="u", top_k=3, trace=trace)
    # the trace tells what the reranker did: its ranks, and the kept hits it left out
    assert sorted((e.rank, e.candidate.memory_id) for e in trace if e.fate == "kept") == \
        [(i, h.memory_id) for i, h in enumerate(hits, 1)]
    assert sum(e.fate == "left out by the reranker 'mmr'" for e in trace) == 3
    assert set(plain) == set(HIKING)
    diverse = [h.content for h in hits]
    assert diverse[0] == plain[0] and sum(t in HIKING for t in diverse) == 1
    assert OTHERS[0] in diverse  # the rowing
    assert hits[0].score == pytest.approx(hits[0].breakdown.final)
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    assert "redundancy" in hits[1].breakdown.components


def test_mmr_keeps_the_scoring_where_nothing_repeats_and_lambda_one_is_off() -> None:
    hits = [_hit("a", 0.9, [1, 0, 0, 0]), _hit("b", 0.8, [0, 1, 0, 0]), _hit("c", 0.7, [0, 0, 1, 0]),
            _hit("d", 0.6, [0, 0, 0, 1])]
    same = builtin.mmr(hits, 3, 0.7)
    assert [h.content for h in same] == ["a", "b", "c"] and [h.score for h in same] == [0.9, 0.8, 0.7]
    twin = [_hit("a", 0.9, [1, 0, 0]), _hit("a again", 0.85, [1, 0.01, 0]), _hit("b", 0.5, [0, 1, 0]),
            _hit("c", 0.4, [0, 0, 1]), _hit("no vector", 0.3)]
    # at 0.7 the twin still beats c (0.4): 0.7 * 0.85 - 0.3 * 0.9 > 0.7 * 0.4; at 0.5 it does not
    assert [h.content for h in builtin.mmr(twin, 3, 0.7)] == ["a", "b", "a again"]
    assert [h.content for h in builtin.mmr(twin, 4, 0.5)] == ["a", "b", "c", "no vector"]
    assert [h.content for h in builtin.mmr(twin, 3, 1.0)] == ["a", "a again", "b"]


# ---------------------------------------------------------------------- cross-encoder
def test_the_cross_encoder_orders_by_its_scores_squashing_logits(tmp_path, embedder, monkeypatch) -> None:
    scripted = {"I row on the lake on Sunday mornings.": 4.0, "Every summer I hike in the Alps.": 1.0}
    calls: list[list[tuple[str, str]]] = []

    def predict(pairs):  # type: ignore[no-untyped-def]  # a CrossEncoder's predict: logits per pair
        calls.append(pairs)
        return np.asarray([scripted.get(text, -3.0) for _, text in pairs])

    monkeypatch.setitem(builtin._LOADED, "scripted-cross-encoder", predict)
    with _memory(tmp_path, embedder, rerank="cross-encoder", rerank_model="scripted-cross-encoder") as mem:
        mem.save_memories(HIKING + OTHERS, user_id="u", wait=True)
        hits = mem.search_memory("what sports do I do?", user_id="u", top_k=2)
    assert calls and all(q == "what sports do I do?" for q, _ in calls[0]) and len(calls[0]) == 6
    assert [h.content for h in hits] == [OTHERS[0], HIKING[1]]
    assert [h.score for h in hits] == pytest.approx([1 / (1 + math.exp(-4.0)), 1 / (1 + math.exp(-1.0))])
    assert hits[0].breakdown.components["rerank"] == pytest.approx(hits[0].score)


def test_the_cross_encoder_without_sentence_transformers_names_the_extra(tmp_path, embedder) -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("sentence-transformers is installed")
    with _memory(tmp_path, embedder, rerank="cross-encoder", rerank_model="cross-encoder/ms-marco-MiniLM-L6-v2") as mem:
        mem.save_memory("I row on the lake.", user_id="u", wait=True)
        with pytest.raises(FrameworkNotInstalledError, match=r"portamem\[sentence-transformers\]") as info:
            mem.search_memory("rowing", user_id="u")
    assert info.value.extra == "sentence-transformers"


# ---------------------------------------------------------------------- the chat model as judge
def _judge(answers: list[str], seen: list[str] | None = None) -> CallableChatModel:
    def fn(prompt: str) -> str:
        if seen is not None:
            seen.append(prompt)
        return answers.pop(0)
    return CallableChatModel(fn)


def test_the_model_judge_orders_the_ids_it_is_shown(tmp_path, embedder) -> None:
    prompts: list[str] = []
    with _memory(tmp_path, embedder, rerank="model", rerank_candidates=6, llm_url="http://127.0.0.1:9/v1",
                 llm_model="judge") as mem:
        mem.save_memories(HIKING + OTHERS, user_id="u", wait=True)
        plain = mem.search_memory("what sports do I do?", user_id="u", top_k=6)  # no server: the scoring's order
        assert mem.stats().model["fallbacks"] == 1
        ids = {f"m{i + 1}": h for i, h in enumerate(plain)}
        rowing = next(m for m, h in ids.items() if h.content == OTHERS[0])
        mem.formation.model = _judge([json.dumps({"order": [rowing, "m1"]})], prompts)
        hits = mem.search_memory("what sports do I do?", user_id="u", top_k=3)
    assert "what sports do I do?" in prompts[0] and all(h.content in prompts[0] for h in plain)
    # the ids it named first, the rest in the scoring's order; the scoring's scores in the new order
    rest = [h for m, h in ids.items() if m not in (rowing, "m1")]
    assert [h.content for h in hits] == [OTHERS[0], plain[0].content, rest[0].content]
    assert [h.score for h in hits] == pytest.approx([h.score for h in plain[:3]], rel=1e-6)  # recency moved


@pytest.mark.parametrize("answer", [
    json.dumps({"order": ["m1", "m9"]}),  # an id not shown
    json.dumps({"order": ["m2", "m2"]}),  # one twice
    json.dumps({"ranking": ["m2"]}),  # another shape
    "m2 is best",  # not JSON
])
def test_a_judge_answer_breaking_the_contract_keeps_the_scoring_and_is_counted(answer: str) -> None:
    hits = [_hit(t, 0.9 - i / 10) for i, t in enumerate(HIKING + OTHERS)]
    model = _judge([answer, answer])
    out = builtin.judge("what sports do I do?", hits, 4, model)
    assert [h.content for h in out] == [h.content for h in hits[:4]]
    snap = model.stats.snapshot()
    assert snap["fallbacks"] == 1 and snap["failures"]["invalid"] == 2  # asked twice, then the scoring's order


def test_a_judge_that_answers_on_retry_is_used() -> None:
    hits = [_hit(t, 0.9 - i / 10) for i, t in enumerate(HIKING + OTHERS)]
    model = _judge(["not json", json.dumps({"order": ["m4", "m3", "m2", "m1", "m6", "m5"]})])
    out = builtin.judge("what sports do I do?", hits, 2, model)
    assert [h.content for h in out] == [OTHERS[0], HIKING[2]]
    assert model.stats.snapshot()["fallbacks"] == 0
