"""Checks every public entry point runs before it touches the store or the index.

Each check either returns the value in the form the write and read paths expect, or raises a
``portamem.errors`` type that says what was wrong. Text anywhere (content, ids, summaries,
entities, metadata keys and values, turns, queries) must be encodable as UTF-8 and free of NUL
characters: a lone surrogate accepted once would make every later export of its owner fail.
Sizes are bounded by ``Settings`` (``max_content_chars``, ``max_summary_chars``, ``max_id_chars``,
``max_metadata_bytes``, ``max_metadata_depth``, ``max_entities``, ``max_entity_chars``, ``max_top_k``).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

from ..config import Settings
from ..errors import ContentTooLongError, ValidationError
from ..filters import SearchFilters
from ..pipeline import WriteContext
from ..plugins import Hooks
from ..records import DEFAULT_TRUST, SYSTEM_METADATA_KEYS, SYSTEM_NAMESPACE, MemoryType, Source, Trust
from .requests import MemoryDraft

__all__ = [
    "check_text",
    "check_id",
    "check_tenant",
    "check_content",
    "check_query",
    "check_unit",
    "check_number",
    "check_int",
    "check_top_k",
    "check_flag",
    "check_json",
    "check_provenance",
    "RESERVED_METADATA_KEYS",
    "check_entities",
    "check_summary",
    "check_datetime",
    "check_timedelta",
    "check_memory_ids",
    "check_progress",
    "check_enum",
    "check_draft",
    "check_key",
    "check_namespace",
    "join_namespace",
    "SEPARATOR",
    "check_turn",
    "check_filters",
    "check_sources",
    "check_weights",
    "check_texts",
    "check_opaque_ids",
    "SafeProgress",
    "ProgressFactory",
    "MAX_ROWS",
]

_E = TypeVar("_E")
#: a progress bar factory: ``factory(total, label)`` returns a bar with ``update(n)`` and ``close()``
ProgressFactory = Callable[[int, str], Any]

log = logging.getLogger(__name__)

#: the largest limit or offset of a listing (SQLite's integers are 64-bit)
MAX_ROWS = 2**63 - 1

#: NUL and lone surrogates: SQLite keeps a NUL as a string terminator in places, and a surrogate
#: cannot be written as UTF-8, so a record holding one breaks every export of its owner
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def _describe(value: Any) -> str:
    return type(value).__name__


def check_text(name: str, value: Any, *, limit: int | None = None, allow_blank: bool = False,
               too_long: type[ValidationError] = ValidationError, setting: str = "") -> str:
    """A string of at most ``limit`` characters, UTF-8 encodable, without NUL characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {_describe(value)}")
    if not allow_blank and not value.strip():
        raise ValidationError(f"{name} must not be empty or whitespace")
    if limit is not None and len(value) > limit:
        where = f" (Settings.{setting})" if setting else ""
        raise too_long(f"{name} has {len(value)} characters; the limit is {limit}{where}")
    bad = _UNSAFE.search(value)
    if bad is not None:
        what = "NUL characters" if bad.group(0) == "\x00" else "lone surrogates (text that is not valid Unicode)"
        raise ValidationError(f"{name} must not contain {what}; found one at index {bad.start()}")
    return value


def check_id(settings: Settings, name: str, value: Any, *, optional: bool = False) -> Any:
    """An identifier: a non-blank string of at most ``Settings.max_id_chars``; None when optional."""
    if value is None and optional:
        return None
    return check_text(name, value, limit=settings.max_id_chars, setting="max_id_chars")


def check_tenant(settings: Settings, value: Any, default: str) -> str:
    """The tenant of a call: ``default`` when None; an empty string is refused like any blank id."""
    return default if value is None else check_id(settings, "tenant_id", value)


def check_content(settings: Settings, value: Any, name: str = "content") -> str:
    return check_text(name, value, limit=settings.max_content_chars, too_long=ContentTooLongError,
                      setting="max_content_chars")


