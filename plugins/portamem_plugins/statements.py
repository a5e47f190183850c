"""Rule statement extractor, English and Chinese: the atomic statements a user's words make about
themselves, including the ways people state and change things.

"I moved from Lyon to Paris last month" -> lives_in = Paris (previous Lyon, when last month);
"the budget for the kitchen renovation is now 15000 euros" -> budget (kitchen renovation) = 15000 euros;
"I've gone off spicy food" -> preference spicy food, negative; "I switched to oat milk" -> uses oat milk;
"我搬到杭州了" -> lives_in = 杭州; "我不再吃辣了" -> preference 辣, negative.

Only statements count: questions, requests and small talk (``acts``) are skipped, except a request that
states a new value ("please change my address to 12 Rue Cler"). Each statement keeps the clause it was
read from, which becomes its memory's text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from portamem.language.statements import Statement
from portamem.language.text import has_cjk
from portamem.language.vocabulary import CHANGE, CHANGE_VERBS

from .acts import utterances

__all__ = ["extract_statements", "clauses"]

# ---------------------------------------------------------------------------------------------- English
#: what ends a value: punctuation, a conjunction or a word that starts another part of the sentence
_END = (r"(?=\s*(?:[;!?()\"]|[,:](?!\d)|\.(?:\s|$)|$)|\s+(?:and|but|so|because|since|as|which|who|where|while|though|"
        r"although|if|now|anymore|any\s?more|from now on|these days|nowadays|instead|too|as well|again|for good|"
        r"for now|at the moment|right now|after all|though|then)\b)")
#: a value: anything up to a clause's end, a number's "12,000" and a time's "17:25" included
_P = r"(?P<value>(?:[^,;!?:()\"]|(?<=\d)[,:](?=\d)){1,60}?)"
_PREV = r"(?P<prev>(?:[^,;!?:()\"]|(?<=\d)[,:](?=\d)){1,60}?)"
_TIME = re.compile(
    r"\s+(?:(?:last|this|next|past|earlier this|later this)\s+(?:week|month|year|summer|winter|spring|autumn|fall|"
    r"weekend|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|yesterday|today|tonight|recently|lately|"
    r"(?:in|since|on)\s+(?:january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|\d{4})(?:\s+\d{1,4})?|"
    r"(?:a|one|two|three|four|five|six|a few|a couple of|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago)$", re.I)
_LEAD = re.compile(r"^(?:(?:big |good |some |great )?news|update|fyi|by the way|btw|also|oh|well|so|actually|"
                   r"(?:it )?turns out(?: that)?|correction|"
                   r"anyway|just so you know|heads up|quick update|one more thing|and|but|ok(?:ay)?|alright|"
                   r"(?:please )?(?:remember|note|keep in mind|don't forget)(?: that)?)\s*[:,!-]?\s+", re.I)
_SUBJ = r"\b(?:i|we)(?:'ve| have| had)?\s+(?:just\s+|recently\s+|finally\s+|now\s+|officially\s+|already\s+|since\s+)*"
#: the subject, or none at the sentence's start: people drop it in chat for a change they report
#: ("Also switched to Hoka Clifton", "quit coffee completely")
_SUBJ_OPT = (r"(?:\b(?:i|we)(?:'ve| have| had)?\s+|^)(?:just\s+|recently\s+|finally\s+|now\s+|officially\s+|"
             r"already\s+|since\s+)*")

_PROFESSIONS = (
    r"engineer|developer|programmer|teacher|nurse|doctor|physician|surgeon|chef|cook|baker|designer|student|lawyer|"
    r"manager|architect|accountant|writer|author|artist|consultant|scientist|researcher|analyst|pilot|driver|"
    r"photographer|musician|professor|pharmacist|dentist|vet|veterinarian|journalist|editor|translator|"
    r"electrician|plumber|carpenter|mechanic|firefighter|police officer|officer|soldier|farmer|librarian|"
    r"therapist|psychologist|paramedic|cashier|waiter|waitress|barista|bartender|freelancer|entrepreneur|"
    r"founder|intern|retiree|pastry chef|data scientist|product manager|project manager|tutor|coach|trainer|"
    r"dancer|actor|actress|singer|economist|banker|broker|agent|secretary|assistant|clerk|technician|"
    r"salesperson|marketer|recruiter|scientist|biologist|chemist|physicist|mathematician|historian|"
    r"software engineer|web developer|graphic designer|ux designer|social worker|midwife|optician"
)
_DIETS = (r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|plant[- ]based|gluten[- ]free|dairy[- ]free|"
          r"lactose[- ]free|keto(?:genic)?|paleo|low[- ]carb|low[- ]sodium|halal|kosher|carnivore|omnivore|"
          r"raw[- ]food|mediterranean|sugar[- ]free")
#: the verbs of "my {attribute} was {verb} to {value}": a change, or a value set
_CHANGE = CHANGE_VERBS + "|set"
_ATTR = r"(?P<attr>(?:[\w'-]+\s+){0,6}?[\w'-]+)"
_VAL = r"(?P<value>(?:[^,;!?()\"]|(?<=\d),(?=\d)){1,60}?)"
_PRV = r"(?P<prev>(?:[^,;!?()\"]|(?<=\d),(?=\d)){1,60}?)"

#: attribute heads people give a value of; another head needs a number, a name or a change word
_KNOWN_ATTRS = frozenset(
    "budget deadline address phone number email birthday date time flight appointment meeting size weight height "
    "salary rent price cost limit goal target plan schedule shift hours gym car bank account password username "
    "handle team school university college major degree diet doctor dentist dog cat pet partner wife husband "
    "boyfriend girlfriend son daughter age zip postcode code pin seat room hotel destination departure return "
    "arrival wedding party dinner lunch reservation booking order subscription membership insurance provider "
    "carrier plan mortgage loan savings income currency language timezone time-zone city country neighbourhood "
    "neighborhood street office workplace employer company job role title position boss manager mentor".split())
_RELATIONS = {  # attribute heads that are one of the named relations
    "employer": "works_at", "company": "works_at", "workplace": "works_at", "firm": "works_at",
    "job": "occupation", "profession": "occupation", "occupation": "occupation",
    "name": "name", "diet": "diet", "hometown": "lives_in",
}
_NOT_VALUES = re.compile(r"^(?:it|that|this|them|him|her|you|me|us|one|something|anything|nothing|everything|"
                         r"to\b|going|not|a bit|kind of|sort of|so|very|too|really|just|here|there)\b", re.I)
#: "my new address is ...": a value said as new, though nothing names the old one
_NEW = re.compile(r"\bnew\b", re.I)
_DIGIT_OR_NAME = re.compile(r"\d|[$€£¥]|(?:^|\s)[A-Z][\w'-]+")


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("{P}", _P).replace("{PREV}", _PREV).replace("{END}", _END)
                      .replace("{SUBJ}", _SUBJ).replace("{SUBJ?}", _SUBJ_OPT).replace("{ATTR}", _ATTR).replace("{VAL}", _VAL)
                      .replace("{PRV}", _PRV).replace("{CHANGE}", _CHANGE), re.I)


# (pattern, attribute, polarity, kind): each pattern names a ``value`` and maybe a ``prev``
_ENGLISH: list[tuple[re.Pattern[str], str, bool, str]] = [
    (re.compile(r"\b(?i:my name is|my name's|call me|you can call me|i go by|i'm called|i am called)\s+"
                r"(?P<value>[A-Z\u00C0-\u024F][\w'\-]*(?:\s+[A-Z\u00C0-\u024F][\w'\-]*){0,3})"), "name", True, "identity"),
    (_en(r"{SUBJ?}(?:moved|relocated)(?:\s+(?:house|home|back|over))?\s+from\s+{PREV}\s+(?:to|into|over to)\s+{P}{END}"),
     "lives_in", True, "identity"),
    (_en(r"{SUBJ?}(?:moved|relocated)(?:\s+(?:house|home|back|over))?\s+(?:to|into)\s+{P}{END}"), "lives_in", True,
     "identity"),
    (_en(r"\b(?:i(?:'m| am)|we(?:'re| are))\s+(?:now\s+|finally\s+|officially\s+)?(?:moving|relocating)\s+(?:to|into)\s+"
         r"{P}{END}"), "lives_in", True, "identity"),
    (_en(r"\b(?:i|we)\s+(?:now\s+|currently\s+|still\s+|actually\s+)?live\s+in\s+{P}{END}"), "lives_in", True,
     "identity"),
    (_en(r"\bi(?:'m| am)\s+(?:now\s+|currently\s+|still\s+)?(?:living|based|settled|staying for good)\s+in\s+{P}{END}"),
     "lives_in", True, "identity"),
    (_en(r"\b(?:my\s+)?home\s+is\s+(?:now\s+)?(?:in\s+)?(?P<value>[A-Z][\w' -]{1,40}?){END}"), "lives_in", True,
     "identity"),
    (_en(r"{SUBJ}moved\s+(?:out\s+of|away\s+from)\s+{P}{END}"), "lives_in", False, "identity"),
    (_en(r"\b(?:i|we)\s+(?:now\s+|currently\s+|still\s+)?work\s+(?:at|for)\s+{P}{END}"), "works_at", True, "identity"),
    (_en(r"\bi(?:'m| am)\s+(?:now\s+|currently\s+)?(?:working|employed)\s+(?:at|for|by)\s+{P}{END}"), "works_at", True,
     "identity"),
    (_en(r"{SUBJ}(?:joined|started (?:a new job |working |my new job )?(?:at|with)|got a (?:new )?job (?:at|with)|"
         r"took a (?:new )?job (?:at|with)|moved (?:jobs )?to|switched jobs to|changed jobs to)\s+"
         r"(?P<value>[A-Z][\w'&.-]*(?:\s+[A-Z&][\w'&.-]*){0,4}){END}"), "works_at", True, "identity"),
    (_en(r"{SUBJ}(?:quit|left|resigned from|was laid off from|got laid off from|was let go from)\s+"
         r"(?:my\s+(?:job|position|role)\s+(?:at|with)\s+)?(?P<value>[A-Z][\w'&.-]*(?:\s+[A-Z&][\w'&.-]*){0,4}){END}"),
     "works_at", False, "identity"),
    (_en(r"{SUBJ}(?:quit|left|lost)\s+my\s+(?P<value>job|position)\b"), "works_at", False, "identity"),
    (_en(r"\bi(?:'m| am)\s+(?:now\s+|currently\s+|still\s+)?(?:a|an)\s+(?P<value>(?:[\w-]+\s+){0,2}?(?:"
         + _PROFESSIONS + r"))\b"), "occupation", True, "identity"),
    (_en(r"\bi\s+(?:now\s+)?work\s+as\s+(?:a|an)\s+(?P<value>[\w -]{1,40}?)(?=\s+(?:at|for|with)\s+\S)"),
     "occupation", True, "identity"),
    (_en(r"\bi\s+(?:now\s+)?work\s+as\s+(?:a|an)\s+{P}{END}"), "occupation", True, "identity"),
    # "I work as a data analyst at Zalando", "Starting as a machine learning engineer at Delivery Hero"
    (_en(r"(?:\bi\s+(?:now\s+)?work|\b(?:i(?:'m| am)\s+)?(?:starting|started|start)(?:\s+(?:a new job|work|my new job))?)"
         r"\s+as\s+(?:a|an)\s+[\w -]{1,40}?\s+(?:at|for|with)\s+"
         r"(?P<value>[A-Z][\w'&.-]*(?:\s+[A-Z&][\w'&.-]*){0,4})(?:{END}|(?=\s+(?:on|in|from|next|this)\b))"),
     "works_at", True, "identity"),
    (_en(r"(?:^|\b(?:i(?:'m| am)\s+|i'll be\s+))(?:starting|start)\s+as\s+(?:a|an)\s+(?P<value>[\w -]{1,40}?)"
         r"(?=\s+(?:at|for|with|on|in|from|next)\b|{END})"), "occupation", True, "identity"),
    (_en(r"{SUBJ}(?:became|become|retrained as|qualified as|got promoted to)\s+(?:a|an)?\s*{P}{END}"), "occupation",
     True, "identity"),
    (_en(r"{SUBJ}(?P<value>retired)\b"), "occupation", True, "identity"),
    (_en(r"\bi(?:'m| am)\s+(?:now\s+|a\s+|still\s+|fully\s+|strictly\s+|officially\s+)*(?P<value>" + _DIETS + r")\b"),
     "diet", True, "preference"),
    (_en(r"{SUBJ}(?:switched|gone|moved|turned|converted|changed|went|become|became|started|adopted|"
         r"started eating|started following)\s+(?:to\s+|over\s+to\s+)?(?:a\s+|an\s+|being\s+)?(?:fully\s+|strictly\s+)?"
         r"(?P<value>" + _DIETS + r")(?:\s+diet)?\b"), "diet", True, "preference"),
    (_en(r"\bi(?:'m| am)\s+(?:now\s+)?on\s+(?:a|the)\s+(?P<value>[\w-]+(?:\s+[\w-]+)?)\s+diet\b"), "diet", True,
     "preference"),
    (_en(r"\bi(?:'m| am)\s+(?:also\s+|severely\s+|very\s+|mildly\s+|really\s+)?allergic\s+to\s+{P}{END}"),
     "allergic_to", True, "identity"),
    (_en(r"\bi(?:'m| am)\s+(?:no longer|not)\s+allergic\s+to\s+{P}{END}"), "allergic_to", False, "identity"),
    # switching from one thing to another
    (_en(r"{SUBJ?}(?:switched|changed|moved|upgraded|downgraded|converted|swapped|migrated)\s+(?:over\s+)?"
         r"from\s+{PREV}\s+to\s+{P}{END}"), "uses", True, "preference"),
    (_en(r"{SUBJ?}(?:switched|swapped|migrated)\s+(?:over\s+)?to\s+{P}{END}"), "uses", True, "preference"),
    # "traded the Jazz Bass for a StingRay", "swapped my Brooks for Hokas"
    (_en(r"{SUBJ?}(?:traded|swapped|exchanged|replaced)\s+(?:in\s+)?(?:my|the|our|a|an)?\s*{PREV}\s+(?:for|with)\s+"
         r"(?:a|an|the|some)?\s*{P}{END}"), "uses", True, "preference"),
    (_en(r"(?:\b(?:i(?:'m| am)|we(?:'re| are))\s+|^|,\s*)(?:now\s+)?(?:going|gone)\s+with\s+{P}\s+(?:now|instead)\b"),
     "uses", True, "preference"),
    (_en(r"\b(?:i|we)(?:'ll| will|'d| would|'ve| have)?\s*(?:have|take|drink|eat|use|get|go with|gone with|going with|"
         r"went with|prefer|want|choose|chose|chosen|order|ordered|pick|picked|booked|book)\s+"
         r"{P}\s+instead\s+of\s+{PREV}{END}"), "preference", True, "preference"),
    (_en(r"^instead\s+of\s+{PREV},\s*(?:i|we)(?:'ll| will|'d| would|'ve| have)?\s*(?:have|take|drink|eat|use|get|"
         r"go with|gone with|went with|prefer|want|choose|chose)\s+{P}{END}"), "preference", True, "preference"),
    # liking and no longer liking
    (_en(r"\bi(?:'m| am)\s+not\s+(?:really\s+)?(?:into|keen on|a (?:big |huge )?fan of)\s+{P}\s+any\s?more"),
     "preference", False, "preference"),
    (_en(r"\bi(?:'ve| have)?\s+(?:kind of\s+|totally\s+|completely\s+|really\s+)?gone\s+off\s+{P}{END}"), "preference",
     False, "preference"),
    (_en(r"\bi\s+(?:no longer|don't|do not|can't|cannot)\s+(?:really\s+)?(?:like|love|enjoy|eat|drink|want|fancy|"
         r"stand|do|play|watch|use|take)\s+{P}\s+any\s?more"), "preference", False, "preference"),
    (_en(r"\bi\s+no\s+longer\s+(?:really\s+)?(?:like|love|enjoy|eat|drink|want|fancy|do|play|watch|use|take|"
         r"listen to|go to|drive)\s+{P}{END}"), "preference", False, "preference"),
    (_en(r"\b(?:i(?:'m| am)|we(?:'re| are))?\s*(?:totally\s+|completely\s+|so\s+)?done\s+with\s+{P}{END}"),
     "preference", False, "preference"),
    (_en(r"{SUBJ?}(?:stopped|quit|given up|gave up|cut out|ditched|dropped|kicked)\s+(?:eating\s+|drinking\s+|"
         r"having\s+|using\s+|taking\s+|buying\s+)?{P}{END}"), "preference", False, "preference"),
    (_en(r"\b(?:no more|not anymore)\s+{P}\s+for\s+me"), "preference", False, "preference"),
    (_en(r"\bi\s+(?:really\s+|absolutely\s+|just\s+|truly\s+)?(?:hate|dislike|detest|loathe|can't stand|"
         r"cannot stand|can't bear)\s+{P}{END}"), "preference", False, "preference"),
    (_en(r"\bi\s+(?:don't|do not|never)\s+(?:really\s+)?(?:like|enjoy|eat|drink|fancy)\s+{P}{END}"), "preference",
     False, "preference"),
    (_en(r"\bi(?:'m| am)\s+not\s+(?:really\s+)?(?:into|keen on|a (?:big |huge )?fan of)\s+{P}{END}"), "preference",
     False, "preference"),
    (_en(r"\bi\s+(?:really\s+|absolutely\s+|still\s+|now\s+|actually\s+|totally\s+|do\s+|also\s+)*"
         r"(?:like|love|enjoy|prefer|adore|fancy)\s+{P}{END}"), "preference", True, "preference"),
    (_en(r"\bi(?:'m| am)\s+(?:really\s+|now\s+|totally\s+|also\s+|big\s+)?(?:into|a (?:big |huge )?fan of|keen on|"
         r"crazy about|obsessed with|hooked on)\s+{P}{END}"), "preference", True, "preference"),
    (_en(r"^{P}\s+(?:is|are)\s+my\s+(?:new\s+)?(?:absolute\s+)?favou?rites?\b"), "preference", True, "preference"),
    # "from now on, oat milk" (not "from now on I'm charging £55 an hour": a clause of its own, no thing liked)
    (_en(r"\bfrom\s+now\s+on,?\s+(?:i(?:'ll| will)?\s+(?:only\s+)?(?:have|eat|drink|take|go with|use|want)\s+|"
         r"(?!(?:i|i'm|i've|i'd|we|we're|we've|it|it's|they|you|he|she|the|my|our)\b)){P}{END}"),
     "preference", True, "preference"),
    (_en(r"^(?:only\s+)?{P}\s+from\s+now\s+on\b"), "preference", True, "preference"),
    # what the user owns
    (_en(r"\bi\s+(?:now\s+)?(?:own|drive|ride)\s+(?:a|an|two|three|\d+)\s+{P}{END}"), "has", True, "fact"),
    (_en(r"{SUBJ}(?:sold|got rid of|gave away|given away|returned|totaled|totalled|scrapped)\s+"
         r"(?:my|the|our|a|an)\s+{P}{END}"), "has", False, "fact"),
    (_en(r"\bi\s+(?:no longer|don't|do not)\s+(?:have|own|drive)\s+(?:a|an|my|the)\s+{P}{END}"), "has", False, "fact"),
]

# the value of an attribute: "my budget is 8000", "the flight has been moved to Friday"
_ATTRIBUTE_EN = [
    _en(r"\b(?:my|our)\s+{ATTR}\s+(?:is|are|was|were|'s)\s+(?:now\s+|still\s+|actually\s+|currently\s+|officially\s+|"
        r"finally\s+|going to be\s+|set\s+(?:at|to)\s+)*(?:at\s+|on\s+)?{VAL}{END}"),
    _en(r"\b(?:my|our|the)\s+{ATTR}\s+(?:has|have)?\s*(?:been|got|was|were|is|are)\s+(?:{CHANGE})\s+"
        r"(?:from\s+{PRV}\s+)?to\s+{VAL}{END}"),
    _en(r"\b(?:i|we)(?:'ve| have)?\s+(?:just\s+)?(?:{CHANGE})\s+(?:my|our|the)\s+{ATTR}\s+(?:from\s+{PRV}\s+)?to\s+"
        r"{VAL}{END}"),
    _en(r"\b(?:please\s+)?(?:change|update|set|switch|move|make|bump|raise|lower|increase|reduce)\s+(?:my|our|the)\s+"
        r"{ATTR}\s+(?:from\s+{PRV}\s+)?to\s+{VAL}{END}"),
    _en(r"\b(?:my|our|the)\s+{ATTR}\s+(?:went|has gone|is going|goes)\s+(?:up|down)\s+to\s+{VAL}{END}"),
    _en(r"\b(?:my|our|the)\s+{ATTR}\s+(?:has\s+|have\s+)?(?:moved|changed|shifted|switched|gone up|gone down)\s+"
        r"(?:from\s+{PRV}\s+)?to\s+{VAL}{END}"),
    _en(r"\bthe\s+{ATTR}\s+(?:is|are)\s+(?:now|actually)\s+{VAL}{END}"),
    _en(r"^{ATTR}\s+(?:is|are)\s+now\s+{VAL}{END}"),
    # a known attribute opening a sentence: "Budget is 12,000 pounds all in", "The deadline is Friday"
    _en(r"^(?:the\s+|our\s+)?(?P<attr>[\w'-]+(?:\s+[\w'-]+)?)\s+(?:is|are|'s)\s+(?:set\s+(?:at|to)\s+)?(?:at\s+|on\s+)?{VAL}{END}"),
]


_FILLER_TAIL = re.compile(
    r"\s+(?:now|already|then|too|again|permanently|for good|completely|entirely|altogether|totally)$", re.I)
_CALLED = re.compile(r"^(?:called|named|known as)\s+", re.I)


def _clean(value: str) -> tuple[str, str | None]:
    """A value without its trailing time phrase and filler; the time phrase apart."""
    value = value.strip(" \t'\"")
    when = None
    m = _TIME.search(" " + value)
    if m:
        when = m.group(0).strip()
        value = (" " + value)[: m.start()].strip()
    value = _FILLER_TAIL.sub("", value)
    value = _CALLED.sub("", value)  # "my cat is called Tom": Tom
    return value.strip(" .,'\""), when


def _attribute(phrase: str) -> tuple[str, str]:
    """(attribute, qualifier) of an attribute phrase: "monthly budget for the trip" -> ("budget", "monthly trip")."""
    words = [w for w in re.split(r"\s+", phrase.lower()) if w]
    words = [w for w in words if w not in ("new", "current", "old", "updated", "actual", "latest", "the", "a", "an")]
    before, after = words, []
    for i, w in enumerate(words):
        if w in ("for", "of", "on", "at", "to", "with", "in") and i > 0:
            before, after = words[:i], [x for x in words[i + 1:] if x not in ("my", "our", "the", "a", "an")]
            break
    while len(before) > 1 and before[-1].isdigit():  # "flight number 2": the number names which one
        after = [before.pop(), *after]
    if not before:
        return "", ""
    head = before[-1]
    qualifier = " ".join(before[:-1] + after)
    if head == "number" and qualifier in ("phone", "mobile", "cell", "telephone", "contact"):
        return "phone", ""
    if head in _RELATIONS:
        return _RELATIONS[head], ""
    return head, qualifier


#: patterns whose value is a name: it must be written with a capital (the patterns ignore case)
_NAMED = {i for i, (p, *_rest) in enumerate(_ENGLISH) if "[A-Z]" in p.pattern}
#: patterns whose statement claims only its value's span: "work as a data analyst at Zalando" states the
#: occupation (its own pattern) and, from "Zalando", the employer
_VALUE_SPAN = {i for i, (p, attribute, *_rest) in enumerate(_ENGLISH)
               if attribute == "works_at" and r"\s+as\s+(?:a|an)" in p.pattern}


def _english(sentence: str) -> Iterator[tuple[int, int, Statement]]:
    for i, (pattern, attribute, polarity, kind) in enumerate(_ENGLISH):
        for m in pattern.finditer(sentence):
            raw, end = m.group("value"), m.end()
            if i in _NAMED:  # a name runs over capitalised words only ("Acme and joined Globex" -> "Acme")
                words = raw.split()
                if words[0].lower() in ("job", "position"):
                    words = words[:1]
                else:
                    cut = next((n for n, w in enumerate(words) if not w[:1].isupper() and w != "&"), len(words))
                    words = words[:cut]
                if not words:
                    continue
                named = " ".join(words)
                end = m.start("value") + raw.index(words[-1]) + len(words[-1])
                raw = named
            value, when = _clean(raw)
            prev = _clean(m.group("prev"))[0] if "prev" in m.groupdict() and m.group("prev") else None
            if attribute == "lives_in" and " in " in value:  # "a new flat in Paris"
                value = value.rsplit(" in ", 1)[1]
            if not value or (_NOT_VALUES.match(value) and attribute not in ("works_at",)) or len(value.split()) > 8:
                continue
            qualifier = ""
            if attribute == "uses":  # "switched to oat milk": its slot is what it is (milk)
                qualifier = value.split()[-1].lower()
            start = m.start("value") if i in _VALUE_SPAN else m.start()
            yield start, end, Statement(attribute, value, qualifier=qualifier, polarity=polarity,
                                        previous=prev, when=when, kind=kind)
    for pattern in _ATTRIBUTE_EN:
        for m in pattern.finditer(sentence):
            attribute, qualifier = _attribute(m.group("attr"))
            value, when = _clean(m.group("value"))
            prev = _clean(m.group("prev"))[0] if m.groupdict().get("prev") else None
            prev = prev or (_replaced(sentence[m.end():], value) if value else None)
            if not attribute or not value or _NOT_VALUES.match(value) or len(value.split()) > 8:
                continue
            if attribute in ("i", "it", "that", "this", "he", "she", "they", "there", "what", "who"):
                continue
            known = attribute in _KNOWN_ATTRS or attribute in _RELATIONS.values()
            if pattern is _ATTRIBUTE_EN[-1] and not (known and _DIGIT_OR_NAME.search(value)) and not prev:
                continue  # "Dinner is ready": a sentence opening with a thing states its value, not its state
            if not (known or _DIGIT_OR_NAME.search(value) or CHANGE.search(sentence) or _NEW.search(sentence) or prev):
                continue
            kind = "identity" if attribute in ("name", "lives_in", "works_at", "occupation") else "fact"
            yield m.start(), m.end(), Statement(attribute, value, qualifier=qualifier, previous=prev, when=when,
                                                kind=kind)


# ---------------------------------------------------------------------------------------------- Chinese
_ZV = r"(?P<value>[\u4e00-\u9fff\w$¥€£.%·\-]{1,20}?)"
_ZP = r"(?P<prev>[\u4e00-\u9fff\w$¥€£.%·\-]{1,20}?)"
_ZEND = r"(?=[了啦呢吧啊的哦]?(?:[，。,.!！?？；;、\s]|$)|了[，。,.!！?？；;]|了$)"
_ZTIME = re.compile(r"^(?:上个?月|上周|上星期|去年|今年|前几天|最近|刚刚?|已经|现在|目前|今天|昨天|这个月|这周)")
_ZH_ATTR_HEAD = {"预算": "budget", "地址": "address", "电话": "phone", "手机号": "phone", "手机号码": "phone",
                 "邮箱": "email", "生日": "birthday", "名字": "name", "工作": "occupation", "职业": "occupation",
                 "公司": "works_at", "单位": "works_at", "航班": "flight", "城市": "lives_in"}


def _zh(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace("{V}", _ZV).replace("{PV}", _ZP).replace("{E}", _ZEND))


_CHINESE: list[tuple[re.Pattern[str], str, bool, str]] = [
    (_zh(r"(?:我叫|我的名字(?:是|叫)|叫我)(?P<value>[\u4e00-\u9fff]{2,4}|[A-Z][a-z]+(?: [A-Z][a-z]+)?){E}"), "name", True,
     "identity"),
    (_zh(r"我(?:们)?(?:已经|刚刚?|最近|上个?月|去年|今年|前几天)?从{PV}搬(?:家)?(?:到|去)了?{V}{E}"), "lives_in", True,
     "identity"),
    (_zh(r"我(?:们)?(?:已经|刚刚?|最近|上个?月|去年|今年|前几天)?(?:搬(?:家)?(?:到|去)了?|移居到?|定居在?)(?!了){V}{E}"),
     "lives_in", True, "identity"),
    (_zh(r"我(?:们)?(?:现在|目前|还|一直)?住在{V}{E}"), "lives_in", True, "identity"),
    (_zh(r"我(?:现在|目前)?在{V}(?:工作|上班|任职){E}"), "works_at", True, "identity"),
    (_zh(r"我(?:已经|刚)?(?:跳槽到了?|入职了?|加入了?|去了)(?P<value>[\u4e00-\u9fffA-Za-z]{2,12}?)(?:公司|工作)?{E}"),
     "works_at", True, "identity"),
    (_zh(r"我(?:已经|刚)?(?:从{V})?(?:辞职|离职)了?"), "works_at", False, "identity"),
    (_zh(r"我(?:现在)?是(?:一名|一个|个|名)(?P<value>[\u4e00-\u9fff]{2,8}?(?:师|员|生|家|工|手|者|官|长|医生|护士|厨|司机)){E}"),
     "occupation", True, "identity"),
    (_zh(r"我(?:现在|已经|开始)?(?:吃素|改吃素|是素食者|成了素食者)"), "diet", True, "preference"),
    (_zh(r"我(?:现在|已经)?(?:是|成了|改成了?|变成了?)(?P<value>素食|纯素|蛋奶素)(?:主义)?者?{E}"), "diet", True, "preference"),
    (_zh(r"我对{V}过敏"), "allergic_to", True, "identity"),
    (_zh(r"我对{V}(?:不过敏了|已经不过敏了)"), "allergic_to", False, "identity"),
    (_zh(r"(?:我)?(?:现在)?(?:不用|不要|不喝|不吃){PV}了?[，,]?(?:我)?(?:改用|换成|改成|改喝|改吃)了?{V}{E}"), "uses", True, "preference"),
    (_zh(r"我(?:已经|现在)?(?:不再|再也不)(?:喜欢|爱|吃|喝|用|玩|看|听|去)?{V}了?{E}"), "preference", False, "preference"),
    (_zh(r"我(?:现在|已经)?不(?:吃|喝|喜欢|爱吃|爱喝|用|碰)(?P<value>[\u4e00-\u9fff\w]{1,12}?)了"), "preference", False,
     "preference"),
    (_zh(r"我(?:已经)?戒(?:了|掉了)?{V}了?{E}"), "preference", False, "preference"),
    (_zh(r"我(?:真的|很|非常|特别|最|超|挺)?(?:不喜欢|讨厌|受不了|不爱吃|不爱喝|不吃|不喝){V}{E}"), "preference", False,
     "preference"),
    (_zh(r"我(?:现在|也|一直)?(?:真的|很|非常|特别|最|超|挺)?(?:喜欢|爱吃|爱喝|爱|偏爱|钟爱|迷上了?)(?:吃|喝|用|看|听|玩|去)?(?!的){V}{E}"),
     "preference", True, "preference"),
    (_zh(r"(?:从现在开始|从今以后|以后|今后)[，,]?(?:我)?(?:只|都|就)?(?:吃|喝|用|要|选)?{V}{E}"), "preference", True,
     "preference"),
    (_zh(r"我(?:已经|现在)?(?:把{PV})?(?:换成|改成|改用|改喝|改吃|换用)了?{V}{E}"), "uses", True, "preference"),
    # "不是飞鹤了，现在是爱他美", "大理不去了，改去丽江", "最后还是选了vivo X100"
    (_zh(r"不(?:再)?是{PV}了[，,]?\s*(?:现在|而|改)?(?:是|换成|改成|用|喝|吃){V}{E}"), "uses", True, "preference"),
    (_zh(r"{PV}不(?:去|买|用|喝|吃|要|订|住|办|考|报)了[，,]?\s*(?:改|换)(?:成)?(?:去|买|用|喝|吃|要|订|住|办|考|报)?了?{V}{E}"),
     "uses", True, "preference"),
    (_zh(r"(?:后来|最后|最终)(?:还是|就)?(?:办了|选了|定了|买了|换了|去了|订了|挑了)(?P<value>[^，。,.!！?？；;\s][^，。,.!！?？；;]{0,15})(?=[，。,.!！?？；;]|$)"),
     "uses", True, "preference"),
    (_zh(r"我(?:已经)?把{V}卖(?:掉)?了"), "has", False, "fact"),
    (_zh(r"我(?:已经)?卖(?:掉)?了{V}{E}"), "has", False, "fact"),
]
_ATTRIBUTE_ZH = [
    _zh(r"(?:我的|我们的)(?P<attr>[\u4e00-\u9fff]{1,8}?)(?:现在|已经|也)?(?:是|为|改成了?|改为|换成了?|变成了?|调整为|调到了?|"
        r"涨到了?|降到了?|增加到了?|减少到了?|定在|定为){V}{E}"),
    _zh(r"把(?:我的|我们的)?(?P<attr>[\u4e00-\u9fff]{1,8}?)(?:从{PV})?(?:改成|改为|换成|调整为|调到|提高到|降到|增加到|改到)了?{V}{E}"),
    _zh(r"(?:^|[，,。])(?P<attr>[\u4e00-\u9fff]{1,6}?)(?:现在|已经|目前)(?:是|改成了?|改为|换成了?|变成了?|调整为|调到了?|涨到了?|"
        r"降到了?|定在){V}{E}"),
    _zh(r"(?:^|[，,。])(?P<attr>[\u4e00-\u9fff]{1,6}?)(?:也|都|又|已经|只能|往后|往前|又往后)?(?:从{PV})?(?:改成了?|改为了?|换成了?|调整为|调到了?|"
        r"推迟到了?|提前到了?|改到了?|挪到了?|涨到了?|降到了?|砍到了?|减到了?|加到了?|升级到了?){V}{E}"),
]


def _chinese(sentence: str) -> Iterator[tuple[int, int, Statement]]:
    for pattern, attribute, polarity, kind in _CHINESE:
        for m in pattern.finditer(sentence):
            groups = m.groupdict()
            raw = groups.get("value") or ""
            if attribute == "diet" and not raw:
                raw = "素食"
            value = _ZTIME.sub("", raw).strip("了的")
            if attribute == "works_at" and not polarity and not value:
                value = "工作"
            if not value:
                continue
            prev = (groups.get("prev") or "").strip() or None
            qualifier = value[-1] if attribute == "uses" else ""
            yield m.start(), m.end(), Statement(attribute, value, qualifier=qualifier, polarity=polarity,
                                                previous=prev, kind=kind)
    for pattern in _ATTRIBUTE_ZH:
        for m in pattern.finditer(sentence):
            phrase = _ZTIME.sub("", m.group("attr"))
            value = _ZTIME.sub("", m.group("value")).strip("了的")
            if not phrase or not value or phrase in ("我", "这", "那", "它", "他", "她", "这个", "那个"):
                continue
            head = next((v for k, v in _ZH_ATTR_HEAD.items() if phrase.endswith(k)), None)
            attribute, qualifier = (head, phrase[: -len(next(k for k in _ZH_ATTR_HEAD if phrase.endswith(k)))]) \
                if head else (phrase[-2:] if len(phrase) > 2 else phrase, phrase[:-2] if len(phrase) > 2 else "")
            prev = (m.groupdict().get("prev") or "").strip() or None
            kind = "identity" if attribute in ("name", "lives_in", "works_at", "occupation") else "fact"
            yield m.start(), m.end(), Statement(attribute, value, qualifier=qualifier, previous=prev, kind=kind)


# ---------------------------------------------------------------------------------------------- clauses
_CLAUSE = re.compile(r"\s*(?:[;；，]|,\s+(?:and\s+|but\s+)?|\s+(?:and|but)\s+(?=i\b|i'|my\b|we\b|our\b))\s*", re.I)


def clauses(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of the sentence's clauses: split at semicolons, commas and "and"/"but" before a new
    subject."""
    out, start = [], 0
    for m in _CLAUSE.finditer(sentence):
        if m.start() > start:
            out.append((start, m.start()))
        start = m.end()
    if start < len(sentence):
        out.append((start, len(sentence)))
    return out


