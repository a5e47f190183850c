"""API keys: bound to a tenant (optionally to users or agents, read-only or read-write), stored hashed.

A key reads ``pm_<key id>_<secret>``: the id is public (it names the key in the audit log and in
``portamem keys list``), the secret is 32 random bytes of which only the SHA-256 is stored, compared
in constant time. The table lives in the store's own record database, so keys travel with backups
and a second process (``portamem keys create`` beside a running server) sees the same rows.

A key bound to agents writes as one of them (``Principal.agent_for``) and reads one of its agents'
private memories and the shared layer (``Principal.reading``, ``Principal.may_read``), never another
agent's; naming another agent is refused (403).

A key may carry scopes beyond its tenant: ``admin`` (the all-tenant views: ``/v1/stats`` of every
tenant, ``/metrics``) and ``debug`` (a search's candidate table, ``search --debug``).

A server checks keys from memory (``KeyCache``): the table is read whole once, and then only a
one-row summary of it (how many keys, how many revoked, the latest times) is polled every
``Settings.server_key_refresh_s``; when it changed, the table is read again. A revocation, by this
process or any other sharing the store, is so refused within that interval (0.5 s by default), and
a request with a known key costs no query at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..errors import AuthenticationError, NotFoundError, PermissionDeniedError, StoreOpenError, ValidationError
from ..filters import for_agent
from ..records import MemoryRecord
from .failures import describe

__all__ = ["Access", "ApiKey", "Principal", "KeyStore", "KeyCache", "LOCAL_PRINCIPAL_ID", "SCOPES", "parse_key"]

log = logging.getLogger(__name__)

PREFIX = "pm"
#: what a key may do beyond its tenant's memories: ``admin`` the all-tenant views (stats of every
#: tenant, /metrics), ``debug`` a search's candidate table
SCOPES = ("admin", "debug")
#: the actor of requests to a keyless server (loopback only)
LOCAL_PRINCIPAL_ID = "local"

_md = sa.MetaData()
keys_t = sa.Table(
    "api_keys",
    _md,
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column("secret_sha256", sa.String(64), nullable=False),
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("name", sa.String(256), nullable=True),
    sa.Column("users", sa.JSON, nullable=True),
    sa.Column("agents", sa.JSON, nullable=True),
    sa.Column("read_only", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
    #: extra scopes (``SCOPES``); added to a table made before they existed
    sa.Column("scopes", sa.JSON, nullable=True),
)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(token: str) -> tuple[str, str]:
    """``(key id, secret)`` of a presented key; AuthenticationError when it is not of the key form."""
    parts = token.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        raise AuthenticationError("malformed API key (expected pm_<id>_<secret>)")
    return parts[1], parts[2]


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: the key id (the audit actor), its tenant and its scope."""

    key_id: str
    tenant_id: str
    users: frozenset[str] | None = None
    agents: frozenset[str] | None = None
    read_only: bool = False
    scopes: frozenset[str] = frozenset()

    def check_scope(self, scope: str, what: str) -> None:
        """403 unless the key has ``scope`` (``SCOPES``)."""
        if scope not in self.scopes:
            raise PermissionDeniedError(f"{what} needs a key with the {scope!r} scope "
                                        f"(portamem keys create --scope {scope}); {self.key_id} has none")

    def may_act_for(self, user_id: str) -> bool:
        return self.users is None or user_id in self.users

    def check_user(self, user_id: str) -> None:
        """A user-level operation for a user outside the scope: 403 (it says nothing about stored data)."""
        if not self.may_act_for(user_id):
            raise PermissionDeniedError(f"API key {self.key_id} may not act for user {user_id!r}")

    def check_write(self) -> None:
        if self.read_only:
            raise PermissionDeniedError(f"API key {self.key_id} is read-only")

    def agent_for(self, agent_id: str | None) -> str | None:
        """The agent a write or a read is made as: the key's only agent by default, never one outside its set."""
        if self.agents is None:
            return agent_id
        if agent_id is None and len(self.agents) == 1:
            return next(iter(self.agents))
        if agent_id not in self.agents:
            raise PermissionDeniedError(f"API key {self.key_id} may act as agents {sorted(self.agents)} only"
                                        + ("" if agent_id is not None else ": name one (agent_id)"))
        return agent_id

    def reading(self, filters: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """A read's ``filters`` narrowed to what the key may read: one of its agents' private memories and
        the shared layer (``for_agent``; which agent as ``agent_for`` says); unchanged for a key of every agent."""
        if self.agents is None:
            return filters
        named = (filters or {}).get("agent_id")
        if named is not None and not isinstance(named, str):
            raise ValidationError(f"filter 'agent_id' must be a string, got {type(named).__name__}")
        return for_agent(filters, self.agent_for(named))  # type: ignore[return-value]

    def may_read(self, record: MemoryRecord) -> bool:
        """Whether the key may read ``record`` of a user in its scope: its agents' own or the shared layer's."""
        return self.agents is None or record.agent_id is None or record.agent_id in self.agents

    def may_change(self, record: MemoryRecord) -> bool:
        """Whether the key may change ``record`` of a user in its scope: one of its agents' own memories only,
        never the shared layer's nor another agent's (``portamem.write.scope``)."""
        return self.agents is None or record.agent_id in self.agents

    @property
    def tenant_wide(self) -> bool:
        return self.users is None


@dataclass(frozen=True)
class ApiKey:
    """A stored key as ``portamem keys list`` shows it (never the secret)."""

    key_id: str
    tenant_id: str
    name: str | None
    users: list[str] | None
    agents: list[str] | None
    read_only: bool
    created_at: float
    revoked_at: float | None
    scopes: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "tenant_id": self.tenant_id, "name": self.name, "users": self.users,
                "agents": self.agents, "read_only": self.read_only, "scopes": self.scopes,
                "created_at": self.created_at, "revoked_at": self.revoked_at}


