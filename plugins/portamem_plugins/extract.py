"""Built-in rule extractor: entities, the user's statements (``statements``) and their triples, each
sentence's dialogue act (``acts``), a one-line summary, the kind."""

from __future__ import annotations

import re

from portamem import hookimpl
from portamem.language.entities import extract_entities
from portamem.pipeline import Extraction, WriteContext

from .acts import utterances
from .classify import classify_kind
from .statements import extract_statements

#: a statement's kind, strongest first: a memory holding several takes the strongest
_KIND_ORDER = ("identity", "preference", "fact")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")


def attribute_values(text: str) -> list[list[str]]:
    """The triples of the text's single-valued statements: "my budget is 8000" -> (user, my budget, 8000)."""
    return [s.triples()[0] for s in extract_statements(text) if s.polarity and not s.multi_valued]


def extract(text: str) -> Extraction:
    statements = extract_statements(text)
    triples = [t for s in statements for t in s.triples()]
    first = _SENTENCE.split(text.strip(), maxsplit=1)[0]
    summary = first if len(first) < len(text.strip()) else None
    kinds = {s.kind for s in statements}
    kind = next((k for k in _KIND_ORDER if k in kinds), None) or classify_kind(text)
    return Extraction(entities=extract_entities(text), triples=triples, summary=summary, kind=kind,
                      statements=statements, utterances=utterances(text))


@hookimpl(trylast=True)
def portamem_extract(text: str, context: WriteContext) -> Extraction | None:
    return extract(text)
