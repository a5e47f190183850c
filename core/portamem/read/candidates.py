"""A search's candidates: the union of the vector, BM25 keyword and exact-entity retrievers' top k,
each candidate scored by every retriever (so "not in one list" never reads as "no match").

May import: the data model, ``portamem.storage`` and the read path's calibration.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from ..language.entities import extract_entities, normalize_entity
from ..errors import ValidationError
from ..filters import SearchFilters
from ..records import MemoryRecord, Tier
from ..storage.keywords import BM25_B, BM25_K1
from ..storage.schema import keyword_text
from ..storage.sql import RecordStore
from ..storage.vectors import MilvusVectorIndex
from ..language.text import STOPWORDS, has_cjk, query_tokens, tokenize
from ..language.vocabulary import animal_words, names_animal, other_animals, relation_words
from .calibration import Calibration, Hubness, calibration_for, vector_score
from .replica import UserVectors
from .slots import asked_slots, states_slot

__all__ = ["SOURCES", "OWN_VECTOR", "PRIOR_DOCS", "Candidate", "ComponentScorer", "CandidateFinder", "bm25_idf"]

#: the candidate generators; each one's score is also computed for the candidates of the others
SOURCES: tuple[str, ...] = ("vector", "keyword", "entity")

#: idf is computed as if this many more memories held none of the query's words: in a small pool
#: every word is "common" (one memory of one: idf 0), which would make a single unmatched word
#: outweigh all the matched ones; in a large pool it changes nothing
PRIOR_DOCS = 5
#: the keyword score of a memory that states the slot a question asks for ("I'm a pastry chef" for "What
#: does Dana do for a living?", ``portamem.read.slots``): as if it held every word of the question
SLOT_MATCH = 1.0
#: the share of a passage's hubness above an ordinary passage's (``calibration.Hubness``) that its cosine
#: loses; a passage less near questions than most gains nothing. Chosen on the dev halves: paraphrase top-1
#: 0.875 at 0.5 against 0.859 at 1.0 (measured taking off the excess over the other candidates', which
#: made a memory's score depend on its pool); on LoCoMo dev the two-sided correction in full cost MRR
#: 0.012 and 2 points of the other conversation's questions recalling nothing
HUB_WEIGHT = 0.5
#: BM25 statistics are cached for this many users, this many words each
_STATS_USERS = 256
_STATS_TOKENS = 20000

#: what a question asks of the user's things: the words after "my", "our" or a possessive "'s" (a chain,
#: "my car's registration number"), and in Chinese what follows 我的 / 我家 / "X的" up to the verb
_POSSESSED_EN = re.compile(
    r"(?:\b(?:my|our)\s+|(?<!\bwhat)(?<!\bwho)(?<!\bwhere)(?<!\bwhen)(?<!\bhow)(?<!\bthat)(?<!\bit)"
    r"(?<!\bthere)(?<!\bhere)['’]s\s+)"
    r"((?:(?!(?:is|are|was|were|for|in|at|on|with|from|to|by|and|or|now|again|these|this|that|do|did)\b)"
    r"[a-z][\w-]*(?:['’]s)?(?:\s+|(?=[?.!,;:)]|$))){1,5})", re.I)
_POSSESSED_ZH = re.compile(r"(?:我的|我家的?|我们的?|[\u4e00-\u9fff]{1,6}的)([\u4e00-\u9fffA-Za-z0-9]{1,10}?)"
                           r"(?=是|叫|在|有|多少|什么|哪|吗|呢|[？?，,]|$)")
#: the last word of a question that asks for an identifier or a reading of a thing: a value stated
#: with the thing's own word ("my passport number", "我的血型", "我家WiFi密码"), which nobody can guess
#: from another memory. Not a name: a named thing is often introduced without its category ("a
#: beagle called Rolo" answers "my dog's name", "married to Ana" "my partner's name")
_IDENTIFIER_EN = frozenset("number no id code password pin username email address level size type reading "
                           "score".split())
_IDENTIFIER_ZH = ("号码", "号", "密码", "账号", "型", "率", "码", "地址")
#: "the frame size of my bike": the identifier before the thing
_OF_MINE = re.compile(rf"\bthe\s+((?:[a-z][\w-]*\s+){{0,2}}?)(?:{'|'.join(sorted(_IDENTIFIER_EN))})\s+of\s+"
                      r"(?:my|our)\s+([a-z][\w-]*)", re.I)
#: words that only qualify the asked thing
_QUALIFIER = frozenset("current new old usual latest full exact real".split())


def asked_identifiers(question: str) -> list[list[str]]:
    """For each identifier or reading a question asks of a thing the user has ("my passport number",
    "the frame size of my bike", "我的血型是什么"), the words naming that thing. A search
    whose user never mentioned any of them is about nothing stored (``Candidate.unknown_asked``)."""
    out: list[list[str]] = []
    for m in _POSSESSED_EN.finditer(question):
        segments = [seg.split() for seg in re.split(r"['’]s\b", m.group(1)) if seg.split()]
        if not segments or segments[-1][-1].lower() not in _IDENTIFIER_EN:
            continue
        # "my passport number": the words before the identifier; "my dentist's code": the segment before
        thing = segments[-1][:-1] or (segments[-2] if len(segments) > 1 else [])
        words = [t for w in thing for t in tokenize(w) if t not in _QUALIFIER]
        if words:
            out.append(words)
    for m in _OF_MINE.finditer(question):
        words = [t for t in tokenize(m.group(1) or m.group(2)) if t not in _QUALIFIER]
        if words:
            out.append(words)
    for m in _POSSESSED_ZH.finditer(question):
        phrase = m.group(1)
        if phrase.endswith(_IDENTIFIER_ZH):
            words = tokenize(phrase)
            if words:
                out.append(words)
    return out


#: the words that say "mine" in a Chinese question ("我老婆", "我的车", "我家狗")
_MINE_ZH = frozenset({"我", "我的", "我家", "我们", "我们的", "咱家", "我家的"})
#: words after "my" that qualify or ask rather than name a thing of the user's
_NOT_THINGS = _IDENTIFIER_EN | _QUALIFIER | frozenset(
    "name names called favourite favorite usual own best last next first whole other way".split())


def asked_things(question: str) -> list[str]:
    """The things of the user's a personal question names ("What does my wife do?" -> wife, "What's my
    dog's name?" -> dog, "我老婆做什么工作？" -> 老婆): each possessed phrase's head (its last word before a
    possessive or a verb), and in Chinese the first noun after 我 / 我的 / 我家 / 我们. A question naming a
    thing no memory of the user mentions is about nothing stored, unless a memory stands out for it by
    meaning ("a beagle called Rolo" for "my dog"): ``Settings.unknown_thing_penalty`` weighs it."""
    out: list[str] = []
    for m in _POSSESSED_EN.finditer(question):
        if not re.match(r"(?:my|our)\b", m.group(0), re.I):  # "Dana's job" is Dana's, not the user's
            continue
        for seg in re.split(r"['’]s\b", m.group(1)):
            words = [w.lower() for w in seg.split() if w.lower() not in _NOT_THINGS]
            if words and words[-1] not in STOPWORDS and words[-1].isalpha():
                out.append(words[-1])
    if has_cjk(question):
        import rjieba

        for word in _mine_zh(question):
            # the word on its own: a noun (狗, 老婆, 牙医) or a character jieba leaves untagged (车), not a
            # verb or a time (住, 现在)
            tags = rjieba.tag(word)
            if len(tags) == 1 and (tags[0][1].startswith("n") or tags[0][1] in ("vn", "zg")):
                out.append(word)
    return list(dict.fromkeys(out))


def _mine_zh(question: str) -> list[str]:
    """The words a Chinese question says are the user's: each after 我 / 我的 / 我家 / 我们, and a relative
    the tokenizer keeps whole with 我 ("我哥", "我妈")."""
    import rjieba

    words = [w for w in rjieba.cut(question) if w.strip()]
    out = []
    for i, word in enumerate(words):
        if word in _MINE_ZH:
            nxt = next((w for w in words[i + 1:i + 3] if w not in ("的", "家")), "")
            if len(nxt) == 2 and nxt[1] == "叫":  # the tokenizer reads 狗叫 ("a dog's bark") in 我家狗叫什么
                nxt = nxt[0]
            if nxt:
                out.append(nxt)
        elif word[0] == "我" and len(word) > 1 and relation_words(word[1:]):
            out.append(word[1:])
    return out


def asked_relations(question: str) -> list[list[str]]:
    """The people of the user's a personal question names by their relation ("What does my wife do?",
    "Where does my brother live?", "What's my son's birthday?", "我哥住在哪里？", "我老婆做什么工作？"), each
    as the words that name that relation (``portamem.language.vocabulary.relation_words``). Unlike a thing
    the user owns (a dog is often introduced by its breed), a person of the user's is introduced by the
    relation ("my wife Ana", "Ana and I got married"): a question about one no memory names by any of
    those words is about nothing stored, as a question for an identifier never given is
    (``Candidate.unknown_asked``)."""
    out: list[list[str]] = []
    for m in _POSSESSED_EN.finditer(question):
        if not re.match(r"(?:my|our)\b", m.group(0), re.I):
            continue
        for word in re.split(r"['’]s\b|\s+", m.group(1)):
            words = relation_words(word) if word else None
            if words:
                out.append(list(words))
                break  # "my brother's wife" is the brother's: the first relation is the user's
    if has_cjk(question):
        for word in _mine_zh(question):  # "我的哥哥", "我家老公", "我哥"
            found = relation_words(word)
            if found:
                out.append(list(found))
    return [list(g) for g in dict.fromkeys(tuple(g) for g in out)]


#: ``Candidate.raw`` key of the vector component scored on the background of the question's own language
#: (``portamem.read.calibration.Calibration.cjk``), where it differs from the one that ranks
OWN_VECTOR = "vector_own"


@dataclass
class Candidate:
    """A record found by one or more retrievers, with every component score kept (each 0..1).

    ``found_by`` is the provenance (which retrievers returned it); ``raw`` keeps the unnormalised
    scores (cosine, bm25) for debugging.
    """

    memory_id: str
    components: dict[str, float] = field(default_factory=dict)
    found_by: set[str] = field(default_factory=set)
    record: MemoryRecord | None = None
    raw: dict[str, float] = field(default_factory=dict)
    #: share (0..1) of the query's entities that none of the user's memories holds: a question about
    #: someone or something never mentioned is probably about nothing stored (``Settings.unknown_entity_penalty``)
    unknown_entities: float = 0.0
    #: share (0..1) of the things whose identifier the query asks for ("my passport number") that no
    #: memory mentions: nothing stored can give that value (``Settings.unknown_asked_penalty``); a relative
    #: of the user's no memory names ("my wife", ``asked_relations``) counts likewise
    unknown_asked: float = 0.0
    #: share (0..1) of the things of the user's the query names ("my wife") that no memory mentions
    #: (``asked_things``, ``Settings.unknown_thing_penalty``)
    unknown_thing: float = 0.0
    #: the record's vector of the index's model (float32), read from the replica rather than the row
    vector: np.ndarray | None = None
    #: a row not reviewed by the indexer yet: a duplicate of a stored memory among them will be merged into it
    queued: bool = False


#: adds or changes named components of each candidate (a retrieval-scorer plugin):
#: scorer(query, candidates, now, settings)
ComponentScorer = Callable[[str, list[Candidate], datetime, Any], None]


def bm25_idf(n_docs: int, df: int) -> float:
    """BM25's inverse document frequency, floored as SQLite FTS5's bm25() floors it."""
    idf = math.log((n_docs - df + 0.5) / (df + 0.5))
    return idf if idf > 0 else 1e-6


@lru_cache(maxsize=8192)
def _term_counts(text: str) -> Counter[str]:
    """Search-token counts of a text (shared by the cache: never mutate the result)."""
    return Counter(tokenize(text))


def _merge_queued(hits: list[tuple[str, float]], queued: Mapping[str, np.ndarray], qvec: np.ndarray,
                  k: int) -> list[tuple[str, float]]:
    """The top ``k`` of the index's hits and the queued rows' exact cosines (a queued row's own
    score wins over an older indexed version of it)."""
    ids = list(queued)
    scores = (np.stack([queued[m] for m in ids]) @ qvec).tolist()
    merged = {m: s for m, s in hits if m not in queued}
    merged.update(zip(ids, scores))
    return sorted(merged.items(), key=lambda item: -item[1])[:k]


class CandidateFinder:
    """Finds and scores a search's candidates in one record store and one vector index."""

    #: told (tenant, user, ids) when a query names what only the cold tier holds (``Memory`` loads them)
    on_cold: Callable[[str, str, list[str]], None] | None = None
    #: gives the embedder's hubness reference, by which each candidate's cosine is corrected
    #: (``calibration.Hubness``); asked when a search first scores vectors, not when the store opens (it
    #: embeds the background set once per process)
    hubness_of: Callable[[], Hubness | None] | None = None

    #: whether a text is personal data the write path redacts (``portamem_redact``): a query naming an
    #: e-mail or a phone number names what no memory can hold in clear, so it is not an unknown entity
    redacts: Callable[[str], bool] | None = None

    @property
    def hubness(self) -> Hubness | None:
        return self.hubness_of() if self.hubness_of is not None else None

    def __init__(self, store: RecordStore, index: MilvusVectorIndex, embed_query: Callable[[str], np.ndarray],
                 calibration: Calibration | None = None) -> None:
        self.store = store
        self.index = index
        self.embed_query = embed_query
        #: the embedder's background cosine distribution (``portamem.read.calibration``); None: relative scale
        self.calibration = calibration if calibration is not None else calibration_for(getattr(index, "model", ""))
        self._stats: dict[tuple[str, str], tuple[int, float, dict[str, int]]] = {}
        self._stats_lock = threading.Lock()

    def candidates(
        self,
        query: str,
        *,
        tenant_id: str,
        user_id: str,
        filters: SearchFilters,
        k: int,
        sources: Sequence[str] = SOURCES,
        queued: Mapping[str, np.ndarray] | None = None,
        generate: Sequence[str] | None = None,
    ) -> dict[str, Candidate]:
        """The union of each source's top ``k``, every member scored by every requested source.

        A memory that one retriever found and another did not rank in its top ``k`` still gets that
        retriever's score, so the merge never mistakes "not in the list" for "no match". ``queued``:
        vectors of the user's rows not in the index yet (``portamem.background.queued``), scored exactly beside it.
        ``generate``: the retrievers that propose candidates (default: ``sources``; the others only score).

        ``filters.tiers`` (``portamem.lifecycle.tiers``): the vector index holds the hot tier; a warm
        tier named there is scanned on disk, a cold one read from the archive. A query naming an
        entity that only the cold tier holds is reported to ``on_cold`` (a background load).
        """
        if isinstance(sources, str) or not sources or set(sources) - set(SOURCES):
            raise ValidationError(f"sources must be a non-empty list drawn from {list(SOURCES)}, got {sources!r}")
        gen = set(sources if generate is None else generate) & set(sources)
        tiers = filters.tiers
        found: dict[str, Candidate] = {}

        def add(memory_id: str, name: str) -> None:
            found.setdefault(memory_id, Candidate(memory_id)).found_by.add(name)

        qvec = None
        vector_hits: list[tuple[str, float]] = []
        if "vector" in sources:
            qvec = np.asarray(self.embed_query(query), dtype=np.float32)
        if qvec is not None and "vector" in gen:
            if tiers is None or Tier.HOT in tiers:
                if filters.index_only_active:
                    vector_hits = [(h.memory_id, h.score)
                                   for h in self.index.search(tenant_id, user_id, qvec, k, filters)]
                else:  # statuses the index does not hold: exact scan of the stored vectors
                    vector_hits = self._scan(qvec, tenant_id, user_id, filters, k)
            if tiers is not None and Tier.WARM in tiers and filters.index_only_active:  # the warm vectors on disk
                vector_hits = sorted(vector_hits + self._scan_warm(qvec, tenant_id, user_id, filters, k),
                                     key=lambda hit: -hit[1])[:k]
            if queued:
                vector_hits = _merge_queued(vector_hits, queued, qvec, k)
            for memory_id, _ in vector_hits:
                add(memory_id, "vector")
        if "keyword" in gen:
            for memory_id, _ in self.store.keyword_search(tenant_id, user_id, query, filters, k):
                add(memory_id, "keyword")
        cold: dict[str, MemoryRecord] = {}
        if tiers is not None and Tier.COLD in tiers:
            for memory_id, (record, by) in self._cold(query, qvec, tenant_id, user_id, filters, k, gen).items():
                cold[memory_id] = record
                found.setdefault(memory_id, Candidate(memory_id)).found_by.update(by)
        query_entities = extract_entities(query) if "entity" in sources else []
        n_user = self.store.user_count(tenant_id, user_id)
        entity_weights: dict[str, float] = {}
        unheld: list[str] = []
        if query_entities:
            df = self.store.entity_counts(tenant_id, user_id, query_entities)
            entity_weights = {e: bm25_idf(n_user + PRIOR_DOCS, df.get(e, 0)) for e in query_entities}
            unheld = [e for e in query_entities if not df.get(e) and not (self.redacts and self.redacts(e))]
            # an entity held by more memories than we rank cannot single any of them out
            selective = [e for e in query_entities if 0 < df.get(e, 0) <= 4 * k]
            if "entity" in gen:
                for memory_id, _ in self.store.entity_search(tenant_id, user_id, selective, filters, k):
                    add(memory_id, "entity")
                if unheld and not cold and self.on_cold is not None and (tiers is None or Tier.COLD not in tiers):
                    archived = self.store.cold_entity_ids(tenant_id, user_id, unheld)
                    if archived:  # named, and only the cold tier holds it: loaded for the next searches
                        self.on_cold(tenant_id, user_id, archived)
        if not found:
            return found
        # the store re-checks tenant, user and filters: the index is never trusted for isolation
        records = self.store.get(tenant_id, user_id, [m for m in found if m not in cold], vectors=False)
        records.update(cold)
        for memory_id in list(found):
            record = records.get(memory_id)
            if record is None or not filters.admits(record):
                del found[memory_id]
            else:
                found[memory_id].record = record
        for memory_id, record in cold.items():
            if memory_id in found and record.embedding is not None and record.embedding_model == self.index.model:
                found[memory_id].vector = np.asarray(record.embedding, dtype=np.float32)
        for memory_id, vec in (queued or {}).items():
            if memory_id in found:
                found[memory_id].vector = vec
                found[memory_id].queued = True
        self.attach_vectors(tenant_id, user_id, found.values())
        if qvec is not None:
            self._score_vector(qvec, found, [s for _, s in vector_hits], cjk=has_cjk(query))
        if "keyword" in sources:
            self._score_keyword(query, tenant_id, user_id, n_user, found)
        if "entity" in sources:
            self._score_entities(entity_weights, bm25_idf(n_user + PRIOR_DOCS, 1), found)
            unknown, unasked = self._unknown_shares(query_entities, unheld, asked_identifiers(query), tenant_id,
                                                    user_id, n_user)
            relations = asked_relations(query)
            if relations:  # a relative never named, like an identifier never given: nothing stored answers
                unasked = 1.0 - (1.0 - unasked) * (1.0 - self._unknown_shares([], [], relations, tenant_id,
                                                                              user_id, n_user)[1])
            asked = asked_things(query)
            things = [list(relation_words(w) or animal_words(w) or (w,)) for w in asked]  # a relative by any word of it
            unthing = self._unknown_shares([], [], things, tenant_id, user_id, n_user)[1] if things else 0.0
            if unthing:  # a pet of another kind than the one asked about: nothing stored answers
                unasked = 1.0 - (1.0 - unasked) * (1.0 - self._other_animal(asked, found, tenant_id, user_id, n_user))
            for cand in found.values():
                cand.unknown_entities, cand.unknown_asked, cand.unknown_thing = unknown, unasked, unthing
        return found

    def _other_animal(self, asked: Sequence[str], found: Mapping[str, Candidate], tenant_id: str, user_id: str,
                      n_user: int) -> float:
        """The share of the things a question asks about that are a kind of animal no memory names while the
        hits name another kind ("What's my cat called?" where the user spoke of their dog, 我家狗叫什么 to a
        cat's owner): unlike a pet never named by its kind ("a greyhound called Biscuit" for "my dog"), the
        animal the store knows of is another one."""
        kinds = [words for w in asked if (words := animal_words(w))]
        if not kinds:
            return 0.0
        texts = [c.record.content for c in found.values() if c.record is not None]
        other = 0
        for words in kinds:
            if self._unknown_shares([], [], [words], tenant_id, user_id, n_user)[1] \
                    and not any(names_animal(t, words) for t in texts) \
                    and any(names_animal(t, g) for t in texts for g in other_animals(words)):
                other += 1
        return other / len(asked)

    def _unknown_shares(self, entities: Sequence[str], unheld: Sequence[str], asked: Sequence[Sequence[str]],
                        tenant_id: str, user_id: str, n_user: int) -> tuple[float, float]:
        """The shares of the query's entities, and of the things whose identifier it asks for
        (``asked_identifiers``), that no memory holds and none of whose words any memory contains
        ("Ghent Sunday" read as one name is known when a memory says "Ghent"; "my passport number"
        is about nothing stored when no memory says "passport")."""
        if not unheld and not asked:
            return 0.0, 0.0
        named = [tokenize(e) for e in unheld]
        _, df = self._keyword_stats(tenant_id, user_id, n_user, sorted({w for ws in named + list(asked) for w in ws}))

        def unknown(groups: Sequence[Sequence[str]]) -> int:
            return sum(1 for ws in groups if not any(df.get(w) for w in ws))

        return (unknown(named) / len(entities) if entities else 0.0,
                unknown(asked) / len(asked) if asked else 0.0)

    def attach_vectors(self, tenant_id: str, user_id: str, cands: Iterable[Candidate]) -> None:
        """Give candidates their vectors of the index's model: from the read replica where the user is
        loaded, else only the vector column of their rows (never the rest of the row again)."""
        todo = [c for c in cands if c.vector is None]
        if not todo:
            return
        ids = [c.memory_id for c in todo]
        reader = getattr(self.index, "vectors", None)
        found = reader(tenant_id, user_id, ids) if reader is not None else \
            self.store.vectors(tenant_id, user_id, ids, self.index.model)
        for cand in todo:
            cand.vector = found.get(cand.memory_id)

    def _score_vector(self, qvec: np.ndarray, found: dict[str, Candidate], pool: list[float], cjk: bool = False) -> None:
        """Cosine against the embedder's measured background of unrelated pairs (``portamem.read.calibration``):
        the same cosine scores the same in any pool. For a Chinese question (``cjk``) it is also scored
        against the background of Chinese text (``OWN_VECTOR``), by which ``rank`` decides whether
        anything is relevant at all. A model nobody calibrated falls back to the
        cosine above this query's least similar neighbour, over the headroom left to 1."""
        floor = min(pool) if pool else 0.0
        with_vec = [c for c in found.values() if c.vector is not None]
        cosines: dict[str, float] = {}
        if with_vec:
            matrix = np.stack([c.vector for c in with_vec])
            scores = matrix @ qvec
            hubness = self.hubness
            if hubness is not None:
                # a hub (a short greeting) is near every question: part of what it has over an ordinary
                # passage is taken off (no passage gains, and the same text scores the same in any pool)
                near = hubness.correction(matrix, [c.record is not None and has_cjk(c.record.content)
                                                        for c in with_vec])
                scores = scores - HUB_WEIGHT * np.maximum(near, 0.0)
            cosines = dict(zip((c.memory_id for c in with_vec), scores.tolist()))
        for cand in found.values():
            cos = float(cosines.get(cand.memory_id, 0.0))
            cand.raw["cosine"] = cos
            if self.calibration is not None:
                cand.components["vector"] = float(vector_score(cos, self.calibration))
                if cjk and self.calibration.cjk is not None:
                    cand.raw[OWN_VECTOR] = float(vector_score(cos, self.calibration, cjk=True))
            else:
                cand.components["vector"] = max(0.0, (cos - floor) / (1.0 - floor)) if floor < 1.0 else 0.0

    def _score_keyword(self, query: str, tenant_id: str, user_id: str, n_docs: int, found: dict[str, Candidate]) -> None:
        """BM25 with this user's statistics, as a share of what a memory holding every query word once
        would score: query words no memory holds count against every match, and a match on common
        words alone stays weak (the share is of at least one word that only one memory holds)."""
        tokens = list(dict.fromkeys(query_tokens(query)))
        if not tokens:
            for cand in found.values():
                cand.components["keyword"] = 0.0
            tokens = []
        mean_len, df = self._keyword_stats(tenant_id, user_id, n_docs, tokens)
        idf = {t: bm25_idf(n_docs + PRIOR_DOCS, df.get(t, 0)) for t in tokens}
        ceiling = max(sum(idf.values()), bm25_idf(n_docs + PRIOR_DOCS, 1))
        for cand in found.values():
            assert cand.record is not None
            text = keyword_text(cand.record)
            counts = _term_counts(text)
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * len(text) / mean_len) if mean_len > 0 else BM25_K1
            bm25 = sum(idf[t] * counts[t] * (BM25_K1 + 1.0) / (counts[t] + norm) for t in tokens if counts[t])
            cand.raw["bm25"] = bm25
            cand.components["keyword"] = min(1.0, bm25 / ceiling)
        slots = asked_slots(query)
        if slots:  # "What does Dana do for a living?" is answered by "I'm a pastry chef" (``read.slots``)
            # ... but "What does my wife do for a living?" asks for the wife's work, not the user's: a
            # memory that does not name the person asked about does not state that slot
            others = [t for t in asked_things(query) if not asked_slots(f"my {t} 我的{t}是什么")]
            for cand in found.values():
                assert cand.record is not None
                if others and not any(t in cand.record.content.lower() for t in others):
                    continue
                if states_slot(cand.record.content, slots):
                    cand.raw["slot"] = 1.0
                    cand.components["keyword"] = max(cand.components["keyword"], SLOT_MATCH)

    def forget_user(self, tenant_id: str, user_id: str) -> None:
        """Drop what is kept of one user (an erased user): the statistics of the words their searches asked for."""
        with self._stats_lock:
            self._stats.pop((tenant_id, user_id), None)

    def _keyword_stats(self, tenant_id: str, user_id: str, n_docs: int, tokens: list[str]) -> tuple[float, dict[str, int]]:
        """The store's per-user BM25 statistics, kept until the user's record count changes: counting
        a common word's records is the dearest part of a search, and questions repeat their words."""
        key = (tenant_id, user_id)
        with self._stats_lock:
            cached = self._stats.pop(key, None)
        if cached is None or cached[0] != n_docs:
            cached = (n_docs, *self.store.keyword_stats(tenant_id, user_id, tokens))
        else:
            missing = [t for t in tokens if t not in cached[2]]
            if missing:
                cached[2].update(self.store.keyword_stats(tenant_id, user_id, missing)[1])
        if len(cached[2]) > _STATS_TOKENS:
            cached = (n_docs, cached[1], {t: cached[2][t] for t in tokens if t in cached[2]})
        with self._stats_lock:
            self._stats[key] = cached  # most recently used last
            while len(self._stats) > _STATS_USERS:
                del self._stats[next(iter(self._stats))]
        return cached[1], cached[2]

    @staticmethod
    def _score_entities(weights: Mapping[str, float], floor: float, found: dict[str, Candidate]) -> None:
        """The idf-weighted share of the query's entities a memory holds, of at least one entity held
        by a single memory: a name in half the memories says little, an order number says all."""
        total = max(sum(weights.values()), floor)
        for cand in found.values():
            assert cand.record is not None
            held = {normalize_entity(e) for e in cand.record.entities}
            matched = sum(w for e, w in weights.items() if e in held)
            cand.components["entity"] = matched / total if total > 0 else 0.0

    def _cold(self, query: str, qvec: np.ndarray | None, tenant_id: str, user_id: str, filters: SearchFilters,
              k: int, generate: Collection[str]) -> dict[str, tuple[MemoryRecord, set[str]]]:
        """The cold tier's candidates: the archive of the user read whole (a search that asked for it),
        each retriever's top ``k`` among the records the filters admit, with their vectors attached."""
        records = [r for r in self.store.cold_records(tenant_id, user_id) if filters.admits(r)]
        if not records:
            return {}
        picked: dict[str, set[str]] = {}
        if qvec is not None and "vector" in generate:
            usable = [r for r in records if r.embedding is not None and r.embedding_model == self.index.model]
            if usable:
                cos = np.asarray([r.embedding for r in usable], dtype=np.float32) @ qvec
                for i in np.argsort(-cos)[:k]:
                    picked.setdefault(usable[i].memory_id, set()).add("vector")
        tokens = set(tokenize(query))
        if tokens and "keyword" in generate:
            overlap = [(sum(1 for t in tokens if _term_counts(keyword_text(r))[t]), r.memory_id) for r in records]
            for n, memory_id in sorted(overlap, key=lambda x: -x[0])[:k]:
                if n:
                    picked.setdefault(memory_id, set()).add("keyword")
        wanted = {normalize_entity(e) for e in extract_entities(query)} if "entity" in generate else set()
        if wanted:
            for r in records:
                if wanted & {normalize_entity(e) for e in r.entities}:
                    picked.setdefault(r.memory_id, set()).add("entity")
        return {r.memory_id: (r, picked[r.memory_id]) for r in records if r.memory_id in picked}

    def _scan_warm(self, qvec: np.ndarray, tenant_id: str, user_id: str, filters: SearchFilters,
                   k: int) -> list[tuple[str, float]]:
        """The exact top ``k`` of the user's warm vectors: their vector and filter columns only, read
        from disk into one matrix for this search (never kept)."""
        dim = int(qvec.shape[0])
        rows = self.store.user_vectors(tenant_id, user_id, self.index.model, Tier.WARM)
        if not rows:
            return []
        hits = UserVectors(dim, rows).search(qvec[None, :], k, filters)[0]
        return [(h.memory_id, h.score) for h in hits]

    def _scan(
        self, qvec: np.ndarray, tenant_id: str, user_id: str, filters: SearchFilters, k: int
    ) -> list[tuple[str, float]]:
        records = [
            r for r in self.store.list(tenant_id, user_id, filters)
            if r.embedding is not None and r.embedding_model == self.index.model
        ]
        if not records:
            return []
        matrix = np.asarray([r.embedding for r in records], dtype=np.float32)
        scores = matrix @ np.asarray(qvec, dtype=np.float32)
        order = np.argsort(-scores)[:k]
        return [(records[i].memory_id, float(scores[i])) for i in order]
