"""Export -> import into a new store gives the same records and the same search results."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest

from portamem import ImportFormatError, Memory, Settings

FACTS = [
    "My name is Lena Fischer and I teach chemistry in Graz.",
    "I prefer window seats on long flights.",
    "Order ORD-99812 for the espresso machine was confirmed on 3 June 2026.",
    "我对花生过敏，点餐时请注意。",
    "My daughter Mia starts school in September.",
]
QUERIES = ["what do I teach?", "ORD-99812", "有什么过敏？", "seat preference on planes", "when does Mia start school"]
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _results(mem: Memory, user: str) -> list[list[tuple[str, float]]]:
    return [[(h.memory_id, round(h.score, 6)) for h in mem.search_memory(q, user_id=user, now=NOW)] for q in QUERIES]


def test_export_import_round_trip_gives_same_search(tmp_path, embedder) -> None:
    src = Memory(settings=Settings(path=str(tmp_path / "a")), embedder=embedder)
    for i, fact in enumerate(FACTS):
        src.save_memory(fact, user_id="lena", created_at=datetime(2026, 11, 1 + i, tzinfo=timezone.utc))
    src.add_turn("is it going to rain?", "light rain after 5 pm", user_id="lena", session_id="s1")
    before = _results(src, "lena")
    src.save_memory("Another user's secret: vault code 7731.", user_id="other")
    records_before = {r.memory_id: r.to_dict() for r in src.list_memories(user_id="lena")}
    path = tmp_path / "lena.jsonl"
    assert src.export(path, user_id="lena") == len(FACTS)
    src.close()

    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert header["embedding_model"] == embedder.name and header["embedding_dim"] == embedder.dim
    dst = Memory(settings=Settings(path=str(tmp_path / "b")), embedder=embedder)
    try:
        assert dst.import_(path) == len(FACTS)
        assert _results(dst, "lena") == before
        records_after = {r.memory_id: r.to_dict() for r in dst.list_memories(user_id="lena")}
        assert records_after == records_before
        assert dst.list_memories(user_id="other") == []  # only that user's memory was exported
        assert [t.user for t in dst.context(user_id="lena", session_id="s1")] == ["is it going to rain?"]
        with pytest.raises(ImportFormatError):
            dst.import_(path)  # ids already present: refused whole
        assert len(dst.list_memories(user_id="lena")) == len(FACTS)
        assert dst.import_(path, on_conflict="skip") == 0
    finally:
        dst.close()


def test_import_without_vectors_recomputes_them(tmp_path, embedder) -> None:
    with Memory(settings=Settings(path=str(tmp_path / "a")), embedder=embedder) as src:
        rec = src.save_memory(FACTS[0], user_id="lena")
        buf = io.StringIO()
        src.export(buf, include_embeddings=False)
    with Memory(settings=Settings(path=str(tmp_path / "b")), embedder=embedder) as dst:
        dst.import_(io.StringIO(buf.getvalue()))
        got = dst.get_memory(rec.memory_id, user_id="lena")
        assert got.embedding == pytest.approx(rec.embedding, abs=1e-6)
        assert dst.search_memory("what do I teach?", user_id="lena")[0].memory_id == rec.memory_id


@pytest.mark.parametrize(
    "body",
    [
        "",
        "not json\n",
        '{"format": "something-else", "version": 1}\n',
        '{"format": "portamem-export", "version": 99}\n',
    ],
)
def test_bad_export_files_are_refused(memory: Memory, body: str) -> None:
    with pytest.raises(ImportFormatError):
        memory.import_(io.StringIO(body))


def test_one_bad_line_rolls_back_the_whole_import(memory: Memory, tmp_path) -> None:
    memory.save_memory(FACTS[1], user_id="lena")
    buf = io.StringIO()
    memory.export(buf)
    good = buf.getvalue().splitlines()
    record = json.loads(good[1])["record"]
    record["memory_id"] = "f" * 32
    bad = dict(record, memory_id="e" * 32, content="")  # empty content is invalid
    text = "\n".join([good[0], json.dumps({"record": record}), json.dumps({"record": bad})]) + "\n"
    with Memory(settings=Settings(path=str(tmp_path / "c")), embedder=memory.embedder) as dst:
        with pytest.raises(ImportFormatError, match="line 3"):
            dst.import_(io.StringIO(text))
        assert dst.list_memories(user_id="lena") == []
