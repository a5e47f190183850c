"""``portamem serve``, ``portamem keys create/list/revoke`` and ``portamem mcp``."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from ..client import SERVER_FILE
from ..config import Settings
from ..errors import ConfigError, PortamemError
from ..read.calibration import hubness_for
from ..storage.indexes import vector_backend

__all__ = ["SERVER_COMMANDS", "check_keyless", "is_loopback", "open_keys", "serve"]


#: how often ``portamem serve`` runs maintenance when ``Settings.maintain_interval_s`` is not set
SERVE_MAINTAIN_INTERVAL_S = 3600.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warm_up(memory: Any) -> None:
    """What a process pays once, paid before the first request rather than by a user's search: each
    embedding worker's first call, and the embedder's hubness reference (the packaged background set
    embedded once, about 0.6 s of e5: a fresh server's first search took 0.67 s, the next 11-14 ms)."""
    warm = getattr(memory.embedder, "warm", None)
    if callable(warm):
        warm()
    hubness_for(memory.embedder)


def serving(settings: Settings) -> Settings:
    """A server's indexer runs in a worker process when the user did not choose and its vector index
    has a process of its own (the embedded index's child, a Milvus server, or the pgvector database): its
    review then never holds the GIL the requests need (``portamem.background.process``)."""
    if settings.indexer_process is not None or os.environ.get("PORTAMEM_INDEXER_PROCESS"):
        return settings
    if vector_backend(settings) != "milvus-lite" or settings.resolved_vector_process == "child":
        return settings.replace(indexer_process="child")
    return settings


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.load(args.config, path=args.path, tenant_id=args.tenant)


# ---------------------------------------------------------------------- serve
def _add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--max-queue", type=int, default=2048,
                   help="writes waiting at most before new ones get HTTP 429 (default 2048)")
    p.add_argument("--max-batch", type=int, default=256, help="writes applied per group commit at most")
    _add_access(p)
    p.add_argument("--max-inflight-bytes", type=int,
                   help="request bytes all requests may hold at once (default 16 MiB; "
                        "Settings.server_max_inflight_bytes)")
    p.add_argument("--llm-url", help="base URL of an OpenAI-compatible chat model, ending in /v1, that forms "
                                     "memories in the background (Settings.llm_url; its key only from "
                                     "PORTAMEM_LLM_API_KEY)")
    p.add_argument("--llm-model", help="the model name that server serves (Settings.llm_model)")
    p.add_argument("--log-level", default="warning")


def _add_access(p: argparse.ArgumentParser) -> None:
    """The flags ``serve`` and ``mcp --transport http`` share: who and what a request may bring."""
    p.add_argument("--allowed-host", action="append", dest="allowed_hosts", metavar="NAME[:PORT]",
                   help="a Host name requests may carry (repeatable; default: loopback names on a loopback "
                        "address, any on another; Settings.server_allowed_hosts)")
    p.add_argument("--max-body-bytes", type=int, help="largest request body taken, in bytes "
                                                      "(default 4 MiB; Settings.server_max_body_bytes)")
    p.add_argument("--keyless", action="store_true", default=None,
                   help="serve callers without an API key as the local user, with every scope: loopback "
                        "addresses only, refused with --allowed-host (Settings.server_keyless). Without it "
                        "every request needs a key, also while the store has none")


def _access_settings(settings: Settings, args: argparse.Namespace) -> Settings:
    if args.allowed_hosts:
        settings = settings.replace(server_allowed_hosts=[*(settings.server_allowed_hosts or []), *args.allowed_hosts])
    if args.max_body_bytes is not None:
        settings = settings.replace(server_max_body_bytes=args.max_body_bytes)
    if args.keyless:
        settings = settings.replace(server_keyless=True)
    return settings


def check_keyless(settings: Settings, host: str) -> None:
    """ConfigError unless a keyless server (``settings.server_keyless``) may run on ``host``: a loopback
    address, and no ``server_allowed_hosts`` (a reverse proxy forwarding those names would hand every
    remote caller a loopback connection, and so the local user's every scope)."""
    if not settings.server_keyless:
        return
    if not is_loopback(host):
        raise ConfigError(f"--keyless (server_keyless) serves callers without a key: refused on {host}, which is "
                          "not a loopback address; create keys with `portamem keys create --for-tenant ...` instead")
    if settings.server_allowed_hosts:
        raise ConfigError(f"--keyless (server_keyless) is refused with --allowed-host "
                          f"{', '.join(settings.server_allowed_hosts)}: a proxy forwarding those names would serve "
                          "everyone it takes as the local user; create keys with `portamem keys create --for-tenant ...`")


