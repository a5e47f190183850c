"""The model reconciler (``portamem_reconcile``, first): one model call per user turn decides what its
new statements do to the memories shown with them, as mem0 does (ADD / UPDATE / DELETE / NOOP), with
a part outdated besides.

Active when a model is configured (``Settings.llm_url`` and ``llm_model``, or a model handed over):
the formation worker passes it. The answer must keep a strict JSON schema (sent as the request's
``response_format`` where the server takes one) and is validated before it counts:

- every statement and memory named is one of those shown, and a memory only for a statement it was
  shown with (so within the writer's tenant, user and scope: the worker selected them so); a decision
  that names no memory changes none (a small model often answers "noop" with a null target);
- a part outdated must be words of that memory; a reason is short text;
- a change, outdate or delete stands only on a clause the rules read as a statement (a question,
  request, thanks, greeting or small talk states nothing, whatever the model says).

A broken answer is asked again within the time budget; when no answer keeps the contract the plugin
passes and the rule reconciler decides (counted as a fallback). The worker then checks trust, scope,
the user's own words and the subjects again (``portamem.write.forming.check``) and audits each
decision with the model's reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from portamem import hookimpl
from portamem.models import ask_json
from portamem.pipeline import RECONCILE_ACTIONS, Decision, FormationTurn, WriteContext
from portamem.records import MemoryRecord
from portamem.language.statements import content_words

from .acts import utterances

__all__ = ["portamem_reconcile", "prompt", "schema", "validator", "CONTEXT_CHARS"]

#: characters of each earlier turn, reply and memory shown to the model
CONTEXT_CHARS = 300
#: tokens the answer may take: a few decisions of a turn with short reasons
MAX_TOKENS = 320

SYSTEM = (
    "You keep a user's long-term memory up to date. You get the latest conversation turn, the new "
    "statements read from the user's message (S1, S2, ...) and, under each, memories already stored "
    "(M1, M2, ...). For every new statement decide, against each memory shown under it that it is "
    "about: \"update\" when the statement gives a new value for what the memory says (the memory is "
    "replaced), \"delete\" when the statement says the memory no longer holds, \"outdate\" when it "
    "replaces only a part of the memory (give that part, copied from the memory, as part), \"noop\" "
    "when it says the memory again, \"add\" when it is new and the memory still holds beside it. A "
    "statement about someone else (a parent, a friend, a pet) never replaces a memory about the user. "
    "A question, request or thanks states nothing. Give target null for a statement that is about "
    "none of the memories. Keep reasons under 15 words. Answer with JSON only.\n\n"
    "Example. New statements: S1: \"The kitchen budget is now 8000 euros.\" with M1: \"My budget for the "
    "kitchen is 5000 euros.\" and M2: \"I live in Lyon.\"; S2: \"My sister got a puppy.\" with M2. Answer: "
    '{"decisions": [{"statement": "S1", "action": "update", "target": "M1", "reason": "the kitchen budget '
    'changed"}, {"statement": "S2", "action": "add", "target": null, "reason": "about nothing stored"}]}'
)


def schema(statement_keys: Sequence[str], memory_keys: Sequence[str]) -> dict[str, Any]:
    """The answer's JSON schema: one decision per (statement, memory) pair it bears on."""
    return {
        "type": "object", "additionalProperties": False, "required": ["decisions"],
        "properties": {"decisions": {
            "type": "array", "maxItems": max(1, 2 * len(statement_keys) + len(memory_keys)),
            "items": {
                "type": "object", "additionalProperties": False,
                "required": ["statement", "action", "target", "reason"],
                "properties": {
                    "statement": {"type": "string", "enum": list(statement_keys)},
                    "action": {"type": "string", "enum": list(RECONCILE_ACTIONS)},
                    "target": {"anyOf": [{"type": "string", "enum": list(memory_keys) or ["M0"]},
                                         {"type": "null"}]},
                    "reason": {"type": "string", "maxLength": 160},
                    "part": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]},
                },
            },
        }},
    }


