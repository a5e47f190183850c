"""What a memory states, as the read and the write path both read it: its statements (subject,
attribute, value, polarity), their slots, its single-valued attributes, and whether two memories give
conflicting values of one relation.

A statement is one atomic thing the user said holds: "I moved from Lyon to Paris" states
``lives_in = Paris`` (replacing Lyon); "I've gone off spicy food" states ``preference: spicy food``
with negative polarity. The extractor (``portamem_extract``) reads them; the write path stores them
with the memory (``metadata["statements"]`` and, for the read path, as triples) and reconciles each
with the user's current statements on the same slot (``portamem.write.supersession``).

A triple ``(subject, relation, value)`` comes from the extractor too. A single-valued relation holds one
value at a time ("lives in", "my budget"), so a later value replaces an earlier one; ``likes`` and
``dislikes`` of the same object exclude each other. The write path supersedes by these rules
(``portamem.write.supersession``), the trust review holds back a low-trust contradiction of a
high-trust fact (``portamem.write.trust``), and the read path marks conflicts among its hits
(``portamem.read.scoring``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .entities import normalize_entity
from ..records import MemoryRecord
from .text import STOPWORDS, normalize, tokenize

__all__ = ["SINGLE_VALUED", "MULTI_VALUED", "NAMED", "Statement", "statements_of", "same_slot",
           "same_value", "single_valued", "attributes", "triples_conflict", "record_cosine",
           "content_words"]

#: attributes that hold a set of values: each value is its own slot (liking tea does not outdate coffee)
MULTI_VALUED = frozenset({"preference", "allergic_to", "has", "does", "knows"})

#: relations of the rule extractor that hold one value at a time
SINGLE_VALUED = frozenset({"name", "lives_in", "works_at", "diet", "occupation"})
#: attributes a statement names by themselves in its triple (others become "my <attribute>")
NAMED = SINGLE_VALUED | {"allergic_to", "has", "uses", "does", "knows"}
#: relations named after the attribute a statement gives the value of ("my budget is ...", "我的预算是...")
ATTRIBUTE_PREFIXES = ("my ", "我的")
#: (likes, dislikes) exclude each other
_OPPOSITE = {"likes": "dislikes", "dislikes": "likes"}


@dataclass(frozen=True)
class Statement:
    """One atomic statement: ``subject``'s ``attribute`` (qualified by ``qualifier``: the budget *for
    the kitchen*) is ``value``; ``polarity`` False when it no longer holds ("no longer eats meat",
    "gone off spicy food"). ``previous`` is the value the text says it replaced ("from Lyon"),
    ``when`` the time it names ("last month", "from now on"), ``text`` the clause it was read from."""

    attribute: str
    value: str
    subject: str = "user"
    qualifier: str = ""
    polarity: bool = True
    previous: str | None = None
    when: str | None = None
    text: str = ""
    #: identity, preference or fact: chooses the half-life and importance band of its memory
    kind: str = "fact"

    @property
    def multi_valued(self) -> bool:
        return self.attribute in MULTI_VALUED

    def triples(self) -> list[list[str]]:
        """The statement as triples, the form a memory keeps it in (``statements_of`` reads it back):
        ``likes``/``dislikes`` for preferences, a named relation (``lives_in``), or ``my <attribute>``
        with the qualifier in brackets; ``no longer <relation>`` when it no longer holds; and the value
        it replaced as ``previously <relation>``."""
        if self.attribute == "preference":
            relation = "likes" if self.polarity else "dislikes"
        else:
            name = self.attribute + (f" ({self.qualifier})" if self.qualifier else "")
            name = name if self.attribute in NAMED else f"my {name}"
            relation = name if self.polarity else _NO_LONGER + name.removeprefix("my ")
        out = [[self.subject, relation, self.value]]
        if self.previous:
            out.append([self.subject, _PREVIOUSLY + relation, self.previous])
        return out


def content_words(text: str) -> frozenset[str]:
    """The words of a value or attribute that carry its meaning, stemmed crudely (plural and -ing
    forms fold together), without stopwords or a pronoun's or auxiliary's contraction ("we're", "I've",
    "don't": two texts sharing one share no topic)."""
    return frozenset(_stem(t) for t in tokenize(text) if t not in STOPWORDS and t not in _FILLER
                     and not _CONTRACTION.search(t))


#: the end of a contracted function word ("we're", "I'm", "they've", "you'll", "he'd", "isn't")
_CONTRACTION = re.compile(r"['’](?:re|ve|m|ll|d|t)$")


#: the relation prefix of a statement that no longer holds ("no longer has": "I sold the car")
_NO_LONGER = "no longer "
#: the relation prefix of the value a statement says it replaced ("previously lives_in": Lyon)
_PREVIOUSLY = "previously "
_QUALIFIED = re.compile(r"^(?P<attribute>.+?) \((?P<qualifier>.*)\)$")
_FILLER = frozenset("now still actually currently anymore any longer new old".split()) | frozenset(
    # Chinese function words the segmenter keeps as words: two texts sharing 这个 or 已经 share no topic
    "我 你 他 她 它 这个 那个 这些 那些 这样 那样 什么 怎么 怎样 哪 哪个 哪里 已经 还 还是 有 没 对 就 都 也 又 再 "
    "最近 现在 一下 一点 一些 这次 这里 那里 个 说 想 要 会 能 可以 觉得 因为 所以 但是 然后 时候 真的 其实 "
    "比较 有点 一直 应该 可能 自己 大家 今天 昨天 明天".split())


def _stem(word: str) -> str:
    """Plural, -ing, -ed, -al and a final e folded: "rehearse", "rehearsals" and "rehearsing" are one
    word, as are "renewal" and "renews"."""
    if not word.isascii() or len(word) <= 3:
        return word
    for suffix in ("ing", "ies", "es", "s", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    for suffix in ("al", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _value_key(value: str) -> str:
    """A value as compared: case, width, articles and thousands separators folded ("15,000" = "15000")."""
    text = normalize(value)
    text = _NUMBER.sub(lambda m: m.group(0).replace(",", ""), text)
    return " ".join(w for w in re.split(r"[\s\-]+", text) if w and w not in ("a", "an", "the", "my", "our"))


def same_value(a: str, b: str) -> bool:
    """The same value in other words: equal once folded, or the same content words."""
    if _value_key(a) == _value_key(b):
        return True
    wa, wb = content_words(a), content_words(b)
    return bool(wa) and wa == wb


def same_slot(a: Statement, b: Statement) -> bool:
    """Two statements about one slot: the same subject and attribute, qualifiers that can name the same
    thing (one missing, or sharing a word), and for a multi-valued attribute the same value."""
    if normalize_entity(a.subject) != normalize_entity(b.subject) or a.attribute != b.attribute:
        return False
    qa, qb = content_words(a.qualifier), content_words(b.qualifier)
    if qa and qb and not qa & qb:
        return False
    if a.multi_valued:
        wa, wb = content_words(a.value), content_words(b.value)
        return same_value(a.value, b.value) or (bool(wa & wb) and (wa <= wb or wb <= wa))
    return True


def statements_of(record: MemoryRecord) -> list[Statement]:
    """The statements a memory's triples hold (``Statement.triples``), memories written before
    statements were kept included (``lives_in``, ``my budget``, ``likes``/``dislikes``)."""
    out: list[Statement] = []
    previous: dict[tuple[str, str], str] = {}
    for triple in record.triples:
        if len(triple) >= 3 and str(triple[1]).startswith(_PREVIOUSLY):
            previous[(str(triple[0]), str(triple[1]).removeprefix(_PREVIOUSLY))] = str(triple[2])
    for triple in record.triples:
        if len(triple) < 3:
            continue
        subject, relation, value = (str(x) for x in triple[:3])
        if relation.startswith(_PREVIOUSLY):
            continue
        was = previous.get((subject, relation))
        polarity = not relation.startswith(_NO_LONGER)
        name = relation.removeprefix(_NO_LONGER)
        if name in ("likes", "dislikes"):
            out.append(Statement("preference", value, subject, polarity=name == "likes", previous=was,
                                 kind="preference"))
            continue
        name = _unprefixed(name)
        m = _QUALIFIED.match(name)
        attribute, qualifier = (m.group("attribute"), m.group("qualifier")) if m else (name, "")
        if relation.startswith(ATTRIBUTE_PREFIXES) or attribute in NAMED or not polarity:
            out.append(Statement(attribute, value, subject, qualifier=qualifier, polarity=polarity, previous=was))
    return out


def _unprefixed(relation: str) -> str:
    for prefix in ATTRIBUTE_PREFIXES:
        relation = relation.removeprefix(prefix)
    return relation


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
