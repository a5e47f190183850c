"""Metadata filters: one semantics on every path a search takes (the store's SQL on SQLite and
PostgreSQL, the read replica's columns, the Milvus path of a user outside the replica, the queued
rows, the warm tier), applied before ranking, and a typed error for a filter that is not one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from portamem import Memory
from portamem.embedding.embedders import Embedder
from portamem.errors import ValidationError
from portamem.filters import (METADATA_MAX_CONDITIONS, METADATA_MAX_LIST, METADATA_OPERATORS, MetadataFilter,
                              SearchFilters)
from portamem.read import replica

#: every kind of value a field can hold, and a missing field
VALUES: list[Any] = ["<missing>", None, True, False, 0, 1, 2, 2.5, -3, "2", "apollo", "Apollo", "b", "中文",
                     "été", [1, 2], {"x": 1}]
OPERANDS: list[Any] = [None, True, False, 1, 2, 2.0, "2", "apollo", "中文", "été"]
CONDITIONS: list[dict[str, Any]] = (
    [{"$eq": x} for x in OPERANDS] + [{"$ne": x} for x in OPERANDS]
    + [{"$in": [1, "apollo", None]}, {"$in": [True, 2.5]}, {"$in": []}, {"$nin": [1, "apollo", None]},
       {"$nin": [False]}, {"$nin": []}]
    + [{op: x} for op in ("$gt", "$gte", "$lt", "$lte") for x in (1, 2, 0.5, "b", "B", "中", "apollo")]
    + [{"$exists": True}, {"$exists": False}, {"$gte": 0, "$lt": 2}]
)


def _metadata(i: int, value: Any) -> dict[str, Any]:
    if value == "<missing>":
        return {"n": i}
    return {"n": i, "v": value, "o": {"t": value}, "键": value}


def _fill(mem: Memory, user: str = "u") -> dict[str, dict[str, Any]]:
    for i, value in enumerate(VALUES):
        mem.save_memory(f"Note {i} about the rocket launch checklist", user_id=user, metadata=_metadata(i, value))
    mem.flush()
    return {r.memory_id: r.metadata for r in mem.list_memories(user_id=user)}


def _expected(metas: dict[str, dict[str, Any]], f: MetadataFilter) -> set[str]:
    return {m for m, meta in metas.items() if f.admits(meta)}


@pytest.fixture
def pair(settings: Any, embedder: Embedder, tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    """The same records in a store whose users the replica holds, and in one where Milvus serves them."""
    a = Memory(settings=settings, embedder=embedder)
    b = Memory(settings=settings.replace(path=str(tmp_path / "nores"), db_url=None, vector_uri=None,
                                         replica_budget_mb=0.0)
               if settings.db_url is None else settings.replace(replica_budget_mb=0.0, tenant_id="other"),
               embedder=embedder)
    yield a, b
    b.close()
    a.close()


def test_semantics_agree_on_every_path(pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch) -> None:
    """Python, the store's SQL (SQLAlchemy and SQLite's raw fast path), the replica's columns and the
    Milvus path (the admitted rows scored exactly, or Milvus confined to them) admit exactly the same
    rows for every operator and every kind of stored value."""
    opened: list[Memory] = []
    try:
        _agree(pair, monkeypatch, opened)
    finally:
        for mem in opened:
            mem.close()


def _agree(pair: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch, opened: list[Memory]) -> None:
    for mem, exact in ((pair[0], replica.EXACT_ADMITTED), (pair[1], replica.EXACT_ADMITTED), (pair[1], 0)):
        monkeypatch.setattr(replica, "EXACT_ADMITTED", exact)
        if exact == 0:  # the same store opened again: its index read, as after a restart
            mem.close()
            mem = Memory(settings=mem.settings, embedder=mem.embedder)
            opened.append(mem)
        metas = _fill(mem) if exact else {r.memory_id: r.metadata for r in mem.list_memories(user_id="u")}
        tenant = mem.tenant_id
        qvec = np.asarray(mem.embedder.embed(["rocket launch checklist"], kind="query")[0], dtype=np.float32)
        for cond in CONDITIONS:
            for key in ("v", "o.t", "键"):
                f = MetadataFilter.coerce({key: cond})
                assert f is not None
                want = _expected(metas, f)
                sf = SearchFilters(metadata=f)
                where = f"{key} {cond}"
                assert mem.store.admitted_ids(tenant, "u", sf) == want, where
                assert {r.memory_id for r in mem.list_memories(user_id="u", filters={"metadata": {key: cond}})} \
                    == want, where
                assert {m for m, _ in mem.store.keyword_search(tenant, "u", "rocket checklist", sf, 100)} == want, where
                got = {h.memory_id for h in mem.vectors.search(tenant, "u", qvec, 100, sf)}
                assert got == want, where


def test_filter_applies_before_ranking(memory: Memory) -> None:
    """Many better matches outside the filter never push the one inside it out of the top k."""
    for i in range(30):
        memory.save_memory(f"The rocket launch checklist, copy {i}", user_id="u", metadata={"project": "gemini"})
    memory.save_memory("Fuel the rocket before the launch", user_id="u", metadata={"project": "apollo", "priority": 3})
    memory.save_memory("Apollo budget review is on Friday", user_id="u", metadata={"project": "apollo", "priority": 1})
    memory.flush()
    f = {"metadata": {"project": "apollo", "priority": {"$gte": 2}}}
    for sources in (("vector",), ("keyword",), ("vector", "keyword", "entity")):
        hits = memory.search_memory("rocket launch checklist and fuel", user_id="u", filters=f, top_k=1,
                                     sources=sources)
        assert [h.record.content for h in hits] == ["Fuel the rocket before the launch"], sources
    # and a filter nothing matches gives nothing, never rows outside it
    assert memory.search_memory("rocket", user_id="u", filters={"metadata": {"project": "mercury"}}) == []


def test_queued_rows_are_filtered(stuck: tuple[Memory, Any, Any]) -> None:
    """A search scores the user's rows the indexer has not reached yet: only those the filter admits."""
    mem, _, _ = stuck
    mem.save_memory("Pack the telescope for the trip", user_id="q", metadata={"trip": "alps"})
    mem.save_memory("Pack the telescope lens cloth", user_id="q", metadata={"trip": "coast"})
    hits = mem.search_memory("pack the telescope", user_id="q", filters={"metadata": {"trip": "coast"}},
                             sources=("vector",))
    assert [h.record.content for h in hits] == ["Pack the telescope lens cloth"]


