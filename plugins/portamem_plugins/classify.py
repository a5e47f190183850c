"""Rule-based classification of memory text (Chinese and English): kind, stress, emotion, decisions."""

from __future__ import annotations

import re

__all__ = ["classify_kind", "is_explicit", "has_decision", "has_strong_emotion", "KIND_BANDS"]

_IDENTITY = re.compile(
    r"\b(?:my name is|call me|i am (?:a|an)\b|i'm (?:a|an)\b|i was born|my birthday|i(?:'m| am) allergic|"
    r"my (?:wife|husband|son|daughter|mother|father|partner|mom|dad)\b|i live in|i work (?:as|at)|"
    r"never (?:ever )?(?:give|share|call|send|use)|always (?:use|address|call)|do not ever|must not)\b"
    r"|我叫|我的名字|我是一名|我是个|我出生|我的生日|我对.{0,8}过敏|我住在|我在.{0,12}工作|我的(?:妻子|丈夫|老婆|老公|儿子|女儿|妈妈|爸爸)"
    r"|永远不要|绝对不要|千万不要|必须",
    re.I,
)
_PREFERENCE = re.compile(
    r"\b(?:i (?:really )?(?:like|love|prefer|enjoy|hate|dislike|can't stand|adore)|my favou?rite|i'd rather|"
    r"i don't (?:like|eat|drink)|i(?:'m| am) (?:a )?(?:vegetarian|vegan)|i usually|i always)\b"
    r"|喜欢|不喜欢|讨厌|偏好|最爱|爱吃|爱喝|不吃|不喝|习惯|更愿意",
    re.I,
)
_TASK = re.compile(
    r"\b(?:right now|at the moment|currently|today|tonight|this (?:morning|afternoon|evening)|in a minute|"
    r"remind me (?:to|in)|i'm (?:about to|going to)|todo|to-do)\b|现在|目前|今天|今晚|马上|待会|稍后|提醒我",
    re.I,
)
_EXPLICIT = re.compile(
    r"\b(?:remember (?:that|this|my|i)|please remember|don't forget|do not forget|keep in mind|note that|"
    r"make a note|for future reference)\b|记住|别忘了|不要忘记|请记下|记一下|以后都",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:confirm(?:ed)?|cancel(?:led|ed)?|decided?|i'll take|go with|book(?:ed)?|order(?:ed)?|"
    r"approve[d]?|reject(?:ed)?|agree[d]?|refund(?:ed)?|chose|choose|sign(?:ed)? up|subscribe[d]?)\b"
    r"|确认|取消|决定|就要|选择|预订|下单|同意|拒绝|退款|订了|报名",
    re.I,
)
_EMOTION = re.compile(
    r"\b(?:furious|angry|outraged|devastated|heartbroken|terrified|thrilled|ecstatic|love it|hate it|"
    r"unacceptable|disgusted|so happy|so sad|so excited|can't believe)\b|!{2,}"
    r"|太棒了|气死|愤怒|生气|伤心|难过|崩溃|激动|开心死|失望|无法接受|害怕",
    re.I,
)

#: importance band (1-100) by kind: transient 1-20, ordinary fact 21-50, preference 51-80, identity 81-100
KIND_BANDS: dict[str, int] = {"task": 15, "episodic": 30, "fact": 40, "preference": 65, "identity": 88}


def classify_kind(text: str) -> str:
    """identity > preference > task > fact, by the first rule family that matches."""
    if _IDENTITY.search(text):
        return "identity"
    if _PREFERENCE.search(text):
        return "preference"
    if _TASK.search(text):
        return "task"
    return "fact"


def is_explicit(text: str) -> bool:
    return _EXPLICIT.search(text) is not None


#: the user choosing among what was offered: a decision, though it opens as a request or ends like a
#: reaction ("Let's take the Ryanair one at 9:40", "ok I'll go with the blue one", "那就豆腐猫砂吧", "还是选黑色吧")
_CHOICE = re.compile(
    r"^(?:(?:ok(?:ay)?|right|yes|yeah|yep|fine|great|perfect|cool|alright|hmm+)[\s,!.]+)*"
    r"(?:let's|let us|we'll|i'll|we will|i will|i'd|we'd)\s+(?:take|go with|go for|pick|choose|stick with)\s+"
    r"(?:the|that|this|a|an|one|\d|(?-i:[A-Z]))"
    r"|^(?:(?:好的?|嗯+|行|那)[，,\s]*)*(?:那就|就|那还是|还是|干脆)(?:定|选|要|用|买|订|换)?"
    r"(?!这样|那样|这么|那么|算了|好)[^，,。！？?]{2,14}(?:吧|了)[。！!~～]*$",
    re.I,
)


def is_choice(text: str) -> bool:
    """Whether the text is the user choosing among what was offered (``_CHOICE``)."""
    text = text.strip()
    return not text.endswith(("?", "？")) and _CHOICE.search(text) is not None


def has_decision(text: str) -> bool:
    return _DECISION.search(text) is not None or is_choice(text)


def has_strong_emotion(text: str) -> bool:
    return _EMOTION.search(text) is not None
