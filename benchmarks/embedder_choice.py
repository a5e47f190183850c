"""Which packaged embedder should be the default: every workload, each model with its own thresholds.

For each embedder named (default: ``multilingual-e5-small-q4``, ``multilingual-e5-small-int8``,
``use-multilingual-v3``, ``all-minilm-l6-v2``), in one run and one process, on one thread:

1. **calibration**: the model's background cosine from ``portamem.read.calibration.CALIBRATIONS``,
   or, for a model it lacks, measured as ``portamem calibrate FILE --embedder NAME`` measures it
   (``measure_background`` on LoCoMo conversations 0-2) and passed as ``Settings.vector_calibration``;
2. **thresholds fitted on dev only**: ``min_score``, ``prompt_min_evidence`` and ``prompt_margin`` are
   global settings (tuned on e5), so each model gets its own by a coordinate search from the defaults
   over ``GRID`` on the dev halves of the scenario and paraphrase suites (``objective``);
3. with those settings: the scenario suite's test half and held-out conversations
   (``portamem eval scenarios --split test|holdout``), the paraphrase suite's test half
   (``portamem eval paraphrase --split test``), LoCoMo (``portamem eval locomo FILE --k 5 10``: hybrid
   R@5, MRR, questions of the next conversation answered with nothing), the Chinese rows of both
   suites and the Chinese retrieval set of ``benchmarks/embedders.py`` (``eval_chinese``); the test
   half is also run with the global thresholds when the fitted ones differ;
4. **cost**: CPU ms per text (``time.process_time``, one text per call, one thread), median of 3, with
   the ratio to ``multilingual-e5-small-q4`` measured in the same run.

The evaluators are portamem's own (``evaluate_scenarios``, ``evaluate_paraphrase``,
``evaluate_locomo``, ``measure_background``); this file only chooses their settings and builds the table
(``build_table``, ``verdict``). ``all-minilm-l6-v2`` is English only: its Chinese columns stay empty and
the verdict does not weigh them. A model that is not installed is a row saying so.

    PYTHONPATH=core:plugins python benchmarks/embedder_choice.py \\
        --locomo ../shared/data/locomo/locomo-dev.json --cache-dir /tmp/emb-choice
    python benchmarks/embedder_choice.py --table benchmarks/results/embedder_choice.json   # the table again

Results go to ``benchmarks/results/embedder_choice.json`` (merged per embedder, so ``--embedders`` can
add one); the markdown table is printed. Vectors are kept per model in ``--cache-dir`` (``.npz``).
"""

from __future__ import annotations

import os

# one thread for every model and BLAS call, before numpy loads (the figures are per core)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_LOCOMO = HERE.parent.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
DEFAULT_OUT = HERE / "results" / "embedder_choice.json"

DEFAULT = "multilingual-e5-small-q4"
EMBEDDERS = ("multilingual-e5-small-q4", "multilingual-e5-small-int8", "use-multilingual-v3", "all-minilm-l6-v2")
#: English-only models: no Chinese columns, no Chinese rows in the verdict
ENGLISH_ONLY = {"all-minilm-l6-v2", "null-hash"}

#: the global thresholds each model's search starts from (``portamem.Settings`` defaults)
THRESHOLDS = ("min_score", "prompt_min_evidence", "prompt_margin")
#: the values tried per threshold, one threshold at a time, in this order
GRID: dict[str, tuple[float, ...]] = {
    "min_score": (0.05, 0.1, 0.15, 0.2),
    "prompt_min_evidence": (0.05, 0.1, 0.2),
    "prompt_margin": (0.4, 0.5, 0.6),
}
#: a fitted value replaces the one before only when the objective rises by more than this (a question
#: or so of the dev halves): ties keep the global default
MIN_GAIN = 0.003

