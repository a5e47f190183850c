"""PII redaction: hand-checked checksums, spans and placeholders, and nothing valid left in any stored byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.pipeline import WriteContext
from portamem.plugins import Hooks, get_plugin_manager
from portamem_plugins.redact import cn_id_valid, find_pii, luhn_valid

# GB 11643: sum(digit_i * weight_i) mod 11 indexes "10X98765432"
#   11010519491231002X: 1*7+1*9+0*10+1*5+0*8+5*4+1*2+9*1+4*6+9*3+1*7+2*9+3*10+1*5+0*8+0*4+2*2 = 167; 167 % 11 = 2 -> "X"
#   440308199901011234: 4*7+4*9+0+3*5+0+8*4+1*2+9*1+9*6+9*3+0+1*9+0+1*5+1*8+2*4+3*2 = 239; 239 % 11 = 8 -> "4"
VALID_IDS = ["11010519491231002X", "11010519491231002x", "440308199901011234"]
INVALID_IDS = [
    "110105194912310021",  # check digit should be X
    "440308199901011235",  # check digit should be 4
    "440308199902301234",  # 30 February
    "040308199901011234",  # region code cannot start with 0
    "44030819990101123",  # 17 characters
]


@pytest.mark.parametrize(("number", "valid"), [(n, True) for n in VALID_IDS] + [(n, False) for n in INVALID_IDS])
def test_cn_id_checksum(number: str, valid: bool) -> None:
    assert cn_id_valid(number) is valid


# Luhn: double every second digit from the right (subtract 9 above 9), sum, must end in 0.
#   4539148803436467: undoubled 7+4+3+3+8+4+9+5 = 43, doubled 3+3+8+0+7+2+6+8 = 37; 43+37 = 80 -> valid
VALID_CARDS = ["4539148803436467", "4111 1111 1111 1111", "5555-5555-5555-4444", "378282246310005", "6212261202001234567"]
INVALID_CARDS = ["4539148803436468", "4111111111111112", "1234567890123", "0000000000000000", "411111111111"]


@pytest.mark.parametrize(("number", "valid"), [(n, True) for n in VALID_CARDS] + [(n, False) for n in INVALID_CARDS])
def test_luhn(number: str, valid: bool) -> None:
    assert luhn_valid(number) is valid


def _redact(text: str) -> str:
    out = text
    for r in reversed(find_pii(text)):
        out = out[: r.start] + r.label() + out[r.end:]
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("身份证号11010519491231002X，请保密", "身份证号[CN_ID]，请保密"),
        ("my id is 440308 19990101 1234.", "my id is [CN_ID]."),
        ("卡号6212261202001234567，开户行招商银行", "卡号[BANK_CARD]，开户行招商银行"),
        ("card 4111 1111 1111 1111 exp 12/29", "card [BANK_CARD] exp 12/29"),
        ("手机13812345678或者+86 138-1234-5678", "手机[PHONE]或者[PHONE]"),
        ("call +44 20 7946 0958 or (555) 123-4567", "call [PHONE] or [PHONE]"),
        ("邮箱zhang.san@example.com.cn谢谢", "邮箱[EMAIL]谢谢"),
        ("全角号码１３８１２３４５６７８", "全角号码[PHONE]"),
    ],
)
def test_find_pii_replaces_each_kind_with_its_placeholder(text: str, expected: str) -> None:
    assert _redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "order ORD-2024-000123 ships on 2024-01-15 at 12:30",
        "the invalid id 110105194912310021 and card 4539148803436468 stay",
        "version 1.2.3, room 1234, 3 kids, ¥12,800",
        "我的订单号是202401150001，金额5000元",
        "price 12345678901, tracking 9400 1000 0000",
    ],
)
def test_numbers_that_do_not_validate_are_left_alone(text: str) -> None:
    assert find_pii(text) == []


def test_spans_never_overlap_and_an_id_beats_a_phone() -> None:
    spans = find_pii("11010519491231002X 13812345678 4111111111111111 a@b.co")
    assert [s.kind for s in spans] == ["cn_id", "phone", "bank_card", "email"]
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


def test_hook_is_a_default_plugin_named_pii_redaction(tmp_path: Path) -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    assert pm.get_plugin("pii_redaction") is not None
    ctx = WriteContext(tenant_id="default", user_id="u1", settings=Settings(path=str(tmp_path)))
    out, spans = Hooks(pm).redact("mail me: li@example.org / 13812345678", ctx)
    assert out == "mail me: [EMAIL] / [PHONE]" and {s.kind for s in spans} == {"email", "phone"}
    blocked = Hooks(get_plugin_manager(load_entrypoints=False, block=["pii_redaction"]))
    assert blocked.redact("13812345678", ctx)[0] == "13812345678"


# ---------------------------------------------------------------------- nothing valid in any stored byte
# bounded like the redactor's own matches: a run inside a hex memory id is not a number anyone wrote
_DIGIT_RUN = re.compile(rb"(?<![0-9A-Za-z])\d(?:[ -]?\d){12,18}(?![0-9A-Za-z])")
_ID_RUN = re.compile(rb"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
SECRETS = {"cn_id": "11010519491231002X", "card": "6212261202001234567", "phone": "13812345678",
           "email": "wang.fang@example.com"}


def _leaks(root: Path) -> list[str]:
    """Every valid id or card number, and every secret verbatim, found in any file under root."""
    found = []
    for path in (p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for m in _ID_RUN.finditer(data):
            if cn_id_valid(m.group(0).decode()):
                found.append(f"{path.name}: id {m.group(0)!r}")
        for m in _DIGIT_RUN.finditer(data):
            if luhn_valid(m.group(0).decode()):
                found.append(f"{path.name}: card {m.group(0)!r}")
        for name, secret in SECRETS.items():
            for encoded in {secret.encode(), secret.encode("utf-16-le")}:
                if encoded in data:
                    found.append(f"{path.name}: {name}")
    return found


def test_no_valid_id_or_card_in_the_store_the_index_or_the_audit_log(memory: Memory, settings: Settings) -> None:
    s = SECRETS
    memory.save_memory(f"我的身份证号是{s['cn_id']}，工资卡{s['card']}", user_id="u1",
                       entities=[s["cn_id"]], summary=f"ID {s['cn_id']}", metadata={"note": f"card {s['card']}"})
    memory.save_memory(f"Please remember: my phone is {s['phone']} and my e-mail {s['email']}", user_id="u1")
    for i in range(settings.window_turns + 2):  # turns leave the window and are compressed into memories
        memory.add_turn(f"Remember that my bank card is {s['card']} ({i})", f"Noted the card ending {s['card'][-4:]}.",
                        user_id="u1", session_id="s1")
    memory.add_turn(f"身份证{s['cn_id']}，邮箱{s['email']}", "好的", user_id="u1", session_id="s2")
    hits = memory.search_memory("bank card number", user_id="u1", top_k=10)
    assert hits and all(s["card"] not in h.content for h in hits)
    assert any("[BANK_CARD]" in h.content for h in hits)
    memory.close()
    leaks = _leaks(Path(settings.path))
    assert not leaks, leaks


# Variants seen in real text. Each valid number has a twin one digit off that fails its checksum
# (Luhn for cards, GB 11643 for ids) and must stay readable.
CARD_VARIANTS = [
    ("卡号4539.1488.0343.6467到期", "4539.1488.0343.6467"),  # dots
    ("card 4539  1488  0343  6467 ok", "4539  1488  0343  6467"),  # double spaces
    ("card 4539 1488-0343.6467 ok", "4539 1488-0343.6467"),  # mixed separators
    ("卡号4539\u00a01488\u00a00343\u00a06467", "4539\u00a01488\u00a00343\u00a06467"),  # no-break spaces
    ("卡号4539\u20141488\u20140343\u20146467", "4539\u20141488\u20140343\u20146467"),  # em dashes
    ("卡号４５３９ １４８８－０３４３．６４６７", "４５３９ １４８８－０３４３．６４６７"),  # full-width digits and separators
    ("卡号４５３９ 1488-０３４３ 6467", "４５３９ 1488-０３４３ 6467"),  # half and full width mixed
]
PHONE_VARIANTS = [
    ("电话+86 138 1234 5678谢谢", "+86 138 1234 5678"),
    ("call +86  138  1234  5678 now", "+86  138  1234  5678"),
    ("电话+86\u00a0138\u00a01234\u00a05678", "+86\u00a0138\u00a01234\u00a05678"),
    ("电话(+86) 138 1234 5678", "(+86) 138 1234 5678"),
    ("电话（+86）138 1234 5678", "（+86）138 1234 5678"),
    ("tel +86 138.1234.5678", "+86 138.1234.5678"),
]
ID_VARIANTS = [
    ("姓名张三身份证号码11010519491231002X电话", "11010519491231002X"),
    ("我的身份证是440308199901011234，请保密", "440308199901011234"),
    ("身份证号110105-19491231-002X住址", "110105-19491231-002X"),
    ("身份证号１１０１０５１９４９１２３１００２Ｘ住址", "１１０１０５１９４９１２３１００２Ｘ"),
]


def _one_off(number: str) -> str:
    """The same text with its last digit changed: the checksum no longer holds."""
    i = max(i for i, ch in enumerate(number) if ch.isdigit() or "０" <= ch <= "９")
    ch = number[i]
    zero = "0" if ch.isascii() else "０"
    digit = (ord(ch) - ord(zero) + 1) % 10
    return number[:i] + chr(ord(zero) + digit) + number[i + 1:]


@pytest.mark.parametrize(("text", "number"), CARD_VARIANTS)
def test_card_variants_are_redacted_and_a_failing_checksum_stays(text: str, number: str) -> None:
    assert [(text[r.start:r.end], r.kind) for r in find_pii(text)] == [(number, "bank_card")]
    bad = text.replace(number, _one_off(number))
    assert not luhn_valid(_one_off(number))
    assert [r.kind for r in find_pii(bad)] == []


@pytest.mark.parametrize(("text", "number"), PHONE_VARIANTS)
def test_plus86_variants_are_redacted(text: str, number: str) -> None:
    assert [(text[r.start:r.end], r.kind) for r in find_pii(text)] == [(number, "phone")]


@pytest.mark.parametrize(("text", "number"), ID_VARIANTS)
def test_resident_ids_inside_chinese_text(text: str, number: str) -> None:
    assert [(text[r.start:r.end], r.kind) for r in find_pii(text)] == [(number, "cn_id")]
    off = _one_off(number) if not number[-1] in "Xx" else number[:-1] + "1"  # X -> 1 breaks the check digit
    assert not cn_id_valid(off)
    assert find_pii(text.replace(number, off)) == []
