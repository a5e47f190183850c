"""Preload over ``RemoteMemory``: the same rules on the client, the same one extra search on the server."""

from __future__ import annotations

from portamem import RemoteMemory
from portamem.read.preload import PRELOAD
from portamem.recall import format_memories, recall


def test_a_task_opened_over_the_server_gets_its_needs(remote: RemoteMemory, user: str) -> None:
    for text in ("I live in Leeds.", "I always take an aisle seat on flights.", "My Avios number is 4417-2208.",
                 "I love jazz.", "My dentist is Dr Shah."):
        remote.save_memory(text, user_id=user)
    remote.flush()
    remote.settings = remote.settings.replace(preload=True)  # off by default
    hits = recall(remote, "Can you help me plan my business trip to Madrid next week?", user_id=user, session_id="trip")
    preloaded = {h.content for h in hits if PRELOAD in h.found_by}
    assert {"I live in Leeds.", "I always take an aisle seat on flights."} <= {h.content for h in hits}
    assert preloaded and not preloaded & {"I love jazz.", "My dentist is Dr Shah."}
    assert "preloaded for the task" in format_memories(hits)
    later = recall(remote, "Which hotels are near the Prado?", user_id=user, session_id="trip")
    assert preloaded <= {h.content for h in later}
