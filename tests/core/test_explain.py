"""Explainability: provenance, trust and weight of a memory, and every search that returned it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from portamem import Memory, Settings
from portamem.cli import main
from portamem.records import utcnow


def _logged(memory: Memory) -> int:
    with memory.store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM retrieval_log")).scalar() or 0)


def test_explain_says_how_when_and_from_where(memory: Memory) -> None:
    rec = memory.save_memory("My sister Ana lives in Porto.", user_id="u1", session_id="chat-7", source="tool",
                             importance=0.7)
    memory.refresh_memory(rec.memory_id, 0.1, user_id="u1")
    first = memory.search_memory("where does Ana live", user_id="u1")
    second = memory.search_memory("sister in Porto", user_id="u1", top_k=3)
    memory.search_memory("completely unrelated gardening question", user_id="u1")
    why = memory.explain(rec.memory_id, user_id="u1")
    assert why.written_by == "saved through the API" and why.session_id == "chat-7"
    assert why.record.source.value == "tool" and why.record.trust.value == "high"
    assert why.record.importance == pytest.approx(0.8) and why.record.access_count == 1
    assert [h["action"] for h in why.history] == ["save", "refresh"]
    hits = [x for x in why.retrievals if x.query in {"where does Ana live", "sister in Porto"}]
    assert [(x.query, x.rank) for x in hits] == [
        ("where does Ana live", [h.memory_id for h in first].index(rec.memory_id) + 1),
        ("sister in Porto", [h.memory_id for h in second].index(rec.memory_id) + 1),
    ]
    assert hits[0].score == next(h.score for h in first if h.memory_id == rec.memory_id)
    text = why.render()
    assert "session chat-7" in text and "trust high" in text and "returned by" in text
    assert json.loads(json.dumps(why.to_dict()))["retrievals"][0]["query"] == "where does Ana live"


def test_explain_names_the_turn_a_captured_memory_came_from(memory: Memory) -> None:
    when = utcnow() - timedelta(hours=3)
    written = memory.add_turn("Please remember that my passport expires in May 2031.", "Noted.",
                              user_id="u1", session_id="s1", created_at=when)
    captured = next(r for r in written if "passport" in r.content)
    why = memory.explain(captured.memory_id, user_id="u1")
    assert why.written_by.startswith("captured from the user's message")
    assert why.session_id == "s1" and why.turns[0]["created_at"] == when.isoformat()
    assert why.turns[0]["user"].startswith("Please remember")


def test_explain_lists_the_turns_an_episode_was_compressed_from(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with Memory(settings=Settings(path=str(tmp_path / "s"), window_turns=1, auto_capture=False),
                embedder=embedder) as mem:
        mem.add_turn("我们周六去爬香山吧。", "好啊，几点出发？", user_id="u1", session_id="s1")
        written = mem.add_turn("早上八点在地铁站见。", "好的。", user_id="u1", session_id="s1")
        episode = written[0]
        why = mem.explain(episode.memory_id, user_id="u1")
        assert why.written_by == "compressed from turns that left the working window"
        assert [t["user"] for t in why.turns] == ["我们周六去爬香山吧。"]


def test_retrieval_log_is_batched_redacted_and_purged_with_the_memory(memory: Memory) -> None:
    rec = memory.save_memory("Call the plumber on Tuesday.", user_id="u1")
    memory.search_memory("plumber on Tuesday, number 13812345678", user_id="u1")
    assert _logged(memory) == 0  # buffered: a search does not write
    why = memory.explain(rec.memory_id, user_id="u1")  # flushes
    assert [x.query for x in why.retrievals] == ["plumber on Tuesday, number [PHONE]"]
    memory.forget_memory(rec.memory_id, user_id="u1")
    memory.purge_deleted(now=utcnow() + timedelta(days=30))
    assert _logged(memory) == 0


def test_retrieval_log_flushes_on_close(settings: Settings, embedder) -> None:  # type: ignore[no-untyped-def]
    with Memory(settings=settings, embedder=embedder) as mem:
        rec = mem.save_memory("The spare key is under the blue pot.", user_id="u1")
        mem.search_memory("spare key", user_id="u1")
    with Memory(settings=settings, embedder=embedder) as mem:
        assert len(mem.explain(rec.memory_id, user_id="u1").retrievals) == 1


def test_portamem_show_explains(tmp_path: Path, embedder, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    with Memory(settings=Settings(path=str(store)), embedder=embedder) as mem:
        rec = mem.save_memory("Mi vuelo a Lima sale el 3 de junio.", user_id="u1", session_id="trip")
        mem.search_memory("vuelo Lima", user_id="u1")
    monkeypatch.setattr("portamem.cli.connect.Memory", lambda settings, **kw: Memory(settings=settings, embedder=embedder))
    assert main(["--path", str(store), "show", rec.memory_id, "--user", "u1"]) == 0
    out = capsys.readouterr().out
    assert "session trip" in out and "returned by 1 search(es)" in out and "'vuelo Lima'" in out
    assert main(["--path", str(store), "show", rec.memory_id, "--user", "u1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["retrievals"][0]["rank"] == 1


def test_full_batches_are_written_in_the_background(memory: Memory) -> None:
    rec = memory.save_memory("The gym opens at six.", user_id="u1")
    memory.retrieval_log.batch = 3
    for _ in range(3):
        memory.search_memory("gym opening", user_id="u1")
    writer = memory.retrieval_log._writer
    assert writer is not None
    writer.join(timeout=10)
    assert _logged(memory) == 3
    assert len(memory.explain(rec.memory_id, user_id="u1").retrievals) == 3


def test_retrieval_log_keeps_only_its_newest_rows(memory: Memory) -> None:
    memory.retrieval_log.keep = 2
    rec = memory.save_memory("The boiler is serviced every October.", user_id="u1")
    for i in range(4):
        memory.search_memory(f"boiler service {i}", user_id="u1")
        memory.retrieval_log.flush()
    assert _logged(memory) == 2
    queries = [x.query for x in memory.explain(rec.memory_id, user_id="u1").retrievals]
    assert queries == ["boiler service 2", "boiler service 3"]