#: the table's quality columns: (key, header, higher is better); ``zh`` ones are the Chinese columns
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("scen_top1", "scen top-1", True),
    ("scen_in_prompt", "scen in prompt", True),
    ("scen_stale", "scen stale", False),
    ("scen_precision", "scen precision", True),
    ("scen_none_empty", "scen none-empty", True),
    ("para_top1", "para top-1", True),
    ("para_in_prompt", "para in prompt", True),
    ("para_never_empty", "para never-said empty", True),
    ("locomo_r5", "LoCoMo R@5", True),
    ("locomo_mrr", "LoCoMo MRR", True),
    ("locomo_other_empty", "LoCoMo other-conv empty", True),
)
ZH_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("zh_scen_top1", "zh scen top-1", True),
    ("zh_scen_in_prompt", "zh scen in prompt", True),
    ("zh_para_top1", "zh para top-1", True),
    ("zh_set_top1", "zh set top-1", True),
    ("zh_set_mrr", "zh set MRR", True),
    ("xl_top1", "en-memory zh-question top-1", True),
)
#: a Chinese column counts as lost when it falls more than this below the default's
ZH_TOLERANCE = 0.02


# ---------------------------------------------------------------------- figures out of the reports
def scenario_figures(report: Mapping[str, Any], split: str) -> dict[str, Any]:
    """The columns of one split of ``evaluate_scenarios``' report, overall and Chinese."""
    block = report["splits"][split]
    f = block["overall"]
    zh = block["by_language"].get("zh")
    return {"top1": f["top1_right"], "in_prompt": f["answer_in_prompt"], "stale": f["stale_in_prompt"],
            "with_stale": f["questions_with_stale_values"], "precision": f["prompt_precision"],
            "none_empty": f["unstored_empty"], "questions": f["questions"],
            "zh_top1": zh["top1_right"] if zh else None, "zh_in_prompt": zh["answer_in_prompt"] if zh else None}


def paraphrase_figures(report: Mapping[str, Any], split: str) -> dict[str, Any]:
    """The columns of one split of ``evaluate_paraphrase``' report, overall and Chinese."""
    by = report["figures"][split]
    f, zh = by["all"], by.get("zh")
    return {"top1": f["top1"], "in_prompt": f["in_prompt"], "never_empty": f["never_empty"],
            "questions": f["questions"], "zh_top1": zh["top1"] if zh else None}


def locomo_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    hybrid = report["results"]["hybrid"]["overall"]
    return {"r5": hybrid["recall@5"], "mrr": hybrid["mrr"], "other_empty": report["negatives"]["hybrid"],
            "questions": report["questions"], "conversations": report["conversations"]}


def objective(scen: Mapping[str, Any], para: Mapping[str, Any]) -> float:
    """What the dev fit maximises: the mean of the scenario suite's top-1, answer in prompt, prompt
    precision, empty recall for never-stored questions and share of stale questions without a stale line,
    and the paraphrase suite's top-1, answer in prompt and never-said empty (each 0..1, equal weights)."""
    parts = [scen["top1"], scen["in_prompt"], scen["precision"], scen["none_empty"],
             1.0 - scen["stale"] / max(scen["with_stale"], 1), para["top1"], para["in_prompt"], para["never_empty"]]
    return round(sum(p or 0.0 for p in parts) / len(parts), 4)


def row_of(result: Mapping[str, Any], which: str = "test") -> dict[str, Any]:
    """One embedder's table row (``which``: ``test`` with its fitted thresholds, ``test_global``
    with the global ones, ``holdout``) as ``COLUMNS`` and ``ZH_COLUMNS`` keys."""
    if which == "holdout":
        s = result.get("holdout") or {}
        return {"scen_top1": s.get("top1"), "scen_in_prompt": s.get("in_prompt"), "scen_stale": s.get("stale"),
                "scen_precision": s.get("precision"), "scen_none_empty": s.get("none_empty")}
    s = result.get("scenarios_" + which) or {}
    p = result.get("paraphrase_" + which) or {}
    # LoCoMo asks search, which of the three thresholds only min_score touches
    same_search = (result.get("thresholds") or {}).get("min_score") == _global("min_score")
    lo = (result.get("locomo") or {}) if which == "test" or same_search else {}
    zh = result.get("chinese") or {}
    english_only = result["embedder"] in ENGLISH_ONLY
    row = {"scen_top1": s.get("top1"), "scen_in_prompt": s.get("in_prompt"), "scen_stale": s.get("stale"),
           "scen_precision": s.get("precision"), "scen_none_empty": s.get("none_empty"),
           "para_top1": p.get("top1"), "para_in_prompt": p.get("in_prompt"), "para_never_empty": p.get("never_empty"),
           "locomo_r5": lo.get("r5"), "locomo_mrr": lo.get("mrr"), "locomo_other_empty": lo.get("other_empty")}
    if not english_only:
        row.update(zh_scen_top1=s.get("zh_top1"), zh_scen_in_prompt=s.get("zh_in_prompt"),
                   zh_para_top1=p.get("zh_top1"), zh_set_top1=zh.get("zh", {}).get("top1") if which == "test" else None,
                   zh_set_mrr=zh.get("zh", {}).get("mrr") if which == "test" else None,
                   xl_top1=zh.get("xl_en_mem_zh_q", {}).get("top1") if which == "test" else None)
    return row


