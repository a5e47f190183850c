"""What the server's routes share: the memory, the write queue and the keys."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ..errors import AuthenticationError
from ..memory import Memory
from .auth import LOCAL_PRINCIPAL_ID, KeyStore, Principal
from .queue import WriteQueue

__all__ = ["ServerState"]


class ServerState:
    """What the routes share: the memory, the write queue and the keys."""

    def __init__(self, memory: Memory, keys: KeyStore | None, *, open_access: bool,
                 max_pending: int = 2048, max_batch: int = 256) -> None:
        self.memory = memory
        self.keys = keys
        #: a keyless server (loopback only) serves its default tenant without a key
        self.open_access = open_access
        self.queue = WriteQueue(memory, max_pending=max_pending, max_batch=max_batch)
        #: key lookups run here, never behind the searches in the default pool: a write waits for no search
        self.auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="portamem-auth")

    def authenticate(self, token: str | None) -> Principal:
        if self.keys is not None and (token or not self.open_access or self.keys.active_count()):
            return self.keys.authenticate(token)
        if not self.open_access:
            raise AuthenticationError("this server needs an API key")
        return Principal(key_id=LOCAL_PRINCIPAL_ID, tenant_id=self.memory.tenant_id)