def check_query(settings: Settings, value: Any) -> str:
    return check_content(settings, value, "query")


def check_number(name: str, value: Any, low: float, high: float) -> float:
    """A finite real number within [low, high] (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be a number between {low:g} and {high:g}, got {value!r}")
    number = float(value)
    if not (math.isfinite(number) and low <= number <= high):
        raise ValidationError(f"{name} must be a number between {low:g} and {high:g}, got {value!r}")
    return number


def check_unit(name: str, value: Any) -> float:
    return check_number(name, value, 0.0, 1.0)


def check_int(name: str, value: Any, low: int, high: int | None = None, *, optional: bool = False) -> Any:
    """An integer within [low, high] (or None when optional)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValidationError(f"{name} must be an integer {bound}, got {value!r}")
    return value


def check_top_k(settings: Settings, value: Any) -> int:
    """How many hits a search returns: ``Settings.top_k`` when None, at most ``Settings.max_top_k``."""
    if value is None:
        return settings.top_k
    return int(check_int("top_k", value, 1, settings.max_top_k))


def check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
    return value


def _walk(name: str, value: Any, depth: int, limit: int | None) -> None:
    if limit is not None and depth > limit:
        raise ValidationError(f"{name} is nested deeper than {limit} levels (Settings.max_metadata_depth)")
    if isinstance(value, str):
        check_text(f"a string in {name}", value, allow_blank=True)
    elif isinstance(value, bool) or value is None or isinstance(value, int):
        return
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{name} holds {value!r}, which JSON cannot represent")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"the keys of {name} must be strings, got {_describe(key)}")
            check_text(f"a key in {name}", key, allow_blank=True)
            _walk(name, item, depth + 1, limit)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(name, item, depth + 1, limit)
    else:
        raise ValidationError(f"{name} must be JSON-serialisable: {_describe(value)} is not")


def check_json(settings: Settings, name: str, value: Any, *, bounded: bool = True) -> dict[str, Any]:
    """A JSON-clean copy of a metadata mapping: string keys, finite numbers, safe text.

    ``bounded`` applies ``Settings.max_metadata_bytes`` and ``max_metadata_depth``: caller input is
    bounded; what the write path composes itself from bounded parts (an episode quoting its turns) is not.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{name} must be a mapping, got {_describe(value)}")
    _walk(name, value, 1, settings.max_metadata_depth if bounded else None)
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"{name} must be JSON-serialisable: {exc}") from exc
    if bounded:
        size = len(text.encode("utf-8"))
        if size > settings.max_metadata_bytes:
            raise ValidationError(f"{name} takes {size} bytes as JSON; the limit is {settings.max_metadata_bytes} "
                                  "(Settings.max_metadata_bytes)")
    return dict(json.loads(text))


#: metadata keys portamem owns, its provenance (``portamem.records.SYSTEM_METADATA_KEYS``, where each is
#: declared with what it holds): the guard's verdict, what redaction took out and sealed, the trust review's
#: notes, how a memory was written, what a statement replaced or outdated, an import's file id, habits
RESERVED_METADATA_KEYS = SYSTEM_METADATA_KEYS


def check_provenance(name: str, metadata: Mapping[str, Any], *, kept: Mapping[str, Any] | None = None,
                     strip: bool = False) -> dict[str, Any]:
    """A caller's metadata without the keys the write path owns (``RESERVED_METADATA_KEYS``): one of them
    is refused with ``ValidationError`` (a forged guard verdict or sealed original would read as real), or
    dropped with ``strip`` (an untrusted import: the file's provenance is not taken on its word). ``kept``,
    a stored memory's metadata, gives its own provenance back (an update keeps how the memory was written).
    """
    forged = sorted(k for k in metadata if k in RESERVED_METADATA_KEYS)
    if forged and not strip:
        raise ValidationError(f"{name} may not set {forged}: portamem writes these keys itself (guard verdicts, "
                              "redactions, trust notes, how a memory was written, what replaced or outdated it; "
                              "portamem.records.SYSTEM_METADATA_KEYS); use other names")
    out = {k: v for k, v in metadata.items() if k not in RESERVED_METADATA_KEYS}
    if kept:
        out.update((k, v) for k, v in kept.items() if k in RESERVED_METADATA_KEYS)
    return out


def check_entities(settings: Settings, value: Any, *, bounded: bool = True) -> list[str] | None:
    """None (let the extractor find them) or at most ``max_entities`` strings of ``max_entity_chars``."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f"entities must be a list of strings, got {_describe(value)}")
    if bounded and len(value) > settings.max_entities:
        raise ValidationError(f"{len(value)} entities; the limit is {settings.max_entities} (Settings.max_entities)")
    limit = settings.max_entity_chars if bounded else None
    return [check_text("an entity", e, limit=limit, setting="max_entity_chars") for e in value]


def check_summary(settings: Settings, value: Any, *, bounded: bool = True) -> str | None:
    if value is None:
        return None
    return check_text("summary", value, limit=settings.max_summary_chars if bounded else None, allow_blank=True,
                      setting="max_summary_chars")


def check_datetime(name: str, value: Any, *, optional: bool = True) -> datetime | None:
    """A datetime (naive ones are taken as UTC)."""
    if value is None and optional:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a datetime, got {_describe(value)}")
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def check_timedelta(name: str, value: Any, *, optional: bool = True) -> timedelta | None:
    if value is None and optional:
        return None
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise ValidationError(f"{name} must be a non-negative timedelta, got {value!r}")
    return value


def check_memory_ids(settings: Settings, value: Any, *, single: bool = False) -> list[str]:
    """A list (or tuple) of memory ids; one id as a string too when ``single``."""
    if single and isinstance(value, str):
        value = [value]
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"memory ids must be a list of strings, got {_describe(value)}")
    return [check_id(settings, "memory_id", m) for m in value]


