"""Dialogue acts by rule, in English and Chinese: is a sentence a statement, a question, a request to
the assistant, or small talk (greetings, thanks, fillers)? Only statements become memories; an explicit
ask to remember ("please remember that I ...", "记住 ...") is a statement whatever its form."""

from __future__ import annotations

import functools
import re

from .classify import is_choice, is_explicit

__all__ = ["sentences", "act_of", "utterances", "is_small_talk"]

#: sentence ends (a dot between digits or inside an abbreviation is not one)
_END = re.compile(r"(?<=[.!?。！？…])(?<!\d\.)(?<!\b[A-Z]\.)(?<!\b(?:Mr|Ms|Dr|St|vs)\.)\s*|\n+")

_SMALL = (
    r"hi|hello|hey|hiya|yo|howdy|good (?:morning|afternoon|evening|night|day)|morning|evening|"
    r"thanks?(?: (?:a lot|a bunch|so much|very much|again|a million))?|thank you(?: (?:so much|very much|again))?|"
    r"thx|ty|cheers|much appreciated|appreciate it|bye|bye bye|goodbye|good night|see (?:you|ya)(?: later| soon| tomorrow)?|"
    r"talk (?:to you )?(?:later|soon|tomorrow)|ttyl|catch you later|take care|"
    r"ok(?:ay)?|k|kk|cool|great|nice|awesome|perfect|lovely|wonderful|excellent|sweet|brilliant|fine|"
    r"sounds (?:good|great|perfect)|got it|gotcha|understood|noted|makes sense|fair enough|"
    r"lol|lmao|(?:ha){2,}[ha]*|(?:he){2,}[he]*|ha|yes|yeah|yep|yup|no|nope|nah|sure|of course|alright|all right|right|"
    r"wow|oh|ooh|ah|hmm+|um+|uh+|np|no problem|no worries|you're welcome|welcome|my pleasure|"
    r"have a (?:nice|good|great|lovely) (?:day|evening|weekend|night|one)|you too|same to you|"
    r"how are you(?: doing)?|how's it going|what's up|sup|nice to meet you|good to know|interesting|"
    r"that's (?:great|nice|cool|good|awesome|funny|interesting|fine|ok|okay)|that was (?:funny|fun|great)|"
    r"i see|oh i see|ok then|okay then|never mind|nevermind|whatever|exactly|indeed|true|agreed|same"
)
#: a whole sentence of small talk, optionally to someone ("Good morning, Dana!") and with emoji or ":)"
_SMALL_TALK = re.compile(
    # a word edge after each phrase: phrases that run together ("ha" + "ha" ...) were tried every way, in
    # exponential time on "haha haha ... x"
    rf"^(?:(?:{_SMALL})\b[\s,!.~]*)+(?:[A-Z][a-z]+)?[\s!.,~:;)(\-dDpP]*$", re.I)
#: possessive runs (嗯++, 哦++, 哈++): the tail takes 哈 and 哦 too, so a run split between the two was
#: tried every way ("哈" * 10,000 + "，吗？" took 4.4 s on the acknowledged write path)
_SMALL_TALK_ZH = re.compile(
    r"^(?:你好|您好|嗨|哈喽|早上好|早安|早|中午好|下午好|晚上好|晚安|谢谢|谢谢你|多谢|感谢|辛苦了|再见|拜拜|回头见|明天见|"
    r"好的|好|好吧|好滴|行|可以|没问题|嗯++|哦++|噢|啊|哈++|呵呵|嘿嘿|是的|对|对的|没错|确实|收到|明白|了解|知道了|"
    r"不客气|没事|没关系|太好了|真好|真棒|不错|厉害|有意思|挺好|还行|好玩|有道理|原来如此|你呢|你好吗|最近怎么样)"
    r"(?:[啊呀呢吧啦哦哈～~！!。.，,\s]|[\u4e00-\u9fff]{1,3}[！!。.]?$)*$")
_QUESTION_START = re.compile(
    r"^(?:what(?! an? )|what's|whats|where|where's|when|when's|who|who's|whom|whose|which|why|how|how's|"
    r"is|are|am|was|were|do|does|did|can|could|will|would|should|shall|may|might|have|has|had|"
    r"isn't|aren't|don't|doesn't|didn't|can't|won't|wouldn't|shouldn't|any idea|do you know|"
    r"remind me what|tell me what|tell me where|tell me when)\b", re.I)
_QUESTION_ZH = re.compile(r"[吗嘛么呢][？?!！。.\s]*$|什么|哪里|哪儿|哪个|哪些|哪家|哪天|几点|几号|几个|多少|怎么|怎样|"
                          r"为什么|为何|是否|是不是|有没有|能不能|要不要|会不会|对不对|谁|何时|啥|多久|多长时间|多远|多大|多高|多重")
_REQUEST = re.compile(
    r"^(?:please|pls|plz|kindly|can you|could you|would you|will you|can u|could u|would you mind|"
    r"help me|i need you to|i want you to|i'd like you to|i would like you to|let's|let us|go ahead and|"
    r"i(?:'d| would) like to (?:book|order|reserve|buy|get|cancel|schedule|know|find)|"
    r"i (?:want|need) to (?:book|order|reserve|buy|cancel|schedule|find|know)|i(?:'m| am) looking for|"
    # an imperative: the verb, then what it acts on
    r"(?:remind|book|reserve|find|search|look up|look for|show|tell|give|send|order|buy|get|schedule|set up|"
    r"make|create|add|cancel|check|call|email|text|write|draft|plan|recommend|suggest|translate|summari[sz]e|"
    r"explain|compare|list|pick|choose|arrange|organi[sz]e|sort|fix|update|change)\s+"
    r"(?:me|us|a|an|the|my|our|some|it|this|that|these|those|all|\d))\b", re.I)
