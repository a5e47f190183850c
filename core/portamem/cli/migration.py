"""``portamem migrate SRC DST``: move a store to another backend, then fill the destination's index."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..config import Settings
from ..memory import Memory

__all__ = ["STORAGE_COMMANDS", "store_settings"]


def store_settings(location: str, config: str | None, vector_uri: str | None = None) -> Settings:
    """Settings of a store named by a database URL, or by a directory: the embedded stores in it,
    whatever URLs the configuration names."""
    settings = Settings.load(config)
    if "://" in location:
        return settings.replace(db_url=location, vector_uri=vector_uri or settings.vector_uri)
    return settings.replace(path=location, db_url=None, vector_uri=vector_uri)


def _add_migrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", help="source store: a directory or a database URL (sqlite:///..., postgresql+psycopg://...)")
    p.add_argument("dst", help="destination store, empty or a copy interrupted earlier: a directory or a database URL")
    p.add_argument("--dst-vectors", help="the destination's vector index: a Milvus URI, or pgvector (a table in the "
                                          "destination's PostgreSQL database); default: its embedded one")
    p.add_argument("--batch", type=int, default=1000, help="memories per copied transaction (default 1000)")
    p.add_argument("--no-index", action="store_true", help="copy the records only; the index fills on first open")


def cmd_migrate(args: argparse.Namespace) -> int:
    """Copy every record, turn, audit and retrieval row from SRC to DST in batches (rerun to resume),
    verify both by row counts and checksums, then build DST's vector index from the copied embeddings,
    re-embedding when DST's embedder differs from the one the records were made with. Stop writers first."""
    from ..storage.migrate import migrate

    src = store_settings(args.src, args.config)
    dst = store_settings(args.dst, args.config, args.dst_vectors)
    bar: dict[str, Any] = {}

    def progress(table: str, n: int) -> None:
        from tqdm import tqdm

        if table not in bar:
            bar[table] = tqdm(desc=f"copy {table}", unit="row", file=sys.stderr, disable=None)
        bar[table].update(n)

    try:
        report = migrate(src.resolved_db_url, dst.resolved_db_url, batch=args.batch, progress=progress)
    finally:
        for b in bar.values():
            b.close()
    for table, (a, b) in report.counts.items():
        print(f"{table} {a} = {b}  checksum {'ok' if report.checksums_match[table] else 'DIFFERS'}")
    if report.resumed_after:
        print(f"resumed after memory {report.resumed_after}")
    if not args.no_index:
        with Memory(settings=dst) as mem:
            mem.flush()  # the indexer fills the destination's vector index from the copies
            print(f"indexed {mem.index.count()} active memories with {mem.embedder.name}")
    return 0


STORAGE_COMMANDS = [
    ("migrate", "copy a whole store to another backend, verified, then index it there", _add_migrate, cmd_migrate),
]
