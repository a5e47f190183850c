"""A key bound to agents acts only within its agents' scope (``portamem.write.scope``): by id or by key,
it never forgets, rewrites, confirms, reinforces or moves the shared layer's memories or another
agent's, and it writes no key the shared layer holds."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from portamem import RemoteMemory
from portamem.errors import NotFoundError, PermissionDeniedError
from portamem_conformance.remote import ServerProcess


def test_an_agent_key_acts_on_its_agents_memories_only(server: ServerProcess, connect: Callable[..., RemoteMemory],
                                                       user: str) -> None:
    admin = connect(server.key("agent-scope"))
    sales = connect(server.key("agent-scope", agents=["sales"]))
    shared = admin.save_memory("The shared budget is 1200 euros.", user_id=user, wait=True)
    other = admin.save_memory("Support's note: call back on Monday.", user_id=user, agent_id="support", wait=True)
    keyed = admin.save_memory("The budget is 1200 euros.", user_id=user, key="budget", wait=True)
    own = sales.save_memory("Sales' note: send the quote.", user_id=user, wait=True)
    for target in (shared, other):
        for action in (lambda: sales.forget_memory([target.memory_id], user_id=user),
                       lambda: sales.update_memory(target.memory_id, user_id=user, content="changed"),
                       lambda: sales.refresh_memory(target.memory_id, 0.2, user_id=user),
                       lambda: sales.set_tier([target.memory_id], "warm", user_id=user)):
            with pytest.raises(NotFoundError):
                action()
        kept = admin.get_memory(target.memory_id, user_id=user)
        assert (kept.status.value, kept.content, kept.tier.value) == ("active", target.content, "hot")
    with pytest.raises(NotFoundError):
        sales.forget_by_key("budget", user_id=user)
    with pytest.raises(PermissionDeniedError, match="shared layer"):
        sales.save_memory("The budget is 2500 euros.", user_id=user, key="budget")
    assert admin.get_by_key("budget", user_id=user).content == keyed.content
    # its own memories stay its to change
    assert sales.update_memory(own.memory_id, user_id=user, content="Sales' note: quote sent.").content \
        == "Sales' note: quote sent."
    assert sales.forget_memory([own.memory_id], user_id=user) == [own.memory_id]
