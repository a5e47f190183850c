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

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import NotFoundError, ValidationError
from .records import MemoryRecord, Status
from .validation import MAX_ROWS, check_filters, check_int, check_text

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["SEPARATOR", "TOOL_NAMESPACE", "Namespace", "join_namespace", "split_namespace", "check_key", "KeyedMemory"]

#: joins a namespace's labels in the stored form
SEPARATOR = "."
#: where the adapters' memory tools keep the facts a model names by key: LangMem's ("memories", user)
TOOL_NAMESPACE = ("memories",)
Namespace = str | Sequence[str]


def join_namespace(namespace: Any, *, max_chars: int = 1024) -> str:
    """The stored form of a namespace (labels joined by ``"."``), validated."""
    if isinstance(namespace, str):
        labels: Sequence[Any] = namespace.split(SEPARATOR) if namespace else ()
    elif isinstance(namespace, (list, tuple)):
        labels = namespace
    else:
        raise ValidationError(f"a key namespace must be a string or a tuple of strings, got {type(namespace).__name__}")
    for label in labels:
        if not isinstance(label, str):
            raise ValidationError(f"namespace labels must be strings, got {type(label).__name__}")
        if not label:
            raise ValidationError(f"namespace {namespace!r} has an empty label")
        if SEPARATOR in label:
            raise ValidationError(f"namespace label {label!r} must not contain {SEPARATOR!r}")
        check_text("a namespace label", label, allow_blank=True)
    joined = SEPARATOR.join(labels)
    if len(joined) > max_chars:
        raise ValidationError(f"key namespace is longer than {max_chars} characters")
    return joined


def split_namespace(stored: str) -> tuple[str, ...]:
    """The labels of a stored namespace."""
    return tuple(stored.split(SEPARATOR)) if stored else ()


def check_key(key: Any, *, max_chars: int) -> str:
    if isinstance(key, str) and not key:
        raise ValidationError("key must not be empty")
    return check_text("key", key, limit=max_chars, allow_blank=True)


class KeyedMemory:
    """The keyed half of ``Memory``'s API; writing with a key is ``save_memory(..., key=...)``."""

    def get_by_key(self: Memory, key: str, *, user_id: str, key_namespace: Namespace = (),
                   tenant_id: str | None = None) -> MemoryRecord:
        """The memory stored under ``(key_namespace, key)`` (any status but deleted), or ``NotFoundError``."""
        record = self._keyed(key, user_id=user_id, key_namespace=key_namespace, tenant_id=tenant_id)
        if record is None or record.status is Status.DELETED:
            raise NotFoundError(f"no memory under key {key!r} in namespace {key_namespace!r} for user {user_id!r}")
        return record

    def forget_by_key(self: Memory, key: str, *, user_id: str, key_namespace: Namespace = (),
                      tenant_id: str | None = None) -> str:
        """Soft-delete the memory under a key (as ``forget_memory``); returns its id. A later write revives the key."""
        with self._lock:
            record = self.get_by_key(key, user_id=user_id, key_namespace=key_namespace, tenant_id=tenant_id)
            self._soft_delete([record.memory_id], user_id=record.user_id, tenant_id=record.tenant_id,
                              action="forget", actor="api")
        return record.memory_id

    def list_keyed(
        self: Memory, *, user_id: str, key_namespace: Namespace = (), filters: Any = None,
        limit: int | None = None, offset: int = 0, tenant_id: str | None = None,
    ) -> list[MemoryRecord]:
        """One user's keyed memories in ``key_namespace`` or below it, in write order (active unless ``filters``)."""
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._tenant(tenant_id)
        prefix = join_namespace(key_namespace)
        f = check_filters(self.settings, filters)
        limit = check_int("limit", limit, 0, MAX_ROWS, optional=True)
        return self.store.list_keyed(tenant_id, user_id, prefix, f, limit=limit, offset=check_int("offset", offset, 0, MAX_ROWS))

    def user_ids(self: Memory, *, tenant_id: str | None = None) -> list[str]:
        """The users of a tenant that hold memories, for tenant-wide (administrative) tooling."""
        self._check_open()
        return self.store.user_ids(self._tenant(tenant_id))

    def _keyed(self: Memory, key: str, *, user_id: str, key_namespace: Namespace,
               tenant_id: str | None) -> MemoryRecord | None:
        self._check_open()
        user_id = self._check_id("user_id", user_id)
        tenant_id = self._tenant(tenant_id)
        return self.store.get_by_key(tenant_id, user_id, join_namespace(key_namespace),
                                     check_key(key, max_chars=self.settings.max_id_chars))

    async def aget_by_key(self, *args: Any, **kwargs: Any) -> MemoryRecord:
        """Async twin of :meth:`get_by_key`."""
        return await asyncio.to_thread(self.get_by_key, *args, **kwargs)  # type: ignore[arg-type]

    async def aforget_by_key(self, *args: Any, **kwargs: Any) -> str:
        """Async twin of :meth:`forget_by_key`."""
        return await asyncio.to_thread(self.forget_by_key, *args, **kwargs)  # type: ignore[arg-type]

    async def alist_keyed(self, *args: Any, **kwargs: Any) -> list[MemoryRecord]:
        """Async twin of :meth:`list_keyed`."""
        return await asyncio.to_thread(self.list_keyed, *args, **kwargs)  # type: ignore[arg-type]
