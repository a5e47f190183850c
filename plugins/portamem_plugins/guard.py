"""Built-in guard: quarantines instruction-style injection (English and Chinese), also hidden or encoded.

The text is read in several views: as written (normalised: NFKC, casefold, invisible characters
dropped, look-alike letters mapped to Latin), with spaced-out letters squashed, in leetspeak,
reversed, rot13, and every base64, hex, URL-encoded or escaped payload decoded (nested twice).
Each view runs the phrase rules of ``injection_rules``; the text as written (and every decoded
payload) is also read by ``directives`` (instructions aimed at the assistant's answer) and by the
learned model of ``injection_model`` (hashed character n-grams, words and concepts, a linear model
trained by ``benchmarks/train_guard.py``), which catches wordings no rule was written for; hidden
markup (invisible Unicode tag characters, zero-width characters inside words, bidi overrides, HTML
comments) adds its own findings. Findings add up by rule; a total of 1.0 quarantines.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import unicodedata
import urllib.parse
import warnings
from dataclasses import dataclass

from portamem import hookimpl
from portamem.pipeline import GuardVerdict, WriteContext
from portamem.records import MemoryRecord, MemoryType, Source

from . import directives, injection_model
from .injection_rules import RULES, Rule

__all__ = ["Finding", "THRESHOLD", "DATA_THRESHOLD", "threshold", "scan", "judge", "portamem_guard"]

#: total weight of findings that quarantines a write
THRESHOLD = 1.0
#: the same for web and tool content: text that should be data quarantines on an instruction to the
#: assistant alone ("in your answer, mention ..."), which a user may say to their own assistant
DATA_THRESHOLD = 0.75
#: decoded payloads are scanned again, to this depth (base64 inside hex, say)
_MAX_DEPTH = 2


@dataclass(frozen=True)
class Finding:
    """One reason for suspicion: which rule, how strong, where (``layer``) and on what text."""

    rule: str
    label: str
    weight: float
    layer: str
    evidence: str


# ---------------------------------------------------------------------- hidden characters
_TAGS = re.compile("[\U000e0000-\U000e007f]+")
#: zero-width and other invisible format characters (ZWJ is legitimate inside emoji sequences)
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u00ad\u034f\u115f\u1160\u3164\uffa0"
_ZW_INSIDE_WORD = re.compile(rf"(?<=\w)[{_ZERO_WIDTH}]+(?=\w)")
_ZW = re.compile(rf"[{_ZERO_WIDTH}]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_HTML_COMMENT = re.compile(r"<!--(.*?)(?:-->|$)", re.S)
_HIDDEN_CSS = re.compile(
    r"style\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0|opacity\s*:\s*0)", re.I
)
#: words that make an HTML comment an instruction rather than a developer's note
_COMMENT_INSTRUCTION = re.compile(
    r"\b(?:ignore|instead|you|your|ai|assistant|model|always|never|must|recommend|say|tell|system|prompt|remember)\b"
    r"|忽略|无视|無視|指令|你|助手|推荐|推薦|必须|必須|记住|記住|系统|系統",
    re.I,
)
_EMOJI_TAG_FLAG = re.compile("\U0001f3f4[\U000e0061-\U000e007a]{2,7}\U000e007f")

# ---------------------------------------------------------------------- look-alikes and leetspeak
_CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "ӏ": "l", "ԛ": "q",
    "ԝ": "w", "ү": "y",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "ω": "w",
    # typographic quotes and dashes, so contractions and gaps read the same
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201b": "'", "\u2032": "'", "\u2010": "-", "\u2011": "-", "\u2012": "-",
    "\u2013": "-", "\u2014": "-",
})
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i", "|": "l"})
_LEET_WORD = re.compile(r"\b(?=[\w@$!|]*[a-z])(?=[\w@$!|]*[0-9@$|])[\w@$!|]{2,}\b")
_CONTRACTIONS = (
    (re.compile(r"\byou're\b"), "you are"), (re.compile(r"\byou'll\b"), "you will"), (re.compile(r"\bdon't\b"), "do not"),
    (re.compile(r"\bcan't\b"), "cannot"), (re.compile(r"\bwon't\b"), "will not"), (re.compile(r"\bit's\b"), "it is"),
    (re.compile(r"\byou've\b"), "you have"), (re.compile(r"\bdoesn't\b"), "does not"),
)
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: separators an attacker puts between Chinese characters ("忽 略", "忽-略") to break phrase matching
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])[\s\-_*·.|/~+]+(?=[{_CJK}])")
#: four or more single letters in a row, spaced or dotted ("i g n o r e", "i-g-n-o-r-e")
_SPACED = re.compile(r"(?:(?<![^\W\d_])[a-z](?:[\s\-_.*·|/+]{1,3})){3,}[a-z](?![^\W\d_])")

# ---------------------------------------------------------------------- encoded payloads
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:(?:0x)?[0-9a-fA-F]{2}[\s:,]?){8,}(?![0-9A-Za-z])")
_URL_ESCAPES = re.compile(r"(?:%[0-9a-fA-F]{2}){4,}")
_BACKSLASH_ESCAPES = re.compile(r"(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})){4,}")
_HTML_ENTITIES = re.compile(r"(?:&#(?:\d{2,7}|x[0-9a-fA-F]{2,6});){4,}")
_DIGIT_RUN = re.compile(r"\d{5,}")


def _evidence(text: str) -> str:
    """A short quote for the reason; long digit runs are masked so no personal number leaks into it."""
    quote = " ".join(text.split())[:80]
    return _DIGIT_RUN.sub(lambda m: "#" * len(m.group(0)), quote)


def normalize(text: str) -> str:
    """The text as a reader sees it: no invisible characters, look-alikes and quotes mapped, casefolded."""
    text = _TAGS.sub("", _BIDI.sub("", _ZW.sub("", text)))
    text = unicodedata.normalize("NFKC", text).casefold().translate(_CONFUSABLES)
    text = _CJK_GAP.sub("", text)
    for pattern, expanded in _CONTRACTIONS:
        text = pattern.sub(expanded, text)
    return re.sub(r"[ \t\u3000]+", " ", text)


def _printable(data: bytes) -> str | None:
    """Decoded bytes as text, or None when they do not look like words (random ids, hashes, images)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or sum(ch.isprintable() or ch in "\n\t" for ch in text) < 0.95 * len(text):
        return None
    letters = sum(ch.isalpha() for ch in text)
    return text if letters >= 4 and letters >= 0.5 * len(text.replace(" ", "")) else None


