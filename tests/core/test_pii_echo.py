"""What a search prints for debugging ends up in logs: its query is shown redacted, as the retrieval log
keeps it, and no candidate line quotes the PII a memory held."""

from __future__ import annotations

import io

import pytest

from portamem import Memory, ValidationError


def test_a_debug_search_prints_its_query_redacted(memory: Memory) -> None:
    memory.save_memory("Email me at dana.smith@example.com", user_id="dana", wait=True)
    printed = io.StringIO()
    hits = memory.search_memory("is dana.smith@example.com my e-mail?", user_id="dana", debug=printed)
    out = printed.getvalue()
    assert hits and "query: 'is [EMAIL] my e-mail?'" in out and "dana.smith" not in out
    why = memory.explain(hits[0].memory_id, user_id="dana")
    assert [r.query for r in why.retrievals] == ["is [EMAIL] my e-mail?"]
    printed = io.StringIO()
    memory.search_memory("my passport no. X1234567, where do I renew it?", user_id="dana", debug=printed)
    assert "query: 'my passport no. [PASSPORT], where do I renew it?'" in printed.getvalue()


def test_a_key_holding_pii_is_refused_as_session_ids_are(memory: Memory) -> None:
    # a key is an id: it is stored, exported and answered by every read that lists the memory, and cannot
    # be redacted (two e-mail keys would become one memory)
    with pytest.raises(ValidationError, match="key holds personal data"):
        memory.save_memory("Dana's contact card.", user_id="dana", key="dana.smith@example.com")
    with pytest.raises(ValidationError, match="key_namespace holds personal data"):
        memory.save_memory("Dana's contact card.", user_id="dana", key="card", key_namespace=("contacts", "13812345678"))
    assert memory.list_memories(user_id="dana") == []
    kept = memory.save_memory("Dana's contact card.", user_id="dana", key="card-7", key_namespace=("contacts",))
    assert (kept.key_namespace, kept.key) == ("contacts", "card-7")


def test_pii_found_anywhere_in_a_record_is_redacted_wherever_it_is_quoted(memory: Memory) -> None:
    # the metadata says it is a passport number; the content and an entity quote it alone
    rec = memory.save_memory("Renewal form: X1234567, due in May.", user_id="dana", entities=["X1234567"],
                             metadata={"note": "passport no. X1234567"})
    stored = memory.get_memory(rec.memory_id, user_id="dana")
    assert "X1234567" not in repr(stored) and stored.content == "Renewal form: [PASSPORT], due in May."
    assert stored.metadata["redactions"] == ["passport"]


def test_a_query_naming_redacted_personal_data_finds_the_memory_that_held_it(memory: Memory) -> None:
    # memories hold an e-mail as a placeholder: the raw e-mail in a question is no unknown entity
    memory.save_memory("Email me at dana.smith@example.com", user_id="dana", wait=True)
    hits = memory.search_memory("email dana.smith@example.com", user_id="dana")
    assert [h.content for h in hits] == ["Email me at [EMAIL]"]
    # a name nobody mentioned still is one: its share of the question is taken off
    named = memory.search_memory("email Bartholomew Quince", user_id="dana")
    assert named and named[0].score < hits[0].score
