"""Formation's write side: what a queued turn carries, the candidates a reconciler is shown, the checks
every decision passes, and how the accepted ones are applied through supersession.

The formation worker (``portamem.background.formation``) runs these off the acknowledged path, after
the indexer's rule pass settled the turn's statements. A reconciler (``portamem_reconcile``: a model,
the rules, a third party's) proposes; nothing here trusts it: a decision is applied only when its
target is one of the statement's candidates (same tenant and user, within the writer's scope), a less
trusted statement does not override a high-trust memory, a delete or change stands on the user's own
words, a subject other than the user is not merged into the user's, and a statement the rules read as
a question, request or small talk changes nothing. Applied decisions are supersessions (history kept,
audited with the reconciler's reason, reversible with ``restore``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..components import Components
from ..language.entities import normalize_entity
from ..filters import SearchFilters
from ..pipeline import Decision, FormationTurn, WriteContext
from ..records import EARLIER_KEY, OUTDATED_KEY, REPLACED_KEY, TRUST_RANK, MemoryRecord, as_trusted, MemoryType, Source, Status, Trust, Turn
from ..language.sameness import APART_S, same_thing
from ..language.statements import content_words, record_cosine, statements_of
from ..language.text import same_passage
from ..language.vocabulary import CHANGE_OR_FORMER as _CHANGE
from .currency import mark_earlier
from .scope import acts_on, may_merge
from .supersession import _CLAUSES, _FACT, Supersessions, _decide, _outdate_part, _repeat, _replaced_part, _update

__all__ = ["turn_row", "formation_turn", "candidates_for", "check", "Applied", "apply", "rule_decisions", "changes", "related",
           "CANDIDATES"]

#: current memories shown to a reconciler per statement (vector, keyword and entity neighbours together)
CANDIDATES = 6
#: each look-up's depth before the candidates are merged
_PROBE = 8
#: actions that change a memory other than the statement itself
_CHANGING = frozenset({"update", "outdate", "delete"})


def turn_row(tenant_id: str, user_id: str, session_id: str, turn: Turn, context: Sequence[Turn],
             memory_ids: Sequence[str]) -> dict[str, Any]:
    """The formation queue's row for a user turn (as the window keeps it: redacted when it is) and the
    turns before it in its session."""
    return {"tenant_id": tenant_id, "user_id": user_id, "session_id": session_id,
            "turn": {"user": turn.user, "assistant": turn.assistant, "created_at": turn.created_at.isoformat(),
                     "context": [{"user": t.user, "assistant": t.assistant} for t in context]},
            "memory_ids": list(memory_ids)}


def formation_turn(row_turn: Mapping[str, Any], session_id: str) -> FormationTurn:
    from datetime import datetime  # noqa: PLC0415 - only here

    return FormationTurn(
        user=str(row_turn.get("user", "")), assistant=str(row_turn.get("assistant", "")),
        created_at=datetime.fromisoformat(str(row_turn["created_at"])), session_id=session_id,
        context=tuple((str(t.get("user", "")), str(t.get("assistant", ""))) for t in row_turn.get("context", [])
                      if isinstance(t, Mapping)))


def _in_scope(writer: MemoryRecord, target: MemoryRecord) -> bool:
    """The target is the writer's to act on: same tenant and user, and (``portamem.write.scope``) its scope."""
    return (writer.tenant_id, writer.user_id) == (target.tenant_id, target.user_id) and acts_on(writer, target)


