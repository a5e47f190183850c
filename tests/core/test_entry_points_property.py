"""Every public operation, driven with arbitrary values: it succeeds or raises a ``portamem.errors`` type,
and when it raises, the store (records, audit log, window, vector index) is exactly as it was."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from portamem import Memory, MemoryDraft, Message, PortamemError, Settings, recall
from portamem.messages import add_messages, archive_messages, window_messages
from portamem.storage.schema import audit_t, memories, turns_t

# ---------------------------------------------------------------------------- values
_SPECIAL = st.sampled_from([
    None, True, False, 0, -1, 1, 10**8, 2**70, 0.5, -0.0, float("nan"), float("inf"), 1.5,
    "", " ", "\x00", "a\x00b", "\ud800", "caf\udce9", "13812345678",
    b"bytes", [], [None], ["a", 1], {}, {"k": "\ud800"}, {1: "int key"}, {"k": {"k": {"k": [1, 2]}}},
    (), object(), datetime(1, 1, 1), datetime(9999, 12, 31), timedelta(days=-1), timedelta.max,
    "default", "u", "s1", "semantic", "active", "web", "high", "quarantined",
])
_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates and NULs included
#: over the id and content bounds (built on draw, so reports stay short)
_LONG = st.sampled_from([300, 9000]).map(lambda n: "x" * n)
JUNK = st.one_of(_SPECIAL, _TEXT, _LONG, st.integers(), st.floats(), st.lists(_SPECIAL, max_size=3),
                 st.dictionaries(_TEXT, _SPECIAL, max_size=3))


def maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly valid values (five in six), sometimes anything at all."""
    return st.integers(0, 5).flatmap(lambda i: JUNK if i == 0 else valid)


USER = maybe(st.sampled_from(["u", "v"]))
TENANT = maybe(st.sampled_from(["default", "t2"]))
SESSION = maybe(st.sampled_from(["default", "s1", "s2"]))
CONTENT = maybe(st.sampled_from(["I drink green tea.", "My sister lives in Lyon.", "我喜欢爬山。",
                                 "Card 4539148803436467 is mine."]))
QUERY = maybe(st.sampled_from(["tea", "where does my sister live", "爬山"]))
WHEN = maybe(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                          timezones=st.sampled_from([None, timezone.utc])))
SPAN = maybe(st.sampled_from([timedelta(0), timedelta(days=1), timedelta(days=30)]))
METADATA = maybe(st.dictionaries(st.sampled_from(["a", "b", "13812345678"]), st.sampled_from(["x", 1, None]),
                                 max_size=2))
FILTERS = maybe(st.sampled_from([None, {"types": ["semantic"]}, {"statuses": ["active", "deleted"]},
                                 {"session_id": "s1"}, {"min_importance": 0.2}]))
FLAG = maybe(st.booleans())
KEYNS = maybe(st.sampled_from([(), ("prefs",), "a.b"]))


# ---------------------------------------------------------------------------- the store under test
def _snapshot(mem: Memory) -> tuple[Any, ...]:
    with mem.store.engine.connect() as conn:
        rows = conn.execute(sa.select(memories).order_by(memories.c.pk)).all()
        audits = conn.execute(sa.select(sa.func.count()).select_from(audit_t)).scalar()
        turns = conn.execute(sa.select(turns_t).order_by(turns_t.c.pk)).all()
    digest = hashlib.sha256(repr([tuple(r) for r in rows]).encode("utf-8", "backslashreplace")).hexdigest()
    return len(rows), digest, audits, repr([tuple(t) for t in turns]), mem.index.count()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[tuple[Memory, Path, list[str]]]:
    root = tmp_path_factory.mktemp("prop")
    mem = Memory(settings=Settings(path=str(root / "store")), embedder=embedder)
    ids = [r.memory_id for r in mem.save_memories(["I keep my bike in the hallway.", "Dinner is at seven."],
                                                  user_id="u")]
    mem.add_turn("hello", "hi there", user_id="u", session_id="s1")
    yield mem, root, ids
    mem.close()


def _export_text(mem: Memory) -> str:
    buf = io.StringIO()
    mem.export(buf, user_id="u")
    return buf.getvalue()


