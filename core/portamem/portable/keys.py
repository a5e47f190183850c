"""Keyed memories: a memory a caller names by (namespace, key), like an entry of a key-value store.

A framework's store (LangGraph's ``BaseStore``, a tool that updates "the user's diet") must read back
what it wrote under its key. A write with a key is therefore an atomic upsert of that key (one
row per key, enforced by a unique index and done in the writing transaction, never read-then-write),
moves the memory's ``updated_at`` and keeps its id and ``created_at``; dedupe and the trust review,
which merge or hold back memories by similarity, never touch a keyed memory.

A namespace is a path of labels, written as a tuple or as one string with the labels joined by
``"."`` (so a label has no ``"."``); ``()`` or ``""`` is the root. Listing by a namespace prefix
matches whole labels: ``("prefs",)`` lists ``prefs`` and ``prefs.ui``, not ``prefsx``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..components import Components
from ..errors import NotFoundError
from ..records import MemoryRecord, Status
from ..write.validation import (
    MAX_ROWS,
    SEPARATOR,
    check_filters,
    check_id,
    check_int,
    check_key,
    check_tenant,
    join_namespace,
)

__all__ = ["SEPARATOR", "TOOL_NAMESPACE", "Namespace", "join_namespace", "split_namespace", "check_key",
           "find_keyed", "get_keyed", "list_keyed"]

#: where the adapters' memory tools keep the facts a model names by key: LangMem's ("memories", user)
TOOL_NAMESPACE = ("memories",)
Namespace = str | Sequence[str]


def split_namespace(stored: str) -> tuple[str, ...]:
    """The labels of a stored namespace."""
    return tuple(stored.split(SEPARATOR)) if stored else ()


def find_keyed(parts: Components, key: Any, *, user_id: Any, key_namespace: Any,
               tenant_id: Any) -> MemoryRecord | None:
    """The row under ``(key_namespace, key)`` of any status, or None; the arguments validated first."""
    user_id = check_id(parts.settings, "user_id", user_id)
    tenant_id = check_tenant(parts.settings, tenant_id, parts.tenant_id)
    return parts.store.get_by_key(tenant_id, user_id, join_namespace(key_namespace),
                                  check_key(key, max_chars=parts.settings.max_id_chars))


def get_keyed(parts: Components, key: Any, *, user_id: Any, key_namespace: Any, tenant_id: Any) -> MemoryRecord:
    """The memory stored under ``(key_namespace, key)`` (any status but deleted), or ``NotFoundError``."""
    record = find_keyed(parts, key, user_id=user_id, key_namespace=key_namespace, tenant_id=tenant_id)
    if record is None or record.status is Status.DELETED:
        raise NotFoundError(f"no memory under key {key!r} in namespace {key_namespace!r} for user {user_id!r}")
    return record


def list_keyed(parts: Components, *, user_id: Any, key_namespace: Any, filters: Any, limit: Any,
               offset: Any, tenant_id: Any) -> list[MemoryRecord]:
    """One user's keyed memories in ``key_namespace`` or below it, in write order (active unless ``filters``)."""
    user_id = check_id(parts.settings, "user_id", user_id)
    tenant_id = check_tenant(parts.settings, tenant_id, parts.tenant_id)
    prefix = join_namespace(key_namespace)
    f = check_filters(parts.settings, filters)
    limit = check_int("limit", limit, 0, MAX_ROWS, optional=True)
    return parts.store.list_keyed(tenant_id, user_id, prefix, f, limit=limit,
                                  offset=check_int("offset", offset, 0, MAX_ROWS))