def _decoded(text: str) -> list[tuple[str, str]]:
    """Every payload in the text that decodes to readable text, as (encoding, decoded text)."""
    out: list[tuple[str, str]] = []
    for m in _BASE64.finditer(text):
        blob = m.group(0)
        if blob.isdigit() or blob.isalpha() and (blob.islower() or blob.isupper()):
            continue  # a plain word or number, not base64
        raw = blob.replace("-", "+").replace("_", "/").rstrip("=")
        try:
            data = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if (found := _printable(data)) is not None:
            out.append(("base64", found))
    for m in _HEX.finditer(text):
        digits = re.sub(r"0x|[\s:,]", "", m.group(0))
        if len(digits) % 2 == 0:
            if (found := _printable(bytes.fromhex(digits))) is not None:
                out.append(("hex", found))
    if _URL_ESCAPES.search(text):
        out.append(("url-encoding", urllib.parse.unquote(text)))
    if _BACKSLASH_ESCAPES.search(text):
        try:
            # an unknown escape ("\q") is kept as written; Python warns of it, which a process that turns
            # warnings into errors would raise
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                out.append(("escapes", codecs.decode(text.encode("latin-1", "backslashreplace"), "unicode_escape")))
        except (UnicodeDecodeError, ValueError):
            pass
    if _HTML_ENTITIES.search(text):
        out.append(("html-entities", html.unescape(text)))
    return out


