"""PII never reaches the store by a side path: metadata keys, turn-metadata keys, ids, the retrieval log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from portamem import Memory, ValidationError
from portamem_plugins.redact import luhn_valid

PHONE = "13812345678"
CARD = "4539148803436467"


def _stored_text(mem: Memory) -> str:
    """Every table of the record store as text (the raw bytes a reader of the file would see)."""
    mem.retrieval_log.flush()
    db = Path(mem.settings.path) / "records.sqlite3"
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    finally:
        conn.close()


def test_metadata_keys_are_redacted_like_values(memory: Memory) -> None:
    rec = memory.save_memory(
        "Contact details for the plumber.", user_id="u",
        metadata={f"call {PHONE}": "evenings", "cards": {CARD: "visa"}, "call 13912345678": "mornings"},
    )
    assert PHONE not in repr(rec.metadata) and CARD not in repr(rec.metadata)
    assert {"evenings", "mornings"} <= {v for v in rec.metadata.values() if isinstance(v, str)}  # both kept
    assert rec.metadata["cards"] == {"[BANK_CARD]": "visa"}
    assert "phone" in rec.metadata["redactions"] and "bank_card" in rec.metadata["redactions"]
    assert PHONE not in _stored_text(memory) and CARD not in _stored_text(memory)


def test_turn_metadata_keys_are_redacted(memory: Memory) -> None:
    memory.add_turn("hi", "hello", user_id="u", session_id="s1", metadata={PHONE: "caller", "card": CARD})
    turn = memory.context(user_id="u", session_id="s1")[0]
    assert PHONE not in repr(turn.metadata) and CARD not in repr(turn.metadata)
    assert PHONE not in _stored_text(memory)


@pytest.mark.parametrize("session_id", [PHONE, f"chat-{PHONE}", "alice@example.com"])
def test_a_session_id_holding_pii_is_refused(memory: Memory, session_id: str) -> None:
    with pytest.raises(ValidationError, match="personal data"):
        memory.save_memory("I like tea.", user_id="u", session_id=session_id)
    with pytest.raises(ValidationError, match="personal data"):
        memory.add_turn("hi", "hello", user_id="u", session_id=session_id)
    with pytest.raises(ValidationError, match="personal data"):
        memory.save_memory("I like tea.", user_id="u", agent_id=session_id)
    assert memory.list_memories(user_id="u") == [] and memory.context(user_id="u", session_id=session_id) == []
    assert PHONE not in _stored_text(memory)


def test_query_is_redacted_before_it_is_cut_for_the_log(memory: Memory) -> None:
    rec = memory.save_memory("The garden hose is in the shed.", user_id="u")
    # the phone number straddles character 500, where the logged query is cut
    query = "garden hose " + "x" * (500 - len("garden hose ") - 5) + " " + PHONE
    hits = memory.search_memory(query, user_id="u")
    assert [h.memory_id for h in hits] == [rec.memory_id]
    memory.retrieval_log.flush()
    logged = memory.store.retrievals(memory.tenant_id, rec.memory_id)[0]["query"]
    assert len(logged) <= 500 and "1381" not in logged and PHONE[:4] not in logged


def test_a_session_id_of_bare_digits_that_passes_luhn_is_a_timestamp_not_a_card(memory: Memory) -> None:
    # a millisecond timestamp; its digits pass the card checksum, as one such time in ten does
    stamp = next(str(t) for t in range(1701234567890, 1701234567990) if luhn_valid(str(t)))
    memory.add_turn("hi", "hello", user_id="u", session_id=stamp)
    assert memory.context(user_id="u", session_id=stamp)[0].user == "hi"
    with pytest.raises(ValidationError):  # with separators it reads as a card number and is refused
        memory.add_turn("hi", "hello", user_id="u", session_id=f"{stamp[:4]} {stamp[4:8]} {stamp[8:]}")


def test_a_lower_case_iban_reaches_no_table(memory: Memory) -> None:
    """Content, a metadata value and a turn (the window and the formation queue): no table holds the
    number, neither the keyword postings nor the entity table."""
    iban = "de89370400440532013000"
    memory.save_memory(f"My IBAN is {iban}, pay the rent there.", user_id="u",
                       metadata={"bank": iban, "spaced": "de89 3704 0044 0532 0130 00"})
    memory.add_turn(f"Send it to {iban} please", "Will do.", user_id="u", session_id="s")
    memory.flush()
    stored = _stored_text(memory).lower()
    assert "370400440532013000" not in stored and "3704 0044 0532" not in stored
