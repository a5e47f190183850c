"""portamem migrate: a whole store copied to another backend, resumable, verified, then searchable there."""

from __future__ import annotations

from pathlib import Path

import pytest
from portamem_conformance.fixtures import Backend

from portamem import Memory, Settings
from portamem.cli import main
from portamem.errors import StoreError
from portamem.storage.migrate import migrate

FACTS = ["I keep bees on the roof of my flat.", "My sister lives in Porto and teaches chemistry.",
         "我每天早上喝一杯乌龙茶", "The spare key is under the blue flowerpot.", "I run the Berlin marathon in September."]


def _fill(settings: Settings, embedder) -> list[str]:  # type: ignore[no-untyped-def]
    with Memory(settings=settings, embedder=embedder) as mem:
        ids = [mem.save_memory(t, user_id=u).memory_id for u in ("ana", "ben") for t in FACTS]
        mem.forget_memory([ids[1]], user_id="ana")
        mem.add_turn("Where is the key?", "Under the blue flowerpot.", user_id="ana", session_id="s")
        mem.search_memory("bees", user_id="ana")
        mem.set_tier(ids[8], "cold", user_id="ben")  # the cold archive travels too
        mem.set_tier(ids[9], "warm", user_id="ben")
    return ids


def test_migrate_copies_everything_and_resumes(tmp_path: Path, backend: Backend, embedder) -> None:  # type: ignore[no-untyped-def]
    src = Settings(path=str(tmp_path / "src"))
    ids = _fill(src, embedder)
    dst = backend.settings(tmp_path / "dst")

    class Interrupt(Exception):
        pass

    def stop_after_first(table: str, n: int) -> None:
        raise Interrupt

    with pytest.raises(Interrupt):  # killed after one committed batch
        migrate(src.resolved_db_url, dst.resolved_db_url, batch=3, progress=stop_after_first)
    report = migrate(src.resolved_db_url, dst.resolved_db_url, batch=3)
    assert report.ok and report.resumed_after > 0
    assert report.counts["memories"] == (9, 9) and report.counts["turns"] == (1, 1)
    assert report.counts["memories_cold"] == (1, 1)
    assert report.counts["keyword_postings"][0] > 10 and all(report.checksums_match.values())

    with Memory(settings=dst, embedder=embedder) as mem:  # the destination index fills from the copies
        mem.flush()
        assert mem.index.count() == 7
        assert mem.tier_counts(user_id="ben") == {"hot": 3, "warm": 1, "cold": 1}
        assert mem.get_memory(ids[8], user_id="ben").content == FACTS[3]
        assert mem.search_memory("Where do my sister live?", user_id="ben")[0].memory_id == ids[6]
        assert mem.search_memory("乌龙茶", user_id="ana")[0].memory_id == ids[2]
        assert [t.user for t in mem.context(user_id="ana", session_id="s")] == ["Where is the key?"]
        assert [h["action"] for h in mem.history(ids[1], user_id="ana")] == ["save", "forget"]
        new = mem.save_memory("A new memory after the move.", user_id="ana")  # keys continue after the copies
        assert mem.get_memory(new.memory_id, user_id="ana").content == "A new memory after the move."


def test_migrate_refuses_a_store_that_is_not_its_copy(tmp_path: Path, backend: Backend, embedder) -> None:  # type: ignore[no-untyped-def]
    src, other = Settings(path=str(tmp_path / "src")), backend.settings(tmp_path / "other")
    _fill(src, embedder)
    with Memory(settings=other, embedder=embedder) as mem:
        mem.save_memory("Already here.", user_id="ana")
    with pytest.raises(StoreError, match="already holds memories"):
        migrate(src.resolved_db_url, other.resolved_db_url)


def test_migrate_command(tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    _fill(Settings(path=str(tmp_path / "src")), embedder)
    monkeypatch.setattr("portamem.cli.migration.Memory", lambda settings, **kw: Memory(settings=settings, embedder=embedder))
    assert main(["migrate", str(tmp_path / "src"), str(tmp_path / "dst")]) == 0
    out = capsys.readouterr().out
    assert "memories 9 = 9" in out and "memories_cold 1 = 1" in out and "indexed 7" in out
    with Memory(settings=Settings(path=str(tmp_path / "dst")), embedder=embedder) as mem:
        assert mem.store.count() == 9
