"""``PortamemStore``: LangGraph's ``BaseStore`` (long-term memory across threads) over portamem.

Namespace mapping: the label at ``user_label`` is the portamem user; the default, 1, is LangMem's
documented layout ``("memories", "{user_id}")``. Pass ``user_label=0`` for ``(user_id, ...)``
layouts. The other labels are the key's namespace and ``key`` is the key: every item is a keyed
portamem memory (``portamem.portable.keys``), so a put is one atomic upsert of its key (parallel puts leave
one item), moves ``updated_at`` and is never merged into another memory by dedupe. The item's
value rides in the record's ``metadata["langgraph"]``; its text (what is embedded and searched) is
the value's ``content``, ``text`` or ``memory`` string, the fields named by ``index``, or else the
value as JSON. Unkeyed memories written by other adapters appear under ``("memories", user_id)``
(with the user at ``user_label``), keyed by memory id, with value ``{"content": text}``.

A search with a query ranks the user's memories once, ``max(search_depth, offset + limit)`` deep,
and pages are slices of that one ranking: they never overlap and scores fall from page to page.
As in LangGraph's own stores every item under the prefix is ranked: those the query found no
evidence for follow the hits with score 0, and items put with ``index=False``, never scored, come
last with score ``None``. Without a query, items come in write order.

Scope: a default store is per user; ``list_namespaces`` and ``search`` need a prefix that names the
user. ``PortamemStore(memory, tenant_wide=True)`` is the explicit administrative mode (LangGraph
tooling that browses every namespace): there, prefixes that stop before the user label and
suffix-only listings span every user of the tenant.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._framework import require

require()

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

# the in-memory store's own matchers: filters and namespace conditions mean exactly what they mean there
from langgraph.store.memory import _compare_values, _does_match  # noqa: E402

from portamem import Memory, MemoryRecord, Status  # noqa: E402
from portamem.errors import NotFoundError, ValidationError  # noqa: E402
from portamem.filters import METADATA_OPERATORS, SearchFilters  # noqa: E402
from portamem.portable.keys import TOOL_NAMESPACE, split_namespace  # noqa: E402

__all__ = ["PortamemStore", "LANGGRAPH_KEY", "TEXT_FIELDS", "SEARCH_DEPTH"]

#: key of a record's metadata that holds the LangGraph value
LANGGRAPH_KEY = "langgraph"
#: value fields that hold the memory text, in order of preference
TEXT_FIELDS = ("content", "text", "memory")
#: how many of a user's memories one query search ranks (at least), pages being slices of it
SEARCH_DEPTH = 100
_MEMORY_ID = re.compile(r"^[0-9a-f]{32}$")
#: statuses an item can be read back in: a quarantined text is held for review, never handed out
_READABLE = (Status.ACTIVE, Status.PENDING)


class PortamemStore(BaseStore):
    """``create_agent(..., store=PortamemStore(memory))``: tools and nodes reach it as ``runtime.store``."""

    supports_ttl = False

    def __init__(
        self,
        memory: Memory,
        *,
        user_label: int = 1,
        tenant_id: str | None = None,
        default_namespace: tuple[str, ...] = TOOL_NAMESPACE,
        tenant_wide: bool = False,
        search_depth: int = SEARCH_DEPTH,
    ) -> None:
        for name, value, least in (("user_label", user_label, 0), ("search_depth", search_depth, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValidationError(f"{name} must be an integer >= {least}, got {value!r}")
        self.memory = memory
        self.user_label = user_label
        self.tenant_id = tenant_id
        #: where unkeyed memories of other adapters appear (the labels besides the user's)
        self.default_namespace = tuple(default_namespace)
        self.tenant_wide = bool(tenant_wide)
        self.search_depth = search_depth

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:  # ops passed straight to batch skip BaseStore's own check; refuse the batch whole
            validate_op_namespace(op)
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValidationError(f"unknown store operation {type(op).__name__}")

    # ------------------------------------------------------------------ namespace <-> scope
    def _split(self, namespace: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        """(user_id, the other labels) of a namespace or namespace prefix."""
        i = self.user_label
        if len(namespace) <= i:
            raise ValidationError(
                f"namespace {namespace!r} has no user label at position {i}: portamem scopes every memory "
                f"by user, so put the user id there (PortamemStore(user_label=...) moves it; "
                f"PortamemStore(tenant_wide=True) searches and lists across users)"
            )
        return namespace[i], namespace[:i] + namespace[i + 1:]

    def _join(self, user_id: str, rest: tuple[str, ...]) -> tuple[str, ...]:
        i = self.user_label
        return rest[:i] + (user_id,) + rest[i:]

    def _users(self, prefix: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...]]]:
        """(user, prefix of the other labels) for each user a prefix reaches."""
        if len(prefix) > self.user_label and prefix[self.user_label] != "*":
            yield self._split(prefix)
            return
        if not self.tenant_wide:
            raise ValidationError(
                f"prefix {prefix!r} names no user at position {self.user_label}: a per-user store never "
                "searches or lists across users (open PortamemStore(memory, tenant_wide=True) to administer them)"
            )
        for user_id in self.memory.user_ids(tenant_id=self.tenant_id):
            yield user_id, prefix[:self.user_label] + prefix[self.user_label + 1:]

    def _locate(self, record: MemoryRecord) -> tuple[tuple[str, ...], str]:
        if record.key is not None:
            return self._join(record.user_id, split_namespace(record.key_namespace or "")), record.key
        return self._join(record.user_id, self.default_namespace), record.memory_id

    def _item(self, record: MemoryRecord, cls: type[Item] = Item, **extra: Any) -> Any:
        namespace, key = self._locate(record)
        lg = record.metadata.get(LANGGRAPH_KEY)
        value = dict(lg["value"]) if record.key is not None and isinstance(lg, Mapping) else {"content": record.content}
        return cls(namespace=namespace, key=key, value=value, created_at=record.created_at,
                   updated_at=record.updated_at, **extra)

    def _foreign(self, user_id: str, rest: tuple[str, ...], key: str) -> MemoryRecord | None:
        """An unkeyed memory of another adapter shown at (default namespace, memory id)."""
        if rest != self.default_namespace or not _MEMORY_ID.match(key):
            return None
        try:
            record = self.memory.get_memory(key, user_id=user_id, tenant_id=self.tenant_id)
        except NotFoundError:
            return None
        return record if record.key is None and record.status is Status.ACTIVE else None

    def _find(self, namespace: tuple[str, ...], key: str) -> MemoryRecord | None:
        user_id, rest = self._split(namespace)
        try:
            record = self.memory.get_by_key(key, user_id=user_id, key_namespace=rest, tenant_id=self.tenant_id)
        except NotFoundError:
            return self._foreign(user_id, rest, key)
        return record if record.status in _READABLE else None

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        record = self._find(tuple(op.namespace), op.key)
        return None if record is None else self._item(record)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        user_id, rest = self._split(namespace)
        if op.ttl is not None:
            raise NotImplementedError("PortamemStore does not expire items (supports_ttl is False); memories decay")
        if op.value is None:
            try:
                self.memory.forget_by_key(op.key, user_id=user_id, key_namespace=rest, tenant_id=self.tenant_id)
            except NotFoundError:
                foreign = self._foreign(user_id, rest, op.key)
                if foreign is not None:
                    self.memory.forget_memory([foreign.memory_id], user_id=user_id, tenant_id=self.tenant_id)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError(f"a store value must be a mapping, got {type(op.value).__name__}")
        text = _text(op.value, op.index)
        foreign = self._foreign(user_id, rest, op.key)
        if foreign is not None:  # an edit of another adapter's memory rewrites it in place
            self.memory.update_memory(foreign.memory_id, user_id=user_id, content=text, tenant_id=self.tenant_id)
            return
        lg: dict[str, Any] = {"value": dict(op.value)}
        if op.index is False:
            lg["index"] = False
        self.memory.save_memory(text, user_id=user_id, key=op.key, key_namespace=rest,
                                metadata={LANGGRAPH_KEY: lg}, tenant_id=self.tenant_id)

    def _listed(self, user_id: str, rest: tuple[str, ...], filters: Mapping[str, Any] | None = None
                ) -> list[MemoryRecord]:
        """A user's items under a prefix of the other labels, in write order (those ``filters`` admit)."""
        shows_foreign = self.default_namespace[:len(rest)] == rest
        if not shows_foreign and "*" not in rest:
            return self.memory.list_keyed(user_id=user_id, key_namespace=rest, tenant_id=self.tenant_id,
                                          filters=filters)
        return [r for r in self.memory.list_memories(user_id=user_id, tenant_id=self.tenant_id, filters=filters)
                if _under(self._rest(r), rest)]

    def _rest(self, record: MemoryRecord) -> tuple[str, ...]:
        return split_namespace(record.key_namespace or "") if record.key is not None else self.default_namespace

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        want = op.offset + op.limit
        # the filter's conditions on the value are portamem metadata filters, applied before ranking;
        # what they cannot say (a list to equal) is checked on the items found
        filters, residual = _pushdown(op.filter)

        def keep(record: MemoryRecord) -> bool:  # as InMemoryStore checks an item: each key is literal
            value = self._item(record).value
            return all(_compare_values(value.get(k), v) for k, v in residual.items())

        if not op.query:
            records = [r for user_id, rest in self._users(prefix) for r in self._listed(user_id, rest, filters)
                       if keep(r)]
            return [self._item(r, SearchItem) for r in records[op.offset:want]]
        depth = max(self.search_depth, want)
        scopes = list(self._users(prefix))
        scored: list[tuple[float, MemoryRecord]] = []
        for user_id, rest in scopes:
            hits = self.memory.search_memory(op.query, user_id=user_id, top_k=depth, tenant_id=self.tenant_id,
                                             filters=filters)
            scored += [(h.score, h.record) for h in hits
                       if _under(self._rest(h.record), rest) and not _unindexed(h.record) and keep(h.record)]
        scored.sort(key=lambda sr: -sr[0])  # stable: one user's own order is kept among equal scores
        ranked = [self._item(r, SearchItem, score=sc) for sc, r in scored]
        if len(ranked) < want:
            # as in LangGraph's own stores every item is ranked: those the query found no evidence for
            # follow with score 0, then the index=False ones, unscored; the same list whatever the page
            found = {r.memory_id for _, r in scored}
            rest_of = [r for user_id, rest in scopes for r in self._listed(user_id, rest, filters)
                       if r.memory_id not in found and keep(r)]
            ranked += [self._item(r, SearchItem, score=0.0) for r in rest_of if not _unindexed(r)]
            ranked += [self._item(r, SearchItem, score=None) for r in rest_of if _unindexed(r)]
        return ranked[op.offset:want]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        prefix = next((tuple(c.path) for c in conditions if c.match_type == "prefix"), ())
        namespaces = {
            self._locate(r)[0]
            for user_id, rest in self._users(prefix)
            for r in self._listed(user_id, rest)
        }
        matched = {ns for ns in namespaces if all(_does_match(c, ns) for c in conditions)}
        if op.max_depth is not None:
            matched = {ns[: op.max_depth] for ns in matched}
        return sorted(matched)[op.offset: op.offset + op.limit]