def open_keys(settings: Settings, host: str) -> tuple[Any, int]:
    """The key table of the store of ``settings`` and how many keys it holds, for a server on ``host``:
    ConfigError when it may not start there (``check_keyless``; no key off loopback)."""
    from .auth import KeyStore

    check_keyless(settings, host)
    keys = KeyStore(settings.resolved_db_url)
    active = keys.active_count()
    if not active and not is_loopback(host):
        keys.close()
        raise ConfigError(f"no API key is configured: refusing to serve on {host}, which is not a loopback "
                          "address; create one with `portamem keys create --for-tenant ...`")
    return keys, active


def serve(settings: Settings, *, host: str = "127.0.0.1", port: int = 8765, max_queue: int = 2048,
          max_batch: int = 256, log_level: str = "warning") -> int:
    """Serve the store of ``settings`` until interrupted; the URL is printed and written to ``server.json``.

    Every request needs an API key, also while the store has none (then every request is refused until
    one is created) and after its last key is revoked, unless ``settings.server_keyless`` was chosen at
    start (``--keyless``: loopback only, never with ``server_allowed_hosts``; ``check_keyless``).
    A server on a loopback address answers only to loopback Host names and ``settings.server_allowed_hosts``
    (421 otherwise: a web page rebinding its name to 127.0.0.1 reaches nothing); on another address it
    checks the Host only against a list given."""
    import uvicorn

    from ..memory import Memory
    from .app import ServerState, create_app
    from .limits import HostPolicy

    keys, active = open_keys(settings, host)
    loopback = is_loopback(host)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)  # connections made before uvicorn runs wait in the backlog instead of being refused
    bound = sock.getsockname()[1]
    if settings.maintain_interval_s is None:  # a long-running service evicts, consolidates and audits itself
        settings = settings.replace(maintain_interval_s=SERVE_MAINTAIN_INTERVAL_S)
    settings = serving(settings)
    memory = Memory(settings=settings)
    state = ServerState(memory, keys, open_access=settings.server_keyless, max_pending=max_queue,
                        max_batch=max_batch, hosts=HostPolicy.of(settings.server_allowed_hosts, loopback=loopback))
    app = create_app(state)
    warm_up(memory)
    state.metrics.time_embedder()
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}"
    marker = Path(settings.path) / SERVER_FILE
    config = uvicorn.Config(app, log_level=log_level, access_log=False, timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    # what is alive now (the libraries' modules and functions, the open store) lives as long as the
    # process: left out of the collector's full passes, which cost 70-90 ms each at 160k objects here
    gc.collect()
    gc.freeze()
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"url": url, "pid": os.getpid(), "started_at": time.time()}), encoding="utf-8")
        if settings.server_keyless:
            mode = " (keyless: callers without a key act as the local user" + (
                f"; {active} API keys are checked when sent)" if active else ")")
        else:
            mode = "" if active else (" (no API key yet: every request is refused until `portamem keys create "
                                      "--for-tenant ...`; or restart with --keyless)")
        print(f"portamem serving {settings.path} on {url}{mode}", flush=True)
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn re-raises the SIGINT it drained the queue for
            pass
    finally:
        try:
            if json.loads(marker.read_text(encoding="utf-8")).get("pid") == os.getpid():
                marker.unlink()
        except (OSError, ValueError):
            pass
        memory.close()
        keys.close()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the memory over HTTP (JSON API, OpenAPI schema at /openapi.json, Prometheus at /metrics),
    behind API keys."""
    settings = _access_settings(_settings(args), args)
    if args.max_inflight_bytes is not None:
        settings = settings.replace(server_max_inflight_bytes=args.max_inflight_bytes)
    if args.llm_url is not None or args.llm_model is not None:  # the key stays in the environment, off the command line
        settings = settings.replace(**{k: v for k, v in (("llm_url", args.llm_url), ("llm_model", args.llm_model))
                                       if v is not None})
    return serve(settings, host=args.host, port=args.port, max_queue=args.max_queue,
                 max_batch=args.max_batch, log_level=args.log_level)


# ---------------------------------------------------------------------- keys
def _add_keys(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_command", required=True)
    c = sub.add_parser("create", help="a new key; its secret is printed once")
    c.add_argument("--for-tenant", dest="key_tenant", help="the tenant the key acts in (default: --tenant)")
    c.add_argument("--user", action="append", dest="users", help="restrict to this user (repeatable)")
    c.add_argument("--agent", action="append", dest="agents", help="writes only as this agent (repeatable)")
    c.add_argument("--read-only", action="store_true")
    c.add_argument("--scope", action="append", dest="scopes", choices=["admin", "debug"], default=[],
                   help="admin: every tenant's statistics and /metrics; debug: a search's candidate table "
                        "(search --debug through the server); repeatable")
    c.add_argument("--name", help="a label for the list")
    c.add_argument("--json", action="store_true")
    ls = sub.add_parser("list", help="keys of the store (never their secrets)")
    ls.add_argument("--all", action="store_true", help="revoked ones too")
    ls.add_argument("--json", action="store_true")
    r = sub.add_parser("revoke", help="revoke a key by its id; servers on the store refuse it within half a second")
    r.add_argument("key_id")


def cmd_keys(args: argparse.Namespace) -> int:
    """Manage API keys (stored hashed in the store's record database)."""
    from .auth import KeyStore

    settings = _settings(args)
    keys = KeyStore(settings.resolved_db_url)
    try:
        if args.keys_command == "create":
            key, token = keys.create(args.key_tenant or settings.tenant_id, name=args.name, users=args.users,
                                     agents=args.agents, read_only=args.read_only, scopes=args.scopes)
            if args.json:
                print(json.dumps({**key.to_dict(), "api_key": token}))
            else:
                print(f"created key {key.key_id} for tenant {key.tenant_id!r}"
                      + (f", users {key.users}" if key.users else "") + (f", agents {key.agents}" if key.agents else "")
                      + (", read-only" if key.read_only else "")
                      + (f", scopes {key.scopes}" if key.scopes else ""), file=sys.stderr)
                print(token)
        elif args.keys_command == "list":
            listed = keys.list(include_revoked=args.all)
            if args.json:
                print(json.dumps([k.to_dict() for k in listed], ensure_ascii=False, indent=2))
            for k in [] if args.json else listed:
                print(f"{k.key_id}  tenant {k.tenant_id}  {'read-only' if k.read_only else 'read-write'}"
                      f"  users {k.users or 'any'}  agents {k.agents or 'any'}"
                      + (f"  scopes {','.join(k.scopes)}" if k.scopes else "")
                      + (f"  {k.name!r}" if k.name else "") + ("  REVOKED" if k.revoked_at else ""))
        else:
            keys.revoke(args.key_id)
            print(f"revoked {args.key_id}")
    finally:
        keys.close()
    return 0


# ---------------------------------------------------------------------- mcp
def _add_mcp(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="the user whose memory the tools read and write")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --transport http: the address to listen on")
    p.add_argument("--port", type=int, default=8766)
    _add_access(p)  # with --transport http, as `portamem serve`: API keys of the store, or --keyless on loopback


def cmd_mcp(args: argparse.Namespace) -> int:
    """An MCP server (stdio or streamable HTTP) with save/search/forget/explain tools for one user; over
    HTTP behind the store's API keys, as portamem serve."""
    from .limits import HostPolicy
    from .mcp_tools import run_mcp

    from ..cli.connect import open_memory

    keys = None
    settings = _access_settings(_settings(args), args)
    hosts = HostPolicy.of(settings.server_allowed_hosts, loopback=is_loopback(args.host))
    if args.transport == "http":  # before the store opens: a refused start costs nothing
        keys, _ = open_keys(settings, args.host)
    try:
        memory: Any = open_memory(args)
        try:
            run_mcp(memory, user_id=args.user, transport=args.transport, host=args.host, port=args.port,
                    keys=keys, settings=settings, hosts=hosts)
        finally:
            memory.close()
    finally:
        if keys is not None:
            keys.close()
    return 0


def _guard(run: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(run(args))
        except PortamemError:
            raise
        except OSError as exc:
            raise ConfigError(str(exc)) from exc

    wrapped.__doc__ = run.__doc__
    return wrapped


#: (name, help, configure, run) rows for ``portamem.cli.COMMANDS``
SERVER_COMMANDS = [
    ("serve", "serve the memory over HTTP to other processes and languages", _add_serve, _guard(cmd_serve)),
    ("keys", "create, list and revoke API keys of the server", _add_keys, cmd_keys),
    ("mcp", "serve save/search/forget/explain as MCP tools for one user", _add_mcp, cmd_mcp),
]
