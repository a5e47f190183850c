"""Built-in PII redactor: Chinese resident ids (GB 11643 checksum), bank cards (Luhn), IBANs (ISO 13616
mod 97), passport numbers given as such, phones, e-mails.

Numbers are only redacted when they validate (a resident id needs a real birth date and its check
digit, a card number its Luhn digit and a card's grouping), so order numbers and amounts stay
readable. Each span becomes a typed placeholder: ``[CN_ID]``, ``[BANK_CARD]``, ``[IBAN]``, ``[PASSPORT]``,
``[PHONE]``, ``[EMAIL]``.

What is read as written by people rather than forms:

- digits of any script (full-width ``１３８``, Arabic-Indic ``٤٥٣٩``, Persian ``۴۵۳۹``, Devanagari ...),
  folded to ASCII before the checks; Unicode spaces and dashes between digit groups;
- a card number split over two lines; phones grouped 3-4-4, 4-3-4 or 7-4 (``138 1234 5678``,
  ``1381 234 5678``); landlines with their area code (``010-12345678``, ``(010) 1234 5678``,
  ``0755 8888 6666``); first-generation 15-digit resident ids (region, a real 19YYMMDD birth
  date, sequence: they carry no check digit), run together or grouped;
- IBANs of any country, run together or grouped as printed (``GB82WEST12345698765432``,
  ``DE89 3704 0044 0532 0130 00``) or typed in lower case (``de89370400440532013000``: then only of a
  registered country), whole: the country's registered length and the mod-97 check digits must hold,
  so a product code or a sentence of capitals is not one;
- passport numbers where the text says they are one (``passport no. X1234567``, ``护照号码 E12345678``,
  ``Reisepass Nr. C01X00T47``): a passport number has no checksum to tell it from any code, so the
  word before it is what tells (the number is redacted, the word stays);
- e-mail addresses with an accented or internationalised domain or local part (``josé@exämple.com``,
  ``user@例子.中国``, ``张三@example.com``) and spelt-out ones (``dave at example dot com``,
  ``dave [at] example [dot] com``, ``dave(at)example.com``, ``dave艾特example点com``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import date

from portamem import hookimpl
from portamem.pipeline import Redaction, WriteContext

__all__ = ["find_pii", "cn_id_valid", "cn_id15_valid", "luhn_valid", "card_grouping_valid", "iban_valid",
           "PLACEHOLDERS", "portamem_redact"]

PLACEHOLDERS: dict[str, str] = {
    "cn_id": "[CN_ID]",
    "bank_card": "[BANK_CARD]",
    "iban": "[IBAN]",
    "passport": "[PASSPORT]",
    "phone": "[PHONE]",
    "email": "[EMAIL]",
}

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
#: the province codes a resident id starts with (GB/T 2260)
_PROVINCES = frozenset({11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51,
                        52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82})

# the patterns run on a same-length copy with full-width forms (１３８, ＠, ＋) folded to ASCII, digits
# of every script folded to 0-9, and Unicode spaces and dashes folded to " " and "-", so spans still
# index the original; a number may touch Chinese text ("卡号6222…"), so only Latin letters and
# digits bound it
_SPACES = (0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)
_DASHES = (*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63)
_FOLD = {0xFF01 + i: 0x21 + i for i in range(94)} | dict.fromkeys(_SPACES, 0x20) | dict.fromkeys(_DASHES, 0x2D)
#: a decimal digit that is not ASCII (Arabic-Indic, Persian, Devanagari, ...; full-width ones fold above)
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")
#: between digit groups: up to two spaces, dots or hyphens, mixed ("4111 1111-1111.1111", "138  1234")
_SEP = r"[ .-]{0,2}"
#: a card number may also wrap onto the next line
_CARD_SEP = r"(?:[ .-]{0,2}|[ \t]*\r?\n[ \t]*)"
_B = r"(?<![0-9A-Za-z])"
_E = r"(?![0-9A-Za-z])"
_CN_ID = re.compile(rf"{_B}(\d{{6}})[ -]?(\d{{8}})[ -]?(\d{{3}}[\dXx]){_E}", re.ASCII)
#: 15 digits, run together, 6-6-3 or in other groups of at least three ("3101 0480 0523 421")
_CN_ID15 = re.compile(rf"(?<![+-]){_B}\d{{3,}}(?:[ .-]\d{{3,}}){{0,4}}{_E}(?![.-]\d)", re.ASCII)
_CARD = re.compile(rf"(?<![+-]){_B}\d(?:{_CARD_SEP}\d){{12,18}}{_E}(?!-\d)", re.ASCII)
#: a Chinese mobile, 3-4-4 (138 1234 5678, 1381234 5678) or 4-3-4 (1381 234 5678), +86 optional
_CN_MOBILE = re.compile(
    rf"(?<!\+){_B}(?:\(?(?:\+|00)86\)?{_SEP})?1[3-9]\d(?:{_SEP}\d{{4}}|\d{_SEP}\d{{3}}){_SEP}\d{{4}}{_E}", re.ASCII
)
#: a Chinese landline with its area code (010, 02x, 0xxx) set apart by a dash, a space or brackets
_AREA = r"(?:010|02\d|0[3-9]\d\d)"
_CN_LANDLINE = re.compile(
    rf"(?<![+(]){_B}(?:\({_AREA}\) ?|{_AREA}(?: -|- ?| ))\d{{3,4}}[ -]?\d{{4}}{_E}(?!-\d)", re.ASCII
)
#: +CC or 00CC, then more digits in groups; E.164 allows 15 digits in all
_INTL_PHONE = re.compile(
    rf"(?<!\+){_B}(?:\+|00)[1-9]\d{{0,2}}(?:{_SEP}\(\d{{1,4}}\))?(?:{_SEP}\d{{1,5}}){{2,5}}{_E}", re.ASCII
)
#: North American (555) 123-4567 and 555-123-4567: separators required, so bare numbers stay
_NANP_PHONE = re.compile(rf"(?<![+(]){_B}(?:\(\d{{3}}\)\s?|\d{{3}}[.-])\d{{3}}[.-]\d{{4}}{_E}", re.ASCII)

# ---------------------------------------------------------------------- IBAN
#: an IBAN's length by country (ISO 13616 registry, and the countries using IBAN-form numbers outside it)
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29,
    "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
    # IBAN-form numbers of countries outside the registry (SEPA-style national use)
    "AO": 25, "BF": 28, "BJ": 28, "CF": 27, "CG": 27, "CI": 28, "CM": 27, "CV": 25, "DZ": 26, "GA": 27, "GQ": 27,
    "GW": 25, "IR": 26, "KM": 27, "MA": 28, "MG": 27, "ML": 28, "MZ": 25, "NE": 28, "SN": 28, "TD": 27, "TG": 28,
}
#: a country code and two check digits, then up to 32 letters and digits, single spaces or hyphens between
#: any of them (printed in fours, or grouped as a bank writes it: "FR14 2004 1010 0505 0001 3M02 606"), in
#: either case ("de89 3704 0044 0532 0130 00" as typed into a chat)
_IBAN = re.compile(rf"{_B}[A-Za-z]{{2}}\d{{2}}(?:[ -]?[0-9A-Za-z]){{11,32}}", re.ASCII)
_ALNUM = re.compile(r"[0-9A-Za-z]")


def iban_valid(text: str) -> bool:
    """An IBAN with separators or without: its country's registered length (15 to 34 where the country is
    not listed) and the ISO 13616 check: the number, its first four characters moved to the end and
    letters read as 10-35, is 1 modulo 97."""
    chars = "".join(ch for ch in _fold(text) if ch.isascii() and ch.isalnum()).upper()
    if len(chars) != _IBAN_LENGTHS.get(chars[:2], len(chars)) or not 15 <= len(chars) <= 34:
        return False
    if not (chars[:2].isalpha() and chars[2:4].isdigit()):
        return False
    return int("".join(str(int(ch, 36)) for ch in chars[4:] + chars[:4])) % 97 == 1


def _ibans(folded: str) -> Iterator[Span]:
    """Each run that starts like an IBAN, cut at its country's length (the words after a grouped IBAN run
    on in the pattern), or at the longest length that validates for a country not listed."""
    for m in _IBAN.finditer(folded):
        ends = [c.end() for c in _ALNUM.finditer(folded, m.start(), m.end())]
        country = m.group(0)[:2]
        length = _IBAN_LENGTHS.get(country.upper())
        if length is None and not country.isupper():
            # a lower-case run of a country outside the registry would try 20 lengths against the 1-in-97
            # check: ordinary ids and hashes would pass too often
            continue
        for n in ([length] if length else range(min(34, len(ends)), 14, -1)):
            if n > len(ends):
                continue
            end = m.start() + (ends[n - 1] - m.start())
            if _ALNUM.match(folded, end) is None and iban_valid(folded[m.start():end]):
                yield m.start(), end
                break


# ---------------------------------------------------------------------- passport
#: the words that say a passport number follows: English, Chinese, German (and French)
_PASSPORT_WORD = (r"(?:(?<![A-Za-z])(?:passport|passeport)(?:\s*(?:number|num|no|nr|n°|numéro|#|id))?\.?"
                  r"|护照(?:号码|號碼|号|號|编号|編號)?|(?<![A-Za-z])(?:reisepass|pass)(?:nummer|-nummer|-?nr\.?"
                  r"|\s+nr\.?|\s+nummer)|(?<![A-Za-z])reisepass)")
#: what may stand between the word and the number: "is", "was", "ist", "lautet", a colon, "是", "为"
_PASSPORT_LINK = r"(?:\s*(?:[:：#=]|是|为|為|(?:is|was|ist|lautet|est)(?![A-Za-z])))*\s*"
_PASSPORT = re.compile(
    rf"{_PASSPORT_WORD}{_PASSPORT_LINK}(?P<number>(?<![0-9A-Za-z])[0-9A-Za-z]{{6,10}})(?![0-9A-Za-z])", re.I)


def _passports(folded: str) -> Iterator[Span]:
    """A 6-10 character number with at least four digits, right after words that name it a passport's."""
    for m in _PASSPORT.finditer(folded):
        if sum(ch.isdigit() for ch in m.group("number")) >= 4:
            yield m.start("number"), m.end("number")


