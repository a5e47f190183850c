"""The words that say a value changed, and the kinds of value a text gives, in English and Chinese: one
vocabulary for the write path (the extractor's templates, formation's judgement without slots) and the
read path (which line of the prompt is current, which hit holds the asked value).

A change is said with a verb ("moved", "pushed back", "改成"), a marker of what holds now ("now",
"no longer", "instead", "现在", "不再") or a word for what held before ("used to", "以前"). Each
reader takes the part it needs: the templates only the verbs ("my budget was raised to ..."), the
read path the verbs and the markers, formation all three (a statement of what held before outdates
it too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .text import has_cjk

__all__ = ["CHANGE_VERBS", "CHANGE", "CHANGE_OR_FORMER", "DATE", "AMOUNT", "CURRENCY", "value_kinds", "relation_words",
           "animal_words", "names_animal", "other_animals"]

#: English verbs of change, as a regex alternation (for templates: "my {attribute} was {verb} to {value}")
CHANGE_VERBS = (
    r"changed?|updated?|switched|swapped|moved|pushed(?:\s+back)?|postponed|rescheduled|rebooked|delayed|put back|"
    r"brought forward|bumped(?:\s+up)?|raised|lowered|increased|reduced|cut|dropped(?:\s+to)?|upgraded|downgraded|"
    r"cancell?ed|replaced|revised|extended|shifted|adjusted|tweaked|doubled|halved|capped|sold|quit|stopped|"
    r"gave up|given up|went up|gone up|went down|gone down|crept(?:\s+(?:back\s+)?up)?|rose|fell"
)
#: English words that say what holds now differs from before
_MARKERS = (r"now|nowadays|these days|no longer|any ?more|no more|instead|actually|from now on|this time|"
            r"scratch that|correction|up to|down to|went with|gone with|going with|gone off|left|lost|went to|bump")
#: Chinese verbs and markers of change
_ZH = (r"现在|如今|改成|改为|改到|改了|改用|换成|换了|换到|不再|已经不|搬到|搬去|取消|推迟|提前|更新|其实|调整|减到|"
       r"加到|降到|涨到|砍到|提高到|变成|这次|这回|转到|转网|挪到|戒了|退了|卖了|升级|提了新|买了新|新买")
#: what held before ("I used to", "以前"), and a negation of what held ("not ... any more", "不...了")
_FORMER = r"\b(?:used to|not \w+ any)\b|之前|以前|原来|不.{0,6}了"

#: a word that says something changed
CHANGE = re.compile(rf"\b(?:{CHANGE_VERBS}|{_MARKERS})\b|{_ZH}", re.I)
#: a change, or a word for what held before
CHANGE_OR_FORMER = re.compile(rf"\b(?:{CHANGE_VERBS}|{_MARKERS})\b|{_ZH}|{_FORMER}", re.I)

_MONTHS = (r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
           r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
_ZH_DIGITS = "一二三四五六七八九十"
_WEEKDAY = (r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"
            r"|(?:下|上|这)?(?:周|星期|礼拜)[一二三四五六日天]|周末")
#: "Sat", "Thu": a date when a value is looked for, too often another word ("sat", "sun") to say a text gives one
_WEEKDAY_SHORT = r"\b(?:mon|tue|wed|thu|fri|sat|sun)\b"
_CALENDAR = (
    rf"\b(?:\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:\s+\d{{4}})?|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"(?:,?\s+\d{{4}})?|(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)\b|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?)"
    rf"|(?:(?:\d{{4}}|[一二三四五六七八九〇零]{{4}})\s*年\s*)?(?:\d{{1,2}}|[{_ZH_DIGITS}]{{1,3}})\s*月\s*(?:\d{{1,2}}|[{_ZH_DIGITS}]{{1,3}})\s*[日号]?"
    rf"|(?:\d{{1,2}}|[{_ZH_DIGITS}]{{1,3}})\s*[日号](?!码)"
)
_CLOCK = (r"\b\d{1,2}[:.]\d{2}(?:\s*(?:am|pm)\b)?|\b\d{1,2}\s*(?:am|pm)\b|[上下]午\s*\S{1,3}点"
          r"|\d{1,2}\s*点(?:\s*\d{1,2}\s*分?|半)?")
_MONEY = (r"[$€£¥]\s*\d|\d[\d,.]*\s*(?:k\b|pounds|euros?|dollars|quid|bucks|元|块|万)|"
          r"\b(?:a|per)\s+(?:month|year|week|night)\b|每[月年晚]|一[个]?月")

#: a date or a time: a calendar date, a weekday, a clock time
DATE = re.compile(rf"{_CALENDAR}|{_WEEKDAY}|{_WEEKDAY_SHORT}|{_CLOCK}", re.I)
_UNITS = (r"k|m|bn|kg|kgs|km|kms|g|cm|mm|m2|%|lbs?|pounds?|euros?|dollars?|quid|usd|eur|gbp|rmb|yuan|hours?|hrs?|"
          r"minutes?|mins?|people|guests|persons?|days|nights|weeks|months|years|mb|gb|tb|mbps|miles?|percent")
#: an amount: a number with its unit (``unit``, ``zh`` or ``zhw`` names it), or Chinese numerals before one
AMOUNT = re.compile(
    r"\d+(?:\.\d+)?\s*(?P<zh>万\d*|千|百|元|块钱?|公斤|斤|公里|千米|厘米|毫米|公分|米|兆|个月|个|人|桌|岁|天|周|年|小时|分钟|平米?)"
    rf"|(?:[£$€¥]\s?)?\d+(?:[.,]\d+)*(?:\s?(?P<unit>{_UNITS})\b)?"
    r"|[一二两三四五六七八九十百千万]+\s*(?P<zhw>万|千|百|元|块|公斤|斤|公里|厘米|公分|个月|个|人|桌|岁|天|周|小时|分钟)", re.I)
CURRENCY = re.compile(r"[£$€¥]")

_KINDS = (("weekday", re.compile(_WEEKDAY, re.I)), ("date", re.compile(_CALENDAR, re.I)),
          ("money", re.compile(_MONEY, re.I)), ("clock", re.compile(_CLOCK, re.I)))


def value_kinds(text: str) -> set[str]:
    """The kinds of value a text gives: a weekday, a calendar date, an amount of money, a clock time."""
    return {kind for kind, pattern in _KINDS if pattern.search(text)}


#: the user's family by their relation to the user, each with the words that name that relation
#: (whatever the language of the conversation: a user may write either): a closed class, unlike the things a
#: user owns. A person of the user's named in a question ("my wife", "我老婆") is someone the store knows of
#: only where some memory names the relation with one of its words ("my wife Ana", "Ana and I got married")
_RELATIONS = (
    ("wife", "wives", "missus", "spouse", "married", "老婆", "妻子", "太太", "爱人", "媳妇", "夫人"),
    ("husband", "hubby", "spouse", "married", "老公", "丈夫", "先生", "爱人"),
    ("partner", "wife", "husband", "spouse", "boyfriend", "girlfriend", "fiancé", "fiancée", "fiance", "fiancee",
     "married", "对象", "伴侣", "老婆", "老公", "男朋友", "女朋友", "未婚夫", "未婚妻"),
    ("boyfriend", "bf", "partner", "fiancé", "fiance", "男朋友", "男友", "对象", "未婚夫"),
    ("girlfriend", "gf", "partner", "fiancée", "fiancee", "女朋友", "女友", "对象", "未婚妻"),
    ("fiancé", "fiance", "fiancée", "fiancee", "engaged", "未婚夫", "未婚妻", "男朋友", "女朋友"),
    ("son", "sons", "kid", "kids", "child", "children", "儿子", "孩子", "娃", "宝宝"),
    ("daughter", "daughters", "kid", "kids", "child", "children", "女儿", "闺女", "孩子", "娃", "宝宝"),
    ("kid", "kids", "child", "children", "son", "daughter", "baby", "孩子", "儿子", "女儿", "娃", "宝宝"),
    ("mum", "mom", "mother", "mama", "parents", "妈", "妈妈", "母亲", "老妈", "父母"),
    ("dad", "father", "papa", "parents", "爸", "爸爸", "父亲", "老爸", "父母"),
    ("parents", "mum", "mom", "mother", "dad", "father", "父母", "爸妈", "爸", "妈"),
    ("brother", "brothers", "bro", "哥", "哥哥", "弟", "弟弟", "兄弟"),
    ("sister", "sisters", "sis", "姐", "姐姐", "妹", "妹妹", "姐妹"),
    ("grandma", "grandmother", "granny", "nana", "奶奶", "外婆", "姥姥"),
    ("grandpa", "grandfather", "grandad", "granddad", "爷爷", "外公", "姥爷"),
    ("uncle", "叔叔", "舅舅", "伯伯", "姑父", "姨父"),
    ("aunt", "auntie", "aunty", "阿姨", "姑姑", "姨", "舅妈", "婶婶"),
    ("cousin", "cousins", "表哥", "表姐", "表妹", "表弟", "堂哥", "堂姐", "堂妹", "堂弟"),
)
#: each word's group: the group it heads, else the first that holds it ("mother" -> the group of "mum")
_RELATION_OF: dict[str, tuple[str, ...]] = {}
for _group in _RELATIONS:
    _RELATION_OF.setdefault(_group[0], _group)
for _group in _RELATIONS:
    for _word in _group[1:]:
        _RELATION_OF.setdefault(_word, _group)


#: the kinds of animal a user keeps, each with the words that name it, its commonest breeds among them (a
#: pet is as often introduced by its breed, "a greyhound called Biscuit", as by its kind). In Chinese a
#: kind is one character that its compounds hold (橘猫, 猫粮, 狗狗, 柴犬)
_ANIMALS = (
    ("cat", "cats", "kitten", "kittens", "kitty", "moggy", "tabby", "persian", "siamese", "ragdoll", "maine coon",
     "bengal", "sphynx", "猫", "布偶", "英短", "美短", "暹罗", "加菲"),
    ("dog", "dogs", "puppy", "puppies", "pup", "doggy", "greyhound", "whippet", "lurcher", "labrador", "lab",
     "retriever", "beagle", "poodle", "cockapoo", "labradoodle", "spaniel", "terrier", "collie", "husky", "corgi",
     "dachshund", "bulldog", "pug", "chihuahua", "schnauzer", "rottweiler", "dalmatian", "shih tzu", "staffie",
     "狗", "犬", "金毛", "泰迪", "哈士奇", "二哈", "柯基", "拉布拉多", "边牧", "萨摩耶", "比熊", "博美", "雪纳瑞",
     "法斗", "巴哥", "吉娃娃"),
    ("rabbit", "rabbits", "bunny", "兔"),
    ("hamster", "hamsters", "guinea pig", "仓鼠", "豚鼠"),
    ("bird", "birds", "parrot", "budgie", "canary", "鸟", "鹦鹉"),
    ("tortoise", "turtle", "乌龟", "龟"),
)
_ANIMAL_OF = {w: g for g in _ANIMALS for w in g}


def animal_words(word: str) -> tuple[str, ...] | None:
    """The words naming the kind of animal ``word`` names ("cat" -> cat, cats, kitten, ..., 猫), or None."""
    return _ANIMAL_OF.get(word.lower())


def names_animal(text: str, words: Sequence[str]) -> bool:
    """Whether ``text`` names an animal by one of ``words``: an English word whole, a Chinese one anywhere
    (橘猫 names a cat)."""
    low = text.lower()
    return any(w in low if has_cjk(w) else re.search(rf"\b{re.escape(w)}\b", low) is not None for w in words)


def other_animals(words: Sequence[str]) -> list[tuple[str, ...]]:
    """The kinds of animal other than the one ``words`` name."""
    return [g for g in _ANIMALS if not set(g) & set(words)]


def relation_words(word: str) -> tuple[str, ...] | None:
    """The words naming the relation ``word`` names ("wife" -> wife, missus, spouse, married, 老婆, ...; "哥"
    -> 哥, 哥哥, brother, ...), or None when ``word`` names no relation of the user's. Forms that add 我
    ("我哥", as the tokenizer keeps them) are included for the Chinese words."""
    w = word.lower()
    group = _RELATION_OF.get(w)
    if group is None:
        return None
    group = tuple(dict.fromkeys((w,) + group))
    cjk = [x for x in group if has_cjk(x)]
    return tuple(dict.fromkeys(group + tuple("我" + x for x in cjk)))