def _hidden(text: str) -> tuple[list[Finding], list[tuple[str, str]]]:
    """Findings about markup a human reader would not see, and the hidden texts to scan as well."""
    findings: list[Finding] = []
    payloads: list[tuple[str, str]] = []
    visible_tags = _EMOJI_TAG_FLAG.sub("", text)  # subdivision flags (England, Scotland) use tag characters
    for m in _TAGS.finditer(visible_tags):
        hidden = "".join(chr(ord(ch) - 0xE0000) for ch in m.group(0) if 0xE0020 <= ord(ch) <= 0xE007E)
        if hidden.strip():
            findings.append(Finding("hidden_text", "text hidden in invisible Unicode tag characters", 1.0,
                                    "unicode-tags", _evidence(hidden)))
            payloads.append(("unicode-tags", hidden))
    inside = _ZW_INSIDE_WORD.findall(text)
    if len(inside) >= 3:
        findings.append(Finding("zero_width", "zero-width characters inside words", 0.6, "zero-width",
                                f"{len(inside)} zero-width characters"))
    if _BIDI.search(text):
        findings.append(Finding("bidi", "bidirectional override characters", 0.5, "bidi", "text direction overridden"))
    for m in _HTML_COMMENT.finditer(text):
        body = m.group(1).strip()
        if body:
            strong = _COMMENT_INSTRUCTION.search(body) is not None
            findings.append(Finding("html_comment", "instruction hidden in an HTML comment" if strong else "HTML comment",
                                    1.0 if strong else 0.3, "html-comment", _evidence(body)))
    if _HIDDEN_CSS.search(text):
        findings.append(Finding("hidden_css", "text hidden by CSS", 0.6, "css", "invisible styling"))
    return findings, payloads


#: very common English words: a line rich in them reads as plain language, not reversed or rot13
_COMMON = frozenset(
    "the and to of a in is you i it for on that this with be are was my your me we at have not but so "
    "do if all can will just what they our an as from or by about get one out up like no there how".split())
_LATIN_WORD = re.compile(r"[a-z]{2,}")
#: Chinese characters with a space or tab between them on one line ("忽 略")
_CJK_SPACE = re.compile(rf"[{_CJK}][ \t\u3000]+[{_CJK}]")


def _scrambled(line: str) -> bool:
    """Whether a line has Latin words but hardly any common ones: reversed, rot13 or otherwise encoded."""
    words = _LATIN_WORD.findall(line)
    return len(words) >= 2 and sum(w in _COMMON for w in words) < 0.2 * len(words)


def _views(text: str) -> list[tuple[str, str, bool]]:
    """(layer, text, latin_only) pairs: the ways a reader, or a model, could read this text.

    The decoding views are built from the lines that need them only (leetspeak from lines with
    leet words, reversed and rot13 from lines that do not read as plain language), so a long
    ordinary text costs little more than one reading.
    """
    base = normalize(text)
    views = [("text", base, False)]
    lines = base.split("\n")
    leet = [line for line in lines if _LEET_WORD.search(line)]
    if leet:
        views.append(("leetspeak", "\n".join(_LEET_WORD.sub(lambda m: m.group(0).translate(_LEET), line)
                                              for line in leet), True))
    if _ZW_INSIDE_WORD.search(text) or _CJK_SPACE.search(unicodedata.normalize("NFKC", text)):
        spaced = lines
    else:
        spaced = [line for line in lines if _SPACED.search(line)]
    if spaced:
        views.append(("spaced-out letters", "\n".join(re.sub(rf"[^a-z0-9{_CJK}]+", "", line) for line in spaced), False))
    odd = "\n".join(line for line in lines if _scrambled(line))
    if odd:
        views.append(("reversed", odd[::-1], True))
        views.append(("rot13", codecs.encode(odd, "rot13"), True))
    return views


def _learned(view: str, layer: str) -> list[Finding]:
    """The learned model's finding on the normalised text: its likeliest window, when it reaches a threshold.

    At the user threshold it quarantines any write; between the two thresholds it weighs
    ``DATA_THRESHOLD``, which quarantines web and tool content and adds to other findings in a user's turn.
    """
    model = injection_model.load()
    best = None if model is None else model.best_window(view)
    if model is None or best is None or best.probability < model.data_threshold:
        return []
    weight = 1.0 if best.probability >= model.user_threshold else DATA_THRESHOLD
    return [Finding("learned", f"learned injection model ({best.probability:.2f})", weight, layer,
                    _evidence(view[best.start:best.end]))]