def test_warm_tier_is_filtered(memory: Memory) -> None:
    for i, team in enumerate(["red", "blue", "red"]):
        memory.save_memory(f"Team {team} standup notes number {i}", user_id="w", metadata={"team": team})
    memory.flush()
    ids = [r.memory_id for r in memory.list_memories(user_id="w")]
    memory.set_tier(ids[:2], "warm", user_id="w")
    memory.set_tier(ids[2:], "cold", user_id="w")
    for tier, team in (("warm", "blue"), ("cold", "red")):
        hits = memory.search_memory("standup notes", user_id="w", tiers=[tier], filters={"metadata": {"team": team}})
        assert [h.record.metadata["team"] for h in hits] == [team], tier
        listed = memory.list_memories(user_id="w", filters={"tiers": [tier], "metadata": {"team": team}})
        assert [r.metadata["team"] for r in listed] == [team], tier


def test_chinese_values_and_keys(memory: Memory) -> None:
    memory.save_memory("项目周会在周五举行", user_id="zh", metadata={"项目": "阿波罗", "优先级": 3})
    memory.save_memory("项目预算周一审核", user_id="zh", metadata={"项目": "双子座", "优先级": 5})
    memory.flush()
    hits = memory.search_memory("项目什么时候开会", user_id="zh", filters={"metadata": {"项目": "阿波罗"}})
    assert [h.record.content for h in hits] == ["项目周会在周五举行"]
    assert [r.content for r in memory.list_memories(user_id="zh", filters={"metadata": {"优先级": {"$gt": 4}}})] \
        == ["项目预算周一审核"]


