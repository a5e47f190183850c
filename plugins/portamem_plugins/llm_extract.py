"""An LLM statement extractor for production: the same ``portamem_extract`` hook as the rule extractor,
its statements read by a model, checked against a strict JSON contract, asked again when the answer
breaks it, and left to the rules when every attempt failed.

Register it with ``memory.plugins.register(LLMExtractor(llm), name="llm_extract")`` where ``llm`` is any
``llm(prompt) -> str`` (a LangChain chat model's ``lambda p: model.invoke(p).content``, an OpenAI
client call). It answers only in the formation worker (``WriteContext.formation``), once per user turn
and off the acknowledged path: the write path and the memories the turn wrote are read by the rules, and
the worker writes the statements whose clause those memories do not hold
(``portamem.background.formation``). It runs before the rule extractor (``tryfirst``); its answer must
be one JSON object::

    {"statements": [{"attribute": "lives_in", "value": "Paris", "polarity": true,
                     "previous": "Lyon", "when": "last month", "qualifier": null,
                     "subject": "user", "kind": "identity", "text": "I moved from Lyon to Paris"}],
     "acts": [{"text": "Big news!", "act": "smalltalk"}, ...]}

``attribute`` is one of the rule extractor's named slots (``lives_in``, ``works_at``, ``occupation``,
``diet``, ``name``, ``allergic_to``, ``has``, ``uses``, ``does``, ``knows``, ``preference``) or a short
noun for another attribute ("budget", "flight date") with what it is of in ``qualifier`` ("kitchen
renovation"); ``polarity`` false when it no longer holds ("I've gone off spicy food"); ``previous`` the
value it says was replaced. ``text`` must be words of the message (the clause the statement was read
from). ``acts`` labels each sentence statement / question / request / smalltalk; without it the rule
acts are used. Entities come from the rule entity extractor and the model's values.
"""

from __future__ import annotations

import re
from typing import Any

from portamem import hookimpl
from portamem.language.entities import extract_entities
from portamem.pipeline import ACTS, Extraction, WriteContext
from portamem.language.statements import MULTI_VALUED, NAMED, Statement

from .acts import utterances
from .classify import classify_kind
from .summarize import MAX_CHARS, AskingPlugin

__all__ = ["LLMExtractor", "STATEMENT_KEYS", "portamem_extract"]

#: the keys of one statement in the model's answer (a strict schema requires each: null where not said)
STATEMENT_KEYS = frozenset({"attribute", "value", "polarity", "previous", "when", "qualifier", "subject", "kind",
                            "text"})
#: bounds of an answer: statements and acts in it, characters of a value, of a clause, of the other texts
MAX_STATEMENTS = 8
#: tokens one statement of the answer takes (Qwen2.5 0.5B's answers: about 270 characters, 75-85 tokens,
#: each); the model extractor asks for as many statements as its token budget holds: 3 within 256
TOKENS_PER_STATEMENT = 80
MAX_ACTS = 16
MAX_VALUE = 200
MAX_TEXT = 400
MAX_SHORT = 120
_KINDS = frozenset({"identity", "preference", "fact"})
_KIND_ORDER = ("identity", "preference", "fact")
_ATTRIBUTE = re.compile(r"^[^\W\d_][\w ()'-]{0,60}$")
_SPACE = re.compile(r"\s+")


def _attribute(name: str) -> str:
    """The slot name as the rule extractor writes it: lower case, one space, no "my"/"the"/"user's"."""
    name = _SPACE.sub(" ", name.strip().lower().replace("-", " "))
    for prefix in ("my ", "the ", "user's ", "users ", "我的"):
        name = name.removeprefix(prefix)
    named = name.replace(" ", "_")
    return named if named in NAMED or named in MULTI_VALUED else name