def candidates_for(parts: Components, statements: Sequence[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
    """For each statement, the user's nearest current memories in its scope (by vector, keyword and
    entity, best first, at most ``CANDIDATES``), after those the rules superseded by it."""
    if not statements:
        return {}
    tenant_id, user_id = statements[0].tenant_id, statements[0].user_id
    mine = {s.memory_id for s in statements}
    near = parts.replica.nearest([s for s in statements if s.embedding is not None], k=_PROBE, exclude=mine)
    found: dict[str, list[str]] = {}
    for s in statements:
        ids = [h.memory_id for h in near.get(s.memory_id, [])]
        ids += [i for i, _ in parts.store.keyword_search(tenant_id, user_id, s.content, SearchFilters(), _PROBE)]
        ents = [normalize_entity(e) for e in s.entities]
        ids += [i for i, _ in parts.store.entity_search(tenant_id, user_id, ents, SearchFilters(), _PROBE)] \
            if ents else []
        found[s.memory_id] = [i for i in dict.fromkeys(ids) if i not in mine]
    replaced = {s.memory_id: s.supersedes for s in statements if s.supersedes}
    rows = parts.store.get(tenant_id, user_id, [i for ids in found.values() for i in ids] + list(replaced.values()))
    # only what arrived before a statement can be outdated by it (a backlog forms turns after later ones)
    order = parts.store.arrival(list(rows) + list(mine))
    out: dict[str, list[MemoryRecord]] = {}
    for s in statements:
        ruled = [rows[r] for r in [replaced.get(s.memory_id)] if r in rows and rows[r].superseded_by == s.memory_id]
        at = order.get(s.memory_id, 0)
        current = [rows[i] for i in found[s.memory_id] if i in rows and rows[i].status is Status.ACTIVE
                   and rows[i].key is None and order.get(i, at) < at and _in_scope(s, rows[i])]
        out[s.memory_id] = (ruled + current)[:CANDIDATES]
    return out


def rule_decisions(statements: Sequence[MemoryRecord],
                   candidates: Mapping[str, Sequence[MemoryRecord]]) -> list[Decision]:
    """What supersession's rules decide for each statement against its candidates (those it already
    superseded say so again): update, outdate a part, noop for a repeat, else add."""
    out: list[Decision] = []
    for s in statements:
        mine = statements_of(s)
        decided = False
        for c in candidates.get(s.memory_id, []):
            if c.superseded_by == s.memory_id:
                out.append(Decision(s.memory_id, "update", c.memory_id, "rules: superseded in the rule pass"))
                decided = True
                continue
            verdict = _decide(mine, c) if mine else None
            if verdict == "update":
                part = _replaced_part(c, mine)
                out.append(Decision(s.memory_id, "outdate" if part else "update", c.memory_id,
                                    "rules: another value of what it states", "; ".join(part) if part else None))
            elif verdict == "repeat":
                out.append(Decision(s.memory_id, "noop", c.memory_id, "rules: the same statement again"))
            elif verdict is None and (named := names_replaced(s, c)) is not None:
                # the older says nothing besides what changed: the newer stands for all of it (still
                # outdated, not superseded, so the older's words bring the newer into the prompt)
                whole = not any(_FACT.search(k) for k in _CLAUSES.split(c.content) if k and k.strip() not in named)
                verdict = "outdate"
                out.append(Decision(s.memory_id, verdict, c.memory_id,
                                    "rules: another name in place of one it names again",
                                    c.content[:200] if whole else "; ".join(named)))
            elif verdict is None and (why := changes(s, c)) is not None \
                    and not (_clauses_about(c, s) or _names_beside(c, s)):
                # an older line holding other facts is left to the read path, which shows the newer in
                # its place only for a question the change bears on (outdating it here cost answers
                # to its other facts on the suite's dev half)
                verdict = "update"
                out.append(Decision(s.memory_id, "update", c.memory_id, "rules: " + why))
            decided = decided or verdict is not None
        if not decided:
            out.append(Decision(s.memory_id, "add", None, "rules: about nothing stored"))
    return out


#: the values a statement carries, by kind: numbers (with their units' digits), capitalised names
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*|[一二三四五六七八九十百千万两]+(?:块|元|万|千|点|号|月|岁|公斤|斤)")
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][\w'-]+")


def _values(text: str) -> tuple[set[str], set[str]]:
    return set(_NUMBER.findall(text)), set(_NAME.findall(text))


#: units of time: two values sharing only one ("£45 a month", "£32 a month") need not be of one thing
_TIME_UNITS = frozenset("month week day year hour minute time morning evening night 月 号 天 年 小时 分钟 点 周 次".split())
_TOKENS = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z][\w'-]*|[\u4e00-\u9fff]")


def _topic(text: str) -> frozenset[str]:
    """A text's content words with its values masked (numbers and names are what may change), without
    units of time or single Chinese characters, which say too little of a topic."""
    numbers, names = _values(text)
    masked = _NAME.sub(" ", _NUMBER.sub(" ", text))
    words = content_words(masked) - {n.lower() for n in names}
    return frozenset(w for w in words if w not in _TIME_UNITS and not (len(w) == 1 and "\u4e00" <= w <= "\u9fff"))


def _distinct(words: frozenset[str]) -> list[str]:
    """The words, one of each pair where one holds the other (设计 and 设计师 are one topic)."""
    return [w for w in words if not any(w != o and w in o for o in words)]


def _near_number(text: str, word: str) -> bool:
    """Whether ``word`` (a content word) stands within three tokens of a number in ``text``: the
    number is a value of it ("45 km a week", "预算只能改成15万")."""
    tokens = _TOKENS.findall(text)
    numbers = [i for i, t in enumerate(tokens) if t[0].isdigit()]
    if not numbers:
        return False
    if "\u4e00" <= word[0] <= "\u9fff":
        chars = "".join(t if len(t) == 1 and "\u4e00" <= t <= "\u9fff" else "\x00" for t in tokens)
        spots = [i for i in range(len(chars)) if chars.startswith(word, i)]
        reach = len(word) + 3
    else:
        spots = [i for i, t in enumerate(tokens) if word in content_words(t)]
        reach = 3
    return any(abs(i - n) <= reach for i in spots for n in numbers)


def changes(newer: MemoryRecord, older: MemoryRecord) -> str | None:
    """Why ``newer`` replaces what ``older`` says, judged from the two texts without a named slot, or
    None: they are about the same person and the same thing, and the newer gives another value of
    it (a number beside a topic word both give one beside: "45 km a week" after "30 km a week") or
    says, with two topic words in common, that the older changed or stopped holding ("we've gone
    with sage green tiles instead of the white metro ones")."""
    if older.type is MemoryType.EPISODIC or older.source is not Source.USER or statements_of(older) \
            and statements_of(newer):
        return None  # the named slots decided already (supersession); episodes state nothing themselves
    if _subjects(newer) != _subjects(older):
        return None
    shared = _topic(newer.content) & _topic(older.content)
    if not shared:
        return None
    (new_numbers, _), (old_numbers, _) = _values(newer.content), _values(older.content)
    if new_numbers and old_numbers and not new_numbers & old_numbers:
        valued = sorted(w for w in shared if _near_number(newer.content, w) and _near_number(older.content, w))
        if valued:
            return f"another value of {', '.join(valued[:3])}"
    if len(_distinct(shared)) >= 2 and _CHANGE.search(newer.content) and not _CHANGE.search(older.content):
        return f"a change of {', '.join(sorted(shared)[:3])}"
    return None


#: a change that ends what it names, with nothing in its place ("I cancelled the PureGym membership")
_ENDS = re.compile(r"\b(?:cancell?ed|quit|stopped|gave up|given up|sold|left|closed|ended|no longer|not \w+ any ?more)\b"
                   r"|取消了|退了|卖了|戒了|不再|停了|关了", re.I)
#: a name: capitalised words in a row, not at the start of a sentence ("Brooks Ghost", "The Loose Ends")
_NAMES = re.compile(r"(?<=[a-z,;:] )[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*")


def _names(text: str) -> set[str]:
    """The names a text gives, lower-case, without a leading article ("the loose ends" is "loose ends")."""
    out = set()
    for m in _NAMES.finditer(text):
        words = m.group(0).lower().split()
        while words and not content_words(words[0]):
            words = words[1:]
        if words:
            out.add(" ".join(words))
    return out


def _refers_to(name: str, older: str) -> bool:
    """A newer name refers to an older one: the same, or its short form ("the Brooks" for "Brooks Ghost");
    not a longer one ("Stride Plus" is another thing than the shop "Stride")."""
    a, b = name.split(), older.split()
    return any(b[i:i + len(a)] == a for i in range(len(b) - len(a) + 1))


def names_replaced(newer: MemoryRecord, older: MemoryRecord) -> list[str] | None:
    """The clauses of ``older`` whose name the newer says changed, beside a name of its own: "switched
    to Hoka Clifton, the Brooks were giving me blisters" after "I run in Brooks Ghost" ("I run in Brooks
    Ghost"), "Hazelwood Barn double booked us, so we're going with Oakley Manor" after "We've booked
    Hazelwood Barn as the venue". The older keeps its other facts; None when the newer names none of
    the older's names, names nothing new, or says no change."""
    if older.type is MemoryType.EPISODIC or older.source is not Source.USER or _subjects(newer) != _subjects(older):
        return None
    mine, theirs = _names(newer.content), _names(older.content)
    shared = {o for o in theirs if any(_refers_to(n, o) for n in mine)}
    fresh = [n for n in mine if not any(_refers_to(n, o) for o in theirs)]
    if not shared or not (fresh and _CHANGE.search(newer.content) or _ENDS.search(newer.content)):
        return None
    clauses = [c.strip() for c in _CLAUSES.split(older.content) if c and c.strip()]
    return [c for c in clauses if _names(c) & shared] or None


def _clauses_about(older: MemoryRecord, newer: MemoryRecord) -> list[str] | None:
    """The clauses of the older that the newer replaces, when another clause of the older holds a
    fact of its own (then the older is outdated in part, not superseded)."""
    clauses = [c.strip() for c in _CLAUSES.split(older.content) if c and c.strip()]
    topic = _topic(newer.content)
    about = [c for c in clauses if _topic(c) & topic]
    rest = [c for c in clauses if c not in about]
    return about if about and any(_FACT.search(c) for c in rest) else None


def _names_beside(older: MemoryRecord, newer: MemoryRecord) -> list[str] | None:
    """The older whole, when it names someone or something the newer does not ("Starting at Delivery Hero
    on 1 September" against "HR rescheduled my start to 16 September"): then the older is outdated in
    part, so the name is still recalled, rather than superseded."""
    names = {n for n in _NAME.findall(older.content) if n.lower() not in newer.content.lower()}
    return [older.content[:200]] if names else None


def _rules_read_a_statement(parts: Components, record: MemoryRecord, ctx: WriteContext) -> bool:
    """Whether the rules read the text as stating something (not only a question, request, thanks,
    greeting or small talk)."""
    # the rules' own reading: with formation's context a model extractor would answer, and be asked to
    # judge its own claim
    extraction = parts.hooks.extract(record.content, replace(ctx, formation=False))
    if extraction is None or not extraction.utterances:
        return True
    return any(act == "statement" for _, act in extraction.utterances)


#: someone or something of the user's world a statement may be about instead of the user
_OTHERS = re.compile(
    r"\b(?:my|our)\s+(?:\w+\s+)?(father|dad|mother|mum|mom|parents?|wife|husband|partner|son|daughter|kids?|"
    r"child(?:ren)?|brother|sister|friend|boss|colleague|manager|grand\w+|uncle|aunt|cousin|dog|cat|pet|"
    r"neighbou?r|flatmate|roommate)\b"
    r"|我(?:的)?(爸爸|爸|妈妈|妈|父亲|母亲|父母|老婆|老公|妻子|丈夫|儿子|女儿|孩子|哥哥|弟弟|姐姐|妹妹|朋友|同事|老板|"
    r"爷爷|奶奶|外公|外婆|狗|猫)", re.I)


def related(statement: MemoryRecord, target: MemoryRecord) -> bool:
    """Whether the rules see the two as about the same thing: the rule pass superseded the target by the
    statement, their named slots meet (``supersession``), the judgement without slots finds a change
    (``changes``), or they share two topic words once their values are masked. A model's change,
    repeat or delete of anything else is a guess the rules cannot back (a 0.5B model, asked, "updated"
    whatever memory it was shown first). A change word in the statement and a content word in common
    are enough beside those."""
    if target.superseded_by == statement.memory_id:
        return True
    mine = statements_of(statement)
    if mine and _decide(mine, target) is not None:
        return True
    if changes(statement, target) is not None or len(_distinct(_topic(statement.content)
                                                               & _topic(target.content))) >= 2:
        return True
    # a change said in words the rules do not read as a slot ("these days I go bouldering on Sundays")
    return bool(_CHANGE.search(statement.content)) and bool(_shared_words(statement, target))


def _shared_words(a: MemoryRecord, b: MemoryRecord) -> frozenset[str]:
    """The content words two memories have in common, units of time aside."""
    return frozenset(w for w in content_words(a.content) & content_words(b.content)
                     if w not in _TIME_UNITS and not any(c.isdigit() for c in w))  # a number is a value, not a topic


def _subjects(record: MemoryRecord) -> set[str]:
    """Whom a memory is about: its statements' subjects, else the person or pet of the user's world
    its text names ("my father has ..."), else the user."""
    named = {s.subject.lower() for s in statements_of(record) if s.subject.lower() != "user"}
    named |= {(m.group(1) or m.group(2)).lower() for m in _OTHERS.finditer(record.content)}
    return named or {"user"}


def _comparable(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Both records carry a vector of one model (``record_cosine`` reads 0 for any other pair)."""
    return a.embedding is not None and b.embedding is not None and a.embedding_model == b.embedding_model


def same_thing_as(statement: MemoryRecord, target: MemoryRecord, shown: Sequence[MemoryRecord]) -> bool:
    """Whether the statement is about the same thing as an older target, with another value
    (``portamem.language.sameness``: their vectors against the statement's to the other memories shown,
    what they share and what differs), where the rules' own links (``related``) see nothing: a model's
    change of such a target is applied as a soft mark (``portamem.write.currency``)."""
    if not _comparable(target, statement) or (statement.created_at - target.created_at).total_seconds() < APART_S:
        return False
    pool = [record_cosine(o, statement) for o in shown if o.memory_id != target.memory_id and _comparable(o, statement)]
    found = same_thing(target.content, statement.content, record_cosine(target, statement), pool)
    return found.same and found.differs


def check(parts: Components, decision: Decision, statements: Mapping[str, MemoryRecord],
          candidates: Mapping[str, Sequence[MemoryRecord]], turn: FormationTurn, ctx: WriteContext) -> str | None:
    """Why ``decision`` must not be applied, or None when it may (the module docstring)."""
    statement = statements.get(decision.statement_id)
    if statement is None:
        return f"{decision.statement_id} is not a statement of this turn"
    if decision.target_id is None:
        return "update, outdate, delete and noop need a target" if decision.action != "add" else None
    shown = {c.memory_id: c for c in candidates.get(statement.memory_id, [])}
    target = shown.get(decision.target_id)
    if target is None:
        return f"{decision.target_id} is not among the memories shown for {statement.memory_id}"
    if not _in_scope(statement, target):
        return f"{target.memory_id} is outside the writer's scope"
    if decision.action != "add" and not related(statement, target) \
            and not same_thing_as(statement, target, candidates.get(statement.memory_id, [])):
        return f"{statement.memory_id} and {target.memory_id} are not about the same thing"
    if decision.action not in _CHANGING:
        return None
    if target.trust is Trust.HIGH and TRUST_RANK[statement.trust] < TRUST_RANK[Trust.HIGH]:
        return f"a {statement.trust.value}-trust statement does not override the high-trust {target.memory_id}"
    if statement.source is not Source.USER or not same_passage(statement.content, turn.user) \
            and not content_words(statement.content) <= content_words(turn.user):
        return "a change or delete needs the user's own words in this turn"
    if not _rules_read_a_statement(parts, statement, ctx):
        return "the rules read this as a question, request or small talk, which states nothing"
    mine, theirs = _subjects(statement), _subjects(target)
    if not mine & theirs:
        return f"the statement is about {sorted(mine)}, the memory about {sorted(theirs)}"
    if decision.action == "outdate" and decision.part and not content_words(decision.part) <= content_words(
            target.content):
        return "the outdated part must be words of the memory"
    return None


@dataclass
class Applied:
    """What applying a turn's decisions changed: supersessions (``Supersessions.write`` commits them),
    rule supersessions undone, and an audit row per decision."""

    superseded: Supersessions = field(default_factory=Supersessions)
    restored: list[MemoryRecord] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> list[MemoryRecord]:
        out = {r.memory_id: r for r in self.superseded.changed}
        out.update((r.memory_id, r) for r in self.restored)
        return list(out.values())


def apply(parts: Components, tenant_id: str, user_id: str, decisions: Sequence[tuple[Decision, str | None]],
          by: str) -> Applied:
    """Apply checked decisions (each with why it was refused, or None) to the current rows of one
    user, read again here (the caller holds ``parts.lock``): one already in effect, or whose rows
    moved since, changes nothing. Every decision is audited with its reason, applied or not."""
    out = Applied()
    ids = [i for d, _ in decisions for i in (d.statement_id, d.target_id) if i]
    rows = parts.store.get(tenant_id, user_id, ids) if ids else {}
    for decision, refused in decisions:
        statement, target = rows.get(decision.statement_id), rows.get(decision.target_id or "")
        why = refused or _apply_one(decision, statement, target, parts, out)
        key = decision.action if why is None else "refused"
        out.counts[key] = out.counts.get(key, 0) + 1
        if statement is not None:
            out.audit.append({"action": "form", "tenant_id": tenant_id, "user_id": user_id,
                              "memory_id": statement.memory_id,
                              "detail": {"decision": decision.action, "target": decision.target_id,
                                         "reason": decision.reason[:300], "by": by, "applied": why is None,
                                         **({"refused": why} if why else {})}})
    return out


def _apply_one(decision: Decision, statement: MemoryRecord | None, target: MemoryRecord | None,
               parts: Components, out: Applied) -> str | None:
    """Apply one decision; why it changed nothing, or None when it changed what it says."""
    if statement is None or statement.status is not Status.ACTIVE:
        return "the statement is no longer active"
    if decision.target_id is None:
        return None  # a plain add: the statement stays as the rules left it
    if target is None:
        return "the target is gone"
    ruled = target.superseded_by == statement.memory_id and target.status is Status.SUPERSEDED
    if decision.action == "add":
        if ruled:  # the rules retired the target by this statement; the reconciler says it still holds
            target.status, target.superseded_by = Status.ACTIVE, None
            statement.supersedes = None
            statement.metadata.pop(REPLACED_KEY, None)
            out.restored += [target, statement]
        return None
    if decision.action in ("update", "delete"):
        if ruled:
            return None  # already so
        if target.status is not Status.ACTIVE:
            return "the target is no longer current"
        if not related(statement, target):  # about the same thing in other words: ended, kept as history
            if EARLIER_KEY in target.metadata:
                return "the target is already marked earlier"
            if not as_trusted(statement, target):
                return (f"a {statement.trust.value}-trust statement does not end the "
                        f"{target.trust.value}-trust target")
            mark_earlier(statement, target)
            out.superseded.earlier.append((statement, target))
            return None
        part = _clauses_about(target, statement) or _names_beside(target, statement)
        if part:  # the target says more than what changed: outdated in part, its other facts still recalled
            if not as_trusted(statement, target):
                return (f"a {statement.trust.value}-trust statement does not outdate the "
                        f"{target.trust.value}-trust target")
            _outdate_part(target, statement, part, out.superseded)
            return None
        _update(parts, target, statement, out.superseded)
        return None if statement.status is Status.ACTIVE else "held for review (contradicts high trust)"
    if target.status is not Status.ACTIVE:
        return "the target is no longer current"
    if decision.action == "outdate":
        if target.metadata.get(OUTDATED_KEY, {}).get("by") == statement.memory_id:
            return None
        if not as_trusted(statement, target):  # as supersession's own partial outdating
            return f"a {statement.trust.value}-trust statement does not outdate the {target.trust.value}-trust target"
        _outdate_part(target, statement, [decision.part or target.content[:200]], out.superseded)
        return None
    # noop: the statement says the target again, and merges into it only within one scope (the merged
    # row leaves its own scope: a shared statement folded into an agent's private copy is gone for the rest)
    if not may_merge(statement, target):
        return f"{statement.memory_id} and {target.memory_id} are kept apart: they are of different scopes"
    _repeat(target, statement, out.superseded)
    return None
