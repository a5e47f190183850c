"""Cost of safe export and import: what the checksum, fsync and rename, and the re-run of checks,
guard and redaction on every imported record cost against the bare work in the same run.

- export: ``Memory.export(path)`` (temporary file, SHA-256 trailer, fsync, rename) against writing
  the same records' JSON lines straight to a file;
- import: ``Memory.import_(path)`` (UTF-8 and checksum verification, validation, guard, redaction,
  id settling, one transaction, indexing) against parsing the lines and inserting the records and
  their vectors in one transaction, with no checks at all.

Records carry their vectors, so neither side embeds.

    python benchmarks/portable.py --n 2000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from portamem import Memory, Settings
from portamem.portable.transfer import export_lines
from portamem.records import MemoryRecord

WORDS = ("order invoice parcel coffee tea flight hotel meeting doctor school garden budget contract "
         "birthday allergy train museum recipe bicycle piano holiday").split()
ZH = ["我喜欢喝乌龙茶", "明天去杭州出差", "订单已经确认", "周五下午开会", "孩子下个月开学"]


def _records(mem: Memory, n: int) -> list[dict]:
    rng = random.Random(0)
    vectors = np.random.default_rng(0).standard_normal((n, mem.embedder.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i in range(n):
        text = (f"{rng.choice(ZH)}，编号 ZX-{i:06d}。" if i % 5 == 0 else
                f"The {rng.choice(WORDS)} is ref ORD-{i:06d}, about {rng.choice(WORDS)} and {rng.choice(WORDS)}.")
        out.append(MemoryRecord(content=text, user_id="bench", embedding=vectors[i].tolist(),
                                embedding_model=mem.embedder.name, embedding_version=mem.embedder.version).to_dict())
    return out


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="records exported and imported")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--embedder", default="use-multilingual-v3")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="portamem-portable-"))
    settings = Settings(path=str(root / "src"), embedder=args.embedder, dedupe=False)
    src = Memory(settings=settings)
    records = _records(src, args.n)
    header = {"embedding_model": src.embedder.name, "embedding_dim": src.embedder.dim}
    file = root / "seed.jsonl"
    file.write_text("".join(export_lines(header, records)), encoding="utf-8")
    src.import_(file)

    export_safe, export_bare, import_safe, import_bare = [], [], [], []
    for rep in range(args.repeats):
        out = root / f"export-{rep}.jsonl"
        export_safe.append(_timed(lambda: src.export(out)))

        def bare_export() -> None:
            got = src.store.list(src.tenant_id, None)
            with open(root / f"bare-{rep}.jsonl", "w", encoding="utf-8") as fh:
                for r in got:
                    fh.write(json.dumps({"record": r.to_dict()}, ensure_ascii=False) + "\n")

        export_bare.append(_timed(bare_export))
        with Memory(settings=settings.replace(path=str(root / f"safe-{rep}"))) as dst:
            import_safe.append(_timed(lambda: dst.import_(out)))
            assert dst.store.count() == args.n
        with Memory(settings=settings.replace(path=str(root / f"bare-{rep}"))) as dst:
            def bare_import() -> None:
                with open(out, encoding="utf-8") as fh:
                    rows = [json.loads(line) for line in fh]
                recs = [MemoryRecord.from_dict(o["record"]) for o in rows if "record" in o]
                with dst.store.transaction() as conn:
                    dst.store.insert(conn, recs)
                dst.index.upsert(recs)
                dst.index.flush()

            import_bare.append(_timed(bare_import))
    src.close()
    print(f"n = {args.n} records, {args.repeats} repeats, embedder {args.embedder} (vectors carried, none embedded)")
    print(f"{'operation':<10} {'safe s (median)':>16} {'bare s (median)':>16} {'ratio':>7} {'safe rec/s':>11}")
    for name, safe, bare in (("export", export_safe, export_bare), ("import", import_safe, import_bare)):
        s, b = statistics.median(safe), statistics.median(bare)
        print(f"{name:<10} {s:>16.3f} {b:>16.3f} {s / b:>7.2f} {args.n / s:>11.0f}")


if __name__ == "__main__":
    main()
