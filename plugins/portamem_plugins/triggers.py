"""Built-in write-trigger: remember what the user states about themselves or their world (any sentence
that is not a question, a request, a greeting, thanks or small talk), most strongly turns that carry
entities, numbers, decisions, strong emotion, an attribute's value ("my budget is 8000"), a correction
("actually it's 2,000"), a change the user reports ("we've moved her onto Lily's Kitchen", "改喂渴望了")
or an explicit ask."""

from __future__ import annotations

import functools
import re

from portamem import hookimpl
from portamem.language.entities import extract_entities
from portamem.pipeline import TriggerVote, WriteContext
from portamem.records import MemoryType

from .acts import act_of, sentences
from .classify import classify_kind, has_decision, has_strong_emotion, is_explicit
from .extract import attribute_values


#: a vote this strong keeps the sentence in long-term memory at once (``portamem.write.window``)
LASTING = 0.8
_NUMBER = re.compile(r"\d|[一二三四五六七八九十百千万两]+(?:块|元|万|千|百|号|点|岁|公斤|斤|个|人|天|晚|次|公里)")
#: a change the user reports: kept in long-term memory at once, like a correction
_CHANGED = re.compile(
    r"\b(?:switched|changed|swapped|upgraded|downgraded|cancell?ed|rescheduled|postponed|rebooked|quit|sold|"
    r"no longer|any ?more|instead of|gone off|moved (?:her|him|it|them|us|me) (?:on)?to|pushed (?:it )?back|"
    r"bumped (?:\w+ )?to|put (?:\w+ )?up to|crept (?:back )?up to|gone up to|went up to|down to|"
    r"is now|are now|now at)\b"
    r"|改[成为到用喂吃买]|换[成了到用]|不再|搬到|搬去|取消了|推迟|提前到|改期|戒了|退了|涨到|降到|减到|加到|砍到|挪到", re.I)
_CORRECTION = re.compile(r"\b(?:actually|scratch that|correction|i meant|not \S+ but|wait no|sorry,? (?:it's|i meant))\b"
                         r"|其实|更正|说错了|不是.{1,8}而是|应该是", re.I)


_CJK = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[^\W\d_\u4e00-\u9fff]+|\d+")


def _has_content(text: str) -> bool:
    """Enough words to state something: two words, or three CJK characters ("I'm vegan", "教练姓王")."""
    return len(_CJK.findall(text)) >= 3 or len(_WORD.findall(text)) >= 2


#: what a sentence of banter opens with: laughter ("haha my legs are dead", "lol the dog will hate the noise")
_BANTER = re.compile(r"^(?:lol|lmao|rofl|haha+|hehe+|ha ha|哈哈+|呵呵+|嘿嘿+|233+)\b|^(?:哈哈+|呵呵+|嘿嘿+)", re.I)
#: interjections and thanks before or after what a sentence says ("ok thanks, that's helpful", "phew ok",
#: "小米粥可以，谢谢")
_AROUND = re.compile(
    r"^(?:(?:ok(?:ay)?|oh|ah|ooh|wow|phew|ugh|hmm+|um+|yeah|yep|yes|no|nope|sure|right|well|so|brill|great|cool|"
    r"nice|thanks?|thank you|ta|cheers|morning|hi|hey|hello|你好|您好|嗨|哈喽|嗯+|哦+|噢|唉|啊|好吧|好的|好|行|谢谢|多谢|感谢)"
    r"[\s,，.。!！~～]+)+"
    # possessive runs: a run of 哈 split every way would take exponential time on "我哈哈…哈x"
    r"|(?:[\s,，.。!！~～]++(?:thanks?|thank you|ta|cheers|谢谢|多谢|谢啦|lol|haha++|hehe++|lmao)"
    r"|[\s,，.。!！~～]*+(?:哈哈++|呵呵++|嘿嘿++))+[\s.。!！~～]*$", re.I)
