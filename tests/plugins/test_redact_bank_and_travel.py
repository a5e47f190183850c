"""PII redaction of IBANs (any country, grouped or not, mod-97 checked), first-generation resident ids in
any grouping, and passport numbers given as such (English, Chinese, German): each redacted whole, and
look-alikes left readable."""

from __future__ import annotations

from pathlib import Path

import pytest

from portamem import Memory, Settings
from portamem_plugins.redact import find_pii, iban_valid

IBANS = [
    "GB82WEST12345698765432",
    "GB82 WEST 1234 5698 7654 32",
    "FR14 2004 1010 0505 0001 3M02 606",
    "DE89 3704 0044 0532 0130 00",
    "DE89370400440532013000",
    "NL91 ABNA 0417 1643 00",
    "BE68 5390 0754 7034",
    "CH93 0076 2011 6238 5295 7",
    "IT60 X054 2811 1010 0000 0123 456",
    "ES91-2100-0418-4502-0005-1332",
    "NO93 8601 1117 947",
    "MT84 MALT 0110 0001 2345 MTLC AST0 01S",
    "SA03 8000 0000 6080 1016 7519",
    "BR1800360305000010009795493C1",
]


def _found(text: str) -> list[tuple[str, str]]:
    return [(text[r.start:r.end], r.kind) for r in find_pii(text)]


@pytest.mark.parametrize("iban", IBANS)
@pytest.mark.parametrize("sentence", ["My IBAN is {}.", "IBAN {} is the salary account", "我的银行账户IBAN：{}，谢谢",
                                      "Bitte überweisen Sie auf {} bis Freitag."])
def test_an_iban_is_redacted_whole(iban: str, sentence: str) -> None:
    assert iban_valid(iban)
    assert _found(sentence.format(iban)) == [(iban, "iban")]


@pytest.mark.parametrize("iban", ["de89370400440532013000", "de89 3704 0044 0532 0130 00", "gb82 west 1234 5698 7654 32",
                                  "Fr14 2004 1010 0505 0001 3m02 606", "nl91abna0417164300"])
def test_an_iban_typed_in_lower_case_is_redacted_whole(iban: str) -> None:
    """As typed into a chat: lower case, grouped or not (it was stored in clear, in the keyword postings,
    the entity table and the formation queue too)."""
    assert iban_valid(iban)
    assert _found(f"my iban is {iban}, thanks") == [(iban, "iban")]


@pytest.mark.parametrize("text", [
    "de89370400440532013001",                   # lower case, one check digit off
    "build ab12cdefghijklmnop3 passed",          # a lower-case run of no registered country
    "commit zz00a1b2c3d4e5f6a7b8c9 merged",
])
def test_a_lower_case_run_failing_the_check_or_of_no_country_is_no_iban(text: str) -> None:
    assert "iban" not in {r.kind for r in find_pii(text)}


def test_a_grouped_german_iban_is_not_half_read_as_a_phone() -> None:
    text = "IBAN DE89 3704 0044 0532 0130 00"
    spans = find_pii(text)
    assert [r.kind for r in spans] == ["iban"] and text[: spans[0].start] + "[IBAN]" == "IBAN [IBAN]"


@pytest.mark.parametrize("text", [
    "GB83WEST12345698765432",                   # one check digit off
    "DE89 3704 0044 0532 0130 0",               # one character short of Germany's 22
    "order AB12CDEF3456GHIJ78 ships today",      # a code shaped like one, failing mod 97
    "GB82WEST12345698765432ABC",                # runs on into more letters: not a whole IBAN
    "Flight BA2490 LHR to JFK, seat 32A, gate B12",
    "RFC 2616 section 14.9 and ISO 8601 dates",
])
def test_what_fails_the_iban_check_is_no_iban(text: str) -> None:
    assert "iban" not in {r.kind for r in find_pii(text)}


@pytest.mark.parametrize(("text", "number", "no_such_date"), [
    ("身份证号 310104800523421", "310104800523421", "310104801323421"),
    ("老身份证是3101 0480 0523 421，新的还没办", "3101 0480 0523 421", "3101 0480 1323 421"),
    ("ID 310104-800523-421", "310104-800523-421", "310104-801323-421"),
    ("first-generation ID 110.105.491.231.002", "110.105.491.231.002", "110.105.491.331.002"),
])
def test_a_first_generation_id_in_any_grouping(text: str, number: str, no_such_date: str) -> None:
    assert _found(text) == [(number, "cn_id")]
    assert "cn_id" not in {kind for _, kind in _found(text.replace(number, no_such_date))}  # month 13, 31 Nov


