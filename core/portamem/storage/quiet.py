"""What the Milvus client and its gRPC channel would print that says nothing about portamem's data.

- The embedded milvus-lite server is a gRPC server in this process with gRPC's defaults: it takes a
  client ping at most every five minutes and answers more with ``GOAWAY too_many_pings`` (an error line
  on stderr from gRPC's C core, about 90 s into an idle ``portamem serve``). pymilvus pings every 10 s,
  even with no call in flight. Over loopback to a server in the same process there is no connection to
  keep alive, so an embedded index opens its channel without pings (``LOCAL_CHANNEL_OPTIONS``); a
  Milvus server keeps pymilvus' keepalive, which it accepts.
- milvus-lite does not report the snapshot timestamp a query iterator asks for; pymilvus warns
  ``failed to get mvccTs from milvus server, use client-side ts instead`` and uses the client's time,
  which is right for one process holding the directory. The warning is dropped for the iterations an
  embedded index makes (``lite_iteration``), and passes for a Milvus server, where it would mean
  something.

May import: nothing of portamem (the storage layer's own helpers).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["LOCAL_CHANNEL_OPTIONS", "lite_iteration", "LiteTimestamps"]

#: gRPC channel options of an embedded index: no keepalive pings (``grpc.keepalive_time_ms`` at its
#: maximum is gRPC's "off") and none without a call in flight
LOCAL_CHANNEL_OPTIONS: dict[str, Any] = {
    "grpc.keepalive_time_ms": 2**31 - 1,
    "grpc.keepalive_permit_without_calls": 0,
}

#: the logger pymilvus' query iterator warns on
ITERATOR_LOGGER = "pymilvus.client.iterator.query_iterator"

_state = threading.local()


class LiteTimestamps(logging.Filter):
    """Drops pymilvus' mvccTs warning while this thread iterates an embedded milvus-lite index."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(_state, "lite", False) and "mvccTs" in record.getMessage())


@contextmanager
def lite_iteration() -> Iterator[None]:
    """Within it, this thread's query iterators run against milvus-lite (see the module docstring)."""
    before = getattr(_state, "lite", False)
    _state.lite = True
    try:
        yield
    finally:
        _state.lite = before


logging.getLogger(ITERATOR_LOGGER).addFilter(LiteTimestamps())
