"""The background path: what follows an acknowledged save, off the caller's thread.

- ``indexer``: one thread per store drains the outbox (rows committed with ``indexed = REVIEW``):
  embeds a batch, runs the write path's review on it (trust, dedupe, supersession), writes the
  vector index and the in-memory replica, then commits the decisions and marks the rows indexed;
- ``queued``: read-your-writes without waiting for that queue: a search scores the user's queued
  rows itself and hands the vectors it computed over to the indexer;
- ``upkeep``: the index brought in line at once after a change made under the store's lock,
  checked on open, repaired and rebuilt.

May import: the data model, ``portamem.components``, ``portamem.storage`` and the write path (its review
runs here); never the read path (the replica is reached through ``portamem.components``), lifecycle,
portability or the ``Memory`` facade.
"""
