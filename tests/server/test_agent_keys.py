"""A key bound to agents acts only within its agents' scope (``portamem.write.scope``): by id or by key,
it never forgets, rewrites, confirms, reinforces or moves the shared layer's memories or another
agent's, and it writes no key the shared layer holds. It reads one of its agents' private memories and
the shared layer, over the API and in the inspector, never another agent's."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable

import httpx
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


def test_an_agent_key_reads_its_agents_memories_and_the_shared_layer_only(
        server: ServerProcess, connect: Callable[..., RemoteMemory], user: str) -> None:
    """Search, recall, list, get, history, explain, keyed reads, audit and export of a key bound to agents:
    its agent's private memories and the shared layer, never another agent's; naming another is 403."""
    from portamem.recall import recall

    admin = connect(server.key("agent-reads"))
    sales = connect(server.key("agent-reads", agents=["sales"]))
    both = connect(server.key("agent-reads", agents=["sales", "marketing"]))
    shared = admin.save_memory("The walnut desk order ships on Monday.", user_id=user, key="desk", wait=True)
    theirs = admin.save_memory("The walnut desk order ships late: the supplier is short of walnut.",
                               user_id=user, agent_id="support", key="supplier", wait=True)
    doubted = admin.save_memory("A forum says the walnut desk order was cancelled.", user_id=user,
                                agent_id="support", source="web", wait=True)
    own = sales.save_memory("Offer the walnut desk order customer a discount.", user_id=user, wait=True)
    mine = {shared.memory_id, own.memory_id}
    out = io.StringIO()
    admin.export(out, user_id=user)
    backup = out.getvalue()
    everyone = mine | {theirs.memory_id, doubted.memory_id}
    assert {r.memory_id for r in admin.list_memories(user_id=user, filters={"statuses": ["active", "pending"]})} \
        == everyone

    def ids(records: list) -> set[str]:
        return {getattr(r, "memory_id") for r in records}

    for mem in (sales, both):
        named = {} if mem is sales else {"agent_id": "sales"}
        assert ids(mem.search_memory("walnut desk order", user_id=user, filters=named or None)) == mine
        assert ids(mem.list_memories(user_id=user, filters={"statuses": ["active", "pending"], **named})) == mine
        assert ids(mem.list_keyed(user_id=user, filters=named or None)) == {shared.memory_id}
        assert ids(recall(mem, "walnut desk order", user_id=user, agent_id=named.get("agent_id"))) <= mine
        for hidden in (theirs, doubted):
            for read in (mem.get_memory, mem.history, mem.explain):
                with pytest.raises(NotFoundError):
                    read(hidden.memory_id, user_id=user)
        assert mem.get_memory(shared.memory_id, user_id=user).content == shared.content
        assert mem.explain(shared.memory_id, user_id=user).record.memory_id == shared.memory_id
        assert mem.history(own.memory_id, user_id=user)
        assert mem.get_by_key("desk", user_id=user).memory_id == shared.memory_id
        with pytest.raises(NotFoundError):
            mem.get_by_key("supplier", user_id=user)
        assert doubted.memory_id not in {f.record.memory_id for f in mem.audit_scan(user_id=user)}
        for other in ({"agent_id": "support"}, {"agent_id": "support", "statuses": ["active", "pending"]}):
            with pytest.raises(PermissionDeniedError, match="may act as agents"):
                mem.search_memory("walnut desk order", user_id=user, filters=other)
            with pytest.raises(PermissionDeniedError, match="may act as agents"):
                mem.list_memories(user_id=user, filters=other)
            with pytest.raises(PermissionDeniedError, match="may act as agents"):
                mem.list_keyed(user_id=user, filters=other)
        with pytest.raises(PermissionDeniedError, match="bound to agents"):
            mem.export(io.StringIO(), user_id=user)
        with pytest.raises(PermissionDeniedError, match="bound to agents"):
            mem.import_(io.StringIO(backup))
    # a key of several agents says which one it reads as
    with pytest.raises(PermissionDeniedError, match="name one"):
        both.search_memory("walnut desk order", user_id=user)
    assert doubted.memory_id in {f.record.memory_id for f in admin.audit_scan(user_id=user)}


def test_the_inspector_shows_an_agent_key_its_agents_memories_only(server: ServerProcess, user: str,
                                                                  connect: Callable[..., RemoteMemory]) -> None:
    admin = connect(server.key("agent-ui"))
    shared = admin.save_memory("The kiln fires on Fridays.", user_id=user, wait=True)
    theirs = admin.save_memory("Support's note: the kiln door sticks.", user_id=user, agent_id="support",
                               source="web", wait=True)
    with httpx.Client(base_url=server.url, timeout=60) as ui:
        assert ui.post("/ui/login", data={"key": server.key("agent-ui", agents=["sales"])}).status_code == 303
        for page in (f"/ui/memories?user={user}", f"/ui/search?user={user}&q=kiln", f"/ui/review?user={user}"):
            html = ui.get(page).text
            assert theirs.memory_id not in html and "door sticks" not in html, page
        assert shared.content in ui.get(f"/ui/memories?user={user}").text
        assert ui.get(f"/ui/memories?user={user}&agent=support").status_code == 403
        assert ui.get(f"/ui/memory?user={user}&id={theirs.memory_id}").status_code == 404
        assert ui.get(f"/ui/memory?user={user}&id={shared.memory_id}").status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', ui.get(f"/ui/review?user={user}").text)
        assert csrf is not None
        acted = ui.post("/ui/act", data={"csrf": csrf.group(1), "user": user, "id": theirs.memory_id,
                                         "action": "reject"})
        assert acted.status_code == 404
    assert admin.get_memory(theirs.memory_id, user_id=user).status.value == theirs.status.value


def test_an_import_over_http_never_replaces_another_agents_record(
        server: ServerProcess, connect: Callable[..., RemoteMemory], user: str) -> None:
    from portamem.portable.transfer import export_lines

    admin = connect(server.key("agent-import"))
    theirs = admin.save_memory("Support's callback day: Monday.", user_id=user, agent_id="support", key="callback",
                               wait=True)
    out = io.StringIO()
    admin.export(out, user_id=user)
    header, line = (json.loads(x) for x in out.getvalue().splitlines()[:2])

    def as_sales(**changes: object) -> io.StringIO:
        record = {**line["record"], "agent_id": "sales", "content": "Sales' callback day: Friday.", "embedding": None,
                  **changes}
        return io.StringIO("".join(export_lines(header, [record])))

    assert admin.import_(as_sales(key=None, key_namespace=""), on_conflict="replace") == 1  # the same id
    with pytest.raises(PermissionDeniedError, match="own scope only"):
        admin.import_(as_sales(memory_id="c" * 32), on_conflict="replace")  # the same key
    kept = admin.get_by_key("callback", user_id=user)
    assert (kept.memory_id, kept.agent_id, kept.content) == (theirs.memory_id, "support", theirs.content)
    [sales] = [r for r in admin.list_memories(user_id=user) if r.agent_id == "sales"]
    assert sales.memory_id != theirs.memory_id and sales.metadata["imported_id"] == theirs.memory_id
