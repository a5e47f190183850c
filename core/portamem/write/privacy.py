"""PII on the write path: redact a record's content, summary and metadata texts; seal the originals."""

from __future__ import annotations

import copy
import re
from typing import Any

from ..config import Settings
from ..errors import VaultError
from ..pipeline import Redaction, WriteContext
from ..plugins import Hooks
from ..records import REDACTIONS_KEY, VAULT_KEY, MemoryRecord, Turn
from ..storage.vault import Vault, open_sealed

__all__ = ["redact_record", "redact_value", "redact_turn", "redacted_text", "reveal", "sealed_original", "VAULT_KEY"]

#: ``VAULT_KEY`` (``portamem.records``): metadata key of the sealed original (``Memory.reveal_memory`` opens it)


def redact_value(hooks: Hooks, value: Any, ctx: WriteContext, spans: list[Redaction],
                 originals: dict[str, str] | None = None) -> Any:
    """A copy of a JSON value with every string redacted, keys included; found spans appended, and with
    ``originals`` each span's text mapped to its placeholder.

    Two keys that redact alike ("call 138..." and "call 139...") both stay: the second gets ``#2``.
    """
    if isinstance(value, str):
        out, found = hooks.redact(value, ctx)
        spans.extend(found)
        if originals is not None:
            originals.update((value[r.start:r.end].strip(), r.label()) for r in found)
        return out
    if isinstance(value, list):
        return [redact_value(hooks, v, ctx, spans, originals) for v in value]
    if isinstance(value, dict):
        out_map: dict[str, Any] = {}
        for k, v in value.items():
            key = redact_value(hooks, k, ctx, spans, originals) if isinstance(k, str) else k
            if key != k and (key in out_map or key in value):
                n = 2
                while f"{key}#{n}" in out_map or f"{key}#{n}" in value:
                    n += 1
                key = f"{key}#{n}"
            out_map[key] = redact_value(hooks, v, ctx, spans, originals)
        return out_map
    return value


def redacted_text(hooks: Hooks, settings: Settings, text: str, *, tenant_id: str, user_id: str) -> str:
    """``text`` with its PII replaced, as the retrieval log keeps a query: for what is printed or sent back
    for debugging (a search's candidate table), which ends up in logs."""
    return hooks.redact(text, WriteContext(tenant_id=tenant_id, user_id=user_id, settings=settings))[0]


def _scrub(value: Any, found: dict[str, str]) -> Any:
    """``value`` with each PII original found anywhere in the record replaced wherever else it is quoted:
    a passport number is recognised by the words before it, so a trigger reason or an entity that names it
    alone ("entities: X1234567"), or a summary that cut it from its words, would not be redacted on its own."""
    if not found:
        return value
    known = [(re.compile(re.escape(k), re.I), v) for k, v in sorted(found.items(), key=lambda kv: -len(kv[0]))
             if len(k) >= 4]
    return _replace(value, known)


def _replace(value: Any, known: list[tuple[re.Pattern[str], str]]) -> Any:
    if isinstance(value, str):
        for pattern, label in known:
            value = pattern.sub(label, value)
        return value
    if isinstance(value, list):
        return [_replace(v, known) for v in value]
    if isinstance(value, dict):
        return {_replace(k, known) if isinstance(k, str) else k: _replace(v, known) for k, v in value.items()}
    return value


def redact_record(hooks: Hooks, record: MemoryRecord, ctx: WriteContext, vault: Vault | None = None) -> list[Redaction]:
    """Redact in place. Metadata counts too: trigger reasons and compressed turns quote the user.

    With a vault, the originals are sealed into ``metadata[VAULT_KEY]`` for an authorised reveal.
    """
    original = {"content": record.content, "summary": record.summary, "entities": list(record.entities),
                "metadata": copy.deepcopy(record.metadata)}
    spans: list[Redaction] = []
    found: dict[str, str] = {}
    content = redact_value(hooks, record.content, ctx, spans, found)
    summary = redact_value(hooks, record.summary, ctx, spans, found) if record.summary else record.summary
    metadata = redact_value(hooks, record.metadata, ctx, spans, found)
    entities = redact_value(hooks, list(record.entities), ctx, spans, found)
    record.content, record.summary = _scrub(content, found), _scrub(summary, found)
    record.metadata = _scrub(metadata, found)
    record.entities = list(dict.fromkeys(_scrub(entities, found)))
    if spans:
        record.metadata[REDACTIONS_KEY] = sorted({r.kind for r in spans})
        if vault is not None:
            record.metadata[VAULT_KEY] = vault.seal(
                original, tenant_id=record.tenant_id, user_id=record.user_id, memory_id=record.memory_id
            )
    return spans


def sealed_original(record: MemoryRecord) -> str:
    """The vault token holding a redacted record's originals; ``VaultError`` when it has none."""
    token = record.metadata.get(VAULT_KEY)
    if not isinstance(token, str):
        raise VaultError(f"memory {record.memory_id} has no sealed original (nothing was redacted, "
                         "or no vault public key was set when it was written)")
    return token


def reveal(record: MemoryRecord, private_key: str) -> dict[str, Any]:
    """The sealed originals of a redacted record (content, summary, entities, metadata)."""
    return open_sealed(sealed_original(record), private_key, tenant_id=record.tenant_id, user_id=record.user_id,
                       memory_id=record.memory_id)


def redact_turn(hooks: Hooks, turn: Turn, ctx: WriteContext) -> Turn:
    """A copy of a window turn with its texts and metadata redacted, as it is stored."""
    spans: list[Redaction] = []
    return Turn(redact_value(hooks, turn.user, ctx, spans), redact_value(hooks, turn.assistant, ctx, spans),
                turn.created_at, redact_value(hooks, turn.metadata, ctx, spans), turn.seq)