def _strip_lead(sentence: str) -> str:
    previous = None
    while previous != sentence:
        previous, sentence = sentence, _LEAD.sub("", sentence, count=1)
    return sentence[:1].upper() + sentence[1:] if sentence[:1].islower() and not has_cjk(sentence[:1]) else sentence


#: what a statement says it replaced, right after its value: "on Tuesdays, not Mondays", "almond instead of
#: oat", "而不是飞鹤"
_REPLACED_EN = re.compile(r"^\s*,?\s*(?:and\s+)?(?P<how>not|instead of|rather than|in place of)\s+"
                          r"(?:the\s+|my\s+|our\s+|a\s+|an\s+)?"
                          r"(?P<prev>[^,;.!?]{1,40}?)(?=\s*(?:[,;.!?]|$|\s+(?:and|but|so|because|as)\b))", re.I)
_REPLACED_ZH = re.compile(r"^[了啦]?[，,]?\s*(?:而)?不(?:再)?是(?P<prev>[\u4e00-\u9fff\w]{1,12}?)(?:了|啦)?(?=[，。,.!！?？；;]|$)")


def _shape(text: str) -> str:
    """What kind of thing a value is, by its look: a number, a name (capitalised) or words."""
    return "number" if re.search(r"\d", text) else "name" if text[:1].isupper() else "words"