@pytest.mark.parametrize("bad, says", [
    ({"p": {"$regex": "a"}}, "unknown operator '$regex'"),
    ({"p": {"$gt": None}}, "finite number or a string"),
    ({"p": {"$gt": True}}, "finite number or a string"),
    ({"p": {"$in": "a"}}, "takes a list"),
    ({"p": {"$in": [[1]]}}, "expected a string, number"),
    ({"p": {"$exists": "yes"}}, "true or false"),
    ({"p": {"$eq": float("nan")}}, "not a finite number"),
    ({"p": {"$lt": float("inf")}}, "finite number or a string"),
    ({"p": {"$lt": 10**100}}, "64-bit integer"),
    ({"p": {"q": 1}}, "dotted key"),
    ({"p": [1, 2]}, "'$in'"),
    ({"p": {}}, "empty operator object"),
    ({"$or": [{"p": 1}]}, "not supported"),
    ({"a.b.c.d.e.f.g": 1}, "levels deep"),
    ({"a..b": 1}, "non-empty"),
    ({'a"b': 1}, "quotes"),
    ("project", "must be a mapping"),
])
def test_bad_filters_are_typed_errors(memory: Memory, bad: Any, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        memory.search_memory("x", user_id="u", filters={"metadata": bad})
    assert says in str(err.value)
    with pytest.raises(ValidationError):
        memory.list_memories(user_id="u", filters={"metadata": bad})


def test_filter_round_trips_as_json() -> None:
    spec = {"project": "apollo", "priority": {"$gte": 2, "$lt": 9}, "a.b": {"$in": [1, "x", None]}}
    f = MetadataFilter.coerce(spec)
    assert f is not None and MetadataFilter.coerce(f.to_json()) == f
    assert MetadataFilter.coerce({}) is None


def test_milvus_search_confined_to_ids_reaches_k(memory: Memory) -> None:
    """Milvus asked for the nearest among some ids goes deeper until k of them are found: the same
    top k as exact scoring of those ids alone."""
    for i in range(40):
        memory.save_memory(f"Weekly report number {i} on the garden irrigation", user_id="m")
    memory.flush()
    records = memory.list_memories(user_id="m")
    only = {r.memory_id for r in records[::9]}  # 5 of 40, wherever they rank
    qvec = np.asarray(memory.embedder.embed(["garden irrigation report"], kind="query")[0], dtype=np.float32)
    hits = memory.index.search(memory.tenant_id, "m", qvec, 3, SearchFilters(), only=only)
    vecs = memory.store.vectors(memory.tenant_id, "m", sorted(only), memory.index.model)
    exact = sorted(vecs, key=lambda m: -float(vecs[m] @ qvec))[:3]
    assert [h.memory_id for h in hits] == exact


def test_keyword_search_reaches_k_past_its_shortlist(memory: Memory) -> None:
    """The keyword retriever ranks a shortlist of 4k records before it checks the filter: when the
    filter admits too few of it, the shortlist grows, and the top k are those of the filtered ranking."""
    for i in range(60):
        padding = " and more words" * (i // 10)  # the later ones rank lower (longer texts)
        memory.save_memory(f"Garden irrigation report {i}{padding}", user_id="kw", metadata={"i": i})
    memory.flush()
    sf = SearchFilters(metadata=MetadataFilter.coerce({"i": {"$gte": 50}}))
    everything = memory.store.keyword_search(memory.tenant_id, "kw", "garden irrigation report", SearchFilters(), 100)
    ids = {r.memory_id: r.metadata["i"] for r in memory.list_memories(user_id="kw")}
    want = [m for m, _ in everything if ids[m] >= 50][:2]
    got = memory.store.keyword_search(memory.tenant_id, "kw", "garden irrigation report", sf, 2)
    assert [m for m, _ in got] == want and len(want) == 2


def test_the_replica_keeps_a_bounded_number_of_filtered_keys(memory: Memory) -> None:
    """A caller naming ever new metadata keys costs the replica at most ``MAX_COLUMNS`` columns: the
    least recently filtered key goes first, and answers stay the same after its column is rebuilt."""
    from portamem.read.metacols import MAX_COLUMNS

    memory.save_memory("Fuel the rocket before the launch", user_id="u", metadata={"project": "apollo", "k7": 1})
    memory.save_memory("Pack the rocket launch checklist", user_id="u", metadata={"project": "gemini"})
    memory.flush()

    def found(meta: dict[str, Any]) -> list[str]:
        hits = memory.search_memory("rocket launch", user_id="u", filters={"metadata": meta}, sources=("vector",))
        return [h.record.content for h in hits]

    assert found({"project": "apollo"}) == ["Fuel the rocket before the launch"]
    columns = memory.vectors._users[(memory.tenant_id, "u")].meta._cols
    for i in range(MAX_COLUMNS * 3):
        assert found({f"k{i}": 1}) == (["Fuel the rocket before the launch"] if i == 7 else [])
        assert found({"project": "gemini"}) == ["Pack the rocket launch checklist"]  # used all along: kept
        assert len(columns) <= MAX_COLUMNS
    assert ("project",) in columns and ("k7",) not in columns
    assert found({"k7": 1}) == ["Fuel the rocket before the launch"]


#: text a stored value can hold (no NUL, no lone surrogate: ``test_a_string_no_record_can_hold...``)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6)
#: operands a drawn filter picks from: the stored values' own, near misses, and anything else
_OPERAND = st.one_of(
    st.sampled_from([v for v in VALUES if v != "<missing>" and not isinstance(v, (list, dict))] + [2.0, "Été", ""]),
    st.none(), st.booleans(), _TEXT,
    # numbers the replica's float64 columns hold exactly (an integer beyond 2**53 is rounded there)
    st.integers(-2**53, 2**53), st.floats(allow_nan=False, allow_infinity=False, width=64),
)
_KEYS = ("v", "o.t", "键", "n", "absent", "o.t.deeper")


@st.composite
def _lists(draw: st.DrawFn) -> list[Any]:
    """An ``$in`` / ``$nin`` list up to the validator's maximum: a few drawn operands among filler."""
    picked = draw(st.lists(_OPERAND, max_size=5))
    filler = draw(st.sampled_from([0, 3, 200, METADATA_MAX_LIST]))
    numbers = draw(st.booleans())
    pad: list[Any] = [1000.5 + i if numbers else f"pad{i}" for i in range(filler)]
    return (picked + pad)[:METADATA_MAX_LIST]


@st.composite
def _conditions(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(METADATA_OPERATORS))
    if op in ("$in", "$nin"):
        return {op: draw(_lists())}
    if op == "$exists":
        return {op: draw(st.booleans())}
    if op in ("$eq", "$ne"):
        return {op: draw(_OPERAND)}
    return {op: draw(st.one_of(_TEXT, st.integers(-2**53, 2**53),
                               st.floats(allow_nan=False, allow_infinity=False)))}


@st.composite
def _filters(draw: st.DrawFn) -> dict[str, Any]:
    """A filter the validator accepts, sometimes of its maximal size: 64 conditions of 1000 values."""
    spec: dict[str, Any] = {key: draw(_conditions()) for key in draw(st.lists(st.sampled_from(_KEYS), unique=True,
                                                                              min_size=1, max_size=3))}
    wide = draw(st.sampled_from([0, 0, METADATA_MAX_CONDITIONS - len(spec)]))
    op = draw(st.sampled_from(["$in", "$nin"]))
    for i in range(wide):  # keys no record has, each with the longest list
        spec[f"w{i}"] = {op: [f"x{j}" for j in range(METADATA_MAX_LIST - 1)] + [None]}
    return spec


@pytest.fixture
def filled(pair: tuple[Memory, Memory]) -> tuple[Memory, Memory, dict[str, dict[str, Any]]]:
    metas = _fill(pair[0])
    _fill(pair[1])
    return pair[0], pair[1], metas


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=_filters())
def test_every_accepted_filter_runs_on_every_path(filled: tuple[Memory, Memory, dict[str, dict[str, Any]]],
                                                   spec: dict[str, Any]) -> None:
    """Any filter the validator accepts, up to its maxima (64 conditions, lists of 1000), gives the
    same rows as the Python semantics on the store's SQL (SQLAlchemy and the raw fast path), the
    keyword search, the replica's columns and the Milvus path, and never an error (SQLite refused an
    ``$in`` of 1000 values with 'Expression tree is too large', and 64 lists of 900 took minutes)."""
    a, b, metas = filled
    f = MetadataFilter.coerce(spec)
    assert f is not None
    want = _expected(metas, f)
    sf = SearchFilters(metadata=f)
    qvec = np.asarray(a.embedder.embed(["rocket launch checklist"], kind="query")[0], dtype=np.float32)
    for mem in (a, b):
        tenant = mem.tenant_id
        ids = {r.memory_id: r.metadata["n"] for r in mem.list_memories(user_id="u")}
        numbered = {m: meta["n"] for m, meta in metas.items()}
        want_n = {numbered[m] for m in want}

        def n(found: set[str]) -> set[int]:
            return {ids[m] for m in found}

        assert n(mem.store.admitted_ids(tenant, "u", sf)) == want_n
        assert {r.metadata["n"] for r in mem.list_memories(user_id="u", filters={"metadata": spec})} == want_n
        assert n({m for m, _ in mem.store.keyword_search(tenant, "u", "rocket checklist", sf, 100)}) == want_n
        assert n({h.memory_id for h in mem.vectors.search(tenant, "u", qvec, 100, sf)}) == want_n
        hits = mem.search_memory("rocket launch checklist", user_id="u", filters={"metadata": spec}, top_k=50)
        assert {h.record.metadata["n"] for h in hits} <= want_n


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800"])
def test_a_string_no_record_can_hold_is_a_typed_error(memory: Memory, bad: str) -> None:
    for spec in ({"p": bad}, {"p": {"$in": ["x", bad]}}, {"p": {"$gt": bad}}, {bad: 1}):
        with pytest.raises(ValidationError):
            memory.list_memories(user_id="u", filters={"metadata": spec})