def _global(key: str) -> Any:
    from portamem.config import Settings

    return getattr(Settings(), key)


def _cell(value: Any, key: str) -> str:
    if value is None:
        return "–"
    if key.endswith("stale") or isinstance(value, int):
        return str(value)
    return f"{value:.3f}"


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |",
            *("| " + " | ".join(r) + " |" for r in rows)]


def build_table(results: Mapping[str, Mapping[str, Any]], default: str = DEFAULT) -> str:
    """The markdown tables of the docs: quality on the test halves (fitted thresholds, then global),
    Chinese, the held-out check, cost, and each model's calibration and thresholds. A model that could
    not run is a row with its reason."""
    names = list(results)
    out: list[str] = []
    ran = [n for n in names if not results[n].get("error")]
    quality = COLUMNS
    for title, which in (("Test halves, each model with its own dev-fitted thresholds (LoCoMo: the dev file, every conversation)",
                          "test"),
                         ("Test halves with the global thresholds (fitted on e5; LoCoMo where min_score is the same)",
                          "test_global")):
        rows = []
        for n in ran:
            if which == "test_global" and not results[n].get("scenarios_test_global"):
                continue
            row = row_of(results[n], which)
            rows.append([f"`{n}`", *(_cell(row.get(k), k) for k, _, _ in quality)])
        if rows:
            out += [f"**{title}**", "", *_markdown(["embedder", *(h for _, h, _ in quality)], rows), ""]
    rows = [[f"`{n}`", *(_cell(row_of(results[n]).get(k), k) for k, _, _ in ZH_COLUMNS)]
            for n in ran if n not in ENGLISH_ONLY]
    if rows:
        out += ["**Chinese** (test halves' Chinese rows; the Chinese set of `benchmarks/embedders.py`)", "",
                *_markdown(["embedder", *(h for _, h, _ in ZH_COLUMNS)], rows), ""]
    rows = [[f"`{n}`", *(_cell(row_of(results[n], "holdout").get(k), k) for k, _, _ in COLUMNS[:5])]
            for n in ran if results[n].get("holdout")]
    if rows:
        out += ["**Held-out conversations** (`--split holdout`, a check)", "",
                *_markdown(["embedder", *(h for _, h, _ in COLUMNS[:5])], rows), ""]
    base = (results.get(default) or {}).get("cost", {}).get("cpu_ms_per_text")
    rows = []
    for n in ran:
        cost, fit, cal = results[n].get("cost") or {}, results[n].get("thresholds") or {}, results[n].get("calibration") or {}
        ms = cost.get("cpu_ms_per_text")
        rows.append([f"`{n}`", _cell(ms, "ms"), f"{ms / base:.2f}" if ms and base else "–",
                     f"{cal.get('mean', '–')} / {cal.get('std', '–')} ({cal.get('source', '–')})",
                     ", ".join(f"{k} {fit[k]:g}" for k in THRESHOLDS if k in fit) or "–",
                     _cell(results[n].get("dev_objective"), "x")])
    if rows:
        out += ["**Cost and settings** (CPU ms per text: one text per call, one thread, median of 3)", "",
                *_markdown(["embedder", "CPU ms/text", f"× {default}", "calibration mean / std",
                            "thresholds (fitted on dev)", "dev objective"], rows), ""]
    missing = [f"`{n}`: {results[n]['error']}" for n in names if results[n].get("error")]
    if missing:
        out += ["Not measured: " + "; ".join(missing) + ".", ""]
    return "\n".join(out).rstrip() + "\n"


