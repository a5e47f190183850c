"""The ``portamem`` command: demo, search, show, export, import, reindex, maintain, audit, confirm, reveal, eval, tune,
calibrate, serve, keys, mcp, migrate."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from .. import scenarios
from ..scenarios import locomo
from ..scenarios import habits as habits_eval
from ..scenarios import paraphrase as paraphrase_eval
from ..scenarios import preload as preload_eval
from ..config import Settings
from .connect import one_shot
from .connect import open_memory as _open
from .connect import progress_bar as _progress
from ..errors import PortamemError
from ..memory import Memory
from ..read.prompt import format_memories
from ..recall import recall
from ..records import SearchHit
from .migration import STORAGE_COMMANDS
from ..server.commands import SERVER_COMMANDS

__all__ = ["main", "build_parser", "COMMANDS"]

Command = tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]


def _print_hits(hits: Sequence[SearchHit], *, indent: str = "  ", scope: str = "") -> None:
    if not hits:
        print(f"{indent}(nothing recalled{scope})")
    for rank, hit in enumerate(hits, 1):
        parts = ", ".join(f"{k} {v:.2f}" for k, v in hit.breakdown.components.items())
        when = hit.record.created_at.strftime("%Y-%m-%d %H:%M")
        print(f"{indent}{rank}. [{hit.score:.3f}] {hit.content.splitlines()[0][:100]}")
        print(f"{indent}   {hit.record.type.value}/{hit.record.kind or '-'}  {when}  found by {'+'.join(hit.found_by)}  ({parts})")


# ---------------------------------------------------------------------- demo
DEMO_TURNS: tuple[tuple[str, str], ...] = (
    ("Hi! My name is Dana Whitfield and I'm a pastry chef in Lyon.",
     "Nice to meet you, Dana! How can I help today?"),
    ("Please remember that I'm allergic to hazelnuts.",
     "Noted: no hazelnuts in anything I suggest."),
    ("I ordered a stand mixer yesterday, order number ORD-58213, it should arrive Friday.",
     "Great, I'll keep an eye on ORD-58213 for you."),
    ("I really prefer oat milk in my coffee.",
     "Oat milk it is."),
    ("What's the weather like for a walk later?",
     "It looks mild this afternoon, around 18°C."),
    ("我下个月要去上海参加烘焙展，三月十二号出发。",
     "好的，三月十二号去上海参加烘焙展，我记下了。"),
    ("Actually, cancel the mixer order, I found one at a local shop.",
     "Understood: I'll note that ORD-58213 is cancelled."),
    ("Thanks, that's all for now!", "You're welcome, Dana. See you soon!"),
)
DEMO_QUERIES: tuple[str, ...] = (
    "What is the user allergic to?",
    "ORD-58213",
    "how does she take her coffee?",
    "她什么时候去上海？",
    "What does Dana do for a living?",
)
#: asked the next day through ``recall``, as a framework asks before a model call: the prompt it gets shows
#: the cancellation in place of the order it replaced
DEMO_PROMPT_QUESTION = "Is my mixer order still coming?"


def _add_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep", action="store_true", help="keep the demo store (printed at the end)")


def cmd_demo(args: argparse.Namespace) -> int:
    """A scripted conversation through the working window, then recall from long-term memory."""
    path = args.path or tempfile.mkdtemp(prefix="portamem-demo-")
    t0 = time.perf_counter()
    settings = one_shot(Settings.load(args.config, path=path, window_turns=3))
    with Memory(settings=settings) as mem:
        print(f"portamem demo: store in {path} (embedder {mem.embedder.name}, loaded in {time.perf_counter() - t0:.1f} s)")
        print("\nConversation (window of 3 turns; older turns are compressed into episodic memory):")
        start = datetime.now().astimezone() - timedelta(days=2)
        for i, (user, reply) in enumerate(DEMO_TURNS):
            written = mem.add_turn(user, reply, user_id="dana", session_id="demo",
                                   created_at=start + timedelta(hours=6 * i))
            print(f"  user: {user}\n  assistant: {reply}")
            for rec in written:
                print(f"    -> {rec.type.value} memory ({rec.kind or '-'}, importance {rec.importance_band}): "
                      f"{rec.content.splitlines()[0][:70]}")
        print(f"\nWorking window now holds {len(mem.context(user_id='dana', session_id='demo'))} turns; "
              f"long-term memory holds {len(mem.list_memories(user_id='dana'))} memories.")
        print("\nRecall:")
        for query in DEMO_QUERIES:
            t = time.perf_counter()
            hits = mem.search_memory(query, user_id="dana", top_k=3)
            print(f"\n? {query}   ({(time.perf_counter() - t) * 1000:.0f} ms)")
            _print_hits(hits)
        print(f"\nThe next day, the prompt a framework gets for {DEMO_PROMPT_QUESTION!r} (recall):")
        prompt = format_memories(recall(mem, DEMO_PROMPT_QUESTION, user_id="dana", session_id="next-day"), ids=False)
        print("\n".join(f"  {line}" for line in prompt.splitlines()) or "  (nothing)")
    if not (args.keep or args.path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
    return 0


# ---------------------------------------------------------------------- search / show
def _add_search(p: argparse.ArgumentParser) -> None:
    p.add_argument("query")
    p.add_argument("--user", required=True)
    p.add_argument("-k", "--top-k", type=int, default=5)
    p.add_argument("--type", action="append", dest="types", help="memory type filter (repeatable)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--debug", action="store_true", help="print every candidate's scores and fate, and the prompt")


def cmd_search(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        filters = {"types": args.types} if args.types else None
        hits = mem.search_memory(args.query, user_id=args.user, top_k=args.top_k, filters=filters, debug=args.debug)
        if args.json:
            print(json.dumps([{"memory_id": h.memory_id, "score": h.score, "components": h.breakdown.components,
                               "found_by": h.found_by, "record": h.record.to_dict(include_embedding=False)}
                              for h in hits], ensure_ascii=False, indent=2))
        else:
            # an empty result names where it looked: a wrong --tenant or --user is the usual reason
            where = getattr(mem, "url", None) or mem.settings.path
            _print_hits(hits, indent="", scope=f" for user {args.user!r} in tenant {mem.tenant_id!r} of {where}")
    return 0


def _add_memory(p: argparse.ArgumentParser) -> None:
    p.add_argument("memory_id")
    p.add_argument("--user", required=True)


def _add_show(p: argparse.ArgumentParser) -> None:
    _add_memory(p)
    p.add_argument("--json", action="store_true")


def cmd_show(args: argparse.Namespace) -> int:
    """One memory explained: when and from which turn it was written, its source, trust and weight,
    its audit trail and every search that returned it."""
    with _open(args) as mem:
        why = mem.explain(args.memory_id, user_id=args.user)
        print(json.dumps(why.to_dict(), ensure_ascii=False, indent=2) if args.json else why.render())
    return 0


# ---------------------------------------------------------------------- audit / confirm / reveal / vault-keygen
def _add_audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", help="one user's memories (default: the whole tenant)")
    p.add_argument("--since", type=datetime.fromisoformat, help="only rises from this ISO time on")
    p.add_argument("--window-hours", type=float, default=24.0, help="the window a rise is measured over")
    p.add_argument("--factor", type=float, default=2.0, help="how many times the weight must have grown")
    p.add_argument("--quarantined", action="store_true", help="list quarantined memories too")
    p.add_argument("--json", action="store_true")


def cmd_audit(args: argparse.Namespace) -> int:
    """Memories to review: weight that rose sharply (from the audit log), low-trust and pending ones."""
    with _open(args) as mem:
        findings = mem.audit_scan(user_id=args.user, since=args.since, window=timedelta(hours=args.window_hours),
                                  factor=args.factor, include_quarantined=args.quarantined)
    if args.json:
        print(json.dumps([f.to_dict() for f in findings], ensure_ascii=False, indent=2))
        return 0
    print(f"{len(findings)} memories to review")
    for f in findings:
        r = f.record
        print(f"- {r.memory_id}  user {r.user_id}  {r.status.value}  {r.source.value}/{r.trust.value}  "
              f"{' '.join(r.content.split())[:70]!r}")
        for reason in f.reasons:
            print(f"    {reason}")
    return 0


def cmd_confirm(args: argparse.Namespace) -> int:
    """Activate a pending memory after review."""
    with _open(args) as mem:
        record = mem.confirm_memory(args.memory_id, user_id=args.user)
    print(f"{record.memory_id} is {record.status.value}")
    return 0


def _add_reveal(p: argparse.ArgumentParser) -> None:
    _add_memory(p)
    p.add_argument("--key-file", help="the vault private key (default: $PORTAMEM_VAULT_PRIVATE_KEY)")


def cmd_reveal(args: argparse.Namespace) -> int:
    """Print a memory's original, unredacted texts; needs the vault private key, and is audited."""
    with _open(args) as mem:
        original = mem.reveal_memory(args.memory_id, user_id=args.user, key_file=args.key_file)
    print(json.dumps(original, ensure_ascii=False, indent=2))
    return 0