def operations(mem: Memory, root: Path, ids: list[str]) -> dict[str, tuple[Callable[..., Any], dict, dict]]:
    """name -> (call, required argument strategies, optional argument strategies)."""
    mid = maybe(st.sampled_from([*ids, "0" * 32]))
    mids = st.one_of(mid, st.lists(mid, max_size=3), JUNK)
    draft = st.one_of(CONTENT, st.builds(MemoryDraft, content=CONTENT, summary=maybe(st.none()),
                                         entities=maybe(st.none()), metadata=METADATA),
                      st.fixed_dictionaries({"content": CONTENT}, optional={"importance": maybe(st.just(0.7)),
                                                                            "type": maybe(st.just("episodic"))}),
                      JUNK)
    message = st.builds(lambda role, text, meta: Message(role, text, metadata=meta),
                        st.sampled_from(["user", "assistant"]), st.sampled_from(["hi", "ok", "I love figs."]),
                        st.dictionaries(st.sampled_from(["a", "13812345678"]), st.sampled_from(["x", 1]), max_size=2))
    messages = st.one_of(st.lists(message, max_size=4), JUNK)
    exported = st.sampled_from(["export", "junk", "bytes"])

    def stream(kind: str) -> Any:
        text = _export_text(mem)
        return {"export": io.StringIO(text), "junk": io.StringIO(text[: len(text) // 2]),
                "bytes": io.BytesIO(text.encode("utf-8").replace(b"bike", b"b\xffke"))}[kind]

    fp_out = maybe(st.sampled_from([str(root / "out.jsonl"), "stream"]))

    def export(fp: Any, **kw: Any) -> Any:
        return mem.export(io.StringIO() if fp == "stream" else fp, **kw)

    def import_(fp: Any, **kw: Any) -> Any:
        return mem.import_(stream(fp) if fp in ("export", "junk", "bytes") else fp, **kw)

    scope = {"user_id": USER}
    opt = {"tenant_id": TENANT}
    return {
        "save_memory": (mem.save_memory, {"content": CONTENT, **scope},
                        {**opt, "type": maybe(st.sampled_from(["semantic", "episodic", "working"])),
                         "importance": maybe(st.floats(0, 1)), "half_life_days": maybe(st.floats(0.1, 400)),
                         "source": maybe(st.sampled_from(["user", "web", "tool"])),
                         "trust": maybe(st.sampled_from(["low", "high", None])), "session_id": SESSION,
                         "agent_id": maybe(st.sampled_from(["agent-a", None])),
                         "kind": maybe(st.sampled_from(["fact", "preference", None])),
                         "summary": maybe(st.sampled_from(["short", None])),
                         "entities": maybe(st.sampled_from([["Lyon"], [], None])), "metadata": METADATA,
                         "created_at": WHEN, "key": maybe(st.sampled_from(["theme", None])),
                         "key_namespace": maybe(st.sampled_from([(), ("prefs",), "a.b"]))}),
        "save_memories": (mem.save_memories, {"drafts": st.one_of(st.lists(draft, max_size=3), JUNK), **scope}, opt),
        "search_memory": (mem.search_memory, {"query": QUERY, **scope},
                          {**opt, "filters": FILTERS, "top_k": maybe(st.integers(1, 20)), "now": WHEN,
                           "sources": maybe(st.sampled_from([("vector",), ("keyword", "entity")])),
                           "weights": maybe(st.sampled_from([{"vector": 1.0}])), "window_session": SESSION,
                           "shown": maybe(st.lists(st.sampled_from(["tea"]), max_size=2)),
                           "debug": maybe(st.sampled_from([False, io.StringIO()])), "trace": maybe(st.just([]))}),
        "get_memory": (mem.get_memory, {"memory_id": mid, **scope}, opt),
        "list_memories": (mem.list_memories, scope, {**opt, "filters": FILTERS, "limit": maybe(st.integers(0, 5)),
                                                     "offset": maybe(st.integers(0, 5))}),
        "history": (mem.history, {"memory_id": mid, **scope}, opt),
        "forget_memory": (mem.forget_memory, {"memory_ids": mids, **scope}, opt),
        "restore_memory": (mem.restore_memory, {"memory_id": mid, **scope}, opt),
        "refresh_memory": (mem.refresh_memory, {"memory_id": mid, **scope}, {**opt, "delta": maybe(st.floats(-1, 1))}),
        "update_memory": (mem.update_memory, {"memory_id": mid, **scope},
                          {**opt, "content": CONTENT, "metadata": METADATA}),
        "confirm_memory": (mem.confirm_memory, {"memory_id": mid, **scope}, opt),
        "explain": (mem.explain, {"memory_id": mid, **scope}, opt),
        "reveal_memory": (mem.reveal_memory, {"memory_id": mid, **scope},
                          {**opt, "private_key": JUNK, "key_file": JUNK}),  # no vault: always an error
        "purge_deleted": (mem.purge_deleted, {}, {**opt, "older_than": SPAN, "now": WHEN}),
        "maintain": (mem.maintain, {}, {**opt, "now": WHEN, "policy": maybe(st.just("decay"))}),
        "audit_scan": (mem.audit_scan, {}, {**opt, "user_id": USER, "since": WHEN, "window": SPAN,
                                            "factor": maybe(st.floats(1.1, 10)), "include_quarantined": FLAG}),
        "add_turn": (mem.add_turn, {"user": CONTENT, "assistant": CONTENT, **scope},
                     {**opt, "session_id": SESSION, "metadata": METADATA, "created_at": WHEN}),
        "context": (mem.context, scope, {**opt, "session_id": SESSION}),
        "clear_context": (mem.clear_context, scope, {**opt, "session_id": SESSION}),
        "pop_turn": (mem.pop_turn, scope, {**opt, "session_id": SESSION}),
        "export": (export, {"fp": fp_out}, {**opt, "user_id": USER, "include_embeddings": FLAG,
                                            "include_deleted": FLAG}),
        "import_": (import_, {"fp": maybe(exported)},
                    {**opt, "on_conflict": maybe(st.sampled_from(["error", "skip", "replace"])),
                     "progress": maybe(st.none()), "trusted": FLAG}),
        "reindex": (mem.reindex, {}, {"progress": maybe(st.none())}),
        "add_messages": (lambda **kw: add_messages(mem, **kw), {"messages": messages, **scope},
                         {**opt, "session_id": SESSION}),
        "archive_messages": (lambda **kw: archive_messages(mem, **kw), {"messages": messages, **scope},
                             {**opt, "session_id": SESSION}),
        "window_messages": (lambda **kw: window_messages(mem, **kw), scope, {**opt, "session_id": SESSION}),
        "get_by_key": (mem.get_by_key, {"key": maybe(st.just("theme")), **scope}, {**opt, "key_namespace": KEYNS}),
        "forget_by_key": (mem.forget_by_key, {"key": maybe(st.just("theme")), **scope},
                          {**opt, "key_namespace": KEYNS}),
        "list_keyed": (mem.list_keyed, scope, {**opt, "key_namespace": KEYNS, "filters": FILTERS,
                                               "limit": maybe(st.integers(0, 5)), "offset": maybe(st.integers(0, 5))}),
        "user_ids": (mem.user_ids, {}, opt),
        "Message": (Message, {"role": maybe(st.sampled_from(["user", "tool"])), "text": maybe(st.just("hi"))},
                    {"name": JUNK, "id": JUNK, "created_at": WHEN, "metadata": JUNK, "calls_tools": FLAG,
                     "native": JUNK}),
        "recall": (lambda **kw: recall(mem, **kw), {"query": QUERY, **scope},
                   {**opt, "session_id": SESSION, "top_k": maybe(st.integers(1, 9)),
                    "shown": maybe(st.lists(st.just("tea"), max_size=1))}),
    }


@settings(max_examples=250, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_every_entry_point_succeeds_or_raises_typed_and_changes_nothing(shared, data) -> None:
    mem, root, ids = shared
    ops = operations(mem, root, ids)
    name = data.draw(st.sampled_from(sorted(ops)), label="operation")
    call, required, optional = ops[name]
    kwargs = data.draw(st.fixed_dictionaries(required, optional=optional), label="arguments")
    mem.flush()  # the indexer settles earlier successful writes in the background: not part of this call
    before = _snapshot(mem)
    try:
        with contextlib.chdir(root):  # a junk relative export path lands in the test's directory
            call(**kwargs)
    except PortamemError:
        assert _snapshot(mem) == before, f"{name} raised but changed the store"
    except Exception as exc:  # pragma: no cover - the failure this test exists to find
        pytest.fail(f"{name}({kwargs!r}) raised {type(exc).__name__}: {exc}")