# ---------------------------------------------------------------------- e-mail
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: top-level domains written in Chinese (the ones people use: the country's and the common generic ones)
_ZH_TLDS = ("中国", "中國", "公司", "网络", "網絡", "在线", "在線", "集团", "集團", "香港", "台湾", "台灣", "新加坡",
            "网址", "網址", "商城", "网店", "網店", "中文网", "中文網", "手机", "手機", "信息", "游戏", "遊戲", "企业", "企業",
            "广东", "佛山", "我爱你", "政务", "公益", "商标", "商標", "购物", "購物", "时尚", "時尚")
#: an ASCII top-level domain ends where Latin letters and digits do (Chinese text may follow at once)
_TLD = rf"(?:[A-Za-z]{{2,63}}(?![0-9A-Za-z\u00c0-\u024f])|[\u0400-\u04ff]{{2,30}}|{'|'.join(_ZH_TLDS)})"
_LABEL = r"[^\W_](?:[\w-]{0,62}[^\W_])?"
_EMAIL = re.compile(rf"(?<![\w.%+-])([\w.%+-]+)@((?:{_LABEL}\.)+{_TLD})")
#: where a Chinese local part starts after the words of the sentence before it ("邮箱是张三@…")
_ZH_LEAD = re.compile(r".*(?:是|为|為|：|:|到|给|給|至|向|找|的|邮箱|郵箱|信箱|邮件|郵件|地址|联系|聯繫|聯系|发|發|写信|寫信)")
_CJK_RUN_END = re.compile(rf"[^{_CJK}]+$")

#: spelt out: dave at example dot com, dave [at] example [dot] com, dave(at)example.com, dave艾特example点com
_OB_AT = r"(?:\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|@|艾特)\s*|\s+at\s+)"
_OB_DOT = r"(?:\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|<\s*dot\s*>|点|點)\s*|\s+dot\s+|\s*\.\s*)"
_OB_TLDS = ("com", "net", "org", "edu", "gov", "mil", "int", "info", "biz", "io", "co", "me", "cn", "hk", "tw", "jp",
            "kr", "sg", "uk", "de", "fr", "es", "it", "nl", "be", "ch", "at", "se", "no", "fi", "dk", "pl", "ru",
            "in", "au", "nz", "ca", "us", "br", "mx", "ai", "app", "dev", "tech", "xyz", "online", "site")
_OB_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
_OBFUSCATED_EMAIL = re.compile(
    rf"(?<![A-Za-z0-9._%+-])(?P<local>[A-Za-z0-9][A-Za-z0-9._%+-]*)(?P<at>{_OB_AT})(?P<domain>{_OB_LABEL}"
    rf"(?:{_OB_DOT}{_OB_LABEL})*?)(?P<dot>{_OB_DOT})(?P<tld>{'|'.join(_OB_TLDS)})(?![A-Za-z0-9])",
    re.I,
)
_PLAIN_DOT = re.compile(r"\s*\.\s*")
#: words that are the sentence, not an address, around a bare " at " ("meet me at the dot com ...")
_NOT_ADDRESS = frozenset(
    "a an the this that these those my your his her its our their me you him us them it i we he she they one some "
    "any all each every no not home work school least most last first best was is are were be been am being look "
    "looked looking stay stayed staying arrived arrive meet met live lived living work worked working here there "
    "back out up down off over just still and or but then so only also even right left laughed laugh smiled smile "
    "aimed aim shot good bad great"
    .split()
)


def _fold(text: str) -> str:
    folded = text.translate(_FOLD)
    if _OTHER_DIGIT.search(folded):
        folded = _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(0))), folded)
    return folded


