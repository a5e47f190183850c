"""What a memory states, as the read and the write path both read it: its single-valued attributes,
and whether two memories give conflicting values of one relation.

A triple ``(subject, relation, value)`` comes from the extractor. A single-valued relation holds one
value at a time ("lives in", "my budget"), so a later value replaces an earlier one; ``likes`` and
``dislikes`` of the same object exclude each other. The write path supersedes by these rules
(``portamem.write.supersession``), the trust review holds back a low-trust contradiction of a
high-trust fact (``portamem.write.trust``), and the read path marks conflicts among its hits
(``portamem.read.scoring``).
"""

from __future__ import annotations

import numpy as np

from .entities import normalize_entity
from .records import MemoryRecord

__all__ = ["SINGLE_VALUED", "single_valued", "attributes", "triples_conflict", "record_cosine"]

#: relations of the rule extractor that hold one value at a time
SINGLE_VALUED = frozenset({"name", "lives_in", "works_at"})
#: relations named after the attribute a statement gives the value of ("my budget is ...", "我的预算是...")
ATTRIBUTE_PREFIXES = ("my ", "我的")
#: (likes, dislikes) exclude each other
_OPPOSITE = {"likes": "dislikes", "dislikes": "likes"}


def single_valued(relation: str) -> bool:
    return relation in SINGLE_VALUED or relation.startswith(ATTRIBUTE_PREFIXES)


def attributes(record: MemoryRecord) -> dict[tuple[str, str], str]:
    """(subject, relation) -> value of the record's single-valued triples, normalised."""
    out: dict[tuple[str, str], str] = {}
    for triple in record.triples:
        if len(triple) >= 3 and single_valued(str(triple[1])):
            out[(normalize_entity(str(triple[0])), str(triple[1]).casefold())] = normalize_entity(str(triple[2]))
    return out


def triples_conflict(a: MemoryRecord, b: MemoryRecord) -> bool:
    """True when the two give different values of one single-valued relation of the same subject, or
    one likes what the other dislikes."""
    for s1, r1, o1 in (t[:3] for t in a.triples if len(t) >= 3):
        for s2, r2, o2 in (t[:3] for t in b.triples if len(t) >= 3):
            if normalize_entity(s1) != normalize_entity(s2):
                continue
            same_object = normalize_entity(o1) == normalize_entity(o2)
            if r1 == r2 and single_valued(r1) and not same_object:
                return True
            if _OPPOSITE.get(r1) == r2 and same_object:
                return True
    return False


def record_cosine(a: MemoryRecord, b: MemoryRecord) -> float:
    """Cosine of two records' stored vectors (normalised); 0 when either lacks one of the same model."""
    if a.embedding is None or b.embedding is None or a.embedding_model != b.embedding_model:
        return 0.0
    return float(np.dot(np.asarray(a.embedding, dtype=np.float32), np.asarray(b.embedding, dtype=np.float32)))
