"""The background indexer as a process of its own: ``python -m portamem.background.worker``.

Started by a store whose ``Settings.indexer_process`` is "child" (``portamem.background.process``),
never by hand. It opens the same record store and connects to the store's vector index process (or
Milvus server, or pgvector database), and runs the ``Indexer`` over the shared outbox: embedding, review (trust, dedupe,
supersession), index writes and their commit, each batch as the indexer thread does it. Nothing
acknowledged lives only here: a batch it did not commit is still in the outbox for the next worker.

Its standard input carries, after one JSON line of settings, one command a line: ``w`` (rows were
committed: look at the outbox), ``f N`` (drain the outbox once for the store's flush ``N``); end of
file stops it after the batch in hand, and so does its parent's death; ``v`` and a JSON list hands
over vectors the store's searches computed for queued rows (taken instead of embedding them again). It answers on its standard
output, one JSON object a line (``{"ready": pid}``, ``{"batch": ...}``, ``{"drained": N}``,
``{"repaired": true}``, ``{"error": "..."}``); its log goes to standard error, like the parent's.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

from ..components import Components
from ..config import Settings
from ..embedding.embedders import PassageBatcher, get_embedder
from ..plugins import Hooks, get_plugin_manager
from ..records import MemoryRecord
from ..read.replica import VectorReader
from ..storage.sql import RecordStore
from ..storage.termcache import TermCache
from ..storage.vault import Vault
from ..storage.indexes import open_vector_index
from .indexer import Indexer
from .process import handed_over

__all__ = ["main"]

log = logging.getLogger(__name__)


class _Touched(TermCache):
    """No cache at all (its budget is 0), but it records the users whose keyword postings a committed
    transaction changed: the store that started this worker drops what it cached of them."""

    def __init__(self, write_lock: Any) -> None:
        super().__init__(0, write_lock)
        self.scopes: set[tuple[str, str]] = set()
        self.everyone = False

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.clear()  # never an answer from an earlier read: the serving process writes postings too
        return super().get(*args, **kwargs)

    def apply(self, notes: Sequence[tuple[Any, ...]]) -> None:
        for kind, *args in notes:
            if kind == "clear":
                self.everyone = True
            elif kind in ("erase", "prune"):
                self.scopes.add((args[0], args[1]))
            elif kind == "add":
                self.scopes.update((r["tenant_id"], r["user_id"]) for r in args[0])
            else:
                self.scopes.update((t, u) for t, u, _, _ in args[0])
        super().apply(notes)

    def taken(self) -> list[list[str]] | None:
        """The users noted since the last call (None: every user), and start again."""
        out = None if self.everyone else [list(s) for s in sorted(self.scopes)]
        self.scopes, self.everyone = set(), False
        return out


class _Reply:
    """Lines to the parent, one JSON object each, whole (several threads answer)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def __call__(self, **message: Any) -> None:
        line = json.dumps(message, separators=(",", ":")) + "\n"
        with self._lock:
            try:
                self._out.write(line)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):  # the parent is gone: its death stops us
                pass


def _open(settings: Settings, index_uri: str, local: bool) -> tuple[Components, Indexer, _Touched]:
    embedder = get_embedder(settings.embedder, workers=settings.embed_workers)
    store = RecordStore(settings.resolved_db_url, keyword_cache_mb=0)
    touched = _Touched(store._write_lock)
    if store.is_sqlite:  # the only store whose postings a serving process caches (``RecordStore``)
        store.keywords.cache = touched
    try:
        index = open_vector_index(settings, model=embedder.name, dim=embedder.dim, uri=index_uri, local_server=local)
    except BaseException:
        store.close()
        raise
    lock = threading.RLock()
    parts = Components(settings=settings, tenant_id=settings.tenant_id, store=store, index=index, embedder=embedder,
                       hooks=Hooks(get_plugin_manager()),
                       vault=Vault(settings.pii_vault_public_key) if settings.pii_vault_public_key else None,
                       lock=lock, passages=PassageBatcher(embedder))
    parts.vectors = VectorReader(store, index, budget_mb=settings.replica_budget_mb, lock=lock)
    indexer = Indexer(parts, batch=settings.index_batch)
    parts.queue = indexer
    return parts, indexer, touched


#: seconds between this worker's checkpoints of SQLite's log (the serving process's commits do none)
CHECKPOINT_S = 1.0


def _upkeep(parts: Components, parent: int, stop: threading.Event) -> None:
    """Each second: checkpoint the store's log, and stop when the parent is gone."""
    while not stop.wait(CHECKPOINT_S):
        if os.getppid() != parent:
            log.warning("the store that started this indexer is gone; stopping")
            os._exit(0)  # a batch in hand is not committed: it stays in the outbox, replayed by the next worker
        try:
            parts.store.checkpoint()
        except Exception:  # the next second tries again; the log only grows meanwhile
            log.warning("checkpointing the record store failed", exc_info=True)


def main() -> int:
    # the protocol owns the real standard output; anything a library prints goes to the log
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=os.environ.get("PORTAMEM_LOG_LEVEL", "WARNING"),
                        format="portamem-indexer[%(process)d] %(levelname)s %(name)s: %(message)s")
    reply = _Reply(out)
    config = json.loads(sys.stdin.readline())
    settings = Settings(**config["settings"])  # the store's, as ``dataclasses.asdict`` sent them
    try:
        parts, indexer, touched = _open(settings, config["index_uri"], bool(config.get("index_local")))
    except Exception as exc:  # noqa: BLE001 - said to the parent, which fails its open with it
        reply(failed=f"{type(exc).__name__}: {exc}")
        return 3

    def batch(done: list[str], written: int, records: list[MemoryRecord]) -> None:
        scopes: dict[tuple[str, str], list[str]] = {}
        for r in records:
            scopes.setdefault((r.tenant_id, r.user_id), []).append(r.memory_id)
        reply(batch={"done": done, "written": written, "rows": [[t, u, ids] for (t, u), ids in scopes.items()],
                     "keywords": touched.taken(), "offered": indexer.offered_total})

    indexer.on_batch = batch
    indexer.on_drained = lambda n: reply(drained=n)
    indexer.on_repaired = lambda: reply(repaired=True)
    indexer.on_error = lambda message: reply(error=message)
    stop = threading.Event()
    threading.Thread(target=_upkeep, args=(parts, int(config["parent"]), stop), daemon=True).start()
    try:
        indexer.start(repair=bool(config.get("repair")))
        reply(ready=os.getpid())
        for line in sys.stdin:
            command = line.split()
            if not command:
                continue
            if command[0] == "w":
                indexer.wake()
            elif command[0] == "f" and len(command) == 2:
                indexer.request(int(command[1]))
            elif command[0] == "v":
                rows, vectors = handed_over(line[2:])
                indexer.handover.put(rows, vectors)  # type: ignore[arg-type]
    except (OSError, ValueError):  # standard input closed under us
        pass
    finally:
        stop.set()
        indexer.stop()
        parts.index.close()
        parts.store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