def check_progress(value: Any) -> Callable[[int, str], Any] | None:
    """A progress factory ``(total, label) -> bar`` with ``update(n)`` and ``close()``, or None."""
    if value is not None and not callable(value):
        raise ValidationError(f"progress must be a callable (total, label) -> bar, got {_describe(value)}")
    return value


class SafeProgress:
    """A caller's progress bar that can never fail the work it reports on: a bar that raises is let go.

    The factory itself is called at once, before any work starts, so a bad one fails the call early.
    """

    def __init__(self, factory: Callable[[int, str], Any] | None, total: int, label: str) -> None:
        self._bar: Any = None
        if factory is not None:
            try:
                self._bar = factory(total, label)
            except Exception as exc:
                raise ValidationError(f"the progress factory failed: {exc!r}") from exc

    def update(self, n: int) -> None:
        self._call("update", n)

    def close(self) -> None:
        self._call("close")

    def _call(self, name: str, *args: Any) -> None:
        if self._bar is None:
            return
        try:
            getattr(self._bar, name)(*args)
        except Exception:
            log.warning("the progress bar failed in %s(); continuing without it", name, exc_info=True)
            self._bar = None


def check_enum(name: str, enum: type[_E], value: Any) -> _E:
    try:
        return enum(value)  # type: ignore[call-arg]
    except (ValueError, TypeError) as exc:
        allowed = [e.value for e in enum]  # type: ignore[attr-defined]
        raise ValidationError(f"{name} must be one of {allowed}, got {value!r}") from exc


#: joins a key namespace's labels in the stored form (``portamem.portable.keys``)
SEPARATOR = "."