@pytest.mark.parametrize(("text", "number"), [
    ("My passport number is 912803456", "912803456"),
    ("passport no. X1234567", "X1234567"),
    ("Passport: 533380006, expires 2031", "533380006"),
    ("my passport # is 533380006", "533380006"),
    ("护照号码 E12345678", "E12345678"),
    ("我的护照号是E12345678。", "E12345678"),
    ("护照号：G12345678，签证下周出", "G12345678"),
    ("Reisepass Nr. C01X00T47", "C01X00T47"),
    ("Meine Reisepassnummer lautet C01X00T47.", "C01X00T47"),
    ("Pass-Nr. C01X00T47", "C01X00T47"),
])
def test_a_passport_number_given_as_such(text: str, number: str) -> None:
    assert _found(text) == [(number, "passport")]


@pytest.mark.parametrize("text", [
    "My passport expires 20250101 so I renewed it",
    "Passport photos cost 12 pounds at the post office",
    "I need to pass 123456 tests before the release",
    "护照照片要白底，尺寸33x48毫米",
    "Der Reisepass kostet 70 Euro.",
    "passport island ABCDEFGH",
])
def test_passport_words_without_a_number_leave_the_text(text: str) -> None:
    assert find_pii(text) == []


def test_no_iban_or_passport_reaches_a_stored_byte(memory: Memory, settings: Settings) -> None:
    # the full stop of "passport no." and an e-mail's dots end no sentence of what a turn captures: split
    # there, each piece would no longer read as PII and be kept as said
    said = ["My IBAN is FR14 2004 1010 0505 0001 3M02 606.", "IBAN DE89 3704 0044 0532 0130 00 for rent",
            "Salary goes to GB82WEST12345698765432", "My passport number is 912803456",
            "护照号码 E12345678", "Reisepass Nr. C01X00T47", "身份证 3101 0480 0523 421",
            "My passport no. X1234567 expires in May.", "My email is dana.smith@example.com and my phone is 13812345678"]
    secrets = ["FR14 2004 1010 0505 0001 3M02 606", "3704 0044", "0532 0130", "GB82WEST12345698765432",
               "912803456", "E12345678", "C01X00T47", "0480 0523", "X1234567", "dana.smith", "smith@example",
               "13812345678"]
    for i, text in enumerate(said):
        memory.save_memory(text, user_id="u1", metadata={"note": text})
        memory.add_turn(text, "Noted.", user_id="u1", session_id="s")
    memory.flush()
    stored = memory.list_memories(user_id="u1")
    assert stored and all(not any(s in r.content or s in str(r.metadata) for s in secrets) for r in stored)
    memory.close()
    found = []
    for path in (p for p in Path(settings.path).rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.name}: {s!r}" for s in secrets if s.encode() in data]
    assert not found, found


@pytest.mark.parametrize(("said", "secret"), [
    ("My passport no. X1234567 expires in May.", "X1234567"),
    ("Reisepass Nr. C01X00T47, bitte merken.", "C01X00T47"),
    ("My email is dana.smith@example.com and my phone is 13812345678", "smith@example"),
    ("我的邮箱是zhang.san@example.com，护照号码 E12345678。", "E12345678"),
])
def test_what_a_turn_captures_holds_no_piece_of_its_pii(memory: Memory, said: str, secret: str) -> None:
    captured = memory.add_turn(said, "Noted.", user_id="u1", session_id="s", wait=True)
    assert captured, "the turn states something worth keeping"
    for r in captured:
        assert secret not in r.content and secret not in str(r.metadata) and secret not in str(r.entities), r
        assert secret not in str(r.triples) and "[" in r.content


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def test_no_span_in_the_projects_own_conversations() -> None:
    """The scenario suites and the LoCoMo dev conversations hold no personal data: every span found there
    would be a false positive (IBAN, passport and resident-id patterns included)."""
    import json

    root = Path(__file__).resolve().parents[2]
    texts = [s for path in sorted((root / "core/portamem/scenarios").glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
             for s in _strings(json.loads(line))]
    locomo = root.parent / "shared/data/locomo/locomo-dev.json"
    if locomo.exists():
        texts += [t.get("text", "") for conv in json.loads(locomo.read_text(encoding="utf-8"))
                  for session in conv["conversation"].values() if isinstance(session, list) for t in session]
    assert len(texts) > 5000
    found = [(t[r.start:r.end], r.kind) for t in texts for r in find_pii(t)]
    assert found == []
