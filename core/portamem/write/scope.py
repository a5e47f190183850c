"""The scope rule: what a write may act on, and what a memory derived from others inherits.

A memory belongs to a tenant, a user and an agent scope: an agent's private memories
(``agent_id="sales"``) or the shared layer (``agent_id`` None) every agent of the user reads beside its
own. Maintenance derives things from memories (an abstract memory of a habit, an episode or summary
of turns, a supersession or outdating link, a merged duplicate, a preloaded line), and each of them
could carry a memory where its sources could not reach, or make it look more trusted or lasting
than they are. Two rules close that, and every derivation goes through them:

- **A write acts only within its own scope** (``acts_on``): it may supersede, outdate or confirm
  only memories of its own tenant and user, and

  * a private write (``agent_id="sales"``) only that agent's own private memories: never the shared
    layer (``support`` would lose the shared budget to a value it cannot see) nor another agent's;
  * a shared write (no agent) the shared layer and any agent's private memories of that user: the
    caller that writes without an agent speaks for the user to every agent and reads every agent's
    memories, and an agent reads the shared layer beside its own, so a stale private value would
    otherwise outrank the user's newer word there.

  Merging one memory into another (a duplicate, a repeated statement) takes the merged row out of
  its own scope's view, so it needs the **same** scope on both sides (``may_merge``): a shared
  repeat retired into ``sales``'s private copy would vanish for ``support``, and a private repeat
  would raise the shared copy's trust.

- **What is derived inherits the limits of what it was derived from** (``derived``): the lowest
  trust (and that source), the narrowest scope (the one private agent among its sources, else the
  shared layer; the one session they share, else none) and the strictest retention (the shortest
  half-life). Sources from two users, two tenants or two agents' private memories derive nothing
  together (``ScopeError``): there is no scope both may reach.

May import: the data model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ValidationError
from ..records import DEFAULT_TRUST, TRUST_RANK, MemoryRecord, Source, Trust

__all__ = ["ScopeError", "Derived", "acts_on", "may_merge", "same_scope", "narrowest_agent", "derived",
           "within"]


class ScopeError(ValidationError):
    """Memories of different users, tenants or private agents were to be combined into one derived record."""


def same_scope(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Same tenant, user and agent scope (the shared layer is its own scope)."""
    return (a.tenant_id, a.user_id, a.agent_id) == (b.tenant_id, b.user_id, b.agent_id)


def acts_on(writer: MemoryRecord, target: MemoryRecord) -> bool:
    """Whether ``writer``'s arrival may change ``target`` (supersede it, outdate it in part, confirm or
    re-trust it): same tenant and user, and ``target`` in the writer's agent scope (the module docstring:
    a private write reaches only its agent's private memories, a shared write the shared layer and every
    agent's private memories of the user)."""
    if (writer.tenant_id, writer.user_id) != (target.tenant_id, target.user_id):
        return False
    return writer.agent_id is None or writer.agent_id == target.agent_id


def may_merge(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Whether one of two memories may be merged into the other (dedupe, a repeated statement): only in
    one scope, so the merged row stays visible wherever it was and no scope re-trusts another's row."""
    return same_scope(a, b)


def narrowest_agent(agent_ids: Iterable[str | None]) -> str | None:
    """The one private agent among ``agent_ids``, else None (the shared layer). Raises ``ScopeError``
    when two agents' private memories are named: nothing derived may reach both."""
    private = sorted({a for a in agent_ids if a is not None})
    if len(private) > 1:
        raise ScopeError(f"cannot derive one memory from the private memories of agents {private}: derive "
                         "within each agent's scope (its private memories and the shared layer)")
    return private[0] if private else None


@dataclass(frozen=True)
class Derived:
    """The limits a derived memory inherits from its sources (``derived``)."""

    tenant_id: str
    user_id: str
    trust: Trust
    #: the source of the least trusted of them (a habit of web snippets is web, not system)
    source: Source
    agent_id: str | None
    session_id: str | None
    half_life_days: float


def _least_trusted(record: MemoryRecord) -> tuple[int, int]:
    return TRUST_RANK[record.trust], TRUST_RANK[DEFAULT_TRUST[record.source]]


def derived(sources: Sequence[MemoryRecord]) -> Derived:
    """The trust, source, scope and retention a memory derived from ``sources`` carries: the lowest
    trust and its source, the one private agent among them (else shared), the session they share
    (else none), the shortest half-life. Raises ``ScopeError`` for no sources, or sources of several
    tenants, users or private agents."""
    if not sources:
        raise ScopeError("a derived memory needs at least one source to inherit its trust and scope from")
    owners = {(r.tenant_id, r.user_id) for r in sources}
    if len(owners) > 1:
        raise ScopeError(f"cannot derive one memory from several tenants' or users' memories: {sorted(owners)}")
    tenant_id, user_id = owners.pop()
    weakest = min(sources, key=_least_trusted)
    sessions = {r.session_id for r in sources}
    return Derived(tenant_id=tenant_id, user_id=user_id, trust=weakest.trust, source=weakest.source,
                   agent_id=narrowest_agent(r.agent_id for r in sources),
                   session_id=sessions.pop() if len(sessions) == 1 else None,
                   half_life_days=min(r.half_life_days for r in sources))


def within(record: MemoryRecord, sources: Sequence[MemoryRecord]) -> list[str]:
    """What ``record`` (derived from ``sources``) claims beyond them, as phrases; empty when it keeps
    their limits: its trust at most the lowest, its scope inside the narrowest (tenant, user, the
    private agent among them, their shared session), its half-life at most the shortest."""
    limits = derived(sources)
    out = []
    if (record.tenant_id, record.user_id) != (limits.tenant_id, limits.user_id):
        out.append(f"owner {(record.tenant_id, record.user_id)} is not its sources' {(limits.tenant_id, limits.user_id)}")
    if TRUST_RANK[record.trust] > TRUST_RANK[limits.trust]:
        out.append(f"trust {record.trust.value} above its sources' lowest ({limits.trust.value})")
    if limits.agent_id is not None and record.agent_id != limits.agent_id:
        out.append(f"agent scope {record.agent_id!r} wider than or beside its source's {limits.agent_id!r}")
    if limits.session_id is not None and record.session_id not in (limits.session_id, None):
        out.append(f"session {record.session_id!r} is not its sources' {limits.session_id!r}")
    if record.half_life_days > limits.half_life_days + 1e-9:
        out.append(f"half-life {record.half_life_days} longer than its sources' shortest ({limits.half_life_days})")
    return out
