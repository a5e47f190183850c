"""The store a command names: ``--url`` (or the server that owns the ``--path`` store) through
``RemoteMemory``, else the store itself."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..client import RemoteMemory, discover
from ..config import Settings
from ..errors import StoreLockedError
from ..memory import Memory

__all__ = ["one_shot", "open_memory", "progress_bar"]


def progress_bar(total: int, desc: str) -> Any:
    """A tqdm bar on stderr for ``progress=`` arguments (hidden under 50 rows)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="rec", file=sys.stderr, disable=total < 50)


def one_shot(settings: Settings) -> Settings:
    """The settings of a command that opens the store for a moment: its embedded vector index inline
    unless the user chose (a child process costs about half a second to start, for a command that a
    long-running process would amortise and this one cannot)."""
    if settings.vector_process is None and not os.environ.get("PORTAMEM_VECTOR_PROCESS"):
        return settings.replace(vector_process="inline")
    return settings


def open_memory(args: argparse.Namespace, **overrides: Any) -> Memory:
    """The store of ``--path``; through its server when ``--url`` is given or a server owns the store."""
    if args.url:
        return _remote(args.url, args)
    settings = one_shot(Settings.load(args.config, path=args.path, tenant_id=args.tenant, **overrides))
    try:
        return Memory(settings=settings, progress=progress_bar)
    except StoreLockedError:
        url = discover(settings.path)
        if url is None:
            raise
        print(f"portamem: the store is served at {url}; using the server", file=sys.stderr)
        return _remote(url, args)


def _remote(url: str, args: argparse.Namespace) -> Memory:
    return RemoteMemory(url, args.api_key, tenant_id=args.tenant)  # type: ignore[return-value]