def _replaced(after: str, value: str) -> str | None:
    """The value the words right after a statement's value say it replaced ("Tuesdays, not Mondays"); a
    bare "not" only between numbers or names ("15000, not 12000", "Tuesdays, not Mondays"; not "tea, not the
    point")."""
    zh = has_cjk(after[:4])
    m = _REPLACED_ZH.match(after) if zh else _REPLACED_EN.match(after)
    if m is None:
        return None
    prev = m.group("prev").strip(" '\"")
    if not prev or prev.casefold() == value.casefold():
        return None
    if not zh and m.group("how").lower() == "not" and (_shape(prev) != _shape(value) or _shape(value) == "words"):
        return None
    return prev


def extract_statements(text: str) -> list[Statement]:
    """The statements of ``text``, each with its clause as ``Statement.text``, in order, without repeats."""
    return list(_statements(text))


#: texts whose statements are kept: one write reads the same message several times (its capture, the
#: triggers' attribute values, the clause's own extraction, formation's look), and the reading depends
#: on the text alone (``Statement`` is frozen, the list is copied)
TEXT_CACHE = 1024


@functools.lru_cache(maxsize=TEXT_CACHE)
def _statements(text: str) -> tuple[Statement, ...]:
    found: list[Statement] = []
    for sentence, act in utterances(text):
        body = _strip_lead(sentence)
        if act != "statement" and not (act == "request" and re.search(r"\b(?:change|update|set|switch)\b|改成|换成", body,
                                                                        re.I)):
            continue
        hits = list(_chinese(body)) if has_cjk(body) else []
        hits += list(_english(body))
        taken: list[tuple[int, int]] = []
        chosen: list[tuple[int, int, Statement]] = []
        for start, end, st in hits:  # the first pattern to claim a span wins
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            chosen.append((start, end, st))
        spans = clauses(body)
        for start, end, st in sorted(chosen, key=lambda c: c[0]):
            if len(chosen) == 1:  # the user's own sentence, lead-in ("Actually", "Big news:") and all
                clause = sentence
            else:  # several statements: each keeps the clauses its words span
                pieces = [(s, e) for s, e in spans if s < end and start < e] or [(start, end)]
                clause = body[pieces[0][0]: pieces[-1][1]]
            clause = clause.strip(" ,;，；")
            if clause and clause[-1] not in ".!?。！？":
                clause += "。" if has_cjk(clause) else "."
            previous = st.previous or (_replaced(body[end:], st.value) if st.polarity else None)
            stated = Statement(st.attribute, st.value, st.subject, st.qualifier, st.polarity, previous, st.when,
                               clause, st.kind)
            if not any(s.attribute == stated.attribute and s.value == stated.value and s.polarity == stated.polarity
                       for s in found):
                found.append(stated)
    return tuple(found)