def _ids(name: str, values: Sequence[str] | None) -> list[str] | None:
    if values is None:
        return None
    out = [v for v in dict.fromkeys(values)]
    if not out or any(not isinstance(v, str) or not v.strip() for v in out):
        raise ValidationError(f"{name} must be a non-empty list of non-empty strings")
    return out


class KeyStore:
    """The ``api_keys`` table of one record database."""

    def __init__(self, db_url: str) -> None:
        try:
            if db_url.startswith("sqlite:///") and not db_url.startswith("sqlite:///:memory:"):
                Path(db_url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(db_url, future=True)
            with self.engine.begin() as conn:
                _md.create_all(conn)
                if "scopes" not in {c["name"] for c in sa.inspect(conn).get_columns("api_keys")}:
                    conn.execute(sa.text("ALTER TABLE api_keys ADD COLUMN scopes JSON"))
        except sa.exc.SQLAlchemyError as exc:
            raise StoreOpenError(f"cannot open the key table in {db_url}: {exc}") from exc

    def close(self) -> None:
        self.engine.dispose()

    def create(
        self, tenant_id: str, *, name: str | None = None, users: Sequence[str] | None = None,
        agents: Sequence[str] | None = None, read_only: bool = False, scopes: Sequence[str] = (),
    ) -> tuple[ApiKey, str]:
        """A new key; returns it and the full secret token, which is shown once and never stored."""
        if not isinstance(tenant_id, str) or not tenant_id.strip():
            raise ValidationError("a key needs a tenant id")
        if isinstance(scopes, str) or any(s not in SCOPES for s in scopes):
            raise ValidationError(f"scopes must be drawn from {list(SCOPES)}, got {scopes!r}")
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        row = {"key_id": key_id, "secret_sha256": _digest(secret), "tenant_id": tenant_id, "name": name,
               "users": _ids("users", users), "agents": _ids("agents", agents), "read_only": bool(read_only),
               "created_at": time.time(), "revoked_at": None, "scopes": sorted(set(scopes)) or None}
        with self.engine.begin() as conn:
            conn.execute(keys_t.insert().values(**row))
        return self._key(row), f"{PREFIX}_{key_id}_{secret}"

    @staticmethod
    def _key(row: Any) -> ApiKey:
        m = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)
        return ApiKey(m["key_id"], m["tenant_id"], m["name"], m["users"], m["agents"], bool(m["read_only"]),
                      m["created_at"], m["revoked_at"], list(m.get("scopes") or []))

    def list(self, tenant_id: str | None = None, *, include_revoked: bool = False) -> list[ApiKey]:
        q = sa.select(keys_t).order_by(keys_t.c.created_at)
        if tenant_id is not None:
            q = q.where(keys_t.c.tenant_id == tenant_id)
        if not include_revoked:
            q = q.where(keys_t.c.revoked_at.is_(None))
        with self.engine.connect() as conn:
            return [self._key(r) for r in conn.execute(q)]

    def revoke(self, key_id: str) -> ApiKey:
        with self.engine.begin() as conn:
            n = conn.execute(keys_t.update().where(keys_t.c.key_id == key_id, keys_t.c.revoked_at.is_(None))
                             .values(revoked_at=time.time())).rowcount
            row = conn.execute(sa.select(keys_t).where(keys_t.c.key_id == key_id)).first()
        if row is None:
            raise NotFoundError(f"no API key {key_id!r}")
        if not n:
            raise ValidationError(f"API key {key_id!r} was already revoked")
        return self._key(row)

    def active_count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(keys_t)
                                    .where(keys_t.c.revoked_at.is_(None))).scalar_one())

    def authenticate(self, token: str | None) -> Principal:
        """The principal of a presented key; AuthenticationError for none, a wrong or a revoked one."""
        if not token:
            raise AuthenticationError("this server needs an API key (Authorization: Bearer pm_...)")
        key_id, secret = parse_key(token)
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(keys_t).where(keys_t.c.key_id == key_id)).first()
        # the digest is compared even for an unknown id, so timing does not tell ids apart
        expected = row.secret_sha256 if row is not None else "0" * 64
        if not hmac.compare_digest(_digest(secret), expected) or row is None or row.revoked_at is not None:
            raise AuthenticationError("invalid or revoked API key")
        return _principal(row)

    def version(self) -> tuple[Any, ...]:
        """A summary of the table that changes with every key created or revoked, by any process:
        the number of keys and of revoked ones, and the latest creation and revocation times."""
        with self.engine.connect() as conn:
            return tuple(conn.execute(sa.select(
                sa.func.count(), sa.func.count(keys_t.c.revoked_at), sa.func.max(keys_t.c.created_at),
                sa.func.max(keys_t.c.revoked_at))).one())

    def active(self) -> list[tuple[str, str, Principal]]:
        """Every key not revoked: (key id, secret digest, principal)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(keys_t).where(keys_t.c.revoked_at.is_(None))).all()
        return [(r.key_id, r.secret_sha256, _principal(r)) for r in rows]


def _principal(row: Any) -> Principal:
    return Principal(
        key_id=row.key_id, tenant_id=row.tenant_id,
        users=None if row.users is None else frozenset(row.users),
        agents=None if row.agents is None else frozenset(row.agents),
        read_only=bool(row.read_only), scopes=frozenset(row.scopes or ()),
    )


class KeyCache:
    """The active keys of a ``KeyStore`` in memory, so that checking a request's key costs no query.

    A poller thread reads ``KeyStore.version()`` every ``refresh_s`` seconds and reloads the keys when it
    changed, so a key revoked anywhere is refused within ``refresh_s`` (plus one reload). A key id the
    cache does not know (one created since the last poll) is looked up in the table, and on success the
    cache is refreshed at once.
    """

    def __init__(self, keys: KeyStore, *, refresh_s: float = 0.5) -> None:
        self.keys = keys
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[str, Principal]] = {}
        self._version: tuple[Any, ...] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: reloads of the whole table, and lookups of ids it did not know (for tests and stats)
        self.reloads = 0
        self.misses = 0
        self.refresh()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._poll, name="portamem-keys", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _poll(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.refresh()
            except Exception as exc:  # a store hiccup: keep the keys known, try again next time
                log.warning("reading the API key table failed; keeping the cached keys: %s", describe(exc))

    def refresh(self) -> None:
        """Reload the keys if the table changed since the last look."""
        version = self.keys.version()
        if version == self._version:
            return
        rows = {key_id: (digest, who) for key_id, digest, who in self.keys.active()}
        with self._lock:
            self._rows, self._version = rows, version
            self.reloads += 1

    @property
    def active_count(self) -> int:
        with self._lock:
            return len(self._rows)

    def lookup(self, token: str) -> Principal | None:
        """The principal of a key the cache knows; None for an id it does not know (``authenticate`` then
        asks the table); AuthenticationError for a wrong secret or a malformed key."""
        key_id, secret = parse_key(token)
        with self._lock:
            found = self._rows.get(key_id)
        if found is None:
            return None
        if not hmac.compare_digest(_digest(secret), found[0]):
            raise AuthenticationError("invalid or revoked API key")
        return found[1]

    def authenticate(self, token: str | None) -> Principal:
        """``lookup``, else the table (a key created since the last poll), whose answer is cached."""
        if not token:
            raise AuthenticationError("this server needs an API key (Authorization: Bearer pm_...)")
        who = self.lookup(token)
        if who is not None:
            return who
        self.misses += 1
        who = self.keys.authenticate(token)
        self.refresh()  # a new key: take the table as it stands now (never one row beside an older view)
        return who


class Access:
    """Who a request acts as, from its key alone: the keys in memory (``KeyCache``), a small pool for the
    lookups that miss it, and the keyless choice. ``portamem serve`` and ``portamem mcp --transport http``
    decide alike: a presented key is always checked; no key is ``local`` (the store's tenant, every scope)
    on a keyless server (``--keyless``, loopback only, chosen at start) and refused on any other, however
    many keys the table holds (none left after a revocation is still none: the server stays shut)."""

    def __init__(self, keys: KeyStore | None, *, open_access: bool, tenant_id: str, refresh_s: float = 0.5) -> None:
        self.keys = keys
        #: fixed for the server's life, whatever keys are created or revoked meanwhile
        self.open_access = bool(open_access)
        self.tenant_id = tenant_id
        #: key lookups that miss the cache run here, never behind the searches in the default pool
        self.auth_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="portamem-auth")
        #: the keys in memory: a request with a known key costs no query
        self.key_cache = None if keys is None else KeyCache(keys, refresh_s=refresh_s)

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
        (``authenticate`` in a worker thread then)."""
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
        return Principal(key_id=LOCAL_PRINCIPAL_ID, tenant_id=self.tenant_id, scopes=frozenset(SCOPES))
