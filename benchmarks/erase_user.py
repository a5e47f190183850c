"""What erasing a user costs on an embedded store: ``Memory.erase_user`` rebuilds a milvus-lite index
from the stored vectors (milvus-lite keeps deleted rows in its files and cannot be asked to compact),
so its time grows with the whole store, not with the user; a forget is shown beside it.

``null-hash`` (a near-free pseudo-embedder) writes the store: the rebuild re-embeds nothing, so the
model does not change the erasure's time.

    python benchmarks/erase_user.py --memories 10000 --users 50
"""

from __future__ import annotations

import argparse
import tempfile
import time

from portamem import Memory, Settings
from portamem.embedding.embedders import HashEmbedder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, \
            Memory(settings=Settings(path=d, maintain_interval_s=None), embedder=HashEmbedder()) as mem:
        t = time.perf_counter()
        per = args.memories // args.users
        for u in range(args.users):
            mem.save_memories([f"note {i} of user {u}: item{i * 7919 % 100003} at place{u}x{i}" for i in range(per)],
                              user_id=f"u{u}")
        mem.flush()
        print(f"wrote {per * args.users} memories of {args.users} users in {time.perf_counter() - t:.1f} s; "
              f"index holds {mem.index.count()}")
        t = time.perf_counter()
        done = mem.erase_user(user_id="u1")
        print(f"erase_user: {done.memories} memories in {time.perf_counter() - t:.2f} s; index holds {mem.index.count()}")
        ids = [r.memory_id for r in mem.list_memories(user_id="u2", limit=5)]
        t = time.perf_counter()
        mem.forget_memory(ids, user_id="u2")
        print(f"forget_memory of {len(ids)}: {(time.perf_counter() - t) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
