"""The table and verdict of ``benchmarks/embedder_choice.py`` (the benchmark itself runs on demand).

Its figures come from portamem's own evaluators; what is its own is reading their reports into rows,
the markdown tables of docs/embeddings.md, and the rule that keeps or replaces the default.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest


def _bench() -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "embedder_choice.py"
    spec = importlib.util.spec_from_file_location("embedder_choice", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _result(name: str, q: float, zh: float = 0.8, cost: float = 10.0, stale: int = 10) -> dict[str, Any]:
    scen = {"top1": q, "in_prompt": q + 0.1, "stale": stale, "with_stale": 40, "precision": q - 0.2,
            "none_empty": 0.6, "questions": 100, "zh_top1": zh, "zh_in_prompt": zh}
    return {
        "embedder": name, "calibration": {"mean": 0.5, "std": 0.05, "source": "CALIBRATIONS"},
        "thresholds": {"min_score": 0.1, "prompt_min_evidence": 0.1, "prompt_margin": 0.5}, "dev_objective": q,
        "scenarios_test": scen, "paraphrase_test": {"top1": q, "in_prompt": q, "never_empty": 0.5, "zh_top1": zh},
        "holdout": scen, "locomo": {"r5": q - 0.1, "mrr": q - 0.2, "other_empty": 0.95},
        "chinese": {"zh": {"top1": zh, "mrr": zh}, "xl_en_mem_zh_q": {"top1": zh}},
        "cost": {"cpu_ms_per_text": cost},
    }


def test_table_has_every_measured_model_and_names_the_missing_ones() -> None:
    bench = _bench()
    results = {
        "multilingual-e5-small-q4": _result("multilingual-e5-small-q4", 0.7, cost=30.0),
        "use-multilingual-v3": {**_result("use-multilingual-v3", 0.65, cost=3.0),
                                "scenarios_test_global": _result("x", 0.6)["scenarios_test"]},
        "all-minilm-l6-v2": {"embedder": "all-minilm-l6-v2", "error": "EmbeddingError: not installed"},
    }
    table = bench.build_table(results)
    assert "| `use-multilingual-v3` | 0.650 | 0.750 | 10 |" in table
    assert "global thresholds" in table  # USE's run at e5's thresholds has its own table
    assert "| `use-multilingual-v3` | 3.000 | 0.10 |" in table  # cost and its ratio to the default
    assert "Not measured: `all-minilm-l6-v2`: EmbeddingError: not installed." in table
    # test halves, the same at the global thresholds, Chinese, held-out, cost: five tables
    assert sum(line.startswith("| embedder |") for line in table.splitlines()) == 5


def test_verdict_keeps_the_default_unless_a_model_wins_without_losing_chinese() -> None:
    bench = _bench()
    e5 = _result("multilingual-e5-small-q4", 0.7)
    # better on every quality column, but worse in Chinese: kept
    worse_zh = bench.verdict({e5["embedder"]: e5, "use-multilingual-v3": _result("use-multilingual-v3", 0.8, zh=0.6)})
    assert worse_zh["replace"] is None
    assert worse_zh["challengers"]["use-multilingual-v3"]["chinese_lost"]
    # better and as good in Chinese: replaces
    better = bench.verdict({e5["embedder"]: e5, "use-multilingual-v3": _result("use-multilingual-v3", 0.8, stale=5)})
    assert better["replace"] == "use-multilingual-v3"
    assert "scen stale" in better["challengers"]["use-multilingual-v3"]["wins"]  # fewer stale prompts win
    # better on some columns, worse on more: kept
    mixed = {**_result("use-multilingual-v3", 0.6, stale=5), "locomo": {"r5": 0.9, "mrr": 0.9, "other_empty": 0.99}}
    assert bench.verdict({e5["embedder"]: e5, "use-multilingual-v3": mixed})["replace"] is None
    # an English-only model never replaces a multilingual default
    minilm = bench.verdict({e5["embedder"]: e5, "all-minilm-l6-v2": _result("all-minilm-l6-v2", 0.9)})
    assert minilm["replace"] is None and minilm["challengers"]["all-minilm-l6-v2"]["english_only"]


def test_objective_weighs_stale_prompts_against_the_stale_questions() -> None:
    bench = _bench()
    scen = {"top1": 1.0, "in_prompt": 1.0, "precision": 1.0, "none_empty": 1.0, "stale": 0, "with_stale": 10}
    para = {"top1": 1.0, "in_prompt": 1.0, "never_empty": 1.0}
    assert bench.objective(scen, para) == 1.0
    assert bench.objective({**scen, "stale": 10}, para) == pytest.approx(7 / 8)


@pytest.mark.slow
def test_one_tiny_run_with_null_hash_fills_a_row(tmp_path: Path) -> None:
    bench = _bench()
    result = bench.measure("null-hash", locomo=None, cache_dir=tmp_path, fit=False, holdout=False,
                           scenario_conversations=["en-kitchen", "en-flat"])
    assert not result.get("error")
    row = bench.row_of(result)
    assert row["scen_top1"] is not None and row["para_top1"] is not None and row["locomo_r5"] is None
    assert "`null-hash`" in bench.build_table({"null-hash": result})
