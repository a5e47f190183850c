"""PII redaction: hand-checked checksums, spans and placeholders, and nothing valid left in any stored byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem.pipeline import WriteContext
from portamem.plugins import Hooks, get_plugin_manager
from portamem_plugins.redact import cn_id15_valid, cn_id_valid, find_pii, luhn_valid

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


# ---------------------------------------------------------------------- formats people write by hand
# (text, the span that must become the placeholder); each in an English and a Chinese sentence
WRITTEN_FORMATS = [
    # a card number wrapped onto the next line, with or without spaces
    ("my card is 4539 1488\n0343 6467, expires 12/29", "4539 1488\n0343 6467", "bank_card"),
    ("卡号是4539148803\n436467，下个月到期", "4539148803\n436467", "bank_card"),
    ("card:\n4539 1488 0343\r\n6467 thanks", "4539 1488 0343\r\n6467", "bank_card"),
    # Arabic-Indic, Persian and Devanagari digits
    ("card number \u0664\u0665\u0663\u0669\u0661\u0664\u0668\u0668\u0660\u0663\u0664\u0663\u0666\u0664\u0666\u0667 ok",
     "\u0664\u0665\u0663\u0669\u0661\u0664\u0668\u0668\u0660\u0663\u0664\u0663\u0666\u0664\u0666\u0667", "bank_card"),
    ("卡号\u06f4\u06f5\u06f3\u06f9 \u06f1\u06f4\u06f8\u06f8 \u06f0\u06f3\u06f4\u06f3 \u06f6\u06f4\u06f6\u06f7，请保密",
     "\u06f4\u06f5\u06f3\u06f9 \u06f1\u06f4\u06f8\u06f8 \u06f0\u06f3\u06f4\u06f3 \u06f6\u06f4\u06f6\u06f7", "bank_card"),
    ("phone \u0967\u0969\u096e\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e please",
     "\u0967\u0969\u096e\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e", "phone"),
    # Chinese mobiles grouped 4-3-4, 3-4-4 and 7-4
    ("text me on 1381 234 5678 tonight", "1381 234 5678", "phone"),
    ("我的手机是1381-234-5678，随时打", "1381-234-5678", "phone"),
    ("call 138 1234 5678 after six", "138 1234 5678", "phone"),
    ("手机号1381234 5678，微信同号", "1381234 5678", "phone"),
    # landlines with their area code
    ("the office line is 010-12345678, ext 2", "010-12345678", "phone"),
    ("办公室电话(010) 1234 5678，工作日有人接", "(010) 1234 5678", "phone"),
    ("店里电话0755-8888 6666，营业到晚上十点", "0755-8888 6666", "phone"),
    ("call the Shanghai office on 021 6123 4567", "021 6123 4567", "phone"),
    ("北京办公室：+86 10 6552 9988", "+86 10 6552 9988", "phone"),
    ("reach us at +86-21-61234567 any time", "+86-21-61234567", "phone"),
    # 15-digit first-generation resident ids (1949-12-31, Beijing Chaoyang)
    ("his old ID card reads 110105491231002.", "110105491231002", "cn_id"),
    ("老身份证号码110105 491231 002还能用吗", "110105 491231 002", "cn_id"),
    # internationalised, accented and Chinese addresses
    ("write to josé@exämple.com about it", "josé@exämple.com", "email"),
    ("邮箱是user@例子.中国，谢谢", "user@例子.中国", "email"),
    ("我的邮箱是张三@example.com谢谢", "张三@example.com", "email"),
    ("send it to 张三@example.com please", "张三@example.com", "email"),
    ("mail zoë.müller@universität-köln.de tomorrow", "zoë.müller@universität-köln.de", "email"),
    ("我的邮箱13812345678@163.com", "13812345678@163.com", "email"),
    # spelt-out addresses
    ("you can reach dave at example dot com", "dave at example dot com", "email"),
    ("contact: dave [at] example [dot] com", "dave [at] example [dot] com", "email"),
    ("email dave(at)example.com for the slides", "dave(at)example.com", "email"),
    ("write to J.Smith AT uni-bonn DOT de", "J.Smith AT uni-bonn DOT de", "email"),
    ("我的邮箱dave艾特example点com，有事联系", "dave艾特example点com", "email"),
    ("联系邮箱 dave (at) qq (dot) com", "dave (at) qq (dot) com", "email"),
    ("mail me: dave @ example . com", "dave @ example . com", "email"),
]


@pytest.mark.parametrize(("text", "span", "kind"), WRITTEN_FORMATS)
def test_formats_people_write_are_redacted(text: str, span: str, kind: str) -> None:
    assert [(text[r.start:r.end], r.kind) for r in find_pii(text)] == [(span, kind)]
    assert span not in _redact(text)


@pytest.mark.parametrize(("text", "number"), [
    ("card number \u0664\u0665\u0663\u0669\u0661\u0664\u0668\u0668\u0660\u0663\u0664\u0663\u0666\u0664\u0666\u0667",
     "\u0664\u0665\u0663\u0669\u0661\u0664\u0668\u0668\u0660\u0663\u0664\u0663\u0666\u0664\u0666\u0667"),
    ("my card is 4539 1488\n0343 6467", "4539 1488\n0343 6467"),
])
def test_a_card_in_other_digits_or_over_two_lines_still_needs_its_luhn_digit(text: str, number: str) -> None:
    last = max(i for i, ch in enumerate(number) if ch.isdigit())
    off = number[:last] + chr(ord(number[last]) - 1 if number[last] not in "0\u0660" else ord(number[last]) + 1)
    assert not luhn_valid(off) and find_pii(text.replace(number, off)) == []


@pytest.mark.parametrize(("number", "valid"), [
    ("110105491231002", True),   # Beijing, born 1949-12-31
    ("440308990101123", True),   # Shenzhen, born 1999-01-01
    ("110105490230002", False),  # 30 February
    ("200105491231002", False),  # no province 20
    ("110105491231000", False),  # sequence 000
    ("11010549123100", False),   # 14 digits
])
def test_first_generation_id_structure(number: str, valid: bool) -> None:
    assert cn_id15_valid(number) is valid


@pytest.mark.parametrize("text", [
    # numbers that are not a card: grouped unlike one, or a list over several lines
    "Order #112-4827193-5520391 should arrive by Thursday.",
    "scores:\n4539\n1488\n0343\n6467",
    "figures 45 39 14 88 03 43 64 67 for the quarter",
    # 15 digits that are neither a first-generation id nor pass Luhn
    "订单号202401150001235，明天发货",
    "tracking 356938035643808 on the box",
    # times, versions, years and area codes alone
    "we meet at 0930 and leave at 1130",
    "上海的区号是021，北京是010，广州是020。",
    "version 0.12.3 and build 2024-05-20",
    # "at" and "dot" as the words they usually are
    "Nate was at the dot com startup in 2000 before it folded.",
    "Meet me at Starbucks dot com style, I mean the one with the app.",
    "I work at amazon.com now, in the Seattle office.",
    "The dot com bubble burst in 2000.",
    "look at this dot, it's the smallest planet",
    # @ in handles and mentions
    "@张三 明天的会改到下午了",
    "thanks @dave for the photos",
    "我在@北京 出差",
])
def test_written_numbers_and_words_that_are_not_pii_stay(text: str) -> None:
    assert find_pii(text) == [], [(text[r.start:r.end], r.kind) for r in find_pii(text)]


def test_every_decimal_digit_script_folds_to_its_value() -> None:
    import sys
    import unicodedata

    zeros = [cp for cp in range(sys.maxunicode + 1)
             if unicodedata.category(chr(cp)) == "Nd" and unicodedata.decimal(chr(cp)) == 0]
    card = "4539148803436467"
    for zero in zeros:
        written = "".join(chr(zero + int(d)) for d in card)
        assert [(r.start, r.end, r.kind) for r in find_pii(f"card {written} ok")] == [(5, 21, "bank_card")], hex(zero)


def test_written_formats_reach_no_stored_byte(memory: Memory, settings: Settings) -> None:
    secrets = [span for _, span, _ in WRITTEN_FORMATS]
    for i, (text, _, _) in enumerate(WRITTEN_FORMATS):
        memory.save_memory(text, user_id="u1", metadata={"note": text}, session_id=f"s{i % 3}")
    stored = memory.list_memories(user_id="u1")
    assert len(stored) == len(WRITTEN_FORMATS)
    assert all(not any(s in r.content for s in secrets) for r in stored)
    memory.close()
    found = []
    for path in (p for p in Path(settings.path).rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.name}: {s!r}" for s in secrets if s.encode() in data or s.encode("utf-16-le") in data]
    assert not found, found