def join_namespace(namespace: Any, *, max_chars: int = 1024) -> str:
    """The stored form of a key namespace (labels joined by ``"."``), validated."""
    if isinstance(namespace, str):
        labels: Sequence[Any] = namespace.split(SEPARATOR) if namespace else ()
    elif isinstance(namespace, (list, tuple)):
        labels = namespace
    else:
        raise ValidationError(f"a key namespace must be a string or a tuple of strings, got {type(namespace).__name__}")
    for label in labels:
        if not isinstance(label, str):
            raise ValidationError(f"namespace labels must be strings, got {type(label).__name__}")
        if not label:
            raise ValidationError(f"namespace {namespace!r} has an empty label")
        if SEPARATOR in label:
            raise ValidationError(f"namespace label {label!r} must not contain {SEPARATOR!r}")
        check_text("a namespace label", label, allow_blank=True)
    joined = SEPARATOR.join(labels)
    if len(joined) > max_chars:
        raise ValidationError(f"key namespace is longer than {max_chars} characters")
    return joined


def check_namespace(joined: str) -> str:
    """A caller's key namespace (joined), refused with ``ValidationError`` when it is portamem's own
    (``portamem.records.SYSTEM_NAMESPACE`` or below it), as its system metadata keys are (:func:`check_provenance`)."""
    if joined == SYSTEM_NAMESPACE or joined.startswith(SYSTEM_NAMESPACE + SEPARATOR):
        raise ValidationError(f"key namespace {joined!r} is portamem's own: it writes the keys under "
                              f"{SYSTEM_NAMESPACE!r} itself (a habit of the maintainer, say; "
                              "portamem.records.SYSTEM_NAMESPACE); use another namespace")
    return joined


def check_key(key: Any, *, max_chars: int) -> str:
    """A memory's external key: a non-empty text within ``max_chars``."""
    if isinstance(key, str) and not key:
        raise ValidationError("key must not be empty")
    return check_text("key", key, limit=max_chars, allow_blank=True)


def check_draft(settings: Settings, draft: Any, *, bounded: bool = True) -> MemoryDraft:
    """A draft with every field checked and normalised (enums, a JSON copy of metadata, an aware time).

    ``bounded`` as in :func:`check_json`: summaries, entities and metadata of caller input are bounded,
    caller metadata may not set the keys the write path owns (:func:`check_provenance`), nor a caller's
    key fall in portamem's own namespace (:func:`check_namespace`).
    """
    if not isinstance(draft, MemoryDraft):
        raise ValidationError(f"expected a MemoryDraft, got {_describe(draft)}")
    mtype = check_enum("type", MemoryType, draft.type)
    source = check_enum("source", Source, draft.source)
    trust = DEFAULT_TRUST[source] if draft.trust is None else check_enum("trust", Trust, draft.trust)
    kind = draft.kind
    if kind is not None and (not isinstance(kind, str) or kind not in settings.half_lives):
        raise ValidationError(f"kind must be one of {sorted(settings.half_lives)}, got {kind!r}")
    if draft.half_life_days is not None:
        check_number("half_life_days", draft.half_life_days, 1e-9, 1e9)
    summary = check_summary(settings, draft.summary, bounded=bounded)
    entities = check_entities(settings, draft.entities, bounded=bounded)
    metadata = check_json(settings, "metadata", draft.metadata, bounded=bounded)
    namespace = draft.key_namespace if draft.key is None else join_namespace(draft.key_namespace)
    if bounded:
        check_provenance("metadata", metadata)
        if draft.key is not None:
            check_namespace(namespace)
    return replace(
        draft,
        content=check_content(settings, draft.content),
        type=mtype,
        source=source,
        trust=trust,
        importance=None if draft.importance is None else check_unit("importance", draft.importance),
        session_id=check_id(settings, "session_id", draft.session_id, optional=True),
        agent_id=check_id(settings, "agent_id", draft.agent_id, optional=True),
        summary=summary,
        entities=entities,
        metadata=metadata,
        created_at=check_datetime("created_at", draft.created_at),
        key=None if draft.key is None else check_key(draft.key, max_chars=settings.max_id_chars),
        key_namespace=namespace,
    )