def _digits(text: str) -> str:
    return "".join(ch for ch in _fold(text) if "0" <= ch <= "9")


def cn_id_valid(number: str) -> bool:
    """An 18-character resident id: region, a real birth date (1900 on), sequence, GB 11643 check digit."""
    number = "".join(ch for ch in _fold(number) if not ch.isspace() and ch != "-")
    body = number[:17]
    if len(number) != 18 or len(_digits(body)) != 17 or body[0] == "0":
        return False
    try:
        born = date(int(body[6:10]), int(body[10:12]), int(body[12:14]))
    except ValueError:
        return False
    if not date(1900, 1, 1) <= born <= date.today():
        return False
    check = _ID_CHECK[sum(int(d) * w for d, w in zip(body, _ID_WEIGHTS)) % 11]
    return number[17].upper() == check


def cn_id15_valid(number: str) -> bool:
    """A 15-digit first-generation resident id (1984-1999): a province's region code, a real 19YYMMDD birth
    date, a sequence. Having no check digit, it is held to the province codes that exist."""
    digits = _digits(number)
    if len(digits) != 15 or int(digits[:2]) not in _PROVINCES or digits[2:6] == "0000":
        return False
    try:
        date(1900 + int(digits[6:8]), int(digits[8:10]), int(digits[10:12]))
    except ValueError:
        return False
    return digits[12:15] != "000"