class LLMExtractor(AskingPlugin):
    """A ``portamem_extract`` plugin around any ``llm(prompt) -> str`` (the module docstring). ``acts=False``
    asks for statements only (the rules label the sentences), a shorter answer for a small model."""

    PROMPT = (
        "Read the user's message for long-term memory. List the atomic statements the user makes about "
        "themselves or the things and people in their life, including changes: a new value replaces an old "
        "one (give the old one as previous), and something that no longer holds has polarity false. "
        "Questions, requests to the assistant, greetings, thanks and small talk state nothing. Use these "
        "attributes where they fit: lives_in, works_at, occupation, diet, name, allergic_to, has, uses, "
        "does, knows, preference (value: the thing liked, polarity false when disliked or given up); "
        "otherwise a short noun for the attribute (budget, flight date, weight) and in qualifier what it "
        "is of. subject is \"user\" or the name of the person, pet or thing the statement is about. kind is "
        "identity, preference or fact. text is the clause of the message the statement was read from, "
        "copied exactly; previous, when and qualifier are null unless the message says them. {acts}"
        "Keep the user's language. At most {most} statements. Answer with JSON only, exactly {shape}.\n\n"
        "Message: {text}"
    )
    _ACTS = "Also label each sentence with its act: statement, question, request or smalltalk. "
    _STATEMENT = ('{{"attribute": "...", "value": "...", "polarity": true, "previous": null, "when": null, '
                  '"qualifier": null, "subject": "user", "kind": "fact", "text": "..."}}')

    #: the answer's JSON schema, sent to a server that can hold the model to it (``validate`` checks the rest);
    #: its bounds keep a small model's answer short: a few statements of short texts
    SCHEMA: dict[str, Any] = {
        "title": "statements", "type": "object", "additionalProperties": False, "required": ["statements", "acts"],
        "properties": {
            "statements": {"type": "array", "maxItems": MAX_STATEMENTS, "items": {
                "type": "object", "additionalProperties": False, "required": sorted(STATEMENT_KEYS),
                "properties": {**{k: {"type": ["string", "null"], "maxLength": MAX_SHORT} for k in STATEMENT_KEYS},
                               "attribute": {"type": "string", "maxLength": 60},
                               "value": {"type": "string", "maxLength": MAX_VALUE},
                               "text": {"type": "string", "maxLength": MAX_TEXT},
                               "polarity": {"type": "boolean"},
                               "kind": {"enum": sorted(_KINDS)}}}},
            "acts": {"type": "array", "maxItems": MAX_ACTS, "items": {
                "type": "object", "additionalProperties": False, "required": ["text", "act"],
                "properties": {"text": {"type": "string", "maxLength": MAX_TEXT}, "act": {"enum": sorted(ACTS)}}}}}}

    def __init__(self, llm: Any, retries: int = 2, max_chars: int = MAX_CHARS, *, acts: bool = True,
                 most: int = MAX_STATEMENTS, **kwargs: Any) -> None:
        """``most``: the statements one answer may hold (1 to ``MAX_STATEMENTS``), so that an answer fits
        its token budget: a schema-bound model closes the list there instead of being cut off mid-JSON."""
        super().__init__(llm, retries, max_chars, **kwargs)
        if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MAX_STATEMENTS:
            raise ValueError(f"most must be an integer from 1 to {MAX_STATEMENTS}, got {most!r}")
        self.acts = acts
        self.most = most
        if not acts or most != MAX_STATEMENTS:  # an instance's own schema
            statements = {**self.SCHEMA["properties"]["statements"], "maxItems": most}
            properties = {**self.SCHEMA["properties"], "statements": statements} if acts else {"statements": statements}
            self.SCHEMA = {**self.SCHEMA, "required": sorted(properties), "properties": properties}

    def prompt(self, text: str) -> str:
        """What the model is asked about ``text``."""
        shape = ('{{"statements": [' + self._STATEMENT + ']'
                 + (', "acts": [{{"text": "...", "act": "statement"}}]' if self.acts else '') + '}}')
        return self.PROMPT.format(acts=self._ACTS if self.acts else "", most=self.most,
                                  shape=shape.format(), text=text[: self.max_chars * 4])

    @staticmethod
    def validate(data: Any) -> str | None:
        """Why ``data`` breaks the contract, or None when it keeps it."""
        if not isinstance(data, dict) or not {"statements"} <= set(data) <= {"statements", "acts"}:
            return "expected the key 'statements' (and optionally 'acts') only"
        if not isinstance(data["statements"], list) or len(data["statements"]) > MAX_STATEMENTS:
            return f"statements must be a list of at most {MAX_STATEMENTS}"
        for i, st in enumerate(data["statements"]):
            if not isinstance(st, dict) or set(st) - STATEMENT_KEYS or not {"attribute", "value"} <= set(st):
                return f"statement {i}: expected attribute, value and only the keys {sorted(STATEMENT_KEYS)}"
            if not isinstance(st["attribute"], str) or not _ATTRIBUTE.match(st["attribute"].strip()):
                return f"statement {i}: attribute must be a short name"
            if not isinstance(st["value"], str) or not st["value"].strip() or len(st["value"]) > MAX_VALUE:
                return f"statement {i}: value must be non-empty text of at most {MAX_VALUE} characters"
            if not isinstance(st.get("polarity", True), bool):
                return f"statement {i}: polarity must be true or false"
            for key in ("previous", "when", "qualifier", "subject", "text"):
                most = MAX_TEXT if key == "text" else MAX_SHORT
                if st.get(key) is not None and (not isinstance(st[key], str) or len(st[key]) > most):
                    return f"statement {i}: {key} must be text of at most {most} characters, or null"
            if st.get("kind") is not None and st["kind"] not in _KINDS:
                return f"statement {i}: kind must be one of {sorted(_KINDS)}"
        acts = data.get("acts", [])
        if not isinstance(acts, list) or len(acts) > MAX_ACTS or not all(
                isinstance(a, dict) and set(a) == {"text", "act"} and isinstance(a["text"], str) and a["act"] in ACTS
                for a in acts):
            return f"acts must be a list of {{text, act}} with act one of {sorted(ACTS)}"
        return None

    def statements(self, text: str, data: dict[str, Any]) -> list[Statement]:
        """The model's statements as ``Statement``s; a ``text`` that is not words of the message is
        replaced by the message (a model's paraphrase is not what the user said)."""
        out = []
        for st in data["statements"]:
            clause = (st.get("text") or "").strip()
            out.append(Statement(
                attribute=_attribute(st["attribute"]), value=st["value"].strip()[:200],
                subject=(st.get("subject") or "user").strip() or "user",
                qualifier=(st.get("qualifier") or "").strip().lower(), polarity=st.get("polarity", True),
                previous=(st.get("previous") or "").strip() or None, when=(st.get("when") or "").strip() or None,
                text=clause if clause and clause in text else text.strip(), kind=st.get("kind") or "fact"))
        return out

    @hookimpl(tryfirst=True)
    def portamem_extract(self, text: str, context: WriteContext) -> Extraction | None:
        if not context.formation:  # never on the acknowledged write path, nor on the memories a turn wrote
            return None
        data = self.ask(self.prompt(text), "statements")
        if data is None:
            return None  # every attempt broke the contract: the rule extractor reads the text
        statements = self.statements(text, data)
        acts = [(a["text"], a["act"]) for a in data.get("acts", []) if a["text"].strip()]
        kinds = {s.kind for s in statements}
        entities = extract_entities(text)
        entities += [s.value for s in statements if s.attribute in NAMED and s.value not in entities]
        return Extraction(entities=entities, triples=[t for s in statements for t in s.triples()],
                          kind=next((k for k in _KIND_ORDER if k in kinds), None) or classify_kind(text),
                          statements=statements, utterances=acts or utterances(text))


@hookimpl(tryfirst=True)
def portamem_extract(text: str, context: WriteContext) -> Extraction | None:
    """The model extractor ``Settings.llm_extract`` turns on: the formation worker hands it the configured
    model (``WriteContext.model``); statements only, as many as ``llm_extract_max_tokens`` holds
    (``TOKENS_PER_STATEMENT``), within ``llm_timeout_s`` for every try together, else None and the rules read
    the turn."""
    if not context.formation or context.model is None:
        return None
    tokens = context.settings.llm_extract_max_tokens
    return LLMExtractor(context.model, retries=1, acts=False, max_tokens=tokens,
                        most=max(1, min(MAX_STATEMENTS, tokens // TOKENS_PER_STATEMENT)),
                        budget_s=context.settings.llm_timeout_s).portamem_extract(text, context)