#: a sentence about the assistant or its answer, with nothing of the user in it ("hope you're well",
#: "that's helpful", "sounds perfect", "写得真好", "你说得对")
_TO_ASSISTANT = re.compile(r"\b(?:you|your|you're)\b|^(?:that|this|it|sounds|looks|way)\b|^(?:你|写得|说得|这个|那个|这样)"
                           r"|(?:真好|不错|有道理|可以|挺好|太好了)[\s!！。.~～]*$"
                           # an exclamation: a Chinese sentence ending in a particle of feeling ("差这么多啊")
                           r"|[啊呀吧哇嘛啦][\s!！。.~～]*$", re.I)
_SELF = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|we'll|us|our|ours)\b|我|咱", re.I)
#: what only describes the moment it is said in, or what the user is about to do: kept as a candidate,
#: not for good
_MOMENT = re.compile(r"\b(?:today|tonight|right now|this (?:morning|afternoon|evening)|in a (?:minute|bit)|later today|"
                     r"i'll|i will|i'm going to|i'm gonna|gonna)\b"
                     r"|今天|今晚|马上|待会|稍后|刚才|一会儿|我去|我再|回头", re.I)


def _said(sentence: str) -> str:
    """What a sentence says once the interjections and thanks around it are left out."""
    return _AROUND.sub("", sentence.strip()).strip()


def _states_something(text: str) -> bool:
    """Whether a sentence of the text states something about the user or their world. What is not memory
    is told apart rather than what is listed: questions, requests and small talk (``acts``), banter,
    and what is said to the assistant about itself or its answer."""
    for sentence in sentences(text):
        said = _said(sentence)
        if act_of(said) != "statement" or _BANTER.match(sentence.strip()) or not _has_content(said):
            continue
        if not _SELF.search(said) and (_TO_ASSISTANT.search(said) or said != sentence.strip()):
            # said to the assistant about itself or its answer, or a reaction after thanks or an
            # interjection ("thanks, speak soon", "yes tofu scramble works"): nothing of the user in it
            continue
        return True
    return False


@hookimpl
def portamem_write_trigger(text: str, context: WriteContext) -> TriggerVote | None:
    return _vote(text)


@functools.lru_cache(maxsize=1024)  # a turn's message is voted on twice (its stress, then what is kept of it)
def _vote(text: str) -> TriggerVote | None:
    reasons: list[str] = []
    strength = 0.0
    explicit = is_explicit(text)
    if explicit:
        reasons.append("explicit request to remember")
        strength = 1.0
    entities = extract_entities(text)
    if entities:
        reasons.append(f"entities: {', '.join(entities[:5])}")
        strength = max(strength, 0.6)
    if has_decision(text):
        reasons.append("a decision")
        strength = max(strength, 0.7)
    if has_strong_emotion(text):
        reasons.append("strong emotion")
        strength = max(strength, 0.6)
    if attribute_values(text):
        reasons.append("the value of an attribute")
        strength = max(strength, 0.6)
    if _NUMBER.search(text):
        reasons.append("a number")
        strength = max(strength, 0.6)
    if _CORRECTION.search(text):  # "actually it's 2,000", "scratch that": a value the user put right
        reasons.append("a correction")
        strength = max(strength, LASTING)
    if _CHANGED.search(text):  # "we've moved her onto Lily's Kitchen", "改喂渴望了": what held is replaced
        reasons.append("a change")
        strength = max(strength, LASTING)
    kind = classify_kind(text)
    if kind in {"identity", "preference"}:
        reasons.append(f"{kind} statement")
        strength = max(strength, 0.8)
    if _states_something(text):
        # what is not memory is told apart (questions, requests, greetings, thanks, small talk: ``acts``);
        # any other sentence the user says states something about them or their world, and is kept:
        # for good, unless it only describes the moment ("today", "right now"), kept as a candidate
        reasons.append("a statement")
        moment = _MOMENT.search(text) is not None
        strength = max(strength, 0.6 if moment else LASTING)
        if kind == "task" and not moment:  # "now", "currently", "现在" state what holds, not a task
            kind = "fact"
    if not reasons:
        return None
    mtype = MemoryType.EPISODIC if kind == "task" else MemoryType.SEMANTIC
    return TriggerVote(True, strength, mtype, kind, "; ".join(reasons), explicit)