def luhn_valid(number: str) -> bool:
    """The Luhn (mod 10) check of card numbers, on 13 to 19 digits."""
    digits = _digits(number)
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


#: how card numbers are grouped when written apart, besides fours (the last group may be shorter)
_CARD_LAYOUTS = frozenset({(4, 6, 5), (4, 6, 4), (6, 13), (6, 12), (6, 10)})
_GROUP_SEP = re.compile(r"[^0-9]+")


def card_grouping_valid(number: str) -> bool:
    """Whether the digits are grouped as a card's are: one run, fours (the last 1-4), 4-6-5 (Amex),
    4-6-4 (Diners), 6 then the rest, or groups of four digits or more; a number wrapped onto a second
    line breaks only once. Groups of fewer digits (an order number ``112-4827193-5520391``, a list of
    figures ``45 39 14 88 ...``) are not a card."""
    folded = _fold(number)
    groups = [len(g) for g in _GROUP_SEP.split(folded) if g]
    if folded.count("\n") > 1:
        return False
    return (len(groups) == 1 or (all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)
            or tuple(groups) in _CARD_LAYOUTS or min(groups) >= 4)


def _card_valid(number: str) -> bool:
    return card_grouping_valid(number) and luhn_valid(number)


def _phone_digits_ok(text: str) -> bool:
    return 8 <= len(_digits(text)) <= 15


