"""Built-in PII redactor: Chinese resident ids (GB 11643 checksum), bank cards (Luhn), phones, e-mails.

Numbers are only redacted when they validate (a resident id needs a real birth date and its check
digit, a card number its Luhn digit), so order numbers and amounts stay readable. Each span
becomes a typed placeholder: ``[CN_ID]``, ``[BANK_CARD]``, ``[PHONE]``, ``[EMAIL]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from datetime import date

from portamem import hookimpl
from portamem.pipeline import Redaction, WriteContext

__all__ = ["find_pii", "cn_id_valid", "luhn_valid", "PLACEHOLDERS", "portamem_redact"]

PLACEHOLDERS: dict[str, str] = {
    "cn_id": "[CN_ID]",
    "bank_card": "[BANK_CARD]",
    "phone": "[PHONE]",
    "email": "[EMAIL]",
}

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

# the patterns run on a same-length copy with full-width forms (１３８, ＠, ＋) folded to ASCII and
# Unicode spaces and dashes folded to " " and "-", so spans still index the original; a number may
# touch Chinese text ("卡号6222…"), so only Latin letters and digits bound it
_SPACES = (0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)
_DASHES = (*range(0x2010, 0x2016), 0x2212, 0xFE58, 0xFE63)
_FOLD = {0xFF01 + i: 0x21 + i for i in range(94)} | dict.fromkeys(_SPACES, 0x20) | dict.fromkeys(_DASHES, 0x2D)
#: between digit groups: up to two spaces, dots or hyphens, mixed ("4111 1111-1111.1111", "138  1234")
_SEP = r"[ .-]{0,2}"
_B = r"(?<![0-9A-Za-z])"
_E = r"(?![0-9A-Za-z])"
_CN_ID = re.compile(rf"{_B}(\d{{6}})[ -]?(\d{{8}})[ -]?(\d{{3}}[\dXx]){_E}", re.ASCII)
_CARD = re.compile(rf"(?<![+-]){_B}\d(?:{_SEP}\d){{12,18}}{_E}(?!-\d)", re.ASCII)
_CN_MOBILE = re.compile(
    rf"(?<!\+){_B}(?:\(?(?:\+|00)86\)?{_SEP})?1[3-9]\d{_SEP}\d{{4}}{_SEP}\d{{4}}{_E}", re.ASCII
)
#: +CC or 00CC, then more digits in groups; E.164 allows 15 digits in all
_INTL_PHONE = re.compile(
    rf"(?<!\+){_B}(?:\+|00)[1-9]\d{{0,2}}(?:{_SEP}\(\d{{1,4}}\))?(?:{_SEP}\d{{1,5}}){{2,5}}{_E}", re.ASCII
)
#: North American (555) 123-4567 and 555-123-4567: separators required, so bare numbers stay
_NANP_PHONE = re.compile(rf"(?<![+(]){_B}(?:\(\d{{3}}\)\s?|\d{{3}}[.-])\d{{3}}[.-]\d{{4}}{_E}", re.ASCII)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w])", re.ASCII)


def _digits(text: str) -> str:
    return "".join(ch for ch in text.translate(_FOLD) if "0" <= ch <= "9")


def cn_id_valid(number: str) -> bool:
    """An 18-character resident id: region, a real birth date (1900 on), sequence, GB 11643 check digit."""
    number = "".join(ch for ch in number.translate(_FOLD) if not ch.isspace() and ch != "-")
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


def _phone_digits_ok(text: str) -> bool:
    return 8 <= len(_digits(text)) <= 15


#: (kind, pattern, check of the matched text); earlier kinds win where spans overlap
_FINDERS: tuple[tuple[str, re.Pattern[str], Callable[[str], bool]], ...] = (
    ("cn_id", _CN_ID, cn_id_valid),
    ("bank_card", _CARD, luhn_valid),
    ("phone", _CN_MOBILE, lambda s: True),
    ("phone", _INTL_PHONE, _phone_digits_ok),
    ("phone", _NANP_PHONE, lambda s: True),
    ("email", _EMAIL, lambda s: True),
)


def _candidates(text: str) -> Iterator[Redaction]:
    folded = text.translate(_FOLD)
    for kind, pattern, check in _FINDERS:
        for m in pattern.finditer(folded):
            if check(m.group(0)):
                yield Redaction(m.start(), m.end(), kind, PLACEHOLDERS[kind])


def find_pii(text: str) -> list[Redaction]:
    """Non-overlapping PII spans in text order; a validated id or card beats a phone over the same digits."""
    kept: list[Redaction] = []
    for cand in _candidates(text):
        if all(cand.end <= k.start or cand.start >= k.end for k in kept):
            kept.append(cand)
    return sorted(kept, key=lambda r: r.start)


@hookimpl
def portamem_redact(text: str, context: WriteContext) -> Sequence[Redaction] | None:
    return find_pii(text) or None