def _clip(text: str, n: int = CONTEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def prompt(statements: Sequence[MemoryRecord], candidates: Mapping[str, Sequence[MemoryRecord]],
           turn: FormationTurn) -> tuple[list[dict[str, str]], dict[str, str], dict[str, MemoryRecord],
                                         dict[str, set[str]]]:
    """The messages, and the short keys they use: S-keys to statement ids, M-keys to memories, and the
    M-keys shown under each S-key."""
    s_keys = {f"S{i}": s.memory_id for i, s in enumerate(statements, 1)}
    m_keys: dict[str, MemoryRecord] = {}
    key_of: dict[str, str] = {}
    shown: dict[str, set[str]] = {}
    lines = []
    for (sk, sid), s in zip(s_keys.items(), statements):
        lines.append(f'{sk}: "{_clip(s.content)}"')
        shown[sk] = set()
        for c in candidates.get(sid, []):
            if c.memory_id not in key_of:
                key_of[c.memory_id] = f"M{len(m_keys) + 1}"
                m_keys[key_of[c.memory_id]] = c
            mk = key_of[c.memory_id]
            shown[sk].add(mk)
            note = f" [already replaced by {sk}]" if c.superseded_by == sid else ""
            lines.append(f'  {mk} (stored {c.created_at.date().isoformat()}): "{_clip(c.content)}"{note}')
        if not shown[sk]:
            lines.append("  (no stored memory is about it)")
    earlier = "\n".join(f"User: {_clip(u)}\nAssistant: {_clip(a)}" for u, a in turn.context)
    user = (
        (f"Earlier turns:\n{earlier}\n\n" if earlier else "")
        + f"Latest user message: \"{_clip(turn.user, 800)}\"\nAssistant's reply: \"{_clip(turn.assistant)}\"\n\n"
        + "New statements and the stored memories they may be about:\n" + "\n".join(lines) + "\n\n"
        + 'Answer {"decisions": [{"statement": "S1", "action": "add", "target": null, "reason": "<why, in a few '
        + 'words>", "part": null}]}, one decision per statement, and one per memory it is about.'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], s_keys, m_keys, shown


def validator(s_keys: Mapping[str, str], m_keys: Mapping[str, MemoryRecord], shown: Mapping[str, set[str]],
              statements: Mapping[str, MemoryRecord]) -> Any:
    """``validate(data)`` for ``ask_json``: why the answer breaks the contract, or None."""
    def validate(data: Any) -> str | None:
        if not isinstance(data, dict) or set(data) != {"decisions"} or not isinstance(data["decisions"], list):
            return 'expected exactly {"decisions": [...]}'
        for i, d in enumerate(data["decisions"]):
            if not isinstance(d, dict) or not {"statement", "action", "target"} <= set(d) \
                    or set(d) - {"statement", "action", "target", "reason", "part"}:
                return f"decision {i}: expected statement, action, target, reason and part only"
            if d["statement"] not in s_keys:
                return f"decision {i}: statement must be one of {sorted(s_keys)}"
            if d["action"] not in RECONCILE_ACTIONS:
                return f"decision {i}: action must be one of {list(RECONCILE_ACTIONS)}"
            target = d["target"]
            if target is not None and target not in shown[d["statement"]]:
                return f"decision {i}: target must be null or one of {sorted(shown[d['statement']])}"
            if not isinstance(d.get("reason", ""), str) or (d.get("part") is not None and not isinstance(d["part"], str)):
                return f"decision {i}: reason and part must be text"
            if d["action"] == "outdate" and d.get("part") and not content_words(d["part"]) <= content_words(
                    m_keys[target].content):
                return f"decision {i}: part must be words of {target}"
        return None

    return validate


def _states(text: str) -> bool:
    """Whether the rules read the text as stating something."""
    acts = utterances(text)
    return not acts or any(act == "statement" for _, act in acts)


@hookimpl(tryfirst=True)
def portamem_reconcile(statements: Sequence[MemoryRecord], candidates: Mapping[str, Sequence[MemoryRecord]],
                       turn: FormationTurn, context: WriteContext, model: Any) -> list[Decision] | None:
    if model is None or not statements:
        return None
    messages, s_keys, m_keys, shown = prompt(statements, candidates, turn)
    if not m_keys:  # nothing stored is near: every statement is new, and the rules said so already
        return None
    by_id = {s.memory_id: s for s in statements}
    settings = context.settings
    timeout = float(getattr(settings, "llm_timeout_s", 30.0))
    data = ask_json(model, messages, schema=schema(list(s_keys), list(m_keys)),
                    validate=validator(s_keys, m_keys, shown, by_id), budget_s=2 * timeout,
                    retries=int(getattr(settings, "llm_retries", 1)), max_tokens=MAX_TOKENS, what="reconcile")
    if data is None:
        return None
    out = []
    for d in data["decisions"]:
        statement = by_id[s_keys[d["statement"]]]
        if d["action"] in ("update", "outdate", "delete") and not _states(statement.content):
            continue  # the rules read no statement there: the model's word does not make it one
        target = m_keys[d["target"]].memory_id if d["target"] is not None else None
        action = d["action"] if target is not None else "add"  # about no memory shown: it changes none
        out.append(Decision(statement.memory_id, action, target, "model: " + str(d.get("reason") or "")[:200],
                            d.get("part") or None))
    return out