def check_turn(settings: Settings, user: Any, assistant: Any, metadata: Any) -> tuple[str, str, dict[str, Any]]:
    """The two texts of a window turn (one may be blank, not both) and its bounded metadata."""
    limit = settings.max_content_chars
    user = check_text("user message", user, limit=limit, allow_blank=True, too_long=ContentTooLongError,
                      setting="max_content_chars")
    assistant = check_text("reply", assistant, limit=limit, allow_blank=True, too_long=ContentTooLongError,
                           setting="max_content_chars")
    if not (user.strip() or assistant.strip()):
        raise ValidationError("a turn needs a user message or a reply")
    return user, assistant, check_json(settings, "turn metadata", metadata)


def check_filters(settings: Settings, value: Any) -> SearchFilters:
    """Search or list filters (a mapping or ``SearchFilters``) with their ids checked as ids."""
    f = SearchFilters.coerce(value)
    check_id(settings, "filter session_id", f.session_id, optional=True)
    check_id(settings, "filter agent_id", f.agent_id, optional=True)
    if f.min_importance is not None:
        check_number("filter min_importance", f.min_importance, -1e9, 1e9)
    return f


def check_sources(value: Any, allowed: Sequence[str]) -> tuple[str, ...]:
    """A non-empty list of retriever names drawn from ``allowed``."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)) or not value \
            or not all(isinstance(v, str) and v in allowed for v in value):
        raise ValidationError(f"sources must be a non-empty list drawn from {list(allowed)}, got {value!r}")
    return tuple(value)


def check_weights(value: Any) -> dict[str, float] | None:
    """Score weights by component name: non-negative finite numbers."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValidationError(f"weights must be a mapping of component name to number, got {_describe(value)}")
    return {check_text("a weight name", k): check_number(f"weight {k!r}", v, 0.0, 1e6) for k, v in value.items()}


def check_texts(name: str, value: Any) -> list[str]:
    """A list of strings (texts the prompt already shows, say)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValidationError(f"{name} must be a list of strings, got {_describe(value)}")
    return [check_text(f"an item of {name}", v, allow_blank=True) for v in value]


def check_opaque_ids(hooks: Hooks, settings: Settings, tenant_id: str, user_id: str, *,
                     session_id: str | None = None, agent_id: str | None = None, key: str | None = None,
                     key_namespace: str | None = None) -> None:
    """Refuse a session or agent id, or a memory's key or key namespace, that holds personal data (a
    phone number, an e-mail address).

    Such ids are stored, exported and grouped on as they are, so they cannot be redacted (two phone
    numbers would become one session, two e-mail keys one memory), and every read that lists the memory
    would answer them: the caller is asked for an opaque id instead.
    """
    ctx = WriteContext(tenant_id=tenant_id, user_id=user_id, settings=settings)
    for name, value in (("session_id", session_id), ("agent_id", agent_id), ("key", key),
                        ("key_namespace", key_namespace)):
        if value is None:
            continue
        _, spans = hooks.redact(value, ctx)
        # a bare run of digits that passes the card checksum is far more often a timestamp or a
        # counter (one 13-digit millisecond time in ten passes Luhn) than a card number
        spans = [r for r in spans if not (r.kind == "bank_card" and value[r.start:r.end].isdigit())]
        if spans:
            kinds = sorted({r.kind for r in spans})
            raise ValidationError(f"{name} holds personal data ({', '.join(kinds)}); use an opaque id "
                                  "(a random or hashed one): ids are stored and exported as given")


def check_private_key(private_key: Any, key_file: Any) -> None:
    """The forms a vault private key may be given in (``reveal_memory``): text or bytes, or a key file path."""
    if private_key is not None and not isinstance(private_key, (str, bytes)):
        raise ValidationError(f"private_key must be a string or bytes, got {type(private_key).__name__}")
    if key_file is not None and not isinstance(key_file, (str, Path)):
        raise ValidationError(f"key_file must be a path, got {type(key_file).__name__}")
    if isinstance(private_key, str):
        check_text("private_key", private_key, allow_blank=True)
