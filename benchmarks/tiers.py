"""Storage tiers at scale: a year of memories of many users, with tiers and without, in the same run.

The store holds ``--users`` users of ``--per-user`` memories each, spread over a year of simulated
time. A user's memories are a slice of LoCoMo's turns (the dev file: 5 conversations, 2,760 turns),
starting at a random turn and kept in order, one every ~9 hours, plus a few identity and preference
sentences written in the first two months. About 12 % of the memories were used again after they
were written (``last_accessed_at``, ``access_count``): most within weeks, some at any time since.

Planted questions are LoCoMo's own questions whose evidence turns a user holds: "recent" when every
evidence turn was written in the last 30 days of the year, "old" when every one is older than 90
days. Each question text is asked once, of one user. Recall@5 counts a question as found when one
of its evidence memories is in the top 5.

The store is filled once through the public import path (a trusted restore of records carrying their
vectors, with the guard and PII plugins off: they cost ~3 ms a record and the text is known), then
copied: A keeps the default settings and runs ``maintain(now=end of year)``; B has
``Settings(tiers=False)`` and runs the same maintenance, which moves nothing between tiers. Both
keep decay eviction off (``evict_below=0``): a year of 7-day-half-life episodes would otherwise be
evicted, in both stores alike, and the comparison would be about eviction. Each store is then opened
in a fresh process, as a server would after a restart; it waits until the process is idle (the
indexer checks the vector index at open), searches once for each of ``--active-users`` users with
queries that name no entity (loading their read replicas), then asks the planted questions. RSS is
the process's; the same process opened on an empty store is the baseline.

Passes over the questions, in this order: recent (default search); in A, old with
``tiers=["hot", "warm"]`` and with ``["hot", "warm", "cold"]``, both with the background cold
loads switched off so they leave the tiers as maintenance left them; old (default search: the
vector index's hot tier and the keyword and entity matches of hot and warm, the warm vectors on
disk too when the best hit scores below ``Settings.warm_below``; a query naming an entity only the
cold tier holds loads those memories back in the background); in A, old again, after those loads
landed.

Vectors are the packaged default embedder's own (multilingual-e5-small-q4), computed for every
distinct text (the LoCoMo turns, the identity and preference sentences and the questions, ~3,200
texts, about 2-5 minutes on 2 cores; ``--vector-cache DIR`` keeps them between runs). The stores
read them from that table instead of running the model, so the timed searches measure the store;
the model's own query embedding is timed beside them. A text missing from the table (the abstract
memories maintenance writes) is embedded by the model itself, and counted.

    python benchmarks/tiers.py --users 10 --per-user 200
    python benchmarks/tiers.py --users 200 --per-user 1000 --vector-cache /tmp/bench-vectors \\
        --out benchmarks/results/tiers-200k.json
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import io
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from portamem import Memory, Settings
from portamem.embedding.embedders import Kind, get_embedder
from portamem.language.entities import extract_entities
from portamem.scenarios.locomo import CachedEmbedder, LocomoConversation, load_locomo
from portamem.plugins import get_plugin_manager
from portamem.portable.transfer import export_lines
from portamem.records import MemoryRecord, MemoryType

#: the LoCoMo dev file in a ``shared/data`` folder beside (or above) the checkout
DEFAULT_DATA = next((p / "shared" / "data" / "locomo" / "locomo-dev.json" for p in Path(__file__).resolve().parents
                     if (p / "shared" / "data" / "locomo" / "locomo-dev.json").exists()), Path("locomo-dev.json"))
#: the simulated year ends here; maintenance and the questions happen at this moment
END = datetime(2026, 12, 1, tzinfo=UTC)
YEAR_DAYS = 365.0
RECENT_DAYS, OLD_DAYS = 30.0, 90.0
#: the share of memories used again after they were written, and of those the share used at any time since
ACCESSED, ACCESSED_LATE = 0.12, 0.2
IDENTITY = ("My name is Dana Whitfield.", "I live in Rotterdam with my partner and our two cats.",
            "I work as a structural engineer at a bridge-building firm.", "I was born in 1987 in Porto.",
            "My daughter Lena is eight and goes to the Montessori school.", "I am allergic to peanuts and shellfish.",
            "My mother tongue is Portuguese; I also speak Dutch and English.", "I drive an old blue Volvo estate.",
            "I run the Rotterdam marathon every April.", "My brother Tomas lives in Lisbon.",
            "I have type 1 diabetes and wear an insulin pump.", "I studied civil engineering at TU Delft.")
PREFERENCE = ("I prefer window seats on flights.", "I like my coffee black, no sugar.",
              "I prefer vegetarian restaurants when we eat out.", "Please keep answers short and in bullet points.",
              "I prefer morning meetings, never after 4 pm.", "I like hotels within walking distance of a station.",
              "I prefer trains over flights for trips under six hours.", "I enjoy jazz, especially Chet Baker.",
              "I prefer paper books to e-readers.", "I like to hike on weekends when the weather is good.",
              "I prefer aisle seats at the cinema.", "I like spicy food, the hotter the better.")
PINNED_PER_USER = 4
#: what loads each active user's replica before the questions: no entities, so no cold loads
WARMUP = ("what did we talk about last time?", "any plans for the weekend?", "how have you been feeling lately?",
          "what was that book you recommended?", "remind me what I said about my job", "what did I cook last week?",
          "did I mention anything about my family?", "what should I do to relax this evening?",
          "what were my goals for this year?", "what music have I been listening to?", "how is the new project going?",
          "what did I say about my health?", "any news about the trip we discussed?", "what gifts did I plan to buy?",
          "what was the last movie I watched?", "what hobbies did I pick up recently?")


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _peak_mb() -> float:
    """This process's peak RSS since it started (VmHWM; ``ru_maxrss`` keeps the parent's peak across exec)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _settle(limit_s: float = 900.0) -> float:
    """Wait until this process is idle: after an open, the indexer checks the vector index against the
    records in the background (``portamem.background.upkeep.repair``), and RSS moves until it is done."""
    import psutil

    proc, start = psutil.Process(), time.perf_counter()
    used = sum(proc.cpu_times()[:2])
    while time.perf_counter() - start < limit_s:
        time.sleep(1.0)
        now = sum(proc.cpu_times()[:2])
        if now - used < 0.05:
            break
        used = now
    return time.perf_counter() - start


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _mid(seed: int, user: int, i: int) -> str:
    return hashlib.blake2b(f"tiers/{seed}/{user}/{i}".encode(), digest_size=16).hexdigest()