Span = tuple[int, int]


def _matches(pattern: re.Pattern[str], check: Callable[[str], bool]) -> Callable[[str], Iterator[Span]]:
    def find(folded: str) -> Iterator[Span]:
        for m in pattern.finditer(folded):
            if check(m.group(0)):
                yield m.start(), m.end()
    return find


def _emails(folded: str) -> Iterator[Span]:
    """Addresses with their local part cut to what belongs to it where it runs into Chinese text."""
    for m in _EMAIL.finditer(folded):
        start, local = m.start(), m.group(1)
        if re.search(f"[{_CJK}]", local):
            tail = _CJK_RUN_END.search(local)
            if tail is not None:  # "邮箱zhang.san@…": the Latin run before the @
                start = m.start() + tail.start()
            elif (lead := _ZH_LEAD.match(local)) is not None and lead.end() < len(local):  # "邮箱是张三@…"
                start = m.start() + lead.end()
        if re.match(r"[\w%+-]", folded[start]):
            yield start, m.end()


def _obfuscated_emails(folded: str) -> Iterator[Span]:
    """Spelt-out addresses; a bare " at " counts only with a spelt-out dot and words that are not the sentence's."""
    for m in _OBFUSCATED_EMAIL.finditer(folded):
        at = m.group("at").strip().lower()
        dots = [m.group("dot"), *re.findall(_OB_DOT, m.group("domain"))]
        spelt_dot = any(_PLAIN_DOT.fullmatch(d) is None for d in dots)
        if at == "@" and not spelt_dot and not re.search(r"\s", m.group(0)):
            continue  # a plain address: the e-mail pattern's
        if at == "at":
            labels = re.split(_OB_DOT, m.group("domain"))
            if not spelt_dot or m.group("local").lower() in _NOT_ADDRESS or labels[0].lower() in _NOT_ADDRESS:
                continue
        yield m.start(), m.end()


#: (kind, finder on the folded text); earlier kinds win where spans overlap, so an e-mail keeps the
#: digits of its local part ("13812345678@163.com"), an IBAN its bank code and account (a grouped German
#: one is not read as a phone) and a validated id or card beats a phone
_FINDERS: tuple[tuple[str, Callable[[str], Iterator[Span]]], ...] = (
    ("email", _emails),
    ("iban", _ibans),
    ("passport", _passports),
    ("cn_id", _matches(_CN_ID, cn_id_valid)),
    ("cn_id", _matches(_CN_ID15, cn_id15_valid)),
    ("bank_card", _matches(_CARD, _card_valid)),
    ("phone", _matches(_CN_MOBILE, lambda s: True)),
    ("phone", _matches(_CN_LANDLINE, lambda s: True)),
    ("phone", _matches(_INTL_PHONE, _phone_digits_ok)),
    ("phone", _matches(_NANP_PHONE, lambda s: True)),
    ("email", _obfuscated_emails),
)


def _candidates(text: str) -> Iterator[Redaction]:
    folded = _fold(text)
    for kind, find in _FINDERS:
        for start, end in find(folded):
            yield Redaction(start, end, kind, PLACEHOLDERS[kind])


def find_pii(text: str) -> list[Redaction]:
    """Non-overlapping PII spans in text order; a validated id or card beats a phone over the same digits."""
    return list(_pii(text, date.today()))


@functools.lru_cache(maxsize=1024)  # a turn's message is redacted three times (masking, the clause, the window)
def _pii(text: str, today: date) -> tuple[Redaction, ...]:
    """``find_pii`` of a text on a day (a resident id's birth date must not be after it)."""
    kept: list[Redaction] = []
    for cand in _candidates(text):
        if all(cand.end <= k.start or cand.start >= k.end for k in kept):
            kept.append(cand)
    return tuple(sorted(kept, key=lambda r: r.start))


@hookimpl
def portamem_redact(text: str, context: WriteContext) -> Sequence[Redaction] | None:
    return find_pii(text) or None