def _add_vault_keygen(p: argparse.ArgumentParser) -> None:
    p.add_argument("--private-key-file", help="write the private key here (mode 0600) instead of printing it")


def cmd_vault_keygen(args: argparse.Namespace) -> int:
    """A new vault key pair: the public key goes in the settings, the private key away from the store."""
    from ..storage.vault import generate_keypair, write_private_key

    public, private = generate_keypair()
    print(f"PORTAMEM_PII_VAULT_PUBLIC_KEY={public}")
    if args.private_key_file:
        write_private_key(args.private_key_file, private, store_path=Settings.load(args.config, path=args.path).path)
        print(f"private key written to {args.private_key_file}", file=sys.stderr)
    else:
        print(f"PORTAMEM_VAULT_PRIVATE_KEY={private}")
    return 0


# ---------------------------------------------------------------------- export / import / reindex / maintain
def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="output JSON-lines file ('-' for stdout)")
    p.add_argument("--user", help="only this user's memory (default: the whole tenant)")
    p.add_argument("--no-embeddings", action="store_true", help="leave vectors out (they are recomputed on import)")
    p.add_argument("--include-deleted", action="store_true")


def cmd_export(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        out = sys.stdout if args.file == "-" else args.file
        n = mem.export(out, user_id=args.user, include_embeddings=not args.no_embeddings,
                       include_deleted=args.include_deleted)
    print(f"exported {n} memories", file=sys.stderr)
    return 0


def _add_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("file")
    p.add_argument("--on-conflict", choices=["error", "skip", "replace"], default="error")
    p.add_argument("--into-tenant", help="import into this tenant instead of the one in the file")
    p.add_argument("--trusted", action="store_true",
                   help="a restore of your own backup: keep the file's source, trust and status "
                        "(the guard and PII redaction still apply)")


def cmd_import(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        n = mem.import_(args.file, tenant_id=args.into_tenant, on_conflict=args.on_conflict, progress=_progress,
                       trusted=args.trusted)
    print(f"imported {n} memories")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    with _open(args, auto_reindex=False) as mem:
        n = mem.reindex(progress=_progress)
    print(f"reindexed {n} memories")
    return 0


def _add_maintain(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", help="a named eviction policy (default: the eviction hooks)")


def cmd_maintain(args: argparse.Namespace) -> int:
    with _open(args) as mem:
        report = mem.maintain(policy=args.policy)
    print(f"evicted {len(report.evicted)}, purged {report.purged}, consolidated {len(report.consolidated)} groups, "
          f"abstracted {len(report.abstracted)} habits")
    return 0


def _add_erase_user(p: argparse.ArgumentParser) -> None:
    p.add_argument("--user", required=True, help="the user whose memories, windows and logs are erased")
    p.add_argument("--yes", action="store_true", help="confirm: there is no grace period and no undo")
    p.add_argument("--json", action="store_true")


def cmd_erase_user(args: argparse.Namespace) -> int:
    """Erase everything of one user in the tenant now: every tier, the indexes, caches, working windows,
    logs and sealed originals; one audit row without content remains. Through a server it needs a
    read-write key with the admin scope."""
    if not args.yes:
        print(f"portamem: erasing user {args.user!r} cannot be undone; run again with --yes", file=sys.stderr)
        return 2
    with _open(args) as mem:
        done = mem.erase_user(user_id=args.user)
    if args.json:
        print(json.dumps(done.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(f"erased user {done.user_id!r} of tenant {done.tenant_id!r}: {done.memories} memories, "
              f"{sum(done.rows.values())} rows")
    return 0


def _no_args(p: argparse.ArgumentParser) -> None:
    return None


# ---------------------------------------------------------------------- eval
#: the datasets ``portamem eval`` measures: (help, add its arguments, run it)
EVAL_DATASETS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "locomo": ("Recall@K and MRR on LoCoMo conversations: hybrid vs pure vector vs pure BM25",
               locomo.add_eval_arguments, locomo.run_eval),
    "scenarios": ("the scenario suite: top-1 right, answer and stale values in the prompt, prompt precision",
                  scenarios.add_arguments, scenarios.run),
    "preload": ("task openings: what the task will need in its first prompt, searches per task",
                preload_eval.add_arguments, preload_eval.run),
    "paraphrase": ("facts asked back in other words: top-1, answer in the prompt, nothing for what was never said",
                   paraphrase_eval.add_arguments, paraphrase_eval.run),
    "habits": ("repeated behaviour: an abstract memory with its support, the top hit for the habit question",
               habits_eval.add_arguments, habits_eval.run),
}


def _add_eval(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="dataset", required=True, metavar="{" + ",".join(EVAL_DATASETS) + "}")
    for name, (help_text, configure, run) in EVAL_DATASETS.items():
        configure(sub.add_parser(name, help=help_text, description=(run.__doc__ or help_text).strip()))


def _run_eval(args: argparse.Namespace) -> int:
    """Measure retrieval: ``eval locomo FILE``, ``eval scenarios`` or ``eval preload``."""
    return EVAL_DATASETS[args.dataset][2](args)


COMMANDS: list[Command] = [
    ("demo", "run a scripted conversation, then recall from memory", _add_demo, cmd_demo),
    ("search", "hybrid search of one user's memories", _add_search, cmd_search),
    ("show", "one memory explained: provenance, trust, weight, audit trail, retrievals", _add_show, cmd_show),
    ("export", "write memories as portable JSON lines", _add_export, cmd_export),
    ("import", "read a JSON-lines export back", _add_import, cmd_import),
    ("reindex", "rebuild the vector index from the records", _no_args, cmd_reindex),
    ("maintain", "evict decayed memories, purge after grace, consolidate", _add_maintain, cmd_maintain),
    ("erase-user", "erase everything of one user now (no grace period, no undo)", _add_erase_user, cmd_erase_user),
    ("audit", "list memories whose weight rose sharply, low-trust and pending ones", _add_audit, cmd_audit),
    ("confirm", "activate a pending memory after review", _add_memory, cmd_confirm),
    ("reveal", "print a redacted memory's original (needs the vault private key)", _add_reveal, cmd_reveal),
    ("vault-keygen", "make a key pair for sealing redacted originals", _add_vault_keygen, cmd_vault_keygen),
    ("eval", "retrieval quality: LoCoMo (hybrid vs vector vs BM25) or the scenario suite", _add_eval, _run_eval),
    ("tune", "grid-search the weights on a labelled set, report them held out", locomo.add_tune_arguments,
     locomo.run_tune),
    ("calibrate", "measure an embedder's cosine between unrelated pairs (for absolute scores)",
     locomo.add_calibrate_arguments, locomo.run_calibrate),
    *SERVER_COMMANDS,
    *STORAGE_COMMANDS,
]


def _add_store_options(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    """The options that name the store, the tenant and the server; ``default=SUPPRESS`` on subcommands, so
    they are taken after the subcommand too and never reset what was given before it."""
    parser.add_argument("--path", default=default, help="store directory (default: ./portamem-data or PORTAMEM_PATH)")
    parser.add_argument("--config", default=default, help="TOML settings file (table [portamem])")
    parser.add_argument("--tenant", default=default, help="tenant id (default: 'default')")
    parser.add_argument("--url", default=default, help="use the portamem server at this URL instead of opening the store")
    parser.add_argument("--api-key", default=default, help="API key for --url (default: $PORTAMEM_API_KEY)")


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    return [p for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for p in dict.fromkeys(action.choices.values())]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="portamem", description="Portable long-term memory for LLM agents.")
    _add_store_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, configure, run in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=(run.__doc__ or help_text).strip())
        configure(p)
        p.set_defaults(run=run)
    # `portamem search q --user u --path DIR` as well as `portamem --path DIR search q --user u`
    todo = _subcommands(parser)
    while todo:
        p = todo.pop()
        _add_store_options(p, default=argparse.SUPPRESS)
        todo.extend(_subcommands(p))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except PortamemError as exc:
        print(f"portamem: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
