"""The LoCoMo evaluation and the weight search, on a tiny conversation file in the LoCoMo format."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from portamem import Settings, ValidationError
from portamem.cli import main
from portamem.scenarios.locomo import (
    CachedEmbedder,
    _score_table,
    _Table,
    _Tally,
    evaluate_locomo,
    load_locomo,
    parse_session_time,
    tune_weights,
)


def _conversation(sample_id: str, a: str, b: str, facts: list[tuple[str, str, str]]) -> dict:
    """Two sessions of small talk with one fact per turn; each question asks for one turn."""
    filler = ["Hi, how are you?", "Good, thanks! Busy week.", "Same here, lots going on."]
    conv: dict = {"speaker_a": a, "speaker_b": b}
    qa = []
    for s in (1, 2):
        conv[f"session_{s}_date_time"] = f"{'1:56 pm' if s == 1 else '10:04 am'} on {3 * s} May, 2023"
        turns = [{"speaker": a if i % 2 == 0 else b, "dia_id": f"D{s}:{i + 1}", "text": t}
                 for i, t in enumerate(filler)]
        for speaker, text, question in facts[(s - 1) * 2:s * 2]:
            dia = f"D{s}:{len(turns) + 1}"
            turns.append({"speaker": speaker, "dia_id": dia, "text": text})
            qa.append({"question": question, "answer": "-", "evidence": [dia], "category": 4})
        conv[f"session_{s}"] = turns
    turns[-1]["blip_caption"] = "a photo of a red kayak on a lake"
    qa.append({"question": "What did they photograph?", "evidence": [f"D2:{len(turns)}"], "category": 1})
    qa.append({"question": "Unanswerable?", "evidence": [], "category": 5})
    return {"sample_id": sample_id, "conversation": conv, "qa": qa}


@pytest.fixture(scope="module")
def locomo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = [
        _conversation("conv-a", "Ida", "Max", [
            ("Ida", "I adopted a beagle called Pepper from the shelter.", "What is the name of Ida's dog?"),
            ("Max", "My ferry ticket FX-20931 is for the 7 am crossing.", "Which ticket number does Max have?"),
            ("Ida", "I finally finished the marathon in Rotterdam.", "Where did Ida run a marathon?"),
            ("Max", "I am learning to bake sourdough bread.", "What is Max learning to make?"),
        ]),
        _conversation("conv-b", "Lu", "Sam", [
            ("Lu", "My new job is at a bicycle repair shop.", "Where does Lu work now?"),
            ("Sam", "The concert on Friday was cancelled because of the storm.", "Why was the concert cancelled?"),
            ("Lu", "I planted tomatoes and basil on the balcony.", "What did Lu plant?"),
            ("Sam", "We are flying to Lisbon in August.", "Where is Sam travelling in August?"),
        ]),
    ]
    path = tmp_path_factory.mktemp("locomo") / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_session_times_parse() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert parse_session_time("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9, tzinfo=timezone.utc)
    with pytest.raises(ValidationError):
        parse_session_time("yesterday")


def test_loading_keeps_order_captions_and_only_answerable_questions(locomo_file: Path) -> None:
    convs = load_locomo(locomo_file)
    assert [c.sample_id for c in convs] == ["conv-a", "conv-b"]
    turns = convs[0].turns
    assert [t.created_at for t in turns] == sorted(t.created_at for t in turns)
    assert turns[-1].content.endswith("[shared a photo: a photo of a red kayak on a lake]")
    assert all(q.evidence for q in convs[0].questions) and len(convs[0].questions) == 5
    assert convs[0].now > turns[-1].created_at


def test_tally_counts_recall_and_reciprocal_rank() -> None:
    tally = _Tally((1, 3))
    tally.add(4, ["x", "a", "b"], ["a", "b"])  # both evidence turns within 3, the first at rank 2
    tally.add(2, ["y", "z", "w"], ["a"])
    out = tally.summary()
    assert out["overall"] == {"n": 2, "recall@1": 0.0, "recall@3": 0.5, "mrr": 0.25}
    assert out["by_category"]["4:single-hop"]["recall@3"] == 1.0


def test_weight_search_table_ranks_like_the_read_path() -> None:
    # two questions; in the first the gold candidate wins on keyword, in the second on vector
    table = _Table(
        components={"vector": np.array([0.9, 0.2, 0.1, 0.8]), "keyword": np.array([0.0, 0.9, 0.9, 0.0])},
        group=np.array([0, 0, 1, 1]), created=np.array([1.0, 2.0, 3.0, 4.0]),
        gold=np.array([False, True, False, True]), n_gold=np.array([1, 1]), category=np.array([4, 4]),
    )
    both = _score_table(table, {"vector": 0.5, "keyword": 0.5}, (1,), 2)
    assert both == {"recall@1": 0.5, "mrr": 0.75}
    assert _score_table(table, {"keyword": 1.0}, (1,), 2)["recall@1"] == 0.5
    # ties go to the newer memory, as in search_memory
    tie = _score_table(table, {}, (1,), 2)
    assert tie["recall@1"] == 1.0


def _counting(embedder, calls: list[list[str]]) -> type:  # type: ignore[no-untyped-def]
    """An embedder class that records every batch it is asked to embed."""

    class Counting:
        name, version, dim = embedder.name, embedder.version, embedder.dim

        def embed(self, texts, *, kind="passage"):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return embedder.embed(texts, kind=kind)

    return Counting


def test_cached_embedder_embeds_each_text_once(embedder) -> None:  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []
    Counting = _counting(embedder, calls)
    cached = CachedEmbedder(Counting())
    first = cached.embed(["a cat", "a dog"], kind="query")
    again = cached.embed(["a dog", "a cat"], kind="query")
    assert calls == [["a cat", "a dog"]]
    assert np.allclose(first[::-1], again)
    cached.embed(["a cat"], kind="passage")  # the kind is part of the key
    assert len(calls) == 2


def test_embedding_cache_file_survives_the_run(embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    calls: list[list[str]] = []
    Counting = _counting(embedder, calls)
    path = tmp_path / "vectors.npz"
    first = CachedEmbedder(Counting(), path)
    vectors = first.embed(["a cat", "a dog"], kind="query")
    first.save()
    again = CachedEmbedder(Counting(), path).embed(["a dog", "a cat"], kind="query")
    assert calls == [["a cat", "a dog"]] and np.allclose(vectors[::-1], again)
    other = type("Other", (Counting,), {"version": "another"})  # another model version embeds afresh
    CachedEmbedder(other(), path).embed(["a cat"], kind="query")
    assert len(calls) == 2


def test_evaluation_compares_hybrid_with_both_baselines(locomo_file: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    report = evaluate_locomo(locomo_file, ks=(1, 3), settings=Settings(), embedder=embedder, show_progress=False)
    assert set(report["results"]) == {"hybrid", "vector", "bm25", "relative"}
    assert report["questions"] == 10 and report["turns"] == 2 * 2 * 5
    for result in report["results"].values():
        assert result["overall"]["n"] == 10
        assert 0.0 <= result["overall"]["recall@1"] <= result["overall"]["recall@3"] <= 1.0
    # the exact ticket number and the paraphrased questions both land within the top 3 for hybrid
    assert report["results"]["hybrid"]["overall"]["recall@3"] >= 0.8
    assert set(report["margins"]) == {"vector", "bm25", "relative"}
    # each conversation asked the other's questions: about other people, so nothing comes back, where
    # the previous relative scale always filled its top k; only the photo question (both conversations
    # end with the same kayak photo) has an answer in the other conversation too
    neg = report["negatives"]
    assert neg["questions"] == 10 and neg["hybrid"] == pytest.approx(0.8) and neg["relative"] == 0.0
    # the pre-think gate skips the small talk ("Hi, how are you?") but not a question naming a speaker
    gate = report["gate"]
    assert 0 < gate["turns_skipped"] < 1 and gate["questions"] == 10 and gate["questions_skipped"] < 0.5


def test_cli_eval_json_and_tune(locomo_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "locomo", str(locomo_file), "--k", "1", "3", "--conversations", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["conversations"] == ["conv-b"] and report["ks"] == [1, 3]
    assert main(["tune", str(locomo_file), "--train", "0", "--test", "1", "--k", "1", "3", "--step", "0.5",
                 "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert tuned["train"] == ["conv-a"] and tuned["test"] == ["conv-b"]
    assert set(tuned["best"]) == {"weights", "recency_lambda", "train", "test"}
    # pure vector is one point of the grid, so the best can only do better on the tuning split
    def objective(figures: dict) -> float:
        return figures["recall@1"] + figures["mrr"]

    assert objective(tuned["best"]["train"]) >= objective(tuned["baselines"]["vector"]["train"]) - 1e-9


def test_tune_with_fixed_priors_searches_the_evidence_weights_alone(locomo_file: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """How an embedder's own weights are fitted: recency, importance and the lambda stay as configured."""
    tuned = tune_weights(locomo_file, train=[0], test=[1], ks=(1, 3), step=0.5, embedder=embedder,
                         show_progress=False, fixed_priors=True)
    configured = tuned["defaults"]
    assert tuned["fixed_priors"] and tuned["grid_size"] == 6  # (vector, keyword, entity) on a 0.5 simplex
    assert tuned["best"]["recency_lambda"] == configured["recency_lambda"]
    assert {n: tuned["best"]["weights"][n] for n in ("recency", "importance")} == \
        {n: configured["weights"][n] for n in ("recency", "importance")}
    assert sum(tuned["best"]["weights"][n] for n in ("vector", "keyword", "entity")) == pytest.approx(1.0)


def test_tune_refuses_overlapping_splits(locomo_file: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError):
        tune_weights(locomo_file, train=[0], test=[0], embedder=embedder, show_progress=False)


def test_a_named_reranker_is_measured_beside_the_scoring_in_the_same_run(locomo_file: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    off = evaluate_locomo(locomo_file, ks=(1, 3), settings=Settings(rerank="mmr", rerank_mmr_lambda=1.0),
                          embedder=embedder, show_progress=False, negatives=False)
    assert set(off["results"]) == {"hybrid", "vector", "bm25", "relative", "rerank:mmr"}
    assert off["rerank"] == {"name": "mmr", "candidates": 20, "mmr_lambda": 1.0}
    # lambda 1 is the scoring's order: the reranked column is the hybrid one
    assert off["results"]["rerank:mmr"] == off["results"]["hybrid"]
    plain = evaluate_locomo(locomo_file, ks=(1, 3), settings=Settings(), embedder=embedder, show_progress=False,
                            negatives=False)
    assert plain["results"]["hybrid"] == off["results"]["hybrid"] and plain["rerank"] is None
