"""Slot keys: the words people ask a fact with that the statement of it never uses.

"I'm a pastry chef in Lyon." answers "What does Dana do for a living?" and "我是一名小学语文老师。" answers
"我从事什么职业？", but they share no word, and e5 puts the pair's cosine near its background (0.75). A
slot names such a fact: a question that asks for it (``asks``) and a statement that gives it
(``states``), in English and Chinese. A search whose question asks for a slot counts each candidate
that states it as a full keyword match (``portamem.read.candidates``): the keyword retriever meets the
paraphrase half way. Only slots a person states of themselves in a handful of ways are listed: where
they live, their work, what they cannot eat, their pets.

May import: nothing of portamem beyond the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Slot", "SLOTS", "asked_slots", "states_slot"]


@dataclass(frozen=True)
class Slot:
    name: str
    #: a question that asks for the slot's value
    asks: re.Pattern[str]
    #: a statement that gives it
    states: re.Pattern[str]


_I = r"(?:i|we)(?:'m| am|'re| are)?"
SLOTS: tuple[Slot, ...] = (
    Slot("home",
         re.compile(r"\bwhere\b.{0,20}\b(?:i|we)\s+(?:live|stay|reside|based)\b|\bwhere(?:'s| is)\s+(?:my|our)\s+home\b|"
                    r"\b(?:which|what)\s+(?:city|town|country)\b.{0,30}\b(?:live|home|reside|based)\b|\bhome\s+for\s+me\b|"
                    r"住在?哪|住哪|家在哪|住址|哪座城市|哪个城市.{0,4}(?:住|家)", re.I),
         re.compile(r"\b(?:i|we)\s+(?:live|(?:just\s+)?moved|rent|relocated)\b|\b(?:i'm|i am|we're|we are)\s+based\b|"
                    r"(?:我|我们|现在|目前|如今)家?(?:也|就|还)?住|住在|搬到|搬去|搬家|家住|定居|新地址", re.I)),
    Slot("job",
         re.compile(r"\b(?:do|doing)\s+for\s+(?:a\s+)?(?:living|work)\b|\b(?:my|her|his|your)\s+(?:job|occupation|profession|"
                    r"career|trade|line of work)\b|\bwhat\s+(?:do|does)\s+\w+\s+do\b(?!\s+(?:on|at|in|with|for\s+fun))|"
                    r"\bwho\s+employs\b|\bwhere\s+(?:do|does)\s+\w+\s+work\b|"
                    r"职业|工作是什么|做什么工作|干什么工作|干什么的|做什么的|从事|哪一行|在哪家公司|工作单位", re.I),
         re.compile(r"\b(?:i|she|he)\s+work(?:s|ed)?\s+(?:as|at|for|in)\b|\bself-employed\b|\bfreelanc|\bretired\b|"
                    r"\b(?:i'm|i am|i was|used to be)\s+(?:a|an)\s+(?:[\w-]+\s+){0,3}?"
                    r"(?:\w+(?:er|or|ist|ian|ant|ent)|chef|nurse|pilot|teacher|lawyer|doctor|vet|cook|"
                    r"nanny|midwife|barista|judge|clerk|coach|model|tutor)\b|\b(?:i|she|he)\s+teach(?:es)?\b|"
                    r"我是(?:一名|一个|个)?.{0,6}(?:师|员|家|生|工|手|经理|护士|会计|律师|医生|老师|厨师|主播)|"
                    r"在.{1,12}(?:工作|上班|当|做)|跳槽|入职|辞职|换工作|当(?:律师|老师|医生|护士|会计|厨师|司机)|掌勺", re.I)),
    Slot("food",
         re.compile(r"\b(?:can't|cannot|can\s+not|shouldn't|mustn't)\s+(?:\w+\s+)?(?:eat|have)\b|\bstay\s+away\s+from\b|"
                    r"\b(?:allerg\w*|intoleran\w*|diet|dietary)\b|\bfoods?\b.{0,20}\b(?:avoid|away|can't|not)\b|"
                    r"不能吃|不能碰|碰不得|过敏|忌口|饮食|要避开|得避开", re.I),
         re.compile(r"\ballerg\w*|\bintoleran\w*|\b(?:can't|cannot|don't|do not|never)\s+eat\b|\bvegetarian\b|\bvegan\b|"
                    r"\bgluten-free\b|\bcoeliac\b|\bceliac\b|过敏|不耐受|不吃|吃不了|不能吃|素食|忌口", re.I)),
    Slot("pet",
         re.compile(r"\bpets?\b|\banimals?\b|宠物|动物|狗狗|猫咪", re.I),
         re.compile(r"\b(?:cat|cats|dog|dogs|puppy|kitten|hamster|rabbit|parrot|tortoise|beagle|retriever|terrier|"
                    r"labrador|spaniel|greyhound|goldfish|guinea pig)\b|猫|狗|柯基|金毛|鹦鹉|兔子|仓鼠|乌龟|泰迪", re.I)),
)


def asked_slots(question: str) -> frozenset[str]:
    """The slots a question asks for ("What does Dana do for a living?": job)."""
    return frozenset(s.name for s in SLOTS if s.asks.search(question))


def states_slot(text: str, names: frozenset[str]) -> bool:
    """Whether a memory's text gives one of the named slots ("I'm a pastry chef in Lyon.": job)."""
    return any(s.name in names and s.states.search(text) for s in SLOTS)