def _pushdown(flt: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """A LangGraph ``filter`` as portamem ``filters`` on the value in the record's metadata, and the
    part of it that is checked on the items instead. Equality on a value key (dotted for a nested
    one, or a nested mapping matched field by field) is ``$eq``; operators map one to one (``$eq $ne
    $gt $gte $lt $lte``, and portamem's ``$in $nin $exists`` too). Comparisons are typed as
    portamem's are: ``True`` does not equal ``1``, and ``$gt`` compares numbers with numbers and
    strings with strings. A list to equal, or a key portamem cannot name, stays with the items'
    check (as LangGraph's own stores do it: after the search). A key is a literal key of the value, as
    in ``InMemoryStore`` (``"a.b"`` names a key with a dot in it, not ``b`` inside ``a``): one with a
    dot, which portamem's dotted paths would read as nested, is checked on the items too."""
    pushed: dict[str, Any] = {}
    residual: dict[str, Any] = {}
    for key, spec in (flt or {}).items():
        flat = None if "." in str(key) else _flat(str(key), spec)
        if flat is None:
            residual[key] = spec
            continue
        for path, cond in flat:
            pushed.setdefault(f"{LANGGRAPH_KEY}.value.{path}", {}).update(cond)
    if not pushed:
        return None, residual
    try:
        SearchFilters.coerce({"metadata": pushed})
    except ValidationError:  # a key portamem cannot name: the whole filter is checked on the items
        return None, dict(flt or {})
    return {"metadata": pushed}, residual


def _flat(path: str, spec: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """(dotted path, operators) for each condition of one filter entry; None when one cannot be said."""
    if isinstance(spec, Mapping):
        if spec and all(isinstance(k, str) and k.startswith("$") for k in spec):
            ok = all(op in METADATA_OPERATORS and not isinstance(v, (Mapping, list, tuple))
                     or op in ("$in", "$nin") and isinstance(v, (list, tuple)) for op, v in spec.items())
            return [(path, dict(spec))] if ok else None
        if not spec or any(not isinstance(k, str) or k.startswith("$") or "." in k for k in spec):
            return None
        out: list[tuple[str, dict[str, Any]]] = []
        for k, v in spec.items():
            sub = _flat(f"{path}.{k}", v)
            if sub is None:
                return None
            out += sub
        return out
    if spec is None or isinstance(spec, (str, bool, int, float)):
        return [(path, {"$eq": spec})]
    return None


def _under(labels: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return len(labels) >= len(prefix) and all(p in ("*", label) for p, label in zip(prefix, labels))


def _unindexed(record: MemoryRecord) -> bool:
    lg = record.metadata.get(LANGGRAPH_KEY)
    return record.key is not None and isinstance(lg, Mapping) and lg.get("index") is False


def _text(value: Mapping[str, Any], index: Any) -> str:
    """The text to embed: the ``index`` fields, else the first text field, else the value as JSON."""
    if isinstance(index, list) and index and index != ["$"]:
        parts = [_field(value, path) for path in index]
        return "\n".join(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in parts if p is not None)
    for name in TEXT_FIELDS:
        if isinstance(value.get(name), str):
            return value[name]
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _field(value: Mapping[str, Any], path: str) -> Any:
    current: Any = value
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current