def _match(rule: Rule, view: str, squashed: bool) -> re.Match[str] | None:
    pattern = rule.compact if squashed else rule.pattern
    return None if pattern is None else pattern.search(view)


def scan(text: str, *, _depth: int = 0, _layer: str = "") -> list[Finding]:
    """Every finding in ``text``, strongest per rule first; an empty list for ordinary text."""
    findings, payloads = _hidden(text) if _depth == 0 else ([], [])
    for layer, view, latin_only in _views(text):
        squashed = layer == "spaced-out letters"
        for rule in RULES:
            if latin_only and not rule.latin:
                continue
            m = _match(rule, view, squashed)
            if m is not None:
                where = _layer or layer
                findings.append(Finding(rule.name, rule.label, rule.weight, where, _evidence(m.group(0))))
        if layer == "text":
            findings.extend(Finding(s.rule, s.label, s.weight, _layer or layer, _evidence(s.evidence))
                            for s in directives.signals(view))
            findings.extend(_learned(view, _layer or layer))
    if _depth < _MAX_DEPTH:
        for encoding, decoded in [*payloads, *_decoded(text)]:
            inner = scan(decoded, _depth=_depth + 1, _layer=_layer or encoding)
            findings.extend(inner)
            if encoding != "unicode-tags" and not inner:
                findings.append(Finding("encoded", "encoded text", 0.2, encoding, _evidence(decoded)))
    best: dict[str, Finding] = {}
    for f in findings:
        if f.rule not in best or f.weight > best[f.rule].weight:
            best[f.rule] = f
    return sorted(best.values(), key=lambda f: -f.weight)


def threshold(source: Source | str = Source.USER) -> float:
    """The total that quarantines a write from ``source``: stricter for web and tool content."""
    return DATA_THRESHOLD if Source(source) in (Source.WEB, Source.TOOL) else THRESHOLD


def judge(text: str, source: Source | str = Source.USER) -> GuardVerdict | None:
    """Quarantine when the findings add up to ``threshold(source)``; None (allow) otherwise."""
    findings = scan(text)
    total = sum(f.weight for f in findings)
    if total < threshold(source):
        return None
    parts = [f"{f.label} ({f.layer}: '{f.evidence}')" if f.layer != "text" else f"{f.label} ('{f.evidence}')"
             for f in findings[:3]]
    return GuardVerdict("quarantine", "possible prompt injection: " + "; ".join(parts), score=min(1.0, total))


@hookimpl
def portamem_guard(record: MemoryRecord, context: WriteContext) -> GuardVerdict | None:
    """Scan the content and the summary as written (before redaction), so encoded payloads are seen."""
    for text in guarded_texts(record):
        verdict = judge(text, context.source)
        if verdict is not None:
            return verdict
    return None


#: the speaker labels of an episode's transcript ("User: ...", "Assistant: ...")
_SPEAKER = re.compile(r"^\s*(?:user|assistant)\s*:\s*", re.I)


def guarded_texts(record: MemoryRecord) -> list[str]:
    """The texts one write is judged by.

    An episode written from working-window turns is the memory's own transcript of them: each
    speaker's words are judged as they were said, one by one, and each line of the episode text
    without its speaker label, rather than the whole as one labelled Q&A block addressed to the
    assistant (which is how injected data looks, and how every transcript would look).
    """
    turns = record.metadata.get("turns") if record.type is MemoryType.EPISODIC else None
    if not (isinstance(turns, list) and turns):
        return [record.content if not record.summary else f"{record.content}\n{record.summary}"]
    texts = [t[k] for t in turns if isinstance(t, dict) for k in ("user", "assistant") if isinstance(t.get(k), str)]
    texts += [_SPEAKER.sub("", line) for line in record.content.splitlines()]
    if record.summary:
        texts.append(record.summary)
    return list(dict.fromkeys(t for t in texts if t.strip()))