# ---------------------------------------------------------------------- vectors
class VectorTable:
    """The embedder the stores see: the packaged model's vectors of known texts, looked up by (kind,
    text). A text missing from the table is embedded by the model itself (loaded on first need) and
    counted in ``misses``, so a run says whether anything was embedded on the timed path."""

    def __init__(self, path: Path) -> None:
        with np.load(path, allow_pickle=False) as data:
            self.name, self.version = str(data["name"]), str(data["version"])
            self._rows = {(str(k), str(t)): i for i, (k, t) in enumerate(zip(data["kinds"], data["texts"]))}
            self._vectors = data["vectors"].astype(np.float32)
        self.dim = int(self._vectors.shape[1])
        self._model: Any = None
        self.misses = 0

    def embed(self, texts: list[str], *, kind: Kind = "passage") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = []
        for n, t in enumerate(texts):
            row = self._rows.get((kind, t))
            if row is None:
                todo.append(n)
            else:
                out[n] = self._vectors[row]
        if todo:
            self.misses += len(todo)
            if self._model is None:
                self._model = get_embedder(self.name, workers=0)
            out[todo] = self._model.embed([texts[n] for n in todo], kind=kind)
        return out

    @staticmethod
    def write(path: Path, name: str, version: str, entries: dict[tuple[str, str], np.ndarray]) -> None:
        keys = list(entries)
        np.savez(path, name=np.asarray(name), version=np.asarray(version), kinds=np.asarray([k for k, _ in keys]),
                 texts=np.asarray([t for _, t in keys]), vectors=np.stack([entries[k] for k in keys]).astype(np.float32))