def verdict(results: Mapping[str, Mapping[str, Any]], default: str = DEFAULT) -> dict[str, Any]:
    """Per challenger, the quality columns (test halves, LoCoMo) it wins and loses against ``default``
    and the Chinese columns it loses by more than ``ZH_TOLERANCE``; ``replace`` names one that wins
    more columns than it loses, on a higher mean (stale as the share of stale questions without a
    stale line), and loses no Chinese column. None keeps the default."""
    base = results.get(default)
    if not base or base.get("error"):
        return {"default": default, "replace": None, "challengers": {}, "reason": "the default was not measured"}
    b = row_of(base)

    def norm(row: Mapping[str, Any], key: str, result: Mapping[str, Any]) -> float | None:
        v = row.get(key)
        if v is None:
            return None
        if key == "scen_stale":
            return 1.0 - v / max((result.get("scenarios_test") or {}).get("with_stale") or 1, 1)
        return float(v)

    out: dict[str, Any] = {}
    for name, res in results.items():
        if name == default or res.get("error"):
            continue
        r = row_of(res)
        wins, losses, mine, theirs = [], [], [], []
        for key, header, _ in COLUMNS:
            x, y = norm(r, key, res), norm(b, key, base)
            if x is None or y is None:
                continue
            mine.append(x)
            theirs.append(y)
            if x > y:
                wins.append(header)
            elif x < y:
                losses.append(header)
        zh_lost = [] if name in ENGLISH_ONLY else [
            h for k, h, _ in ZH_COLUMNS
            if r.get(k) is not None and b.get(k) is not None and r[k] < b[k] - ZH_TOLERANCE]
        mean_gain = round(statistics.fmean(mine) - statistics.fmean(theirs), 4) if mine else None
        out[name] = {"wins": wins, "losses": losses, "mean_gain": mean_gain, "chinese_lost": zh_lost,
                     "english_only": name in ENGLISH_ONLY,
                     "beats_default": bool(mine) and len(wins) > len(losses) and (mean_gain or 0) > 0
                     and not zh_lost and name not in ENGLISH_ONLY}
    best = [n for n, v in out.items() if v["beats_default"]]
    best.sort(key=lambda n: -(out[n]["mean_gain"] or 0))
    return {"default": default, "replace": best[0] if best else None, "challengers": out}


