"""Asking a model for JSON that must keep a contract, within a time budget, or getting None.

Real models wrap JSON in a ```json fence and add a sentence before or after it when nothing
constrains their output (all ten answers of a 0.5B model in the first real run did): the answer is
read as the one JSON value it holds, not rejected for its wrapping. What it says is then checked by
the caller's ``validate``; a broken answer is asked again, saying what was wrong, while the budget
lasts. A timeout ends the asking at once (the next try would take as long). None means: use the rules.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelError, ModelRefusedError, ModelTimeoutError
from .client import ChatModel
from .stats import ModelStats

__all__ = ["ask_json", "parse_json_answer", "REJECTED"]

log = logging.getLogger(__name__)

#: what a retry appends to the last user message: the reason the previous answer was refused
REJECTED = "\n\nYour last answer was rejected: {problem}. Answer again with the JSON only."
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.S)
_DECODER = json.JSONDecoder()


def parse_json_answer(text: str) -> Any:
    """The one JSON value in a model's answer: the whole text, else the inside of a ```json fence, else
    the first object or array in the text with only prose around it. Raises ``ValueError`` (a
    ``json.JSONDecodeError`` where the text had JSON gone wrong) when there is none."""
    if not isinstance(text, str):
        raise ValueError(f"the answer is {type(text).__name__}, not text")
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        first_error = exc
    fenced = _FENCE.search(stripped)
    if fenced:
        return json.loads(fenced.group(1).strip())
    for i, ch in enumerate(stripped):
        if ch in "{[":
            try:
                value, _ = _DECODER.raw_decode(stripped, i)
            except json.JSONDecodeError:
                continue
            return value
    raise first_error


def ask_json(model: ChatModel, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
             validate: Callable[[Any], str | None] = lambda data: None, budget_s: float | None = None,
             retries: int = 2, stats: ModelStats | None = None, max_tokens: int = 256,
             what: str = "answer") -> Any | None:
    """The model's answer to ``messages`` as JSON that ``validate`` accepts (``validate(data)`` returns
    None or why it is wrong), or None.

    At most ``retries`` more tries, each with the last user message followed by why the answer before
    was refused (``REJECTED``), and none that would not end within ``budget_s`` seconds of the first
    call (each call's time is bounded by what is left, and none starts with less left than the
    longest try took: a callable cannot be cut short), after a timeout or after the server refused the
    request (``ModelRefusedError``). Counts each refused answer and the final fallback in ``stats``
    (default: the model's own ``stats``, when it has one).
    """
    stats = stats if stats is not None else getattr(model, "stats", None)
    asking = [dict(m) for m in messages]
    last_user = max((i for i, m in enumerate(asking) if m.get("role") == "user"), default=len(asking) - 1)
    original = asking[last_user]["content"] if asking else ""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    longest = 0.0  # the longest attempt so far: what the next one may take
    for attempt in range(retries + 1):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= longest:
            log.warning("%s: no time left for another attempt after %d (%.2f s left, one took %.2f s)", what,
                        attempt, max(0.0, left), longest)
            break
        began = time.monotonic()
        try:
            answer = model.chat(asking, schema=schema, max_tokens=max_tokens, timeout_s=left)
        except ModelTimeoutError as exc:
            log.warning("%s attempt %d: %s", what, attempt + 1, exc)
            break
        except ModelRefusedError:  # asking again is refused alike (the client said why, once)
            break
        except ModelError as exc:
            problem = str(exc)
            log.warning("%s attempt %d: %s", what, attempt + 1, problem)
            continue
        finally:
            longest = max(longest, time.monotonic() - began)
        try:
            data = parse_json_answer(answer)
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        else:
            try:
                problem = validate(data)
            except Exception as exc:  # noqa: BLE001 - a validator tripping on odd data means the data is wrong
                problem = f"{type(exc).__name__}: {exc}"
            if problem is None:
                return data
        if stats is not None:
            stats.record_invalid()
        log.warning("%s attempt %d: %s", what, attempt + 1, problem)
        if asking:
            asking[last_user] = {**asking[last_user], "content": original + REJECTED.format(problem=problem)}
    if stats is not None:
        stats.record_fallback()
    return None
