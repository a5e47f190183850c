"""What the server's routes share: the memory, the write queue, the keys and the request limits."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import AuthenticationError
from ..memory import Memory
from .auth import LOCAL_PRINCIPAL_ID, SCOPES, KeyCache, KeyStore, Principal
from .limits import Budget, HostPolicy
from .queue import WriteQueue

__all__ = ["ServerState"]


class ServerState:
    """What the routes share: the memory, the write queue, the keys (cached) and the request limits."""

    def __init__(self, memory: Memory, keys: KeyStore | None, *, open_access: bool,
                 max_pending: int = 2048, max_batch: int = 256, hosts: HostPolicy | None = None,
                 max_body_bytes: int | None = None) -> None:
        self.memory = memory
        self.keys = keys
        settings = memory.settings
        #: a keyless server (``--keyless``, loopback only) serves callers without a key as ``local``;
        #: fixed for the server's life, whatever keys are created or revoked meanwhile
        self.open_access = bool(open_access)
        self.queue = WriteQueue(memory, max_pending=max_pending, max_batch=max_batch)
        #: key lookups that miss the cache run here, never behind the searches in the default pool
        self.auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="portamem-auth")
        #: the keys in memory: a request with a known key costs no query
        self.key_cache = None if keys is None else KeyCache(keys, refresh_s=settings.server_key_refresh_s)
        #: which Host names requests may carry (the DNS-rebinding defence); all when None
        self.hosts = hosts
        #: the largest request body taken (the import route has its own, larger limit)
        self.max_body_bytes = max_body_bytes if max_body_bytes is not None else settings.server_max_body_bytes
        #: the request bytes all requests may hold at once (never less than one body's limit)
        self.budget = Budget(max(settings.server_max_inflight_bytes, self.max_body_bytes))
        #: ``/metrics`` (``portamem.server.metrics``), set by ``create_app``
        self.metrics: Any = None

    def start(self) -> None:
        if self.key_cache is not None:
            self.key_cache.start()

    def stop(self) -> None:
        if self.key_cache is not None:
            self.key_cache.stop()
        self.auth_pool.shutdown(wait=False)

    @property
    def keyless(self) -> bool:
        """Whether callers without a key are served (as ``local``): decided once, when the server starts
        (``--keyless``), never by how many keys the table holds now."""
        return self.open_access

    def lookup(self, token: str | None) -> Principal | None:
        """The principal of a request from memory alone; None when only the key table can tell
        (``authenticate`` in a worker thread then). A presented key is always checked, also on a keyless
        server; no key is ``local`` on a keyless server and refused on any other, however many keys
        exist (none left after a revocation is still none: the server stays shut)."""
        if token:
            if self.key_cache is None:
                raise AuthenticationError("this server has no API keys: send no key (a keyless loopback server)")
            return self.key_cache.lookup(token)
        if self.open_access:
            return self.local
        raise AuthenticationError("this server needs an API key (Authorization: Bearer pm_...)")

    def authenticate(self, token: str | None) -> Principal:
        who = self.lookup(token)
        if who is not None:
            return who
        assert self.key_cache is not None
        return self.key_cache.authenticate(token)

    async def check(self, token: str | None) -> Principal:
        """``authenticate`` from the event loop: from memory when it can, else in ``auth_pool``."""
        who = self.lookup(token)
        if who is not None:
            return who
        return await asyncio.get_running_loop().run_in_executor(self.auth_pool, self.authenticate, token)

    @property
    def local(self) -> Principal:
        """Who a keyless loopback server's callers act as: the machine's own user, every scope."""
        return Principal(key_id=LOCAL_PRINCIPAL_ID, tenant_id=self.memory.tenant_id, scopes=frozenset(SCOPES))
