"""``PortamemStore``: LangGraph's ``BaseStore`` (long-term memory across threads) over portamem.

Namespace mapping: the label at ``user_label`` (default 0, as in ``(user_id, "memories")``) is the
portamem user; the tenant is the store's. The other labels, joined with "." (which LangGraph forbids
inside a label), are the record's ``agent_id`` scope. An item's namespace, key and value ride in the
record's ``metadata["langgraph"]``; its text (what is embedded and searched) is the value's
``content``, ``text`` or ``memory`` string, the fields named by ``index``, or else the value as JSON.
Memories written by other adapters appear under ``(user_id, "memories")``, keyed by memory id, with
value ``{"content": text}``.

This is portamem memory through LangGraph's interface, not a plain key-value store: a put whose text
nearly duplicates another memory of the user is merged into it by portamem's dedupe, a put over a
key rewrites that record in place (``Memory.update_memory``: atomic, the old text kept in the audit
log), and a delete forgets. ``get`` and ``put`` look a key up among the records of its namespace.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Mapping
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
)

# the in-memory store's own matchers: filters and namespace conditions mean exactly what they mean there
from langgraph.store.memory import _compare_values, _does_match  # noqa: E402

from portamem import Memory, MemoryRecord, Status  # noqa: E402
from portamem.errors import NotFoundError, ValidationError  # noqa: E402
from portamem.records import from_iso, to_iso, utcnow  # noqa: E402

__all__ = ["PortamemStore", "LANGGRAPH_KEY", "TEXT_FIELDS"]

#: key of a record's metadata that holds the LangGraph namespace, key and value
LANGGRAPH_KEY = "langgraph"
#: value fields that hold the memory text, in order of preference
TEXT_FIELDS = ("content", "text", "memory")
#: how far a filtered search widens before it settles for fewer hits
_MAX_SEARCH_K = 1000
_MEMORY_ID = re.compile(r"^[0-9a-f]{32}$")


class PortamemStore(BaseStore):
    """``create_agent(..., store=PortamemStore(memory))``: tools and nodes reach it as ``runtime.store``."""

    supports_ttl = False

    def __init__(
        self,
        memory: Memory,
        *,
        user_label: int = 0,
        tenant_id: str | None = None,
        default_namespace: tuple[str, ...] = ("memories",),
    ) -> None:
        if isinstance(user_label, bool) or not isinstance(user_label, int) or user_label < 0:
            raise ValidationError(f"user_label must be a non-negative integer, got {user_label!r}")
        self.memory = memory
        self.user_label = user_label
        self.tenant_id = tenant_id
        self.default_namespace = tuple(default_namespace)

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
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
                f"by user, so put the user id there (PortamemStore(user_label=...) moves it)"
            )
        return namespace[i], namespace[:i] + namespace[i + 1:]

    def _join(self, user_id: str, rest: tuple[str, ...]) -> tuple[str, ...]:
        i = self.user_label
        return rest[:i] + (user_id,) + rest[i:]

    def _locate(self, record: MemoryRecord) -> tuple[tuple[str, ...], str, dict[str, Any]]:
        """Namespace, key and value of a record, whether this store wrote it or not."""
        lg = record.metadata.get(LANGGRAPH_KEY)
        if isinstance(lg, Mapping):
            return tuple(lg["namespace"]), str(lg["key"]), dict(lg["value"])
        return self._join(record.user_id, self.default_namespace), record.memory_id, {"content": record.content}

    def _item(self, record: MemoryRecord, cls: type[Item] = Item, **extra: Any) -> Any:
        namespace, key, value = self._locate(record)
        lg = record.metadata.get(LANGGRAPH_KEY)
        created = from_iso(lg.get("created_at")) if isinstance(lg, Mapping) else None
        return cls(namespace=namespace, key=key, value=value, created_at=created or record.created_at,
                   updated_at=record.created_at, **extra)

    def _find(self, namespace: tuple[str, ...], key: str) -> MemoryRecord | None:
        """The live record at (namespace, key), the newest if a crash left two."""
        user_id, rest = self._split(namespace)
        if rest == self.default_namespace and _MEMORY_ID.match(key):
            try:
                record = self.memory.get_memory(key, user_id=user_id, tenant_id=self.tenant_id)
            except NotFoundError:
                record = None
            if record is not None and record.status is Status.ACTIVE and LANGGRAPH_KEY not in record.metadata:
                return record
        scope = {"agent_id": ".".join(rest)} if rest else None
        found = [
            r for r in self.memory.list_memories(user_id=user_id, filters=scope, tenant_id=self.tenant_id)
            if self._locate(r)[:2] == (namespace, key)
        ]
        return max(found, key=lambda r: r.created_at, default=None)

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        record = self._find(tuple(op.namespace), op.key)
        return None if record is None else self._item(record)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        user_id, rest = self._split(namespace)
        if op.ttl is not None:
            raise ValidationError("PortamemStore does not expire items (supports_ttl is False); memories decay instead")
        old = self._find(namespace, op.key)
        if op.value is None:
            if old is not None:
                self.memory.forget_memory([old.memory_id], user_id=user_id, tenant_id=self.tenant_id)
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError(f"a store value must be a mapping, got {type(op.value).__name__}")
        created = self._item(old).created_at if old is not None else utcnow()
        meta = {LANGGRAPH_KEY: {"namespace": list(namespace), "key": op.key, "value": dict(op.value),
                                "created_at": to_iso(created)}}
        if old is not None:  # one atomic rewrite: the key keeps its record, a crash keeps one value
            self.memory.update_memory(old.memory_id, user_id=user_id, content=_text(op.value, op.index),
                                      metadata=meta, tenant_id=self.tenant_id)
            return
        self.memory.save_memory(
            _text(op.value, op.index), user_id=user_id, agent_id=".".join(rest) or None,
            metadata=meta, tenant_id=self.tenant_id,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        user_id, _ = self._split(prefix)
        want = op.offset + op.limit

        def keep(record: MemoryRecord) -> bool:
            namespace, _, value = self._locate(record)
            return namespace[: len(prefix)] == prefix and all(
                _compare_values(value.get(k), v) for k, v in (op.filter or {}).items()
            )

        if not op.query:
            records = [r for r in self.memory.list_memories(user_id=user_id, tenant_id=self.tenant_id) if keep(r)]
            return [self._item(r, SearchItem) for r in records[op.offset:want]]
        k = max(want, 1)
        while True:
            hits = self.memory.search_memory(op.query, user_id=user_id, top_k=k, tenant_id=self.tenant_id)
            kept = [h for h in hits if keep(h.record)]
            if len(kept) >= want or len(hits) < k or k >= _MAX_SEARCH_K:
                break
            k = min(k * 4, _MAX_SEARCH_K)
        return [self._item(h.record, SearchItem, score=h.score) for h in kept[op.offset:want]]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        user_id = next(
            (c.path[self.user_label] for c in op.match_conditions or ()
             if c.match_type == "prefix" and len(c.path) > self.user_label and c.path[self.user_label] != "*"),
            None,
        )
        if user_id is None:
            raise ValidationError(
                "list_namespaces needs a prefix naming the user (e.g. prefix=(user_id,)): "
                "portamem never lists across users"
            )
        namespaces = {self._locate(r)[0] for r in self.memory.list_memories(user_id=user_id, tenant_id=self.tenant_id)}
        matched = [ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            matched = list({ns[: op.max_depth] for ns in matched})
        return sorted(matched)[op.offset: op.offset + op.limit]


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