# ---------------------------------------------------------------------- the simulated year
class Year:
    """Each user's slice of LoCoMo, its times and uses, and the planted questions (all from ``seed``)."""

    def __init__(self, convs: list[LocomoConversation], users: int, per_user: int, seed: int) -> None:
        self.turns = [(c.sample_id, t) for c in convs for t in c.turns]
        self.index = {f"{sid}/{t.dia_id}": g for g, (sid, t) in enumerate(self.turns)}
        self.users, self.seed = users, seed
        self.pinned = min(PINNED_PER_USER, per_user // 10)
        self.n = per_user - self.pinned
        if not 0 < self.n <= len(self.turns):
            raise SystemExit(f"--per-user must leave 1..{len(self.turns)} LoCoMo turns per user beside "
                             f"{self.pinned} identity/preference memories (each user holds each turn at most once)")
        rng = np.random.default_rng(seed)
        self.starts = rng.integers(0, len(self.turns), size=users)
        # memory i of a user is written (i + u) / n of the way through the year, u uniform in [0, 1)
        self.days_ago = YEAR_DAYS * (1.0 - (np.arange(self.n)[None, :] + rng.random((users, self.n))) / self.n)
        self.entities = [extract_entities(t.content) for _, t in self.turns]
        self.pinned_entities = {s: extract_entities(s) for s in IDENTITY + PREFERENCE}

    def created(self, user: int, i: int) -> datetime:
        return END - timedelta(days=float(self.days_ago[user, i]))

    def records(self, user: int, model: str, version: str, vectors: dict[tuple[str, str], np.ndarray]) -> list[dict]:
        """The user's memories as portable records (``MemoryRecord.to_dict``), with their vectors."""
        rng = np.random.default_rng([self.seed, user])
        out = []

        def record(i: int, text: str, created: datetime, **kw: Any) -> None:
            last, count = None, 0
            if rng.random() < ACCESSED:  # used again: mostly within weeks, some at any time since
                span = (END - created).total_seconds()
                late = rng.random() < ACCESSED_LATE
                after = rng.random() * span if late else min(span, rng.exponential(14 * 86400.0))
                last, count = created + timedelta(seconds=after), int(min(8, rng.geometric(0.5)))
            rec = MemoryRecord(content=text, user_id=f"user{user:05d}", memory_id=_mid(self.seed, user, i),
                               embedding=vectors[("passage", text)].tolist(), embedding_model=model,
                               embedding_version=version, created_at=created, updated_at=created,
                               last_accessed_at=last, access_count=count, **kw)
            out.append(rec.to_dict())

        start = int(self.starts[user])
        for i in range(self.n):
            g = (start + i) % len(self.turns)
            sid, turn = self.turns[g]
            record(i, turn.content, self.created(user, i), type=MemoryType.EPISODIC, kind="episodic",
                   half_life_days=7.0, entities=self.entities[g], metadata={"dia_id": f"{sid}/{turn.dia_id}"})
        picks = [*rng.choice(len(IDENTITY), self.pinned // 2, replace=False)]
        prefs = [*rng.choice(len(PREFERENCE), self.pinned - len(picks), replace=False)]
        for n, (text, kind) in enumerate([(IDENTITY[p], "identity") for p in picks]
                                         + [(PREFERENCE[p], "preference") for p in prefs]):
            created = END - timedelta(days=YEAR_DAYS - float(rng.random()) * 60.0)
            record(self.n + n, text, created, type=MemoryType.SEMANTIC, kind=kind,
                   half_life_days=365.0 if kind == "identity" else 90.0, entities=self.pinned_entities[text],
                   importance=0.8)
        return out

    def questions(self, convs: list[LocomoConversation], per_class: int) -> dict[str, list[dict]]:
        """Up to ``per_class`` recent and old planted questions, each text asked of one user: the user,
        the question, its evidence memory ids and how many days ago they were written."""
        rng = np.random.default_rng([self.seed, 1 << 20])
        seen: set[str] = set()
        pool: list[tuple[str, np.ndarray]] = []
        for c in convs:
            for q in c.questions:
                g = [self.index[f"{c.sample_id}/{e}"] for e in q.evidence if f"{c.sample_id}/{e}" in self.index]
                if g and q.question not in seen:
                    seen.add(q.question)
                    pool.append((q.question, np.asarray(g)))
        order = rng.permutation(len(pool))
        out: dict[str, list[dict]] = {"recent": [], "old": []}
        taken: set[str] = set()
        users = np.arange(self.users)
        for cls in ("recent", "old"):  # recent first: the last 30 days hold few evidence turns
            for qi in order:
                if len(out[cls]) >= per_class:
                    break
                text, g = pool[qi]
                if text in taken:
                    continue
                pos = (g[None, :] - self.starts[:, None]) % len(self.turns)  # (users, evidence)
                held = (pos < self.n).all(axis=1)
                ago = np.where(pos < self.n, self.days_ago[users[:, None], np.minimum(pos, self.n - 1)], np.inf)
                fits = held & ((ago <= RECENT_DAYS).all(axis=1) if cls == "recent" else (ago > OLD_DAYS).all(axis=1))
                candidates = np.flatnonzero(fits)
                if candidates.size == 0:
                    continue
                u = int(rng.choice(candidates))
                taken.add(text)
                out[cls].append({"user": f"user{u:05d}", "question": text,
                                 "evidence": [_mid(self.seed, u, int(p)) for p in pos[u]],
                                 "days_ago": [round(float(a), 1) for a in ago[u]]})
        return out


# ---------------------------------------------------------------------- phases
def settings_for(path: Path, tiers: bool, questions: int) -> Settings:
    # eviction off in both stores (see the module docstring); room in the query cache for every question;
    # PORTAMEM_* variables set the rest (PORTAMEM_WARM_BELOW=0: no scan of the warm vectors)
    return Settings.load(path=str(path), tiers=tiers, evict_below=0.0,
                         query_cache_size=max(1024, 4 * questions + 256))


def build(year: Year, table: Path, store: Path, batch_users: int) -> dict[str, float]:
    """Fill ``store`` through a trusted restore of the records with their vectors."""
    emb = VectorTable(table)
    vectors = {k: emb._vectors[i] for k, i in emb._rows.items()}
    header = {"embedding_model": emb.name, "embedding_dim": emb.dim}
    # the guard and PII redaction screen each restored record (~3 ms each, an hour per 1M): the text is
    # LoCoMo's and the fixed sentences above, so the fill skips them; nothing else changes
    mem = Memory(settings=settings_for(store, True, 0), embedder=emb,
                 plugins=get_plugin_manager(block=("guard", "pii_redaction")))
    t = time.perf_counter()
    for lo in range(0, year.users, batch_users):
        records = [r for u in range(lo, min(year.users, lo + batch_users))
                   for r in year.records(u, emb.name, emb.version, vectors)]
        mem.import_(io.StringIO("".join(export_lines(header, records))), trusted=True)
    mem.flush()
    mem.index.flush()
    fill_s = time.perf_counter() - t
    mem.close()
    return {"fill_s": fill_s, "misses": emb.misses}


def maintain(table: Path, store: Path, tiers: bool, plan: dict[str, Any]) -> dict[str, Any]:
    """One maintenance run at the end of the year; the tier counts, and each planted evidence's tier."""
    emb = VectorTable(table)
    mem = Memory(settings=settings_for(store, tiers, 0), embedder=emb)
    t = time.perf_counter()
    report = mem.maintain(now=END)
    maintain_s = time.perf_counter() - t
    tier_of = {m: target for target, ids in report.tiered.items() for m in ids}
    evidence = {cls: [[tier_of.get(m, "hot") for m in q["evidence"]] for q in plan[cls]] for cls in ("recent", "old")}
    out = {"maintain_s": maintain_s, "tiers": mem.tier_counts(), "moved": {k: len(v) for k, v in report.tiered.items()},
           "evicted": len(report.evicted), "consolidated": len(report.consolidated),
           "abstracted": len(report.abstracted), "evidence_tiers": evidence, "misses": emb.misses}
    mem.close()
    out["disk_mb"] = _du_mb(store)
    return out


def measure(table: Path, store: Path, tiers: bool, plan: dict[str, Any], active_users: list[str]) -> dict[str, Any]:
    """In a fresh process: open the store, search once for each active user, then ask the planted questions."""
    emb = VectorTable(table)
    gc.collect()
    rss_start = _rss_mb()
    n_q = len(plan["recent"]) + len(plan["old"])
    t = time.perf_counter()
    mem = Memory(settings=settings_for(store, tiers, n_q), embedder=emb)
    out: dict[str, Any] = {"rss_start_mb": rss_start, "open_s": time.perf_counter() - t, "rss_opened_mb": _rss_mb()}
    out["settle_s"] = _settle()
    gc.collect()
    out["rss_open_mb"], out["peak_open_mb"] = _rss_mb(), _peak_mb()
    warmup = plan["warmup"]
    t = time.perf_counter()
    for n, user in enumerate(active_users):
        mem.search_memory(warmup[n % len(warmup)], user_id=user, top_k=5)
    mem.flush()
    out["warmup_s"] = time.perf_counter() - t
    out["warmup_cold_loaded"] = mem.cold_loader.loaded
    gc.collect()
    out["rss_active_mb"] = _rss_mb()

    def ask(cls: str, name: str, *, loads: bool = True, **kw: Any) -> None:
        lat, found, hit_tiers = [], [], {"hot": 0, "warm": 0, "cold": 0}
        loaded_before = mem.cold_loader.loaded
        on_cold = mem.retriever.on_cold
        if not loads:  # this pass leaves the store as it found it, so every pass sees the maintained tiers
            mem.retriever.on_cold = None
        for q in plan[cls]:
            t = time.perf_counter()
            hits = mem.search_memory(q["question"], user_id=q["user"], top_k=5, **kw)
            lat.append((time.perf_counter() - t) * 1000)
            found.append(any(h.memory_id in q["evidence"] for h in hits))
            for h in hits:
                hit_tiers[h.record.tier.value] += 1
        mem.retriever.on_cold = on_cold
        mem.flush()  # the cold loads a pass asked for land before the next pass
        out[name] = {"p50_ms": statistics.median(lat) if lat else float("nan"), "p99_ms": _pct(lat, 0.99),
                     "mean_ms": statistics.fmean(lat) if lat else float("nan"),
                     "recall@5": sum(found) / len(found) if found else float("nan"), "n": len(found),
                     "found": found, "hit_tiers": hit_tiers, "cold_loaded": mem.cold_loader.loaded - loaded_before}

    ask("recent", "recent")
    if tiers:  # without cold loads: the default pass below is the first to ask
        ask("old", "old_hot_warm", loads=False, tiers=["hot", "warm"])
        ask("old", "old_all_tiers", loads=False, tiers=["hot", "warm", "cold"])
    ask("old", "old")
    if tiers:
        ask("old", "old_again")  # after the cold loads the first default pass asked for
    gc.collect()
    out["rss_end_mb"] = _rss_mb()
    out["peak_mb"] = _peak_mb()
    out["tiers_after"] = mem.tier_counts()
    out["misses"] = emb.misses
    mem.close()
    return out


def _in_child(phase: str, work: Path, **kw: Any) -> dict[str, Any]:
    """Run a phase in a fresh interpreter (its own RSS, no state from the others); its result back as JSON."""
    spec = work / f"{phase}-{kw.get('name', '')}.json"
    spec.write_text(json.dumps({"phase": phase, **{k: str(v) if isinstance(v, Path) else v for k, v in kw.items()}}))
    subprocess.run([sys.executable, __file__, "--phase", str(spec)], check=True)
    return json.loads(spec.with_suffix(".out.json").read_text())


def _child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    plan = json.loads(Path(spec["plan"]).read_text())
    table, store = Path(spec["table"]), Path(spec["store"])
    result = measure(table, store, spec["tiers"], plan, plan["active_users"] if spec["active"] else [])
    Path(spec_path).with_suffix(".out.json").write_text(json.dumps(result))


# ---------------------------------------------------------------------- the run
def embed_all(texts: dict[str, list[str]], spec: str, cache: str | None, work: Path) -> tuple[Path, dict[str, Any]]:
    """Every distinct text's vector from the packaged model (``cache``: kept between runs)."""
    inner = get_embedder(spec)
    cached = CachedEmbedder(inner, Path(cache) / f"tiers-{spec}.npz" if cache else None)
    before = len(cached._cache)
    entries: dict[tuple[str, str], np.ndarray] = {}
    t = time.perf_counter()
    for kind, items in texts.items():
        items = list(dict.fromkeys(items))
        for lo in range(0, len(items), 64):
            chunk = items[lo:lo + 64]
            entries.update({(kind, x): v for x, v in zip(chunk, cached.embed(chunk, kind=kind))})  # type: ignore[arg-type]
    embed_s = time.perf_counter() - t
    cached.save()
    path = work / "vectors.npz"
    VectorTable.write(path, inner.name, inner.version, entries)
    # the model alone on one uncached query at a time: what a search adds when its query is new
    lat = []
    for q in texts["query"][:60]:
        t = time.perf_counter()
        inner.embed([q], kind="query")
        lat.append((time.perf_counter() - t) * 1000)
    return path, {"model": inner.name, "version": inner.version, "texts": len(entries),
                  "embedded_now": len(cached._cache) - before, "from_cache": len(entries) - (len(cached._cache) - before),
                  "embed_s": embed_s, "query_p50_ms": statistics.median(lat[10:]), "query_p99_ms": _pct(lat[10:], 0.99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--per-user", type=int, default=1000, help="memories of each user")
    ap.add_argument("--questions", type=int, default=200, help="planted questions per class (recent, old)")
    ap.add_argument("--active-users", type=int, default=None,
                    help="users searched once before the questions, loading their replicas (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", default=Settings().embedder)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo json (the dev file)")
    ap.add_argument("--vector-cache", default=None, help="folder keeping the model's vectors between runs")
    ap.add_argument("--workdir", default=None, help="where the stores go (default: a temporary folder, removed)")
    ap.add_argument("--out", default=None, help="JSON results (e.g. benchmarks/results/tiers-100k.json)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        _child(args.phase)
        return
    wall = time.perf_counter()
    convs = load_locomo(args.data)
    year = Year(convs, args.users, args.per_user, args.seed)
    plan: dict[str, Any] = year.questions(convs, args.questions)
    plan["warmup"] = list(WARMUP)
    n_active = args.users if args.active_users is None else min(args.users, args.active_users)
    plan["active_users"] = [f"user{u:05d}" for u in range(n_active)]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="portamem-tiers-"))
    work.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    try:
        (work / "plan.json").write_text(json.dumps(plan))
        t = time.perf_counter()
        table, vec = embed_all({"passage": [t.content for _, t in year.turns] + list(IDENTITY + PREFERENCE),
                                "query": [q["question"] for cls in ("recent", "old") for q in plan[cls]]
                                + plan["warmup"]}, args.embedder, args.vector_cache, work)
        timings["vectors_s"] = time.perf_counter() - t
        store_a, store_b = work / "tiers", work / "flat"
        for path in (store_a, store_b, work / "empty"):
            shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        built = build(year, table, store_a, batch_users=max(1, 5000 // args.per_user))
        timings["fill_s"] = time.perf_counter() - t
        t = time.perf_counter()
        shutil.copytree(store_a, store_b)
        timings["copy_s"] = time.perf_counter() - t
        common = {"plan": work / "plan.json", "table": table}
        t = time.perf_counter()
        maint_b = maintain(table, store_b, False, plan)
        maint_a = maintain(table, store_a, True, plan)
        timings["maintain_s"] = time.perf_counter() - t
        t = time.perf_counter()
        empty = _in_child("measure", work, name="empty", store=work / "empty", tiers=True, active=False,
                          **{**common, "plan": _empty_plan(work, plan)})
        flat = _in_child("measure", work, name="flat", store=store_b, tiers=False, active=True, **common)
        tiered = _in_child("measure", work, name="tiers", store=store_a, tiers=True, active=True, **common)
        timings["measure_s"] = time.perf_counter() - t
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    timings["total_s"] = time.perf_counter() - wall
    results = {"config": {k: v for k, v in vars(args).items() if k != "phase"} | {"active_users": n_active},
               "environment": {"cpus": os.cpu_count(), "python": platform.python_version(),
                               "load_avg": os.getloadavg(), "commit": _commit()},
               "vectors": vec, "built": built, "timings": timings, "maintain": {"tiers": maint_a, "flat": maint_b},
               "measure": {"tiers": tiered, "flat": flat, "empty": empty},
               "questions": {cls: len(plan[cls]) for cls in ("recent", "old")}}
    report(results, args, year)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(_slim(results), indent=1) + "\n")


def _empty_plan(work: Path, plan: dict[str, Any]) -> Path:
    path = work / "plan-empty.json"
    path.write_text(json.dumps({"recent": [], "old": [], "warmup": plan["warmup"], "active_users": []}))
    return path


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _slim(results: dict[str, Any]) -> dict[str, Any]:
    """The results without the per-question lists (kept as counts)."""
    out = json.loads(json.dumps(results))
    for m in out["measure"].values():
        for v in m.values():
            if isinstance(v, dict) and "found" in v:
                v.pop("found")
    for m in out["maintain"].values():
        m["evidence_tiers"] = {cls: _tally(qs) for cls, qs in m["evidence_tiers"].items()}
    return out


def _tally(questions: list[list[str]]) -> dict[str, int]:
    """Questions by the hottest tier among their evidence (the tier that can still answer them)."""
    order = ("hot", "warm", "cold")
    out = dict.fromkeys(order, 0)
    for tiers in questions:
        out[min(tiers, key=order.index)] += 1
    return out


# ---------------------------------------------------------------------- the table
def report(r: dict[str, Any], args: argparse.Namespace, year: Year) -> None:
    a, b, e = r["measure"]["tiers"], r["measure"]["flat"], r["measure"]["empty"]
    ma, mb = r["maintain"]["tiers"], r["maintain"]["flat"]
    vec, total = r["vectors"], args.users * args.per_user
    t = r["timings"]
    print(f"portamem tiers: {args.users:,} users x {args.per_user:,} memories = {total:,} over {YEAR_DAYS:.0f} "
          f"simulated days (LoCoMo dev turns + {year.pinned} identity/preference sentences per user), "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"vectors: {vec['model']} on {vec['texts']:,} distinct texts ({vec['embedded_now']:,} embedded now in "
          f"{vec['embed_s']:.0f} s, {vec['from_cache']:,} from --vector-cache); every memory carries its own text's "
          f"vector; searches read query vectors from the same table (model misses on the timed path: "
          f"{a['misses'] + b['misses']})")
    print(f"wall: vectors {t['vectors_s']:.0f} s, fill {t['fill_s']:.0f} s ({total / r['built']['fill_s']:,.0f} "
          f"memories/s, guard and PII plugins off), copy {t['copy_s']:.0f} s, maintain A+B {t['maintain_s']:.0f} s, "
          f"measure {t['measure_s']:.0f} s, total {t['total_s']:.0f} s")
    ta = ma["tiers"]
    ev = {cls: _tally(qs) for cls, qs in ma["evidence_tiers"].items()}
    print(f"A after maintain: hot {ta['hot']:,} / warm {ta['warm']:,} / cold {ta['cold']:,} "
          f"(hot {ta['hot'] / max(1, sum(ta.values())):.1%}); evicted {ma['evicted']}, abstract memories "
          f"{ma['abstracted']} (B: {mb['abstracted']}; texts the model embedded during maintenance: "
          f"{ma['misses']} / {mb['misses']}); planted questions by their hottest evidence: "
          f"recent {ev['recent']}, old {ev['old']}")
    print(f"questions: {r['questions']['recent']} recent (evidence <= {RECENT_DAYS:.0f} days old), "
          f"{r['questions']['old']} old (> {OLD_DAYS:.0f} days); {r['config']['active_users']:,} "
          f"users searched first (queries naming no entity); query embedding by the model alone (not in the searches below): "
          f"p50 {vec['query_p50_ms']:.1f} ms, p99 {vec['query_p99_ms']:.1f} ms")
    rows: list[tuple[str, float, float]] = [
        ("hot memories (vector index + replica)", ta["hot"], sum(mb["tiers"].values())),
        ("hot share of all memories", ta["hot"] / max(1, sum(ta.values())), 1.0),
        ("warm memories", ta["warm"], mb["tiers"]["warm"]),
        ("cold memories (archive)", ta["cold"], mb["tiers"]["cold"]),
        ("maintain(now=end of year) (s)", ma["maintain_s"], mb["maintain_s"]),
        ("store on disk after maintain (MB)", ma["disk_mb"], mb["disk_mb"]),
        ("store open (s)", a["open_s"], b["open_s"]),
        ("... until idle: the index check at open (s)", a["settle_s"], b["settle_s"]),
        ("RSS, store opened and idle (MB)", a["rss_open_mb"], b["rss_open_mb"]),
        ("peak RSS while opening (MB)", a["peak_open_mb"], b["peak_open_mb"]),
        (f"RSS, {r['config']['active_users']:,} users searched (MB)", a["rss_active_mb"], b["rss_active_mb"]),
        ("RSS growth over an empty store (MB)", a["rss_active_mb"] - e["rss_active_mb"],
         b["rss_active_mb"] - e["rss_active_mb"]),
        ("RSS after the questions (MB)", a["rss_end_mb"], b["rss_end_mb"]),
        ("peak RSS of the whole run (MB)", a["peak_mb"], b["peak_mb"]),
        ("first searches, one per user (s)", a["warmup_s"], b["warmup_s"]),
    ]
    for name, key, bkey in (("recent facts, default search", "recent", "recent"),
                            ("old facts, default search", "old", "old"),
                            ("old facts, tiers hot+warm", "old_hot_warm", "old"),
                            ("old facts, tiers hot+warm+cold", "old_all_tiers", "old"),
                            ("old facts, default, asked again", "old_again", "old")):
        rows += [(f"{name}: p50 (ms)", a[key]["p50_ms"], b[bkey]["p50_ms"]),
                 (f"{name}: p99 (ms)", a[key]["p99_ms"], b[bkey]["p99_ms"]),
                 (f"{name}: Recall@5", a[key]["recall@5"], b[bkey]["recall@5"])]
    print(f"\n{'figure':<48} {'A: tiers':>11} {'B: no tiers':>12} {'A/B':>7}")
    for name, va, vb in rows:
        ratio = va / vb if vb else float("nan")
        fmt = (lambda v: f"{v:,.3f}") if isinstance(va, float) and abs(va) < 10 else (lambda v: f"{v:,.0f}")
        print(f"{name:<48} {fmt(va):>11} {fmt(vb):>12} {ratio:7.2f}")
    print("(B's column for the hot+warm, hot+warm+cold and asked-again rows is B's default search of the same "
          f"old questions; A's cold loads: first searches {a['warmup_cold_loaded']}, " + ", ".join(f"{k} {a[k]['cold_loaded']}" for k in
                                                        ("recent", "old_hot_warm", "old_all_tiers", "old", "old_again"))
          + ")")
    # old questions by the tier their evidence sat in after maintenance
    tiers_old = [min(ts, key=("hot", "warm", "cold").index) for ts in ma["evidence_tiers"]["old"]]
    print("\nold facts' Recall@5 by the hottest tier of their evidence in A "
          "(A default / hot+warm / hot+warm+cold / asked again; B default)")
    for tier in ("hot", "warm", "cold"):
        idx = [i for i, x in enumerate(tiers_old) if x == tier]
        if not idx:
            continue
        cells = [sum(a[k]["found"][i] for i in idx) / len(idx) for k in ("old", "old_hot_warm", "old_all_tiers",
                                                                         "old_again")]
        cells.append(sum(b["old"]["found"][i] for i in idx) / len(idx))
        print(f"  {tier:<5} {len(idx):4d} questions: " + " / ".join(f"{c:.3f}" for c in cells[:4])
              + f"; B {cells[4]:.3f}")


if __name__ == "__main__":
    main()