_REQUEST_ZH = re.compile(r"^(?:请|麻烦|劳驾|帮我|帮忙|给我|替我|你帮|你给|能不能|能否|可否|可以帮|可不可以|你能|你可以|"
                         r"我想订|我要订|我想买|我要买|我想预订|帮我订|订一|订个|查一下|查查|查一查|看看|看一下|提醒我|"
                         r"推荐|介绍一下|安排|取消|翻译|总结|列出|告诉我)")


def sentences(text: str) -> list[str]:
    """The text's sentences, whitespace trimmed."""
    return [s.strip() for s in _END.split(text.strip()) if s and s.strip()]


def is_small_talk(sentence: str) -> bool:
    s = sentence.strip()
    return bool(_SMALL_TALK.match(s) or _SMALL_TALK_ZH.match(s)) or not _WORDLIKE.search(s)


_WORDLIKE = re.compile(r"[^\W_]")


def act_of(sentence: str) -> str:
    """"statement", "question", "request" or "smalltalk" (``portamem.pipeline.ACTS``)."""
    s = sentence.strip()
    if is_explicit(s) or is_choice(s):
        return "statement"
    if is_small_talk(s):
        return "smalltalk"
    if _REQUEST.match(s) or _REQUEST_ZH.match(s):  # "can you book ...?" asks for something done
        return "request"
    if s.endswith(("?", "？")) or _QUESTION_START.match(s) or _QUESTION_ZH.search(s):
        return "question"
    return "statement"


#: a comma or semicolon between two clauses of one sentence
_CLAUSE = re.compile(r"(?<=[,，;；、])\s*|\s+(?=[-–—]\s)")
#: a clause that leans on another rather than stating anything itself: a condition, a cause, a topic
#: ("if we move", "given my budget", "as for the hotel", "如果下雨"), a word about the asking itself ("quick
#: question", "我想问一下") or the assistant ("hope you're well", "你觉得")
_LEANS = re.compile(
    r"^(?:if|when|whenever|unless|because|since|as|although|though|while|before|after|until|once|given|"
    r"considering|regarding|about|for|with|without|in case|as for|what about|how about|and|but|or|so|also|"
    r"plus|then|otherwise|apart from|besides|except)\b"
    r"|\b(?:question|wonder(?:ing)?|ask(?:ing)?|curious|you|your|you're)\b"
    r"|^(?:如果|要是|假如|假设|万一|因为|虽然|尽管|除非|关于|至于|对于|为了|还有|另外|而且|但是|不过|所以|那么|然后)"
    r"|问一下|请问|想问|想知道|问题|好奇|你", re.I)
#: a verb the clause is stated with: English needs one ("my sister is vegetarian", "it's a Trek FX 3")
_FINITE = re.compile(r"\b(?:am|is|are|was|were|be|been|have|has|had|do|does|did|will|would|can|could|"
                     r"should|must|may|might|shall|got|get|keep|keeps|need|needs|want|wants|like|likes|love|"
                     r"loves|hate|hates|live|lives|work|works|own|owns|use|uses|eat|eats|go|goes)\b|'(?:s|re|m|ve|ll|d)\b"
                     r"|\b(?:i|we|he|she|they|it)\s+\w+(?:ed|s)\b", re.I)


#: a question about what the clause before it says ("my husband wants a boiling water tap, is it worth
#: it?"): the statement is what is asked about, not news
_BACK = re.compile(r"\b(?:it|that|this|those|these|them|one|ones)\b|它|这个|那个|这些|那些|这样|那样", re.I)
#: a field and its value, the thing a request acts on ("订单号CZ2024-778", "order no. 4471")
_FIELD = re.compile(r"^[^\W\d_]{1,12}\s*(?:no\.?|number|#|号|码)?\s*[:：]?\s*[A-Za-z]*\d[\w-]*$", re.I)


def _states_alone(clause: str) -> bool:
    """Whether a clause of a question or a request states something by itself."""
    c = clause.strip(" \t,，;；、-–—")
    if act_of(c) != "statement" or _LEANS.search(c) or _FIELD.match(c):
        return False
    cjk = len(re.findall(r"[\u4e00-\u9fff]", c))
    return cjk >= 3 if cjk else len(re.findall(r"[^\W\d_]+", c)) >= 3 and bool(_FINITE.search(c))


def utterances(text: str) -> list[tuple[str, str]]:
    """Each sentence of ``text`` with its act; a question or a request that also states something in a
    clause of its own ("my sister is vegetarian btw, anywhere good near the hotel?", "帮我找找充电桩，
    公司在望京SOHO") gives that clause as a statement and the rest as the question or request."""
    return list(_utterances(text))


@functools.lru_cache(maxsize=1024)  # one write reads a message several times; the acts depend on the text alone
def _utterances(text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for sentence in sentences(text):
        act = act_of(sentence)
        clauses = [c for c in _CLAUSE.split(sentence) if c.strip()] if act in ("question", "request") else []
        stated = [_states_alone(c) for c in clauses]
        asks_back = any(not alone and _BACK.search(c) for c, alone in zip(clauses, stated))
        if len(clauses) < 2 or not any(stated) or all(stated) or asks_back:
            out.append((sentence, act))
            continue
        rest: list[str] = []
        for clause, alone in zip(clauses, stated):
            if alone:
                if rest:
                    out.append((" ".join(rest).strip(), act))
                    rest = []
                out.append((clause.strip().rstrip(",，;；、").strip(), "statement"))
            else:
                rest.append(clause.strip())
        if rest:
            out.append((" ".join(rest).strip(), act))
    return tuple(out)
