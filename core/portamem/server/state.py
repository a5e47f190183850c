"""What the server's routes share: the memory, the write queue, the keys and the request limits."""

from __future__ import annotations

from typing import Any

from ..memory import Memory
from .auth import Access, KeyStore
from .limits import Budget, HostPolicy
from .queue import WriteQueue

__all__ = ["ServerState"]


class ServerState(Access):
    """What the routes share: the memory, the write queue, the keys (``Access``: cached, and the keyless
    choice) and the request limits."""

    def __init__(self, memory: Memory, keys: KeyStore | None, *, open_access: bool,
                 max_pending: int = 2048, max_batch: int = 256, hosts: HostPolicy | None = None,
                 max_body_bytes: int | None = None) -> None:
        settings = memory.settings
        super().__init__(keys, open_access=open_access, tenant_id=memory.tenant_id,
                         refresh_s=settings.server_key_refresh_s)
        self.memory = memory
        self.queue = WriteQueue(memory, max_pending=max_pending, max_batch=max_batch)
        #: which Host names requests may carry (the DNS-rebinding defence); all when None
        self.hosts = hosts
        #: the largest request body taken (the import route has its own, larger limit)
        self.max_body_bytes = max_body_bytes if max_body_bytes is not None else settings.server_max_body_bytes
        #: the request bytes all requests may hold at once (never less than one body's limit)
        self.budget = Budget(max(settings.server_max_inflight_bytes, self.max_body_bytes))
        #: ``/metrics`` (``portamem.server.metrics``), set by ``create_app``
        self.metrics: Any = None