# ---------------------------------------------------------------------- measuring
def _chinese_set() -> Any:
    """``benchmarks/embedders.py`` (its Chinese set and ``eval_chinese``), loaded by path."""
    spec = importlib.util.spec_from_file_location("bench_embedders", HERE / "embedders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _PortamemAdapter:
    """``benchmarks/embedders.py``'s adapter face over a portamem embedder (its query/passage prefixes)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def docs(self, texts: list[str]) -> Any:
        return self.embedder.embed(list(texts), kind="passage")

    def queries(self, texts: list[str]) -> Any:
        return self.embedder.embed(list(texts), kind="query")


def cpu_ms_per_text(embedders: Mapping[str, Any], texts: Sequence[str], repeats: int = 3) -> dict[str, dict[str, Any]]:
    """CPU time (this process, all threads) per text embedded one per call, median of ``repeats``; the
    models take turns within each repeat, so a change of load on a shared machine falls on all of them."""
    for embedder in embedders.values():
        for t in texts[:3]:
            embedder.embed([t], kind="passage")  # warm-up: lazy loads, first-call allocations
    runs: dict[str, list[float]] = {n: [] for n in embedders}
    for _ in range(repeats):
        for name, embedder in embedders.items():
            started = time.process_time()
            for t in texts:
                embedder.embed([t], kind="passage")
            runs[name].append((time.process_time() - started) * 1000 / len(texts))
    return {n: {"cpu_ms_per_text": round(statistics.median(r), 2), "runs": [round(x, 2) for x in r],
                "texts": len(texts)} for n, r in runs.items()}


def cost_texts(locomo: Path | None, n: int = 48) -> list[str]:
    """Texts for the cost: LoCoMo turns (English, ~20 words) and the Chinese set's memories, 3:1."""
    zh = [m for m, _ in _chinese_set().ZH_PAIRS]
    en: list[str] = []
    if locomo is not None and locomo.exists():
        from portamem.scenarios.locomo import load_locomo

        en = [t.content for t in load_locomo(locomo)[0].turns][: n - n // 4]
    if not en:
        en = [f"I moved to Lisbon in {2010 + i} and I still take the tram to work every morning." for i in range(n)]
    return (en + zh)[:n]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def measure(name: str, *, locomo: Path | None, cache_dir: Path, fit: bool = True,
            scenario_conversations: Sequence[str] | None = None, locomo_conversations: Sequence[int] | None = None,
            holdout: bool = True, save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Every figure of one embedder (see the module's docstring); ``save`` gets the result after each stage."""
    from portamem.config import Settings
    from portamem.embedding.embedders import get_embedder
    from portamem.read.calibration import CALIBRATIONS, measure_background
    from portamem.scenarios.harness import evaluate_scenarios
    from portamem.scenarios.locomo import (
        CachedEmbedder,
        calibration_sets,
        evaluate_locomo,
        load_locomo,
    )
    from portamem.scenarios.paraphrase import evaluate_paraphrase

    result: dict[str, Any] = {"embedder": name}
    try:
        raw = get_embedder(name, workers=0)
        raw.embed(["warm-up"], kind="passage")
    except Exception as exc:  # noqa: BLE001 - a model that is not installed is a row that says so
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result
    result["version"] = raw.version
    cache_dir.mkdir(parents=True, exist_ok=True)
    cached = CachedEmbedder(raw, cache_dir / f"{name}.npz")
    started = time.perf_counter()

    def stage(key: str, value: Any) -> None:
        result[key] = value
        cached.save()
        result["seconds"] = round(time.perf_counter() - started, 1)
        if save is not None:
            save(result)

    # 1. calibration
    settings = Settings(embed_workers=0)
    known = CALIBRATIONS.get(name)
    if known is not None:
        stage("calibration", {"mean": known.mean, "std": known.std, "source": "CALIBRATIONS"})
    elif locomo is not None and locomo.exists():
        report = measure_background(calibration_sets(load_locomo(locomo)), cached, use=(0, 1, 2))
        settings = settings.replace(vector_calibration={"mean": report["mean"], "std": report["std"]})
        stage("calibration", {"mean": report["mean"], "std": report["std"], "source": "LoCoMo 0-2",
                              "pairs": report["pairs"]})
    else:
        stage("calibration", {"mean": None, "std": None, "source": "packaged background set (at open)"})
    base = settings
    conversations = list(scenario_conversations) if scenario_conversations else None

    def dev(s: Any) -> tuple[float, dict[str, Any], dict[str, Any]]:
        scen = scenario_figures(evaluate_scenarios("dev", settings=s, embedder=cached, show_progress=False,
                                                   conversations=_only(conversations, "dev")), "dev")
        para = paraphrase_figures(evaluate_paraphrase("dev", settings=s, embedder=cached, show_progress=False), "dev")
        return objective(scen, para), scen, para

    # 2. thresholds on dev, one at a time from the global defaults
    chosen = {k: getattr(base, k) for k in THRESHOLDS}
    best, _, _ = dev(base)
    trials = [{**chosen, "objective": best}]
    _log(f"{name}: dev at the global thresholds {chosen}: objective {best}")
    tried = {tuple(chosen.values())}
    if fit:
        for key in THRESHOLDS:
            for value in GRID[key]:
                trial = {**chosen, key: value}
                if tuple(trial.values()) in tried:
                    continue
                tried.add(tuple(trial.values()))
                score, _, _ = dev(base.replace(**trial))
                trials.append({**trial, "objective": score})
                _log(f"{name}: dev {trial}: objective {score}")
                if score > best + MIN_GAIN:
                    best, chosen = score, trial
    stage("thresholds", chosen)
    stage("dev_objective", best)
    stage("dev_trials", trials)
    fitted = base.replace(**chosen)

    # 3. the test halves, held-out conversations, LoCoMo, Chinese
    def test(s: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        report = evaluate_scenarios("test", settings=s, embedder=cached, show_progress=False,
                                    conversations=_only(conversations, "test"))
        para_report = evaluate_paraphrase("test", settings=s, embedder=cached, show_progress=False)
        return scenario_figures(report, "test"), paraphrase_figures(para_report, "test")

    s_test, p_test = test(fitted)
    stage("scenarios_test", s_test)
    stage("paraphrase_test", p_test)
    _log(f"{name}: test {s_test} {p_test}")
    if chosen != {k: getattr(base, k) for k in THRESHOLDS}:
        g_scen, g_para = test(base)
        stage("scenarios_test_global", g_scen)
        stage("paraphrase_test_global", g_para)
    if holdout:
        report = evaluate_scenarios("holdout", settings=fitted, embedder=cached, show_progress=False,
                                    conversations=_only(conversations, "holdout"))
        stage("holdout", scenario_figures(report, "holdout"))
    if locomo is not None and locomo.exists():
        report = evaluate_locomo(locomo, ks=(5, 10), conversations=locomo_conversations, settings=fitted,
                                 embedder=cached, show_progress=False)
        stage("locomo", locomo_figures(report))
        _log(f"{name}: LoCoMo {result['locomo']}")
    if name not in ENGLISH_ONLY:
        stage("chinese", _chinese_set().eval_chinese(_PortamemAdapter(raw)))
    _log(f"{name}: done in {result['seconds']} s")
    return result


def _only(conversations: list[str] | None, split: str) -> list[str] | None:
    """The ids of ``conversations`` that belong to ``split`` (None: all of them)."""
    if conversations is None:
        return None
    from portamem.scenarios.harness import load_scenarios, suite_path

    ids = {s.id for s in load_scenarios(suite_path(split), split)}
    kept = [c for c in conversations if c in ids]
    return kept or None


def _indices(text: str) -> list[int]:
    """``0-2`` or ``0,3`` as a list of indices."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedders", default=",".join(EMBEDDERS), help="comma-separated embedder names")
    ap.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="the LoCoMo dev file")
    ap.add_argument("--locomo-conversations", help="only these LoCoMo conversations, e.g. 0-2 (default: all)")
    ap.add_argument("--scenario-conversations", help="only these scenario conversations (ids, comma-separated)")
    ap.add_argument("--cache-dir", type=Path, default=Path(".embedding-cache"), help="one .npz of vectors per model")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON (merged per embedder)")
    ap.add_argument("--no-fit", default="", help="embedders run at the global thresholds (comma-separated)")
    ap.add_argument("--no-holdout", action="store_true", help="skip the held-out conversations")
    ap.add_argument("--no-cost", action="store_true", help="skip the CPU cost")
    ap.add_argument("--table", type=Path, help="print the table and verdict of this results JSON and stop")
    args = ap.parse_args(argv)
    if args.table:
        results = json.loads(args.table.read_text(encoding="utf-8"))["results"]
        print(build_table(results))
        print(json.dumps(verdict(results), indent=2))
        return 0
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    no_fit = {n.strip() for n in args.no_fit.split(",") if n.strip()}
    lo_convs = _indices(args.locomo_conversations) if args.locomo_conversations else None
    scen_convs = [c.strip() for c in args.scenario_conversations.split(",")] if args.scenario_conversations else None
    stored = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    results: dict[str, Any] = dict(stored.get("results", {}))
    sample = cost_texts(args.locomo)

    def save(one: dict[str, Any]) -> None:
        results[one["embedder"]] = one
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"results": results, "verdict": verdict(results)}, ensure_ascii=False,
                                       indent=1), encoding="utf-8")

    for name in names:
        _log(f"measuring {name}")
        save(measure(name, locomo=args.locomo, cache_dir=args.cache_dir, fit=name not in no_fit,
                     scenario_conversations=scen_convs, locomo_conversations=lo_convs,
                     holdout=not args.no_holdout, save=save))
    # cost last, every model measured here and the default (for the ratio) in turns, in this run
    from portamem.embedding.embedders import get_embedder

    models = {n: get_embedder(n, workers=0) for n in dict.fromkeys([DEFAULT, *names])
              if n in results and not results[n].get("error")}
    if not args.no_cost and models:
        _log(f"cost: {list(models)}")
        for name, cost in cpu_ms_per_text(models, sample).items():
            results[name]["cost"] = cost
            save(results[name])
    print(build_table(results))
    print(json.dumps(verdict(results), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
